"""The backup agents: each finalized revision of an hour file, and each published node snapshot,
copied through the configured BackupSink, verified.

One file's failing backup never holds up another's. A failed attempt is not waited out inside the
agent's event: its next try is scheduled (:mod:`hyperdata_sidecar.core.backup_plan`), and a timer
sends it, when due, to the internal backup-attempts topic, where the ``backup_attempts`` agent makes
it. Attempts run one at a time (a lock), whichever agent makes them:

- ``backup`` makes the first attempt for every rotation record;
- ``backup_attempts`` makes the retries that are due, and the new series an operator asks for
  with ``faust -A hyperdata_sidecar backup-retry PATH`` (which writes a request to the same topic).

Results live in the ``sidecar-backups`` table (status ``ok`` / ``failed`` / ``parked`` /
``disabled``, the file revision, tries, last reason and error). After BACKUP_MAX_TRIES failures in
a row a file is *parked*: an error log line, ``hyperdata_sidecar_backups_parked`` and the status
page say so, and it is tried again on the next start (the start hands every finalized file whose
backup is not done to the agents again) or on request. A source that no longer exists is given up
at once. Retry records carry the run id of the process that scheduled them; an earlier process's
are skipped, since its restart already handed those files over again. An attempt for a revision
that a later one replaces (the file grew after its seal) is skipped too, and a file that shrank or
changed its first bytes after its seal is not tried at all (``failed`` at once, its sealed content
is gone). The source is only ever read. The attempt running now is seen through
:meth:`BackupWorker.running` (the status page shows its progress); each attempt's bytes and time
are counted by sink and result when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterable
from typing import Any

import faust
from aiokafka.errors import KafkaError
from hyperdata_sidecar.agents.rotations import manifests

from hyperdata_sidecar.backup import BackupError, BackupProgress, BackupSink, NoBackupSink
from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backup_plan import BackupSubject, Outcome, RetrySchedule, after_failure, superseded
from hyperdata_sidecar.core.backup_status import BackupStatus, status_of
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.seal import SealManifest, revision_of
from hyperdata_sidecar.core.snapshots import SnapshotBackup
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateTables, StateWriter

RETRY_TICK_S = 1.0  # how often due retries are looked for


class BackupWorker:
    """Makes backup attempts for one sidecar and schedules the retries of the failed ones; its
    results go to the ``sidecar-backups`` table of ``tables``, through ``writer``."""

    def __init__(
        self,
        *,
        settings: Settings,
        sink: BackupSink,
        tables: StateTables,
        attempts: faust.types.TopicT,
        writer: StateWriter,
        run_id: str,
        metrics: SidecarMetrics,
        log: EventLog,
    ) -> None:
        self.settings = settings
        self.sink = sink
        self.tables = tables
        self.attempts = attempts  # the internal backup-attempts topic
        self.writer = writer
        self.run_id = run_id  # the retry records of this process carry it
        self.metrics = metrics
        self.log = log
        self.schedule = RetrySchedule()
        self._one_at_a_time = asyncio.Lock()
        self._running: BackupProgress | None = None
        metrics.backup_sink(sink.name)

    def running(self) -> BackupProgress | None:
        """The progress of the attempt running now (the sink's ``progress``), or None between attempts."""
        return self._running

    # ------------------------------------------------------------------ records of the attempts topic

    async def handle(self, record: dict[str, Any]) -> None:
        """One record of the backup-attempts topic (runs in the ``backup_attempts`` agent)."""
        kind = record.get("kind")
        if kind == "request":
            await self.requested(str(record.get("path", "")))
            return
        if kind == "retry":
            if record.get("run") != self.run_id:
                return  # an earlier process's: its restart handed the file over again
            subject: BackupSubject
            try:
                if "snapshot" in record:
                    subject = SnapshotBackup.from_json(str(record["snapshot"]).encode())
                else:
                    subject = SealManifest.from_json(str(record.get("manifest", "")).encode())
            except ValueError:
                pass
            else:
                await self.attempt(subject)
                return
        self.log.warning("unknown_backup_attempt_record", record=str(record)[:200])

    async def requested(self, path: str) -> None:
        """An operator asked for a new series of tries of ``path`` (the ``backup-retry`` command)."""
        snapshot = self.tables.snapshots.get(path)
        if snapshot is not None:
            self.log.info("backup_retry_requested", path=path, revision=1)
            self.schedule.end(path)
            await self.attempt(SnapshotBackup.of_event(snapshot))
            return
        cursor = self._cursor(path)
        manifest = manifest_from_cursor(cursor, self.settings.node_id) if cursor is not None else None
        seal = self.tables.seals.get(path)
        if manifest is None and seal is not None and seal.get("standby") is True:
            manifest = SealManifest.from_record(seal)  # sealed as the stream's standby
        if manifest is None:
            stage = cursor.stage.value if cursor is not None else "not tracked"
            self.log.warning("backup_retry_refused", path=path, reason=f"not a finalized file ({stage})")
            return
        self.log.info("backup_retry_requested", path=path, revision=manifest.revision)
        self.schedule.end(path)
        await self.attempt(manifest)

    async def send_due(self) -> None:
        """Send the retries that are due to the attempts topic (called by a timer)."""
        for manifest in self.schedule.due(time.monotonic()):
            try:
                field = "snapshot" if isinstance(manifest, SnapshotBackup) else "manifest"
                await self.attempts.send(
                    key=manifest.path, value={"kind": "retry", "run": self.run_id, field: manifest.to_json().decode()}
                )
            except (TimeoutError, KafkaError, OSError) as exc:
                self.schedule.retry(manifest, time.monotonic() + RETRY_TICK_S)
                self.log.limited(
                    logging.WARNING, "backup_retry_not_sent", manifest.path, 60.0, path=manifest.path, error=str(exc)
                )

    # ------------------------------------------------------------------ one attempt

    async def attempt(self, manifest: BackupSubject) -> None:
        """One try at backing ``manifest``'s file up; records the result and schedules what follows."""
        async with self._one_at_a_time:
            if await self._no_copy_needed(manifest):
                return
            path = manifest.path
            progress = self._running = BackupProgress(path, manifest.size, time.monotonic())
            try:
                existing = await self.sink.find_existing(path, manifest.sha256)
                self.sink.progress = progress
                ref = existing or await self.sink.backup(self.settings.watch_dir / path, relpath=path, sha256=manifest.sha256)
            except BackupError as exc:
                self._ended(progress, "failed")
                await self._failed(manifest, exc)
                return
            finally:
                self._running = None
            tries = self.schedule.tries(path, manifest.revision) + 1
            self.schedule.end(path)
            seconds = self._ended(progress, "noop" if existing else "ok")
            record = {
                "status": BackupStatus.OK.value,
                "sink": self.sink.name,
                "attempts": tries,
                "ref": ref,
                "sha256": manifest.sha256,
                "revision": manifest.revision,
                "at": iso_utc(time.time()),
            }
            if not await self.writer.put(self.tables.backups, path, record):
                return
            self.log.info(
                "backup",
                path=path,
                ref=ref,
                size=manifest.size,
                sha256=manifest.sha256,
                revision=manifest.revision,
                attempts=tries,
                already_present=existing is not None,
                seconds=round(seconds, 3),
                via=progress.via or None,
            )

    def _ended(self, progress: BackupProgress, result: str) -> float:
        """Count the attempt that ``progress`` followed, ended with ``result``; its seconds."""
        seconds = time.monotonic() - progress.started_at
        self.metrics.backup_attempt_ended(result, sink=self.sink.name, nbytes=progress.done_bytes, seconds=seconds)
        return seconds

    async def _no_copy_needed(self, manifest: BackupSubject) -> bool:
        """True (with the outcome recorded or logged) when ``manifest`` is not to be copied: backups
        are disabled, the file changed after its seal, a later revision supersedes it, or it is done."""
        path = manifest.path
        if isinstance(self.sink, NoBackupSink):
            await self.writer.put(
                self.tables.backups,
                path,
                {"status": BackupStatus.DISABLED.value, "sink": self.sink.name, "revision": manifest.revision},
            )
            return True
        cursor = self._cursor(path)
        if cursor is not None and cursor.stage is CursorStage.REWRITTEN:
            # The file shrank or changed after its seal: what the seal describes is gone for good.
            self.schedule.end(path)
            error = "the file changed after its seal (it shrank or its first bytes changed); the sealed content is gone"
            record = {
                "status": BackupStatus.FAILED.value,
                "sink": self.sink.name,
                "reason": "hash_mismatch",
                "error": error,
                "revision": manifest.revision,
                "at": iso_utc(time.time()),
            }
            await self.writer.put(self.tables.backups, path, record)
            self.log.warning("backup_not_possible", path=path, revision=manifest.revision, error=error)
            return True
        if cursor is not None and superseded(cursor, manifest):
            self.log.info("backup_superseded", path=path, revision=manifest.revision)
            return True
        known = self.tables.backups.get(path)
        if (
            known is not None
            and status_of(known) is BackupStatus.OK
            and revision_of(known) >= manifest.revision
            # A standby's backup of the file, then this sidecar's seal of it as active after the
            # file grew: same revision, other content.
            and known.get("sha256", manifest.sha256) == manifest.sha256
        ):
            self.schedule.end(path)
            return True
        return False

    def _cursor(self, path: str) -> FileCursor | None:
        stored = self.tables.offsets.get(path)
        return FileCursor.from_record(stored) if stored is not None else None

    async def _failed(self, manifest: BackupSubject, exc: BackupError) -> None:
        path = manifest.path
        tries = self.schedule.failed(manifest)
        step = after_failure(tries, exc.reason, self.settings.backup_max_tries)
        record = {
            "status": (BackupStatus.PARKED if step.outcome is Outcome.PARK else BackupStatus.FAILED).value,
            "sink": self.sink.name,
            "attempts": tries,
            "reason": exc.reason,
            "error": str(exc),
            "revision": manifest.revision,
            "at": iso_utc(time.time()),
        }
        if not await self.writer.put(self.tables.backups, path, record):
            return
        if step.outcome is Outcome.RETRY:
            self.schedule.retry(manifest, time.monotonic() + step.delay_s)
            self.log.warning(
                "backup_failed", path=path, attempt=tries, reason=exc.reason, error=str(exc), retry_in_s=step.delay_s
            )
            return
        self.schedule.end(path)
        if step.outcome is Outcome.PARK:
            self.log.error(
                "backup_parked",
                path=path,
                attempts=tries,
                reason=exc.reason,
                error=str(exc),
                retry=f"on the next start, or: faust -A hyperdata_sidecar backup-retry {path}",
            )
        else:
            self.log.warning("backup_failed", path=path, attempt=tries, reason=exc.reason, error=str(exc), retry_in_s=None)


def install_backup_agent(app: faust.App, rotations: faust.types.TopicT, worker: BackupWorker) -> None:
    """The ``backup`` agent on ``rotations``, the ``backup_attempts`` agent on the worker's attempts
    topic, and the timer that sends the retries when due."""

    @app.agent(rotations, name="hyperdata_sidecar.backup")
    async def back_up_files(records: AsyncIterable[bytes]) -> None:
        async for manifest in manifests(worker.log, records):
            await worker.attempt(manifest)

    @app.agent(worker.attempts, name="hyperdata_sidecar.backup_attempts")
    async def back_up_again(records: AsyncIterable[dict[str, Any]]) -> None:
        async for record in records:
            await worker.handle(record)

    @app.timer(RETRY_TICK_S, name="hyperdata_sidecar.backup_retries")
    async def send_due_retries() -> None:
        await worker.send_due()
