"""The backup worker: each attempt's outcome (copied, already present, failed and scheduled again,
parked after BACKUP_MAX_TRIES, given up when the source is gone), what is not copied at all (backups
disabled, a file rewritten after its seal, a superseded revision, a backup already made), the records
of the backup-attempts topic (a retry of this run, a request for a new series, anything else), and
the due retries sent to that topic. A recording BackupSink (and the real LocalBackupSink on temporary
directories), plain dicts for the tables, a real StateWriter, a recorder for the attempts topic.
tests/unit/test_backup.py tests the sinks themselves."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.errors import KafkaTimeoutError
from hyperdata_sidecar.agents.backup import BackupWorker

from hyperdata_sidecar.backup import BackupError, BackupProgress, BackupSink, LocalBackupSink, NoBackupSink
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core import backup_plan
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.snapshots import SnapshotBackup
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateTables, StateWriter

LOGGER = "tests.agents_backup"
RUN = "run-2"
MAX_TRIES = 3
PATH = "node_fills_streaming/hourly/20260610/22"
SNAPSHOT_PATH = "periodic_abci_states/20260610/100.rmp"
DATA = b'{"block_number": 1}\n'
SHA = hashlib.sha256(DATA).hexdigest()


def cursor(path: str = PATH, **changes: Any) -> FileCursor:
    finalized = {
        "stage": CursorStage.FINALIZED,
        "revision": 1,
        "sha256": SHA,
        "size": len(DATA),
        "finalized_at": "2026-06-10T23:00:03.000Z",
    }
    return FileCursor(path=path, **{**finalized, **changes})


def manifest(revision: int = 1) -> SealManifest:
    sealed = manifest_from_cursor(cursor(revision=revision), "unit")
    assert sealed is not None
    return sealed


SNAPSHOT = SnapshotBackup(SNAPSHOT_PATH, SHA, len(DATA))


class Sink(BackupSink):
    """A sink that records its calls: ``existing`` is the ref find_existing gives (None: no copy);
    each backup raises the next of ``failures``, then copies (its progress counts the file's bytes)."""

    name = "fake"

    def __init__(self, *failures: BackupError, existing: str | None = None) -> None:
        self.failures = list(failures)
        self.existing = existing
        self.found: list[tuple[str, str]] = []
        self.copied: list[tuple[Path, str, str]] = []

    async def find_existing(self, relpath: str, sha256: str) -> str | None:
        self.found.append((relpath, sha256))
        return self.existing

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        if self.failures:
            raise self.failures.pop(0)
        self.copied.append((local_path, relpath, sha256))
        self.progress.advance(local_path.stat().st_size)
        return f"fake://{relpath}"


class Topic:
    """The internal backup-attempts topic: keeps what is sent; refuses the next ``refusals`` sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.refusals = 0

    async def send(self, *, key: str, value: dict[str, Any]) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaTimeoutError()
        self.sent.append((key, value))


class Parts:
    def __init__(self, tmp_path: Path, sink: BackupSink) -> None:
        watch = tmp_path / "watch"
        (watch / PATH).parent.mkdir(parents=True, exist_ok=True)
        (watch / PATH).write_bytes(DATA)
        (watch / SNAPSHOT_PATH).parent.mkdir(parents=True, exist_ok=True)
        (watch / SNAPSHOT_PATH).write_bytes(DATA)
        self.settings = load_settings({"WATCH_DIR": str(watch), "NODE_ID": "unit", "BACKUP_MAX_TRIES": str(MAX_TRIES)})
        self.sink, self.topic, self.metrics = sink, Topic(), SidecarMetrics()
        self.tables = StateTables(offsets={PATH: cursor().to_record()}, seals={}, backups={}, snapshots={})
        log = EventLog(logging.getLogger(LOGGER))

        async def pause(_seconds: float) -> bool:
            return True

        self.worker = BackupWorker(
            settings=self.settings,
            sink=sink,
            tables=self.tables,
            attempts=self.topic,  # type: ignore[arg-type]
            writer=StateWriter(self.metrics, log, "/state", pause, lambda _table: None),
            run_id=RUN,
            metrics=self.metrics,
            log=log,
        )

    @property
    def backups(self) -> dict[str, Any]:
        return self.tables.backups  # type: ignore[return-value]

    def record(self, path: str = PATH) -> dict[str, Any]:
        """The backups table's record of ``path``, without its time."""
        record = dict(self.backups[path])
        assert record.pop("at", "Z").endswith("Z")
        return record

    def results(self) -> dict[str, float | None]:
        return {
            result: self.metrics.registry.get_sample_value("hyperdata_sidecar_backups_total", {"result": result})
            for result in ("ok", "noop", "failed")
        }

    def due(self) -> list[Any]:
        return self.worker.schedule.due(float("inf"))

    def moved(self, sink: str = "fake") -> dict[str, tuple[float | None, float | None]]:
        """(bytes moved, attempts timed) by result, from the sink's byte and time metrics."""
        sample = self.metrics.registry.get_sample_value
        return {
            result: (
                sample("hyperdata_sidecar_backup_bytes_total", {"sink": sink, "result": result}),
                sample("hyperdata_sidecar_backup_seconds_count", {"sink": sink, "result": result}),
            )
            for result in ("ok", "noop", "failed")
        }


def io_error() -> BackupError:
    return BackupError("io_error", "connection reset by the store")


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


# -- one attempt ----------------------------------------------------------------------------------


async def test_a_file_not_backed_up_is_copied_and_recorded_ok(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    await p.worker.attempt(manifest())
    assert p.sink.copied == [(p.settings.watch_dir / PATH, PATH, SHA)]
    assert p.record() == {
        "status": "ok",
        "sink": "fake",
        "attempts": 1,
        "ref": f"fake://{PATH}",
        "sha256": SHA,
        "revision": 1,
    }
    assert p.results() == {"ok": 1, "noop": 0, "failed": 0}
    [(level, event, fields)] = events(caplog)
    assert (level, event, fields["ref"], fields["attempts"], fields["already_present"]) == (
        "INFO",
        "backup",
        f"fake://{PATH}",
        1,
        False,
    )


async def test_a_copy_already_present_is_a_noop_recorded_ok_without_copying(tmp_path, caplog):
    p = Parts(tmp_path, Sink(existing="fake://already"))
    await p.worker.attempt(manifest())
    assert p.sink.found == [(PATH, SHA)] and p.sink.copied == []
    assert p.record()["status"] == "ok" and p.record()["ref"] == "fake://already"
    assert p.results() == {"ok": 0, "noop": 1, "failed": 0}
    [(_, _, fields)] = events(caplog)
    assert fields["already_present"] is True


async def test_a_failed_attempt_is_recorded_counted_logged_and_scheduled_again(tmp_path, caplog):
    p = Parts(tmp_path, Sink(io_error()))
    await p.worker.attempt(manifest())
    assert p.record() == {
        "status": "failed",
        "sink": "fake",
        "attempts": 1,
        "reason": "io_error",
        "error": "io_error: connection reset by the store",
        "revision": 1,
    }
    assert p.results() == {"ok": 0, "noop": 0, "failed": 1}
    assert events(caplog) == [
        (
            "WARNING",
            "backup_failed",
            {
                "path": PATH,
                "attempt": 1,
                "reason": "io_error",
                "error": "io_error: connection reset by the store",
                "retry_in_s": backup_plan.FIRST_DELAY_S,
            },
        )
    ]
    assert p.due() == [manifest()]


async def test_a_retry_counts_the_tries_of_its_series(tmp_path):
    p = Parts(tmp_path, Sink(io_error()))
    await p.worker.attempt(manifest())
    await p.worker.attempt(manifest())
    assert p.record()["status"] == "ok" and p.record()["attempts"] == 2
    assert p.due() == []


async def test_after_backup_max_tries_failures_in_a_row_the_file_is_parked(tmp_path, caplog):
    p = Parts(tmp_path, Sink(*[io_error()] * MAX_TRIES))
    for _ in range(MAX_TRIES):
        await p.worker.attempt(manifest())
    assert p.record()["status"] == "parked" and p.record()["attempts"] == MAX_TRIES
    assert p.due() == []
    [(level, _, fields)] = [e for e in events(caplog) if e[1] == "backup_parked"]
    assert level == "ERROR" and fields["attempts"] == MAX_TRIES
    assert fields["retry"] == f"on the next start, or: faust -A hyperdata_sidecar backup-retry {PATH}"


async def test_a_source_that_is_gone_is_given_up_at_once(tmp_path, caplog):
    p = Parts(tmp_path, Sink(BackupError("source_missing", "no such file")))
    await p.worker.attempt(manifest())
    assert p.record()["status"] == "failed" and p.due() == []
    [(_, event, fields)] = events(caplog)
    assert event == "backup_failed" and fields["retry_in_s"] is None


async def test_with_backups_disabled_the_file_is_recorded_disabled_and_nothing_is_copied(tmp_path):
    p = Parts(tmp_path, NoBackupSink())
    await p.worker.attempt(manifest())
    assert p.backups == {PATH: {"status": "disabled", "sink": "none", "revision": 1}}
    assert p.results() == {"ok": 0, "noop": 0, "failed": 0}


async def test_a_file_rewritten_after_its_seal_is_failed_at_once_without_a_try(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    p.tables.offsets[PATH] = cursor(stage=CursorStage.REWRITTEN).to_record()
    await p.worker.attempt(manifest())
    assert p.sink.found == [] and p.sink.copied == []
    assert p.record()["status"] == "failed" and p.record()["reason"] == "hash_mismatch"
    assert [(level, event) for level, event, _ in events(caplog)] == [("WARNING", "backup_not_possible")]
    assert p.due() == []


@pytest.mark.parametrize(
    "later", [cursor(revision=2), cursor(stage=CursorStage.REOPENED, revision=1)], ids=["sealed again", "growing again"]
)
async def test_a_revision_a_later_one_supersedes_is_not_copied(tmp_path, caplog, later):
    p = Parts(tmp_path, Sink())
    p.tables.offsets[PATH] = later.to_record()
    await p.worker.attempt(manifest(revision=1))
    assert p.sink.found == [] and p.backups == {}
    assert events(caplog) == [("INFO", "backup_superseded", {"path": PATH, "revision": 1})]


async def test_a_revision_already_backed_up_is_not_copied_again(tmp_path):
    p = Parts(tmp_path, Sink())
    p.backups[PATH] = {"status": "ok", "revision": 1}
    await p.worker.attempt(manifest(revision=1))
    assert p.sink.found == [] and p.backups[PATH] == {"status": "ok", "revision": 1}


async def test_a_backup_of_the_same_revision_with_another_digest_is_copied_again(tmp_path):
    """A standby backed the file up, then as active sealed it after it grew: same revision, other content."""
    p = Parts(tmp_path, Sink())
    p.backups[PATH] = {"status": "ok", "revision": 1, "sha256": "00" * 32}
    await p.worker.attempt(manifest(revision=1))
    assert len(p.sink.copied) == 1 and p.record()["sha256"] == SHA


async def test_a_later_revision_than_the_one_backed_up_is_copied(tmp_path):
    p = Parts(tmp_path, Sink())
    p.tables.offsets[PATH] = cursor(revision=2).to_record()
    p.backups[PATH] = {"status": "ok", "revision": 1}
    await p.worker.attempt(manifest(revision=2))
    assert len(p.sink.copied) == 1 and p.record()["revision"] == 2


async def test_attempts_run_one_at_a_time(tmp_path):
    class SlowSink(Sink):
        def __init__(self) -> None:
            super().__init__()
            self.running = 0
            self.most = 0

        async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0.01)
            self.running -= 1
            return await super().backup(local_path, relpath=relpath, sha256=sha256)

    p = Parts(tmp_path, SlowSink())
    await asyncio.gather(p.worker.attempt(manifest()), p.worker.attempt(SNAPSHOT))
    assert p.sink.most == 1 and len(p.sink.copied) == 2  # type: ignore[attr-defined]


async def test_the_local_sink_copies_the_file_under_the_backup_dir_then_finds_it_present(tmp_path, caplog):
    root = tmp_path / "backups"
    p = Parts(tmp_path, LocalBackupSink(root))
    await p.worker.attempt(manifest())
    assert (root / PATH).read_bytes() == DATA
    assert p.record()["status"] == "ok" and p.record()["sink"] == "local"
    del p.backups[PATH]
    await p.worker.attempt(manifest())
    assert p.results() == {"ok": 1, "noop": 1, "failed": 0}
    assert [fields["via"] for _, event, fields in events(caplog) if event == "backup"] == ["copy_file_range", None]


# -- what is seen of the attempts -------------------------------------------------------------------


async def test_each_attempts_bytes_and_time_are_counted_by_sink_and_result(tmp_path):
    p = Parts(tmp_path, Sink(io_error()))
    await p.worker.attempt(manifest())
    await p.worker.attempt(manifest())
    assert p.moved() == {"ok": (len(DATA), 1), "noop": (0, 0), "failed": (0, 1)}


async def test_a_noop_moves_no_bytes(tmp_path):
    p = Parts(tmp_path, Sink(existing="fake://already"))
    await p.worker.attempt(manifest())
    assert p.moved()["noop"] == (0, 1)


async def test_the_running_attempts_progress_is_seen_until_it_ends(tmp_path):
    class HeldSink(Sink):
        def __init__(self) -> None:
            super().__init__()
            self.release = asyncio.Event()

        async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
            self.progress.advance(5)
            await self.release.wait()
            return await super().backup(local_path, relpath=relpath, sha256=sha256)

    async def advanced() -> BackupProgress:
        while (running := p.worker.running()) is None or running.done_bytes == 0:
            await asyncio.sleep(0)
        return running

    p = Parts(tmp_path, HeldSink())
    assert p.worker.running() is None
    attempt = asyncio.create_task(p.worker.attempt(manifest()))
    running = await asyncio.wait_for(advanced(), 30)
    assert running is p.sink.progress
    assert (running.relpath, running.total_bytes, running.done_bytes) == (PATH, len(DATA), 5)
    p.sink.release.set()  # type: ignore[attr-defined]
    await attempt
    assert p.worker.running() is None


# -- the backup-attempts topic --------------------------------------------------------------------


async def test_a_retry_of_this_run_is_attempted(tmp_path):
    p = Parts(tmp_path, Sink())
    await p.worker.handle({"kind": "retry", "run": RUN, "manifest": manifest().to_json().decode()})
    assert p.record()["status"] == "ok"


async def test_a_retry_of_a_snapshot_is_attempted(tmp_path):
    p = Parts(tmp_path, Sink())
    await p.worker.handle({"kind": "retry", "run": RUN, "snapshot": SNAPSHOT.to_json().decode()})
    assert p.sink.copied == [(p.settings.watch_dir / SNAPSHOT_PATH, SNAPSHOT_PATH, SHA)]
    assert p.record(SNAPSHOT_PATH)["status"] == "ok"


async def test_a_retry_of_an_earlier_run_is_skipped(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    await p.worker.handle({"kind": "retry", "run": "run-1", "manifest": manifest().to_json().decode()})
    assert p.sink.found == [] and p.backups == {} and events(caplog) == []


@pytest.mark.parametrize(
    "record",
    [
        {"kind": "retry", "run": RUN, "manifest": "not a manifest"},
        {"kind": "retry", "run": RUN, "snapshot": '{"path": 1}'},
        {"kind": "rewind", "path": PATH},
    ],
    ids=["unreadable manifest", "unreadable snapshot", "unknown kind"],
)
async def test_any_other_record_is_a_warning_and_no_attempt(tmp_path, caplog, record):
    p = Parts(tmp_path, Sink())
    await p.worker.handle(record)
    assert p.sink.found == [] and p.backups == {}
    assert events(caplog) == [("WARNING", "unknown_backup_attempt_record", {"record": str(record)})]


async def test_a_request_tries_a_parked_file_again(tmp_path, caplog):
    p = Parts(tmp_path, Sink(*[io_error()] * MAX_TRIES))
    for _ in range(MAX_TRIES):
        await p.worker.attempt(manifest())
    assert p.record()["status"] == "parked"
    caplog.clear()
    await p.worker.handle({"kind": "request", "path": PATH})
    assert p.record()["status"] == "ok"
    assert events(caplog)[0] == ("INFO", "backup_retry_requested", {"path": PATH, "revision": 1})


@pytest.mark.parametrize("subject", [manifest(), SNAPSHOT], ids=["hour file", "snapshot"])
async def test_a_request_starts_a_new_series_of_tries(tmp_path, subject):
    p = Parts(tmp_path, Sink(*[io_error()] * (MAX_TRIES - 1)))
    p.tables.snapshots[SNAPSHOT_PATH] = {"path": SNAPSHOT_PATH, "sha256": SHA, "size": len(DATA), "height": 100}
    for _ in range(MAX_TRIES - 1):
        await p.worker.attempt(subject)
    await p.worker.handle({"kind": "request", "path": subject.path})
    assert p.record(subject.path)["status"] == "ok" and p.record(subject.path)["attempts"] == 1


async def test_a_request_for_a_snapshot_backs_it_up(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    p.tables.snapshots[SNAPSHOT_PATH] = {"path": SNAPSHOT_PATH, "sha256": SHA, "size": len(DATA), "height": 100}
    await p.worker.handle({"kind": "request", "path": SNAPSHOT_PATH})
    assert p.record(SNAPSHOT_PATH)["status"] == "ok"
    assert events(caplog)[0][1:] == ("backup_retry_requested", {"path": SNAPSHOT_PATH, "revision": 1})


async def test_a_request_for_a_file_sealed_as_the_streams_standby_backs_it_up(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    p.tables.offsets[PATH] = FileCursor(path=PATH, byte_offset=10).moved_to(CursorStage.SKIPPED).to_record()
    standby = SealManifest(**{**manifest().__dict__, "standby": True})
    p.tables.seals[PATH] = {**orjson.loads(standby.to_json()), "sealed_at": "t"}
    await p.worker.handle({"kind": "request", "path": PATH})
    assert p.record()["status"] == "ok" and p.sink.copied[0][1:] == (PATH, SHA)


@pytest.mark.parametrize(
    "stored, why",
    [(FileCursor(path=PATH, byte_offset=10).to_record(), "tailing"), (None, "not tracked")],
    ids=["still tailed", "not tracked"],
)
async def test_a_request_for_a_file_that_is_not_finalized_is_refused(tmp_path, caplog, stored, why):
    p = Parts(tmp_path, Sink())
    if stored is None:
        del p.tables.offsets[PATH]
    else:
        p.tables.offsets[PATH] = stored
    await p.worker.handle({"kind": "request", "path": PATH})
    assert p.sink.found == [] and p.backups == {}
    assert events(caplog) == [("WARNING", "backup_retry_refused", {"path": PATH, "reason": f"not a finalized file ({why})"})]


# -- the due retries ------------------------------------------------------------------------------


async def test_a_due_retry_is_sent_to_the_attempts_topic_with_this_runs_id(tmp_path):
    p = Parts(tmp_path, Sink())
    p.worker.schedule.retry(manifest(), 0.0)
    p.worker.schedule.retry(SNAPSHOT, 0.0)
    await p.worker.send_due()
    assert sorted(p.topic.sent, key=lambda sent: sent[0]) == [
        (PATH, {"kind": "retry", "run": RUN, "manifest": manifest().to_json().decode()}),
        (SNAPSHOT_PATH, {"kind": "retry", "run": RUN, "snapshot": SNAPSHOT.to_json().decode()}),
    ]
    assert p.due() == []


async def test_a_retry_not_due_yet_is_not_sent(tmp_path):
    p = Parts(tmp_path, Sink(io_error()))
    await p.worker.attempt(manifest())
    await p.worker.send_due()
    assert p.topic.sent == []


async def test_a_retry_the_topic_refuses_is_scheduled_again_and_logged(tmp_path, caplog):
    p = Parts(tmp_path, Sink())
    p.topic.refusals = 1
    p.worker.schedule.retry(manifest(), 0.0)
    await p.worker.send_due()
    assert p.topic.sent == [] and p.due() == [manifest()]
    assert [(level, event) for level, event, _ in events(caplog)] == [("WARNING", "backup_retry_not_sent")]


async def test_a_failed_backup_goes_round_the_attempts_topic_and_succeeds_on_its_next_try(tmp_path, monkeypatch):
    monkeypatch.setattr(backup_plan, "FIRST_DELAY_S", 0.0)  # the retry is due at once
    p = Parts(tmp_path, Sink(io_error()))
    await p.worker.attempt(manifest())
    await p.worker.send_due()
    [(_key, record)] = p.topic.sent
    await p.worker.handle(orjson.loads(orjson.dumps(record)))
    assert p.record()["status"] == "ok" and p.record()["attempts"] == 2
