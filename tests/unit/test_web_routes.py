"""The pages on a real Faust app's web server (aiohttp test client; no broker, worker not started)."""

from __future__ import annotations

import asyncio
import calendar
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import faust
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from confluent_kafka import KafkaError

from hyperdata_sidecar.backup import BackupSink
from hyperdata_sidecar.broker_login import LoginRefused
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.core.snapshots import SnapshotBackup
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.plugin import Sidecar, install
from hyperdata_sidecar.web import snapshot

FILLS = "node_fills_streaming"
SECRET = "sasl-password-never-shown"


def make_app(tmp_path: Path, app: faust.App | None = None, **env: str) -> tuple[faust.App, Sidecar]:
    """``app`` (a new one by default) with the sidecar installed, configured for ``tmp_path``."""
    (tmp_path / "watch").mkdir(exist_ok=True)
    settings = load_settings(
        {
            "WATCH_DIR": str(tmp_path / "watch"),
            "STATE_PATH": str(tmp_path / "state"),
            "BACKUP_DIR": str(tmp_path / "backups"),
            "NODE_ID": "unit-node",
            "KAFKA_BOOTSTRAP": "127.0.0.1:9",
            **env,
        }
    )
    if app is None:
        app = faust.App(
            "unit-web", broker="kafka://127.0.0.1:9", store="rocksdb://", datadir=str(tmp_path / "data"), autodiscover=False
        )
    return app, install(app, settings)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Sidecar, TestClient]]:
    app, sidecar = make_app(tmp_path)
    app.web.init_server()  # what the worker does on start: Faust's blueprints go in after our pages
    async with TestClient(TestServer(app.web.web_app)) as client:
        yield sidecar, client


def refresh_state(sidecar: Sidecar) -> None:
    """What the readiness and gauge timers do every second (a scrape itself changes nothing)."""
    sidecar.readiness.refresh()
    snapshot.refresh_gauges(sidecar.view)


def run_as_started(sidecar: Sidecar, stored: dict[str, dict[str, FileCursor]]) -> None:
    """Put the sidecar in the state its runtime reaches after recovery: tailers built, producer connected
    (the producer made as connect makes it, for a broker that is not there: nothing is sent)."""
    sidecar.dataplane.partitions = dict.fromkeys(sidecar.settings.contract_topics(), 3)
    sidecar.dataplane._producer = sidecar.engine.producer({"bootstrap.servers": sidecar.settings.kafka_bootstrap})
    sidecar.node_tables.start(sidecar.sync.tailer_rooms, stored)
    for phase in (Phase.CONNECTING, Phase.SYNCING, Phase.RUNNING):
        sidecar.readiness.lifecycle.move(phase)
    sidecar.broker.reachable(True)


def write_hour(sidecar: Sidecar, relpath: str, data: bytes) -> None:
    target = sidecar.settings.watch_dir / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


# ---------------------------------------------------------------------- health


async def test_liveness_answers_200(served) -> None:
    _sidecar, client = served
    response = await client.get("/healthz")

    assert response.status == 200
    assert await response.json() == {"status": "alive"}


async def test_readiness_is_503_with_reasons_before_recovery_and_connection(served) -> None:
    _sidecar, client = served
    response = await client.get("/readyz")
    body = await response.json()

    assert response.status == 503
    assert body["ready"] is False
    assert body["reasons"] == ["tables not recovered yet", "broker unreachable (127.0.0.1:9)"]


async def test_readiness_is_200_once_recovered_connected_and_the_watch_dir_is_readable(served) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    response = await client.get("/readyz")

    assert response.status == 200
    assert await response.json() == {"ready": True, "reasons": []}


async def test_readiness_names_a_missing_watch_dir(served) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    sidecar.settings.watch_dir.rmdir()
    response = await client.get("/readyz")

    assert response.status == 503
    assert (await response.json())["reasons"] == [f"WATCH_DIR {sidecar.settings.watch_dir} is not a readable directory"]


async def test_readiness_names_the_broker_it_waits_for_and_a_table_that_cannot_publish(served) -> None:
    sidecar, client = served
    sidecar.broker.waiting = "waiting for Kafka at 127.0.0.1:9: ConnectionError (attempt 3, next in 2s)"
    waiting = await (await client.get("/readyz")).json()
    run_as_started(sidecar, {})
    sidecar.broker.waiting = None
    sidecar.readiness.hold(FILLS, "hyperliquid.fills: UNKNOWN_TOPIC_OR_PART (Broker: Unknown topic or partition)")
    holding = await client.get("/readyz")

    assert "waiting for Kafka at 127.0.0.1:9: ConnectionError (attempt 3, next in 2s)" in waiting["reasons"]
    assert holding.status == 503
    assert (await holding.json())["reasons"] == [
        f"{FILLS}: cannot publish, keeping its position: hyperliquid.fills: UNKNOWN_TOPIC_OR_PART (Broker: Unknown topic or partition)"
    ]


async def test_readiness_says_the_broker_refused_the_login_until_a_login_succeeds(served) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    callbacks = sidecar.dataplane._config()
    callbacks["stats_cb"](orjson.dumps({"brokers": {"b1": {"state": "UP"}}}).decode())  # connected, then
    callbacks["error_cb"](KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: Authentication failed"))
    refused = await client.get("/readyz")
    callbacks["stats_cb"](orjson.dumps({"brokers": {"b1": {"state": "UP"}}}).decode())
    ready = await client.get("/readyz")
    callbacks["stats_cb"](orjson.dumps({"brokers": {"b1": {"state": "DOWN"}}}).decode())
    unreachable = await client.get("/readyz")

    assert refused.status == 503
    [reason] = (await refused.json())["reasons"]
    assert reason.startswith("the broker refused the login (") and reason.endswith(
        "SASL authentication error: Authentication failed"
    )
    assert ready.status == 200
    assert (await unreachable.json())["reasons"] == [f"broker unreachable ({sidecar.settings.kafka_bootstrap})"]


async def test_readiness_says_the_broker_refused_the_login_while_connecting(served) -> None:
    sidecar, client = served
    sidecar.readiness.lifecycle.move(Phase.CONNECTING)
    sidecar.broker.failed(LoginRefused(sidecar.settings.security, "Invalid username or password"), 1, 0.5)
    refused = await (await client.get("/readyz")).json()
    sidecar.broker.reachable(True)
    connected = await (await client.get("/readyz")).json()

    assert any(reason.startswith("the broker refused the login (") for reason in refused["reasons"])
    assert not any("refused the login" in reason for reason in connected["reasons"])


# ---------------------------------------------------------------------- metrics


async def test_metrics_are_served_in_the_prometheus_text_format(served) -> None:
    sidecar, client = served
    sidecar.metrics.lines_published(FILLS, 5)
    response = await client.get("/metrics")
    text = await response.text()

    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert f'hyperdata_sidecar_lines_published_total{{table="{FILLS}"}} 5.0' in text


async def test_the_state_timers_refresh_readiness_and_the_current_files_lag_from_disk(served) -> None:
    sidecar, client = served
    relpath = f"{FILLS}/hourly/20260610/13"
    write_hour(sidecar, relpath, b'{"a":1}\n' * 10 + b'{"partial')
    run_as_started(sidecar, {FILLS: {relpath: FileCursor(path=relpath, byte_offset=16)}})
    refresh_state(sidecar)
    text = await (await client.get("/metrics")).text()

    assert "hyperdata_sidecar_ready 1.0" in text
    assert f'hyperdata_sidecar_tail_offset_lag_bytes{{file="{relpath}",table="{FILLS}"}} {80 + 9 - 16}.0' in text
    assert f'hyperdata_sidecar_files_tailed{{table="{FILLS}"}} 1.0' in text


async def test_the_gauges_report_the_age_of_the_oldest_finalized_file_without_a_seal(served) -> None:
    sidecar, client = served
    older, newer = (f"{FILLS}/hourly/20260610/{h}" for h in (11, 12))
    finalized = {
        path: FileCursor(path=path, stage=CursorStage.FINALIZED, finalized_at=iso_utc(time.time() - age))
        for path, age in ((older, 600), (newer, 60))
    }
    run_as_started(sidecar, {FILLS: finalized})
    refresh_state(sidecar)
    text = await (await client.get("/metrics")).text()
    age = float(re.search(rf'oldest_unsealed_finalized_age_seconds{{table="{FILLS}"}} (\S+)', text).group(1))

    assert age >= 600


async def test_the_gauges_report_since_when_the_oldest_hour_not_skipped_lacks_a_seal(served) -> None:
    sidecar, client = served
    skipped, finalized, tailing = (f"{FILLS}/hourly/20260610/{h}" for h in (10, 11, 12))
    run_as_started(
        sidecar,
        {
            FILLS: {
                skipped: FileCursor(path=skipped, stage=CursorStage.SKIPPED),
                finalized: FileCursor(path=finalized, stage=CursorStage.FINALIZED, finalized_at=iso_utc(time.time())),
                tailing: FileCursor(path=tailing),
            }
        },
    )
    end_of_11 = calendar.timegm((2026, 6, 10, 12, 0, 0))
    before = time.time()
    refresh_state(sidecar)
    text = await (await client.get("/metrics")).text()
    after = time.time()
    age = float(re.search(rf'oldest_unsealed_hour_age_seconds{{table="{FILLS}"}} (\S+)', text).group(1))

    assert before - end_of_11 <= age <= after - end_of_11
    assert (
        float(re.search(r"^hyperdata_sidecar_lag_warn_bytes (\S+)$", text, re.MULTILINE).group(1))
        == sidecar.settings.lag_warn_bytes
    )


# ---------------------------------------------------------------------- JSON views


async def test_files_view_lists_the_tailers_files_with_lag_from_disk(served) -> None:
    sidecar, client = served
    tailing = f"{FILLS}/hourly/20260610/13"
    finished = f"{FILLS}/hourly/20260610/12"
    write_hour(sidecar, tailing, b"x" * 300)
    run_as_started(
        sidecar,
        {
            FILLS: {
                tailing: FileCursor(path=tailing, byte_offset=120, lines=3),
                finished: FileCursor(path=finished, byte_offset=500, size=500, stage=CursorStage.FINALIZED),
            }
        },
    )
    body = await (await client.get("/sidecar/files/")).json()

    assert [(f["path"], f["state"], f["offset"], f["size"], f["lag_bytes"]) for f in body["files"]] == [
        (finished, "finalized", 500, 500, 0),
        (tailing, "tailing", 120, 300, 180),
    ]
    assert body["counts"]["tailing"] == 1 and body["counts"]["finalized"] == 1


async def test_dlq_view_counts_by_table_and_reason(served) -> None:
    sidecar, client = served
    sidecar.metrics.dlq(FILLS, "malformed", 2)
    sidecar.metrics.dlq(FILLS, "blank")
    body = await (await client.get("/sidecar/dlq/")).json()

    assert body["since_start"] == {FILLS: {"malformed": 2, "blank": 1}}
    assert body["since_start_total"] == 3


async def test_seals_view_is_empty_and_bounded_by_a_valid_limit(served) -> None:
    _sidecar, client = served
    ok = await client.get("/sidecar/seals/?limit=5")
    bad = await client.get("/sidecar/seals/?limit=0")

    assert (ok.status, await ok.json()) == (200, {"seals": [], "limit": 5})
    assert bad.status == 400


async def test_snapshots_view_lists_published_events_newest_first_with_their_backup_and_those_waiting(
    served, monkeypatch
) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    older, newer = "periodic_abci_states/20260610/100.rmp", "periodic_abci_states/20260610/200.rmp"
    monkeypatch.setattr(
        sidecar.tables,
        "snapshots",
        {
            older: {"height": 100, "path": older, "size": 5, "sha256": "a" * 64, "offsets": {}},
            newer: {
                "height": 200,
                "path": newer,
                "size": 6,
                "sha256": "b" * 64,
                "offsets": {},
                "partial": ["node_fills_streaming"],
            },
        },
    )
    monkeypatch.setattr(sidecar.tables, "backups", {older: {"status": "ok"}})
    watch = sidecar.settings.watch_dir / "periodic_abci_states" / "20260611"
    watch.mkdir(parents=True)
    (watch / "300.rmp").write_bytes(b"growing")
    sidecar.watcher.start(set())
    await sidecar.watcher.tick()
    body = await (await client.get("/sidecar/snapshots/?limit=5")).json()

    assert [(s["height"], s["backup"]) for s in body["snapshots"]] == [(200, "pending"), (100, "ok")]
    assert [(w["height"], w["size"]) for w in body["waiting"]] == [(300, 7)]
    assert body["topic"] == sidecar.settings.topic_snapshots and body["limit"] == 5
    assert (await client.get("/sidecar/snapshots/?limit=x")).status == 400
    page = await (await client.get("/sidecar/")).text()
    assert "Last node snapshots" in page and "node_fills_streaming" in page


async def test_a_scrape_and_a_readiness_probe_change_no_metric(served) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    first = await (await client.get("/metrics")).text()
    assert (await client.get("/readyz")).status == 200
    assert "hyperdata_sidecar_ready 0.0" in first  # the timer has not run: the probe did not write it either
    assert "hyperdata_sidecar_ready 0.0" in await (await client.get("/metrics")).text()


async def test_pages_are_read_only(served) -> None:
    _sidecar, client = served
    for path in ("/", "/metrics", "/sidecar/files/", "/readyz"):
        assert (await client.post(path)).status == 405


# ---------------------------------------------------------------------- the status page


async def test_status_page_takes_the_root_from_fausts_index(served) -> None:
    _sidecar, client = served
    response = await client.get("/")
    page = await response.text()

    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert "<h1>hyperdata-sidecar</h1>" in page
    for spec in TABLES:
        assert spec.dir_name in page


async def test_status_page_is_also_served_under_sidecar_for_hosts_that_own_the_root(tmp_path: Path) -> None:
    app = faust.App("host-with-root", broker="kafka://127.0.0.1:9", datadir=str(tmp_path / "data"), autodiscover=False)

    @app.page("/", name="host.index")
    async def index(view, request):
        return view.text("the host's own index")

    _app, _sidecar = make_app(tmp_path, app=app)
    app.web.init_server()
    async with TestClient(TestServer(app.web.web_app)) as client:
        root = await (await client.get("/")).text()
        status = await (await client.get("/sidecar/")).text()

    assert root == "the host's own index"
    assert "<h1>hyperdata-sidecar</h1>" in status


async def test_no_secret_reaches_the_page_or_the_status_json(tmp_path: Path) -> None:
    app, sidecar = make_app(
        tmp_path,
        KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        KAFKA_SASL_MECHANISM="PLAIN",
        KAFKA_SASL_USERNAME="svc",
        KAFKA_SASL_PASSWORD=SECRET,
    )
    app.web.init_server()
    async with TestClient(TestServer(app.web.web_app)) as client:
        bodies = [await (await client.get(path)).text() for path in ("/", "/sidecar/status/", "/metrics")]

    assert sidecar.settings.security.sasl_password == SECRET
    assert not any(SECRET in body for body in bodies)


async def test_the_chosen_engine_is_named_in_the_page_header_the_status_json_and_the_metrics(tmp_path: Path) -> None:
    app, sidecar = make_app(tmp_path, SIDECAR_ENGINE="python")
    engine = sidecar.engine
    app.web.init_server()
    async with TestClient(TestServer(app.web.web_app)) as client:
        page = await (await client.get("/")).text()
        status = await (await client.get("/sidecar/status/")).json()
        metrics = await (await client.get("/metrics")).text()

    header = page[page.index("<header>") : page.index("</header>")]
    assert f"engine python {engine.version}" in header
    assert status["engine"] == {"name": "python", "version": engine.version, "fallback_reason": None}
    assert status["config"]["engine"] == "python"
    assert f'hyperdata_sidecar_engine_info{{engine="python",version="{engine.version}"}} 1.0' in metrics


# ---------------------------------------------------------------------- Faust's table view


async def test_faust_table_list_includes_the_sidecars_tables(served) -> None:
    _sidecar, client = served
    names = [t["name"] for t in await (await client.get("/table/")).json()]

    assert {"sidecar-offsets", "sidecar-seals", "sidecar-backups", "sidecar-snapshots"} <= set(names)


# ---------------------------------------------------------------------- install


def test_every_page_has_an_explicit_sidecar_name(tmp_path: Path) -> None:
    app, _sidecar = make_app(tmp_path)
    ours = {name: path for name, path in app.web.reverse_names.items() if name.startswith("hyperdata_sidecar.")}

    assert ours == {
        "hyperdata_sidecar.status": "/",
        "hyperdata_sidecar.status_page": "/sidecar/",
        "hyperdata_sidecar.metrics": "/metrics",
        "hyperdata_sidecar.healthz": "/healthz",
        "hyperdata_sidecar.readyz": "/readyz",
        "hyperdata_sidecar.files": "/sidecar/files/",
        "hyperdata_sidecar.seals": "/sidecar/seals/",
        "hyperdata_sidecar.snapshots": "/sidecar/snapshots/",
        "hyperdata_sidecar.dlq": "/sidecar/dlq/",
        "hyperdata_sidecar.status_json": "/sidecar/status/",
    }


async def test_readiness_names_the_state_dir_while_the_store_refuses_writes_and_recovers_after(served) -> None:
    sidecar, client = served
    run_as_started(sidecar, {})
    refusing = RefusingTable()
    write = asyncio.ensure_future(sidecar.state_writer.put(refusing, "node_fills_streaming/20250101/0", {"offset": 1}))
    while sidecar.state_writer.problem is None:
        await asyncio.sleep(0)
    full = await client.get("/readyz")
    refusing.full = False
    assert await write is True
    recovered = await client.get("/readyz")

    assert full.status == 503
    assert (await full.json())["reasons"] == [
        f"STATE_PATH {sidecar.settings.state_path}: IO error: No space left on device "
        "(the tailers read nothing new until the state store takes writes again)"
    ]
    assert recovered.status == 200 and refusing == {"node_fills_streaming/20250101/0": {"offset": 1}}


class RefusingTable(dict[str, Any]):
    """A table whose store refuses writes, as RocksDB does on a full disk, until ``full`` is False."""

    full = True

    def __setitem__(self, key: str, value: Any) -> None:
        if self.full:
            raise Exception("IO error: No space left on device")
        super().__setitem__(key, value)


# ---------------------------------------------------------------------- backlog


class HeldSink(BackupSink):
    """A sink that has moved 400 bytes of its file and waits for ``release`` to finish the copy."""

    name = "local"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        self.progress.advance(400)
        await self.release.wait()
        self.progress.advance(600)
        return f"file:///backups/{relpath}"


async def test_the_running_backup_and_every_parked_one_reach_the_status_json_and_page(served, monkeypatch) -> None:
    sidecar, client = served
    parked = "node_fills_streaming/hourly/20260610/9"
    record = {"status": "parked", "reason": "no_space", "error": "no_space: full", "attempts": 5, "at": iso_utc(time.time())}
    monkeypatch.setattr(sidecar.tables, "backups", {parked: record})
    sink = HeldSink()
    monkeypatch.setattr(sidecar.backup_worker, "sink", sink)
    subject = SnapshotBackup("periodic_abci_states/20260610/100.rmp", "a" * 64, 1000)
    attempt = asyncio.create_task(sidecar.backup_worker.attempt(subject))
    while sink.progress.done_bytes == 0:
        await asyncio.sleep(0.01)

    during = await (await client.get("/sidecar/status/")).json()
    page = await (await client.get("/sidecar/")).text()
    sink.release.set()
    await attempt
    after = await (await client.get("/sidecar/status/")).json()

    running = during["backup_running"]
    assert (running["path"], running["sink"], running["done_bytes"], running["total_bytes"]) == (subject.path, "local", 400, 1000)
    assert running["rate_bytes_per_s"] > 0 and running["eta_s"] > 0
    assert [(b["path"], b["reason"], b["error"]) for b in during["backups_parked"]] == [(parked, "no_space", "no_space: full")]
    assert "400 B of 1000 B (40%)" in page and "Parked backups: 1" in page
    assert after["backup_running"] is None
    assert {b["path"]: b.get("ref") for b in after["backups"]}[subject.path] == f"file:///backups/{subject.path}"


async def test_the_backlog_of_each_table_reaches_metrics_status_and_files_views(served) -> None:
    sidecar, client = served
    hours = [f"{FILLS}/hourly/20260610/{h}" for h in (13, 14, 15)]
    write_hour(sidecar, hours[0], b'{"a":1}\n' * 10)
    write_hour(sidecar, hours[1], b'{"b":2}\n' * 20)
    write_hour(sidecar, hours[2], b'{"c":3}\n' * 5)
    run_as_started(sidecar, {FILLS: {hours[0]: FileCursor(path=hours[0], byte_offset=16)}})
    sidecar.node_tables.startup_summary()  # the scan the startup line makes: the sizes the backlog is measured from
    sidecar.node_tables.sample_backlogs()
    metrics = await (await client.get("/metrics")).text()
    status = await (await client.get("/sidecar/status/")).json()
    files = await (await client.get("/sidecar/files/")).json()
    expected_bytes = (80 - 16) + 160 + 40

    assert f'hyperdata_sidecar_backlog_bytes{{table="{FILLS}"}} {expected_bytes}.0' in metrics
    assert f'hyperdata_sidecar_backlog_files{{table="{FILLS}"}} 3.0' in metrics
    fills = next(t for t in status["tables"] if t["table"] == FILLS)
    assert (fills["backlog"]["bytes"], fills["backlog"]["files"]) == (expected_bytes, 3)
    assert files["backlog"][FILLS] == fills["backlog"]


async def test_before_the_tables_are_synced_no_backlog_is_shown(served) -> None:
    sidecar, client = served
    sidecar.node_tables.sample_backlogs()
    status = await (await client.get("/sidecar/status/")).json()

    assert [t["backlog"] for t in status["tables"]] == [None] * len(TABLES)
    assert status["catch_up"] is None
