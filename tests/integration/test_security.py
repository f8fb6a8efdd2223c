"""Security properties of issue 8, against the real broker and real worker processes.

- A misconfigured Kafka credential fails within a bound with an error that names the cause.
- A SASL login (PLAIN, SCRAM-SHA-256) on a broker's SASL_PLAINTEXT listener publishes every line,
  on each line engine; a wrong password fails within a bound naming the authentication, on each.
- The SASL password is in no log line and on no page; the pages show no file contents.
- The sidecar never writes into WATCH_DIR.
- Symlinks in the watch tree or below BACKUP_DIR cannot put a backup outside BACKUP_DIR.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer

from hyperdata_sidecar.config import KafkaSecurity
from hyperdata_sidecar.devkafka import LocalKafka, SaslListener, free_low_port
from hyperdata_sidecar.tools.expected import hour_files

from drill_kit import DrillContext, caught_up, exit_code, kill, wait_for
from drills import corpus
from sidecar_run import Sidecar

SECRET = f"pw-{uuid.uuid4().hex}"
SASL = {
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "PLAIN",
    "KAFKA_SASL_USERNAME": "sidecar",
    "KAFKA_SASL_PASSWORD": SECRET,
}
PAGES = (
    "/",
    "/sidecar/",
    "/sidecar/status/",
    "/sidecar/files/",
    "/sidecar/seals/",
    "/sidecar/dlq/",
    "/metrics",
    "/readyz",
    "/healthz",
    "/router/",
    "/table/",
    "/stats/",
    "/graph/",
)
ADDRESS = re.compile(rb"0x[0-9a-f]{40}")
FAIL_BOUND_S = 60.0
NATIVE_MODULE = "hyperdata_sidecar_engine"


@pytest.fixture
def ctx(tmp_path, kafka_bootstrap, unique_topic_prefix) -> DrillContext:
    return DrillContext(kafka_bootstrap, tmp_path, unique_topic_prefix)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A broker of this module's own whose SASL_PLAINTEXT listener knows the user ``sidecar`` with
    the password SECRET (the session's broker stays without one)."""
    ports: set[int] = set()
    for _ in range(3):
        ports.add(free_low_port(exclude=ports))
    port, controller_port, sasl_port = sorted(ports)
    broker = LocalKafka(
        tmp_path_factory.mktemp("sasl-kafka"),
        port=port,
        controller_port=controller_port,
        sasl=SaslListener(sasl_port, SASL["KAFKA_SASL_USERNAME"], SECRET),
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def native_engine() -> Any:
    """The native engine's module; its tests skip when it is not installed, except under
    HYPERDATA_ENGINE_REQUIRED=1 (make test builds it: a missing engine is a failure there)."""
    if os.environ.get("HYPERDATA_ENGINE_REQUIRED") == "1":
        return importlib.import_module(NATIVE_MODULE)
    return pytest.importorskip(NATIVE_MODULE, reason="the native engine is not installed (make engine builds it into .venv)")


@pytest.fixture(params=["python", "native"])
def engine(request: pytest.FixtureRequest) -> str:
    """The line engine a worker is asked for (SIDECAR_ENGINE)."""
    if request.param == "native":
        native_engine()
    return request.param


def sasl_login(mechanism: str, password: str = SECRET) -> dict[str, str]:
    return {**SASL, "KAFKA_SASL_MECHANISM": mechanism, "KAFKA_SASL_PASSWORD": password}


def security(settings: dict[str, str]) -> KafkaSecurity:
    return KafkaSecurity(
        protocol=settings["KAFKA_SECURITY_PROTOCOL"],
        sasl_mechanism=settings["KAFKA_SASL_MECHANISM"],
        sasl_username=settings["KAFKA_SASL_USERNAME"],
        sasl_password=settings["KAFKA_SASL_PASSWORD"],
    )


def failure_text(sidecar: Sidecar) -> str:
    """What the worker said about its failure: Faust/aiokafka ERROR lines and the sidecar's error fields
    (not the whole log: the node id and paths carry the test's name)."""
    said = []
    for line in (sidecar.root / "run" / "worker.log").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            said.append(str(json.loads(line).get("error", "")))
        elif "[ERROR]" in line:
            said.append(line.split("[ERROR]", 1)[1])
    return "\n".join(said)


async def fails_or_keeps_failing(sidecar: Sidecar, attempts: int = 1) -> str:
    """Start the worker and wait (bounded) until it exits or logs ``attempts`` failed broker
    connections (refused logins included); its failure text."""
    worker = sidecar.start()
    failed = lambda: len(sidecar.events("broker_connect_failed") + sidecar.events("broker_login_refused"))  # noqa: E731
    try:
        await wait_for(
            None,
            lambda: exit_code(worker) is not None or failed() >= attempts,
            "the worker to fail",
            FAIL_BOUND_S,
        )
        if exit_code(worker) is None:
            assert worker.get("/readyz")[0] != 200
        else:
            assert exit_code(worker) != 0
    finally:
        worker.stop()
    return failure_text(sidecar)


async def test_a_sasl_login_against_a_plaintext_listener_fails_within_a_bound_naming_sasl(ctx):
    said = await fails_or_keeps_failing(ctx.sidecar(**SASL))
    assert re.search("sasl", said, re.IGNORECASE), said


async def test_tls_against_a_plaintext_listener_fails_within_a_bound_naming_tls(ctx):
    said = await fails_or_keeps_failing(ctx.sidecar(KAFKA_SECURITY_PROTOCOL="SSL"))
    assert re.search("ssl|tls|handshake|certificate", said, re.IGNORECASE), said


async def test_the_sasl_password_is_in_no_line_of_a_failed_logins_log(ctx):
    sidecar = ctx.sidecar(**SASL)
    await fails_or_keeps_failing(sidecar)
    assert SECRET not in (sidecar.root / "run" / "worker.log").read_text(errors="replace")


async def test_the_sasl_password_and_file_contents_are_on_no_page_and_in_no_log_line(ctx):
    sidecar = ctx.sidecar(KAFKA_SASL_USERNAME="sidecar", KAFKA_SASL_PASSWORD=SECRET)
    corpus(sidecar.watch, hours=2, lines_per_hour=2000, bad_every=97)
    addresses = set(
        ADDRESS.findall(
            b"".join((sidecar.watch / f.relpath).read_bytes() for f in hour_files(sidecar.watch, "node_fills_streaming"))
        )
    )
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the corpus to be published")
        pages = {path: worker.get(path) for path in PAGES}
    finally:
        worker.stop()
    assert addresses
    for path, (_status, _type, body) in pages.items():
        assert SECRET.encode() not in body, path
        assert not addresses & set(ADDRESS.findall(body)), f"{path} shows line contents"
    assert pages["/sidecar/status/"][0] == 200
    assert SECRET not in (sidecar.root / "run" / "worker.log").read_text(errors="replace")


# ---------------------------------------------------------------------------- a SASL listener


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_a_sasl_login_publishes_every_line_on_the_engine_asked_for_and_the_password_is_nowhere(
    sasl_broker, unique_topic_prefix, tmp_path, engine, mechanism
):
    # The worker knows only the SASL listener: Faust's consumers and producer, the admin client and
    # the line engine's producer all log in, or the tables never sync and no seal is written.
    login = sasl_login(mechanism)
    sidecar = Sidecar(tmp_path / "node", sasl_broker.sasl_bootstrap, unique_topic_prefix, SIDECAR_ENGINE=engine, **login)
    corpus(sidecar.watch, hours=2, lines_per_hour=1500, bad_every=97)
    worker = sidecar.start()
    try:
        report = await sidecar.verify(client_kwargs=security(login).client_kwargs())
        pages = {path: worker.get(path) for path in PAGES}
    finally:
        assert worker.stop() == 0
    assert report.ok, report.summary()
    assert all(t.lines_ok == t.lines > 0 and t.seals_ok > 0 for t in report.tables.values()), report.summary()
    [startup] = sidecar.events("startup")
    assert startup["engine"].split()[0] == engine
    assert pages["/sidecar/status/"][0] == 200
    for path, (_status, _type, body) in pages.items():
        assert SECRET.encode() not in body, path
    assert SECRET not in (sidecar.root / "run" / "worker.log").read_text(errors="replace")


async def test_a_wrong_sasl_password_fails_within_a_bound_naming_the_authentication(
    sasl_broker, unique_topic_prefix, tmp_path, engine
):
    wrong = f"wrong-{uuid.uuid4().hex}"
    sidecar = Sidecar(
        tmp_path / "node", sasl_broker.sasl_bootstrap, unique_topic_prefix, SIDECAR_ENGINE=engine, **sasl_login("PLAIN", wrong)
    )
    said = await fails_or_keeps_failing(sidecar, attempts=2)
    assert re.search("authentication", said, re.IGNORECASE), said
    assert wrong not in (sidecar.root / "run" / "worker.log").read_text(errors="replace")


INVALID_PLAIN = "Authentication failed: Invalid username or password"
INVALID_SCRAM = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


@pytest.mark.parametrize(
    ("mechanism", "user", "says"),
    [
        ("PLAIN", SASL["KAFKA_SASL_USERNAME"], INVALID_PLAIN),
        ("SCRAM-SHA-256", SASL["KAFKA_SASL_USERNAME"], INVALID_SCRAM),
        ("SCRAM-SHA-256", "nobody", INVALID_SCRAM),
        ("SCRAM-SHA-512", SASL["KAFKA_SASL_USERNAME"], "the broker does not take SASL mechanism SCRAM-SHA-512"),
    ],
)
async def test_a_refused_login_is_named_in_one_line_of_the_sidecar_per_attempt_and_on_readyz(
    sasl_broker, unique_topic_prefix, tmp_path, mechanism, user, says
):
    wrong = f"wrong-{uuid.uuid4().hex}"
    login = {**sasl_login(mechanism, wrong), "KAFKA_SASL_USERNAME": user}
    sidecar = Sidecar(tmp_path / "node", sasl_broker.sasl_bootstrap, unique_topic_prefix, **login)
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: len(sidecar.events("broker_login_refused")) >= 2, "two refused logins", FAIL_BOUND_S)
        ready = worker.get("/readyz")
    finally:
        worker.stop()
    named = f"the broker refused the login (SASL {mechanism}, user {user}): "
    refused = sidecar.events("broker_login_refused")
    assert [event["attempt"] for event in refused[:2]] == [1, 2] and not sidecar.events("broker_connect_failed")
    for event in refused:
        assert (event["mechanism"], event["user"]) == (mechanism, user)
        assert event["error"].startswith(named), event
        assert says in event["error"], event
    assert ready[0] == 503 and named.encode() in ready[2], ready
    assert wrong not in (sidecar.root / "run" / "worker.log").read_text(errors="replace")
    assert wrong.encode() not in ready[2]


def first_errors(producer: Any, errors: list[Any], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not errors and time.monotonic() < deadline:
        producer.poll(0.05)


def test_both_producers_name_a_failed_sasl_login_alike(sasl_broker):
    native = native_engine()
    seen = {}
    for name, make in {"confluent": ConfluentProducer, "native": native.Producer}.items():
        errors: list[Any] = []
        config = {"bootstrap.servers": sasl_broker.sasl_bootstrap, "error_cb": errors.append, "log_level": 0}
        producer = make({**config, **security(sasl_login("PLAIN", "wrong")).librdkafka_config()})
        first_errors(producer, errors)
        assert errors, name
        seen[name] = (errors[0].name(), errors[0].fatal(), bool(re.search("authentication", errors[0].str(), re.IGNORECASE)))
    assert seen["native"] == seen["confluent"] == ("_AUTHENTICATION", False, True)


def tree_state(root: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """Every entry below ``root`` (symlinks not followed): relative path → (mode, inode, size, mtime, ctime)."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            state[os.path.relpath(path, root)] = (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return state


async def test_the_sidecar_never_writes_into_the_watch_dir(ctx):
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=3, lines_per_hour=3000, bad_every=97)
    before = tree_state(sidecar.watch)
    worker = sidecar.start()
    try:
        report = await sidecar.verify(backup_dir=sidecar.backups)
    finally:
        assert worker.stop() == 0
    assert report.ok, report.summary()
    assert tree_state(sidecar.watch) == before


async def test_symlinks_in_the_watch_tree_are_not_followed_into_a_backup_outside_the_backup_dir(ctx):
    outside = ctx.root / "outside"
    sidecar = ctx.sidecar()
    corpus(outside / "orders", hours=2, lines_per_hour={"node_order_statuses_streaming": 500}, seed=2)
    corpus(outside / "elsewhere", hours=3, lines_per_hour={"node_fills_streaming": 200}, seed=3)
    corpus(sidecar.watch, hours=2, lines_per_hour={"node_raw_book_diffs_streaming": 500}, seed=4)
    book = sidecar.watch / "node_raw_book_diffs_streaming" / "hourly" / "20260610"
    (book / "23").rename(book / "21")  # the real files are hours 21 and 22; hour 23 becomes a symlink
    (book / "23").symlink_to(outside / "elsewhere" / "node_fills_streaming" / "hourly" / "20260610" / "22")
    (sidecar.watch / "node_fills_streaming" / "hourly").mkdir(parents=True)
    (sidecar.watch / "node_fills_streaming" / "hourly" / "20260610").symlink_to(
        outside / "elsewhere" / "node_fills_streaming" / "hourly" / "20260610"
    )
    (sidecar.watch / "node_order_statuses_streaming").symlink_to(outside / "orders" / "node_order_statuses_streaming")
    before = tree_state(outside)
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: len(sidecar.events("backup")) >= 2, "the real finalized files to be backed up")
        adopted = {event["path"] for event in sidecar.events("file_adopted")}
        ignored = {event["path"] for event in sidecar.events("hour_file_ignored")}
    finally:
        assert worker.stop() == 0
    assert tree_state(outside) == before
    backups = tree_state(sidecar.backups)
    assert all(not os.path.islink(sidecar.backups / path) for path in backups)
    assert {p for p in backups if os.path.isfile(sidecar.backups / p)} == {
        "node_raw_book_diffs_streaming/hourly/20260610/21",
        "node_order_statuses_streaming/hourly/20260610/22",
    }
    assert "node_raw_book_diffs_streaming/hourly/20260610/23" not in adopted
    assert "node_raw_book_diffs_streaming/hourly/20260610/23" in ignored
    assert not any(path.startswith("node_fills_streaming/") for path in adopted)
    assert "node_fills_streaming/hourly/20260610" in ignored  # the symlinked date directory


async def test_a_symlink_below_the_backup_dir_fails_the_backup_as_unsafe_and_writes_nothing_outside(ctx):
    outside = ctx.root / "outside"
    outside.mkdir()
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=2, lines_per_hour=1500)
    (sidecar.backups / "node_fills_streaming").symlink_to(outside)
    worker = sidecar.start()
    try:
        unsafe = lambda: any(e["reason"] == "unsafe_path" for e in sidecar.events("backup_failed"))  # noqa: E731
        await wait_for(worker, unsafe, "the redirected backup to be refused")
    finally:
        kill(worker)  # how it stops is not what this test is about (see test_drills)
    assert list(outside.iterdir()) == []
