"""What every fault drill needs: its context, its result, and async ways to watch a live worker.

A drill breaks something real under a running sidecar (a worker process, the broker, the state
dir, the watched files), measures what it sees, and lets the no-loss verifier decide. It returns a
:class:`DrillResult`: named checks, lost and duplicate counts, a recovery time and notes. The CI
tests assert on it; ``scripts/drills.py`` prints it as a table.

Every drill runs in one delivery mode, the context's ``delivery``: each sidecar it makes gets that
``DELIVERY``, and with ``exactly_once`` the verifier reads ``read_committed`` (what downstream
reads); the duplicates it counts are that view's, and the result notes what a ``read_uncommitted``
reader sees besides.

Every drill also runs with one backup sink, the context's ``backup_sink``: ``local`` (a copy under
each sidecar's ``BACKUP_DIR``) or ``object_store`` (the context's :class:`BackupBucket`, a bucket on
an S3-compatible server). :func:`verify_with_backups` checks the backups wherever the sidecar's
settings put them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from prometheus_client.parser import text_string_to_metric_families

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devkafka import LocalKafka
from hyperdata_sidecar.devs3 import MotoS3, credentials_env
from hyperdata_sidecar.tools.expected import hour_files, value_digest
from hyperdata_sidecar.tools.reconcile import DataRecord, DlqRecord, Observed, SealRecord, parse_reference
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.verify import DLQ, SEALS

from sidecar_run import Sidecar
from worker_process import WorkerProcess

WAIT_S = 120.0
AT_LEAST_ONCE, EXACTLY_ONCE = "at_least_once", "exactly_once"
DELIVERIES = (AT_LEAST_ONCE, EXACTLY_ONCE)
LOCAL, OBJECT_STORE = "local", "object_store"
BACKUP_SINKS = (LOCAL, OBJECT_STORE)
POLL_S = 0.25
CLK_TCK = os.sysconf("SC_CLK_TCK")


class DrillError(AssertionError):
    """A drill could not run to its end (a worker died, a condition never came); the message says why."""


# ---------------------------------------------------------------------------- context and result


@dataclass(frozen=True)
class BackupBucket:
    """A bucket on an S3-compatible server (moto's, :mod:`hyperdata_sidecar.devs3`) that sidecars
    back up to with ``BACKUP_SINK=object_store``, each under a prefix of its own."""

    endpoint: str
    name: str

    @classmethod
    def made_on(cls, server: MotoS3, name: str) -> BackupBucket:
        """The bucket ``name`` on ``server``, made now."""
        server.client().create_bucket(Bucket=name)
        return cls(server.endpoint, name)

    def settings(self, prefix: str) -> dict[str, str]:
        """A sidecar's settings to back up under ``prefix`` in this bucket: path-style requests, the
        test credentials in the AWS variables."""
        return {
            "BACKUP_SINK": OBJECT_STORE,
            "BACKUP_URL": f"s3://{self.name}/{prefix}",
            "BACKUP_ENDPOINT": self.endpoint,
            "BACKUP_PATH_STYLE": "true",
            **credentials_env(),
        }


@dataclass
class DrillContext:
    """Where a drill runs: a broker, an empty directory of its own and a topic prefix no one else uses.

    ``broker`` is given to drills that stop and start it (they start it again before they return).
    ``delivery`` is the ``DELIVERY`` of every sidecar the drill makes (``TXN_*`` keep their defaults
    unless the drill sets them). ``bucket`` says where they back up: None for the local sink (each
    sidecar's ``BACKUP_DIR``), else ``BACKUP_SINK=object_store`` in that bucket under the prefix
    ``<root's name>/<sidecar's name>``.
    """

    bootstrap: str
    root: Path
    prefix: str
    broker: LocalKafka | None = None
    delivery: str = AT_LEAST_ONCE
    bucket: BackupBucket | None = None

    def __post_init__(self) -> None:
        if self.delivery not in DELIVERIES:
            raise ValueError(f"delivery must be one of {', '.join(DELIVERIES)}, not {self.delivery!r}")

    @property
    def exactly_once(self) -> bool:
        return self.delivery == EXACTLY_ONCE

    @property
    def backup_sink(self) -> str:
        """The ``BACKUP_SINK`` of every sidecar the drill makes: ``local`` or ``object_store``."""
        return LOCAL if self.bucket is None else OBJECT_STORE

    @property
    def isolation(self) -> str:
        """What the drill's readers read: ``read_committed`` in ``exactly_once``, as downstream does."""
        return "read_committed" if self.exactly_once else "read_uncommitted"

    def sidecar(self, name: str = "node", **overrides: str) -> Sidecar:
        """A sidecar rooted at ``root/name`` (its own watch, state and backup dirs) on the drill's
        topics, in the drill's delivery mode, backing up with the drill's sink."""
        settings = {"DELIVERY": self.delivery}
        if self.bucket is not None:
            settings |= self.bucket.settings(f"{self.root.name}/{name}")
        return Sidecar(self.root / name, self.bootstrap, self.prefix, **{**settings, **overrides})

    def on(self, broker: LocalKafka) -> DrillContext:
        """The same context on another broker (a drill's own, differently configured)."""
        return replace(self, bootstrap=broker.bootstrap, broker=broker)


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


@dataclass
class DrillResult:
    """What one drill found. ``observed`` drills document behaviour that is not defined yet: never "pass"."""

    number: int
    title: str
    variant: str = ""  # "b" for a second drill under the same number
    checks: list[Check] = field(default_factory=list)
    lost: int | None = None
    duplicates: int | None = None
    recovery_s: float | None = None
    notes: list[str] = field(default_factory=list)
    observed: bool = False
    skipped: str | None = None  # why the drill could not run here (e.g. "needs root"); it checked nothing

    @property
    def label(self) -> str:
        return f"{self.number}{self.variant}"

    @property
    def ok(self) -> bool:
        """True when the drill checked something and every check passed (a drill with no check proves nothing)."""
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def outcome(self) -> str:
        if self.skipped is not None:
            return f"skipped: {self.skipped}"
        if not self.ok:
            return "FAIL"
        return "observed" if self.observed else "pass"

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, bool(passed), detail))
        return bool(passed)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def verified(self, report: VerifyReport, *, allowed_duplicates: int = 0, label: str = "") -> None:
        """Fold a verifier report in: lost/duplicate counts (summed over reports) and one check each."""
        lost = report.count("lost") + report.count("dlq_missing")
        self.lost = (self.lost or 0) + lost
        self.duplicates = (self.duplicates or 0) + report.duplicates
        prefix = f"{label}: " if label else ""
        per_table = {t.table: t.counts["duplicate"] + t.counts["dlq_duplicate"] for t in report.tables.values()}
        if any(per_table.values()):
            self.note(f"{prefix}duplicates by table: " + ", ".join(f"{table} {n}" for table, n in per_table.items() if n))
        if report.uncommitted_duplicates is not None:
            self.note(
                f"{prefix}read {report.isolation}: {report.duplicates} duplicates; "
                f"a read_uncommitted reader sees {report.uncommitted_duplicates} (aborted transactions' records)"
            )
        self.check(f"{prefix}nothing lost, wrong or sealed twice", report.failures == 0, report.summary())
        self.check(
            f"{prefix}duplicates {report.duplicates} <= {allowed_duplicates}",
            report.duplicates <= allowed_duplicates,
            report.summary(),
        )

    def describe(self) -> str:
        lines = [f"drill {self.label} ({self.title}): {self.outcome}"]
        for c in self.checks:
            lines.append(f"  [{'ok' if c.passed else 'FAILED'}] {c.name}")
            if not c.passed and c.detail:
                detail = c.detail.splitlines()
                shown = detail if len(detail) <= 40 else [*detail[:3], "...", *detail[-36:]]
                lines.extend(f"      {line}" for line in shown)
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)


# ---------------------------------------------------------------------------- a live worker


def pid(worker: WorkerProcess) -> int:
    assert worker._process is not None
    return worker._process.pid


def exit_code(worker: WorkerProcess) -> int | None:
    return None if worker._process is None else worker._process.poll()


def kill(worker: WorkerProcess) -> None:
    """SIGKILL the worker (its whole process group) and reap it."""
    os.killpg(pid(worker), signal.SIGKILL)
    worker._process.wait()


async def terminate(worker: WorkerProcess, bound_s: float) -> tuple[int | None, float]:
    """SIGTERM the worker; (exit code or None if still running after ``bound_s``, seconds waited)."""
    started = time.monotonic()
    worker._process.send_signal(signal.SIGTERM)
    while time.monotonic() - started < bound_s:
        code = worker._process.poll()
        if code is not None:
            return code, time.monotonic() - started
        await asyncio.sleep(0.05)
    return None, time.monotonic() - started


async def stopped_by_itself(worker: WorkerProcess, timeout_s: float) -> int | None:
    """The worker's exit code once it exits by itself (None if it still runs after ``timeout_s``)."""
    started = time.monotonic()
    while exit_code(worker) is None and time.monotonic() - started < timeout_s:
        await asyncio.sleep(0.2)
    return exit_code(worker)


async def wait_for(worker: WorkerProcess | None, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> float:
    """Poll ``condition`` (run in a thread: it may do HTTP) until it holds; returns the seconds it took.

    Raises :class:`DrillError` naming ``what`` if the worker exits first or ``timeout_s`` passes.
    """
    started = time.monotonic()
    while True:
        if worker is not None and exit_code(worker) is not None:
            raise DrillError(f"worker exited ({exit_code(worker)}) while waiting for {what}:\n{worker.log_tail()}")
        if await asyncio.to_thread(_holds, condition):
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            tail = ""
            if worker is not None:
                os.kill(pid(worker), signal.SIGUSR1)  # mode's worker writes every task's stack to its log
                await asyncio.sleep(2.0)
                tail = worker.log_tail()
            raise DrillError(f"gave up after {timeout_s:.0f}s waiting for {what} (task stacks in the worker log)\n{tail}")
        await asyncio.sleep(POLL_S)


def _holds(condition: Callable[[], bool]) -> bool:
    try:
        return bool(condition())
    except (AssertionError, ValueError, KeyError, OSError):
        return False  # not there yet: a page not served, a file not written


def metric(worker: WorkerProcess, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample named ``name`` on the worker's /metrics; [] when it does not answer."""
    status, _type, body = worker.get("/metrics")
    if status != 200:
        return []
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
        if sample.name == name
    ]


def metric_value(worker: WorkerProcess, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0 when there are none)."""
    return sum(value for found, value in metric(worker, name) if labels.items() <= found.items())


def is_ready(worker: WorkerProcess) -> bool:
    return worker.get("/readyz")[0] == 200


def caught_up(worker: WorkerProcess, watch: Path) -> bool:
    """Ready, and every table's tail gauge is on its newest file with nothing left to publish.

    Files are worked in hour order, so a zero lag on the newest file means every older one is done.
    """
    if not is_ready(worker):
        return False
    lag = {
        labels["table"]: (labels["file"], value) for labels, value in metric(worker, "hyperdata_sidecar_tail_offset_lag_bytes")
    }
    for spec in TABLES:
        files = hour_files(watch, spec.dir_name)
        if files and lag.get(spec.dir_name) != (files[-1].relpath, 0.0):
            return False
    return True


def marks(watch: Path) -> dict[str, int]:
    """Where each table's newest file ends its last complete line now: what a caught-up sidecar has published."""
    found = {}
    for spec in TABLES:
        files = hour_files(watch, spec.dir_name)
        if files:
            found[files[-1].relpath] = _complete_end(watch / files[-1].relpath)
    return found


def _complete_end(path: Path) -> int:
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            chunk = f.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return 0


def reached(worker: WorkerProcess, points: dict[str, int]) -> bool:
    """The sidecar has acked every line up to ``points`` (see :func:`marks`), or finalized those files.

    Unlike :func:`caught_up` this holds while the node keeps writing.
    """
    status, _type, body = worker.get("/sidecar/files/")
    if status != 200:
        return False
    files = {f["path"]: f for f in json.loads(body)["files"]}
    return all(
        path in files and (files[path]["offset"] >= point or files[path]["state"] != "tailing") for path, point in points.items()
    )


def rss_kib(process_id: int) -> int:
    with open(f"/proc/{process_id}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ValueError(f"no VmRSS for {process_id}")


def cpu_s(process_id: int) -> float:
    """User + system CPU seconds the process has used so far."""
    with open(f"/proc/{process_id}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu_s(process_id: int) -> dict[str, float]:
    """CPU seconds used so far by each thread name of the process ("main" for the first thread;
    threads sharing a name are added up). Threads that ended meanwhile are missing."""
    used: dict[str, float] = {}
    for task in os.listdir(f"/proc/{process_id}/task"):
        try:
            with open(f"/proc/{process_id}/task/{task}/stat") as stat:
                head, tail = stat.read().rsplit(")", 1)
        except OSError:
            continue  # ended between the listing and the read
        fields = tail.split()
        name = "main" if int(task) == process_id else head.split("(", 1)[1]
        used[name] = used.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return used


def busiest(before: dict[str, float], after: dict[str, float], seconds: float, top: int = 4) -> str:
    """The ``top`` threads by their share of a core between two :func:`thread_cpu_s`."""
    shares = sorted(((after[name] - before.get(name, 0.0)) / seconds, name) for name in after)
    return ", ".join(f"{name} {100 * share:.1f}%" for share, name in reversed(shares[-top:]))


def log_lines(sidecar: Sidecar) -> int:
    with open(sidecar.root / "run" / "worker.log", "rb") as log:
        return sum(1 for _ in log)


# ---------------------------------------------------------------------------- backups


def backup_target(sidecar: Sidecar) -> dict[str, str]:
    """The settings that say where ``sidecar`` backs up, for another sidecar to back up there too."""
    return {name: sidecar.env[name] for name in ("BACKUP_DIR", "BACKUP_URL") if name in sidecar.env}


async def verify_with_backups(sidecar: Sidecar, **kwargs: Any) -> VerifyReport:
    """The verifier on ``sidecar`` (:meth:`Sidecar.verify`, ``kwargs`` passed on), with the backups
    of its finalized hour files checked where its ``BACKUP_SINK`` puts them.

    With the local sink that is the verifier's own check of the copies under ``BACKUP_DIR``. With
    ``object_store`` the verifier checks the topics, then each file's object (:class:`StoredBackups`)
    is waited for until it has the file's size (up to ``timeout_s`` more), and must hold the file's
    bytes and its sha256 as metadata: the findings (``backup_missing``, ``backup_wrong``, backups
    ok) go into the same report. The drills write no node snapshots, whose backups this leaves out.
    """
    if sidecar.env.get("BACKUP_SINK") != OBJECT_STORE:
        return await sidecar.verify(backup_dir=sidecar.backups, **kwargs)
    kwargs.setdefault("timeout_s", WAIT_S)
    report = await sidecar.verify(**kwargs)
    store = StoredBackups(sidecar.env)
    owed = finalized_files(sidecar.watch, ignore=kwargs.get("ignore", ()))
    deadline = time.monotonic() + kwargs["timeout_s"]
    while not await asyncio.to_thread(store.holds_sizes, sidecar.watch, owed) and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
    await asyncio.to_thread(store.check, report, sidecar.watch, owed)
    return report


def finalized_files(watch: Path, *, ignore: Collection[str] = ()) -> list[tuple[str, str]]:
    """(table, relpath) of every hour file but the newest of its table, as the verifier finalizes
    them, without the relpaths in ``ignore`` (which still count as newer files)."""
    return [
        (spec.dir_name, hour_file.relpath)
        for spec in TABLES
        for hour_file in hour_files(watch, spec.dir_name)[:-1]
        if hour_file.relpath not in ignore
    ]


class StoredBackups:
    """The objects a sidecar with ``BACKUP_SINK=object_store`` backed up, read with boto3 (moto's
    dependency) as its settings name them: the file ``<relpath>`` is the object ``<prefix>/<relpath>``
    in the bucket of ``BACKUP_URL``, with the sidecar's sha256 as the metadata ``sha256``."""

    def __init__(self, env: Mapping[str, str]) -> None:
        url = urlsplit(env["BACKUP_URL"])
        self.bucket, self.prefix = url.netloc, url.path.strip("/")
        self.client = boto3.client(
            "s3",
            endpoint_url=env["BACKUP_ENDPOINT"],
            region_name=env["AWS_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )

    def key(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    def size(self, relpath: str) -> int | None:
        """The size of the object of ``relpath``; None if there is none."""
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self.key(relpath))["ContentLength"]
        except self.client.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey"):
                return None
            raise

    def digests(self, relpath: str) -> tuple[str, str] | None:
        """The sha256 of the object's bytes and its metadata ``sha256`` ("" when unset); None if there is no object."""
        try:
            stored = self.client.get_object(Bucket=self.bucket, Key=self.key(relpath))
        except self.client.exceptions.NoSuchKey:
            return None
        digest = hashlib.sha256()
        for chunk in stored["Body"].iter_chunks(8 * 1024 * 1024):
            digest.update(chunk)
        return digest.hexdigest(), stored["Metadata"].get("sha256", "")

    def holds_sizes(self, watch: Path, files: list[tuple[str, str]]) -> bool:
        """Blocking: every file of ``files`` (see :func:`finalized_files`) has an object of its size."""
        return all(self.size(relpath) == (watch / relpath).stat().st_size for _table, relpath in files)

    def check(self, report: VerifyReport, watch: Path, files: list[tuple[str, str]]) -> None:
        """Blocking: add each file's finding to ``report``, as the verifier does for a copy under ``BACKUP_DIR``."""
        report.backups_checked = True
        for table, relpath in files:
            where = (table, relpath, None)
            expected = _file_sha256(watch / relpath)
            stored = self.digests(relpath)
            if stored is None:
                report.add("backup_missing", *where, f"no object s3://{self.bucket}/{self.key(relpath)}")
            elif stored != (expected, expected):
                report.add("backup_wrong", *where, f"object sha256 {stored[0]}, metadata sha256 {stored[1]!r}, file {expected}")
            else:
                report.table(table).backups_ok += 1


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while block := source.read(8 * 1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------- the topics, from a point on


async def end_offsets(bootstrap: str, topics: Mapping[str, str]) -> dict[TopicPartition, int]:
    """End offset of every partition of the sidecar's topics (role → name) now."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics(sorted(set(topics.values())))
    finally:
        await admin.close()
    partitions = [TopicPartition(t["topic"], p["partition"]) for t in described for p in t["partitions"]]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.end_offsets(partitions)
    finally:
        await consumer.stop()


async def records_since(
    bootstrap: str, topics: Mapping[str, str], since: Mapping[TopicPartition, int], *, isolation: str = "read_uncommitted"
) -> Observed:
    """Every record of the sidecar's topics from ``since`` to the end offsets of now, as the verifier
    keeps them, as a consumer of ``isolation`` reads them (``read_committed``: to the last stable
    offset, aborted transactions left out)."""
    tables = {topics[spec.dir_name]: spec.dir_name for spec in TABLES}
    observed = Observed(topic_tables=tables)
    for tp in since:
        if tp.topic in tables:
            observed.partitions[tp.topic] = observed.partitions.get(tp.topic, 0) + 1
    if not since:
        raise DrillError("no partitions to read")
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation)
    await consumer.start()
    try:
        consumer.assign(list(since))
        ends = await consumer.end_offsets(list(since))
        for tp, offset in since.items():
            consumer.seek(tp, offset)
        remaining = {tp for tp in since if since[tp] < ends[tp]}
        deadline = time.monotonic() + WAIT_S
        while remaining and time.monotonic() < deadline:
            for tp, messages in (await consumer.getmany(*remaining, timeout_ms=1000)).items():
                for message in messages:
                    if message.offset < ends[tp]:
                        _keep(observed, topics, message)
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
        if remaining:
            raise DrillError(f"could not read {sorted(map(str, remaining))} to their end offsets")
    finally:
        await consumer.stop()
    return observed


def _keep(observed: Observed, topics: Mapping[str, str], message) -> None:
    headers = dict(message.headers or ())
    value = message.value or b""
    source = headers["source"].decode() if "source" in headers else None
    offset = int(headers["offset"]) if "offset" in headers else None
    if message.topic in observed.topic_tables:
        observed.data.append(
            DataRecord(
                message.topic,
                message.partition,
                message.offset,
                message.key,
                source,
                offset,
                headers.get("line_id"),
                value_digest(value),
            )
        )
    elif message.topic == topics[DLQ]:
        reason = headers["reason"].decode() if "reason" in headers else None
        observed.dlq.append(
            DlqRecord(
                message.partition,
                message.offset,
                message.key,
                source,
                offset,
                reason,
                value_digest(value),
                parse_reference(value),
            )
        )
    elif message.topic == topics[SEALS]:
        observed.seals.append(SealRecord(message.partition, message.offset, message.key, value))
