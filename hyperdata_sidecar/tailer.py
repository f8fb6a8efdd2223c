"""One node table's tailer: a tick composes the table's rooms.

A tick lists the table's hour files (:class:`~hyperdata_sidecar.scanner.DatedTree`), takes each in
(date, hour) order (:class:`~hyperdata_sidecar.core.tableorder.TableOrder`: which file is current,
where a new file's line ids start, what ``INITIAL_POSITION=end`` skips), and asks the file's state
machine (:mod:`hyperdata_sidecar.core.filestep`) what to do with it: read, finalize, restart, reopen,
mark rewritten, wait. A read of a file (:class:`~hyperdata_sidecar.filetail.FileTail`) becomes a
*cycle* in the window (:class:`~hyperdata_sidecar.core.window.Window`): its records go to the
producer and, once every one of them is reported, it is committed (its cursor checkpointed) in file
order. Failed reports go to :class:`~hyperdata_sidecar.redelivery.Redelivery`; every wait on the
producer to :class:`~hyperdata_sidecar.publishing.PublishFlow`; every metric and log line to
:class:`~hyperdata_sidecar.tailer_events.TailerEvents`.

The tailer never writes Faust tables itself: it hands its checkpoints to the progress topic and its
finalized files to the rotation topic (its :class:`TailerRooms`), whose agents write the tables. A
table's path shares no mutable state with the other tables' (the producer is thread-safe and orders
records per partition).
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple, Protocol

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backlog import Backlog, backlog_of
from hyperdata_sidecar.core.cursor import GROWING, CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.filestep import Step, loss_on_deletion, sealed_step, tail_step
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.output_mode import other_output, other_outputs
from hyperdata_sidecar.core.records import Topics
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.tableorder import Adoption, Role, TableOrder
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.core.window import Cycle, Window
from hyperdata_sidecar.engines import Engine, Handover
from hyperdata_sidecar.filetail import FileTail, TailFactory
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.ports import LiveFile, TrackedView
from hyperdata_sidecar.publishing import Abandoned, Publisher, PublishFlow
from hyperdata_sidecar.reader import HourFileReader
from hyperdata_sidecar.redelivery import Redelivery
from hyperdata_sidecar.scanner import DatedTree, newest_hour
from hyperdata_sidecar.stream_positions import StreamPositions
from hyperdata_sidecar.tailer_events import Holds, Incidents, TailerEvents

__all__ = ["Abandoned", "TableTailer", "TailerRooms"]

RESCAN_EVERY_S = 5.0  # a long catch-up tick looks at the table's directory again this often


class Progress(Protocol):
    """Where a tailer's checkpoints go (:class:`~hyperdata_sidecar.progress_topic.ProgressTopic`)."""

    async def checkpoint(self, cursor: FileCursor) -> None:
        """Persist ``cursor`` (called only once every record it covers was reported delivered)."""

    async def forget(self, path: str) -> None:
        """Drop every piece of state about ``path`` (the file is gone)."""


class RotationSink(Protocol):
    """Where a finalized file goes (:class:`~hyperdata_sidecar.rotations.Rotations`)."""

    async def rotate(self, manifest: SealManifest) -> None:
        """Hand a finalized file to the seal and backup agents."""

    def sealed(self, path: str, revision: int) -> bool:
        """True once the seal of ``path`` at ``revision`` (or a later one) is recorded."""


class StateHealth(Protocol):
    """The state store as the tailer asks after it (:class:`~hyperdata_sidecar.state_writer.StateWriter`)."""

    @property
    def problem(self) -> str | None:
        """Why the state store cannot take writes now (None when it can). While it is not None the
        tailer reads nothing new: cycles in flight settle and are checkpointed, nothing past them is published."""


class Stopping(Protocol):
    """The worker's stop (:class:`~hyperdata_sidecar.shutdown.Shutdown`)."""

    @property
    def stopping(self) -> bool:
        """True once the worker is shutting down."""

    async def pause(self, seconds: float) -> bool:
        """Back off for up to ``seconds``; False (early) when the worker is stopping."""


class TailerRooms(NamedTuple):
    """The rooms a tailer works with: the engine (its reads) and the data plane (its line engines,
    without a ``produce``), where checkpoints and finalized files go, the state store's health, the
    incidents and holds it reports, the worker's stop, and its metrics and log."""

    engine: Engine
    publisher: Publisher
    progress: Progress
    rotations: RotationSink
    state: StateHealth
    incidents: Incidents
    holds: Holds
    shutdown: Stopping
    metrics: SidecarMetrics
    log: EventLog
    positions: StreamPositions | None = None  # STREAM_ID: the stream's position records


class TableTailer:
    """Tails the hour files of one node table."""

    def __init__(self, spec: TableSpec, settings: Settings, rooms: TailerRooms, stored: dict[str, FileCursor]) -> None:
        self.spec = spec
        self.settings = settings
        self.progress, self.rotations, self.state, self.shutdown = rooms.progress, rooms.rotations, rooms.state, rooms.shutdown
        self.positions = rooms.positions
        self.table = spec.dir_name
        publisher = rooms.publisher
        topic, dlq = settings.topic_for(spec), settings.topic_dlq
        self.topics = Topics(topic, publisher.partitions[topic], dlq, publisher.partitions[dlq])
        self.events = TailerEvents(
            self.table,
            rooms.metrics,
            rooms.log,
            rooms.incidents,
            rooms.holds,
            lag_warn_bytes=settings.lag_warn_bytes,
            lag_warn_s=settings.lag_warn_seconds,
        )
        self.flow = PublishFlow(
            publisher, self.events, stopping=lambda: rooms.shutdown.stopping, pause=rooms.shutdown.pause, topics=(topic, dlq)
        )
        self.factory = TailFactory(spec, settings, self.topics, rooms.engine, publisher)
        self.redelivery = Redelivery(self.topics, self.flow, self.events)
        self.tree = DatedTree(
            settings.watch_dir / spec.dir_name / "hourly",
            f"{self.table}/hourly",
            on_ignored=self.events.hour_file_ignored,
            on_missing=self.events.table_dir_missing,
        )
        self.order = TableOrder(initial_position=settings.initial_position, fresh=not stored)
        self.window = Window()
        self.files: dict[str, FileTail] = {}
        self._sizes: dict[str, int] = {}  # files still to publish: their size at the last scan
        self._scanned_at = 0.0
        self._output_looked_at = float("-inf")
        # The highest block of a line this table has delivered (None before any), for snapshot events.
        self.published_block: int | None = max((c.last_block for c in stored.values() if c.last_block is not None), default=None)
        for path, cursor in stored.items():
            hour = HourFile.parse(path)
            if hour is not None and hour.table == self.table:
                self.files[path] = self.factory.tail(hour, cursor)

    @property
    def quiet(self) -> bool:
        """Nothing in flight: every cycle handed over was reported and its progress written."""
        return not len(self.window)

    # ------------------------------------------------------------------ the tick

    async def tick(self) -> None:
        """One poll: catch every file up as far as it has grown, finalize what is finished."""
        started = time.perf_counter()
        await self._settle_all()  # cycles left by an interrupted tick
        if self.state.problem is not None:
            return
        hours = self._scan()
        await self._drop_deleted({h.relpath for h in hours})
        for index, hour in enumerate(hours):
            is_newest = index == len(hours) - 1
            tail = self.files.get(hour.relpath) or await self._adopt(hour, is_newest=is_newest)
            role = self.order.role(tail.cursor)
            if role is Role.SEALED:
                await self._watch_sealed(tail)
            elif role is Role.REOPENED:
                await self._publish(tail, has_later_file=True)
            elif role is Role.CURRENT and not await self._publish(tail, has_later_file=not is_newest):
                break
        self.order.scanned()
        self.events.tick_done(time.perf_counter() - started, len(self.files))

    def view(self, path: str) -> TrackedView:
        """What the read model shows of the tracked file ``path``: its cursor and, while it grows,
        its size now (a ``stat`` that leaves the reader's own observations alone) and the partial line held back."""
        tail = self.files[path]
        live = None
        if tail.cursor.stage in GROWING:
            try:
                size = os.stat(tail.reader.path).st_size
            except OSError:
                size = tail.reader.last_size
            live = LiveFile(size=size, held_bytes=tail.engine.held_bytes)
        return TrackedView(tail.hour, tail.cursor, live)

    def discovered(self) -> list[str]:
        """The hour files of this table on disk now, oldest first (for the startup summary)."""
        return [hour.relpath for hour in self._scan()]

    def _scan(self) -> list[HourFile]:
        """Hour files of this table on disk, oldest first. Notes the size of each one still to
        publish (for the backlog) and the newest one's hour (for the node's liveness gauge)."""
        found: list[HourFile] = []
        sizes: dict[str, int] = {}
        for relpath, entry in self.tree.entries():
            hour = HourFile.parse(relpath)
            if hour is None:
                continue
            if not entry.is_file(follow_symlinks=False):
                self.tree.ignore(hour.relpath, "not a regular file")
                continue
            found.append(hour)
            tail = self.files.get(relpath)
            if tail is None or tail.cursor.stage in GROWING:
                try:
                    sizes[relpath] = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
        found.sort()
        if found:
            self.events.newest_hour_file(found[-1].date, found[-1].hour)
        self._look_for_other_output(found[-1] if found else None)
        self._sizes = sizes
        self._scanned_at = time.monotonic()
        return found

    def _look_for_other_output(self, newest: HourFile | None) -> None:
        """Every RESCAN_EVERY_S: does the node write this table in another layout (a node started
        without ``--stream-with-block-info``, or restarted with other flags)? Two ``stat``s a table."""
        now = time.monotonic()
        if now - self._output_looked_at < RESCAN_EVERY_S:
            return
        self._output_looked_at = now
        elsewhere = {
            other.dir_name: newest_hour(self.settings.watch_dir / other.dir_name / "hourly")
            for other in other_outputs(self.table)
            if (self.settings.watch_dir / other.dir_name).is_dir()
        }
        ours = (newest.date, int(newest.hour)) if newest is not None else None
        self.events.node_output(other_output(self.table, missing=self.tree.missing, newest=ours, elsewhere=elsewhere))

    def _rescan_if_due(self) -> None:
        """During a long catch-up tick, look at the directory again every RESCAN_EVERY_S: the newest
        hour file and the backlog follow the disk, not the start of the tick."""
        if time.monotonic() - self._scanned_at >= RESCAN_EVERY_S:
            self._scan()

    @property
    def backlog(self) -> Backlog:
        """What is on disk and not yet published, from the sizes last seen (no file is read)."""
        files = []
        whole = self.order.publishes_unadopted()
        for path, size in self._sizes.items():
            tail = self.files.get(path)
            if tail is None:
                if whole:
                    files.append((size, 0))
            elif tail.cursor.stage in GROWING:
                files.append((max(size, tail.reader.last_size), tail.cursor.byte_offset))
        return backlog_of(files)

    async def _adopt(self, hour: HourFile, *, is_newest: bool) -> FileTail:
        """Start tracking a file that has no stored state."""
        cursor = FileCursor.adopted(hour.relpath, self.order.carry)
        adoption = self.order.adopt(is_newest=is_newest)
        if adoption is Adoption.SKIP:
            cursor = cursor.moved_to(CursorStage.SKIPPED)
        elif adoption is Adoption.AT_END:
            probe = HourFileReader(self.settings.watch_dir / hour.relpath, 0, "")
            size = probe.stat() or 0
            start = await probe.last_line_start(size, self.settings.max_line_bytes + 1)
            cursor = cursor.with_changes(byte_offset=start, size=size)
        # Persisted at once: the file's start state (``seq0``) comes from the previous file, which
        # may be pruned before this file's first line is checkpointed.
        await self.progress.checkpoint(cursor)
        self.events.file_adopted(cursor)
        tail = self.files[hour.relpath] = self.factory.tail(hour, cursor)
        return tail

    async def _drop_deleted(self, present: set[str]) -> None:
        for path in [p for p in self.files if p not in present]:
            tail = self.files.pop(path)
            cursor = tail.cursor
            if cursor.stage is CursorStage.TAILING:
                self.order.lost(tail.engine.state().seq)
            loss = loss_on_deletion(cursor.stage, sealed=self.rotations.sealed(path, cursor.revision))
            size_seen = cursor.size if cursor.stage is CursorStage.FINALIZED else tail.reader.last_size
            self.events.file_deleted(cursor, loss, size_seen)
            await self.progress.forget(path)

    # ------------------------------------------------------------------ one file

    async def _publish(self, tail: FileTail, *, has_later_file: bool) -> bool:
        """Catch ``tail`` (tailing or reopened) up; finalize it if it is done. True when the next
        file may be worked. Every way out leaves the window empty or the worker stopping."""
        while True:
            size = tail.reader.stat()
            rewrite = await tail.reader.rewritten(size) if size is not None else None
            step = tail_step(
                stage=tail.cursor.stage,
                size=size,
                position=tail.reader.position,
                rewrite=rewrite,
                has_later_file=has_later_file,
                last_growth_at=tail.reader.last_growth_at,
                now=time.monotonic(),
                grace_s=self.settings.seal_grace_s,
            )
            if step is Step.READ:
                assert size is not None
                await self._read(tail, size)
                self._rescan_if_due()
                if self.shutdown.stopping or self.state.problem is not None:
                    await self._settle_all()
                    return False
                continue
            if step is Step.RESTART:
                assert size is not None and rewrite is not None
                tail = await self._restart(tail, rewrite, size)
                continue
            await self._settle_all()
            if step is Step.GONE:
                return True  # reported as deleted by the next scan
            assert size is not None
            if step is Step.MARK_REWRITTEN:
                assert rewrite is not None
                await self._mark_rewritten(tail, rewrite, size)
                return True
            if tail.cursor.stage is CursorStage.TAILING:
                self._report_lag(tail, size)
            if step is Step.FINALIZE:
                await self._finalize(tail, size)
                return True
            await tail.reader.catch_up_digest(tail.reader.position)
            return False

    async def _read(self, tail: FileTail, size: int) -> None:
        """Read one budget of new bytes and hand its complete lines to the producer; commit the
        oldest cycle once more than the window holds are waiting (reading goes on while the broker works)."""
        chunk = await tail.reader.read(min(size - tail.reader.position, self.settings.read_budget_bytes))
        if not chunk:
            return
        self.events.bytes_read(len(chunk))
        engine = tail.engine
        await self._may_read()
        cycle = self.window.open(tail.path, engine.state(), deliveries=engine.deliveries())
        await self._hand_over(engine.handover(chunk, cycle))
        self._close(cycle, tail, complete=engine.held_bytes == 0)
        if tail.cursor.stage is CursorStage.TAILING:
            self._report_lag(tail, size)
        while self.window.over_limit():
            await self._commit_oldest()

    async def _hand_over(self, handover: Handover) -> None:
        """Step ``handover`` until every line of its read was handed over: wait while the producer's
        queue is full; hold the table (not ready, slow retries) while the client refuses a record."""
        backoff = self.flow.backoff()
        while not await handover.step():
            refusal = handover.refusal
            if refusal is None:
                await self.flow.wait_for_room()
            else:
                reason = self.flow.reason(self.topics.data, refusal)
                await self.flow.hold(backoff, (self.topics.data, self.topics.dlq), reason)
        self.flow.release(backoff)

    async def _may_read(self) -> None:
        """exactly_once: before a cycle opens, settle what is in flight while the open transaction
        closes (it commits once every table has), then wait for the next one. Nothing otherwise."""
        if self.flow.txn.closing:
            await self._settle_all()
        await self.flow.txn.open_for_read()

    def _close(self, cycle: Cycle, tail: FileTail, *, complete: bool) -> None:
        self.window.close(cycle, tail.cursor, tail.engine.state(), size=tail.reader.last_size, complete=complete)

    async def _restart(self, tail: FileTail, reason: str, size: int) -> FileTail:
        """Re-read a file that shrank or whose first bytes changed from byte 0 (same line ids)."""
        await self._settle_all()
        self.events.file_restarted(tail.cursor, reason, size)
        cursor = tail.cursor.restarted()
        fresh = self.files[cursor.path] = self.factory.tail(tail.hour, cursor)
        await self.progress.checkpoint(cursor)
        return fresh

    def _report_lag(self, tail: FileTail, size: int) -> None:
        self.events.tail_lag(tail.path, size - tail.cursor.byte_offset, tail.engine.held_bytes)

    # ------------------------------------------------------------------ commits

    async def _settle_all(self) -> None:
        while len(self.window):
            await self._commit_oldest()

    async def _commit_oldest(self) -> None:
        """Wait for the oldest cycle's reports, resolve failures, persist the cursor it reaches."""
        assert self.window.path is not None
        tail = self.files[self.window.path]
        await self.flow.until(self.window.oldest().settled)
        self.flow.vouch(self.window)
        if self.window.oldest().failed():
            self.flow.not_in_transaction(self.window.oldest())
            await self.redelivery.resolve(self.window, tail)
        cycle, cursor = self.window.commit(tail.cursor, head=tail.reader.head, data_topic=self.topics.data)
        self.flow.landed(cycle)
        tail.cursor = cursor
        if cycle.tally.lines and cursor.last_block is not None:
            self.published_block = max(cursor.last_block, self.published_block or cursor.last_block)
        self.events.committed(tail.path, cycle.tally)
        await self.progress.checkpoint(cursor)
        if self.positions is not None and cycle.tally.lines and cursor.stage is CursorStage.TAILING:
            # A sealed file's late lines carry a late tag in their ids: not a place in the stream.
            await self.positions.note(self.table, cursor, cycle.tally.last_line)
        if not len(self.window):
            self.flow.txn.settled()

    # ------------------------------------------------------------------ finalization and sealed files

    async def _finalize(self, tail: FileTail, size: int) -> None:
        """Dead-letter the unterminated tail, complete the digest, hand the file to the sealers.

        The first finalization is revision 1 and fixes where the next hour file's sequence starts
        (``carry``); a reopened file's finalization is the next revision and leaves that alone.
        """
        start = tail.engine.state()
        partial = tail.engine.flush_partial()
        if partial is not None:
            await self._may_read()
            cycle = self.window.open(tail.path, start, partial, tail.engine.deliveries())
            await self._hand_over(tail.engine.unterminated(partial, cycle))
            self._close(cycle, tail, complete=True)
            await self._settle_all()
        await tail.reader.catch_up_digest(size, None)
        first = tail.cursor.stage is CursorStage.TAILING
        cursor = tail.cursor.finalized(
            size=size,
            finalized_at=iso_utc(time.time()),
            sha256=tail.reader.digest.hexdigest(),
            head=tail.reader.head,
            unterminated_at=partial.offset if partial is not None else None,
            writer_seq=tail.engine.state().seq,
        )
        manifest = manifest_from_cursor(cursor, self.settings.node_id)
        assert manifest is not None
        await self.rotations.rotate(manifest)
        tail.cursor = cursor
        tail.watch_until = self.factory.watch_until(cursor)
        await self.progress.checkpoint(cursor)
        if first:
            self.order.finished(cursor.carry_state)
        self.events.file_finalized(cursor, first=first)

    async def _watch_sealed(self, tail: FileTail) -> None:
        """One ``stat`` of a sealed file within LATE_APPEND_WATCH_S of its seal: publish what was
        appended since (and seal it again), or report a file that shrank or was replaced."""
        watched = tail.watch_until is not None and time.time() <= tail.watch_until
        size = tail.reader.stat() if watched else None
        sealed_size = tail.cursor.size
        rewrite = await tail.reader.rewritten(size) if size is not None and size != sealed_size else None
        step = sealed_step(watched=watched, size=size, sealed_size=sealed_size, rewrite=rewrite)
        if step is Step.MARK_REWRITTEN:
            assert size is not None and rewrite is not None
            await self._mark_rewritten(tail, rewrite, size)
        elif step is Step.REOPEN:
            assert size is not None
            self.events.late_append(tail.cursor, size)
            reopened = tail.cursor.reopened()
            tail = self.files[reopened.path] = self.factory.tail(tail.hour, reopened, tail.reader)
            await self.progress.checkpoint(reopened)
            await self._publish(tail, has_later_file=True)

    async def _mark_rewritten(self, tail: FileTail, reason: str, size: int) -> None:
        """A sealed file shrank or its first bytes changed: report it and stop reading it (nothing is
        published again; what was published and sealed stays as it is)."""
        await self._settle_all()
        self.events.sealed_file_rewritten(tail.cursor, reason, size)
        tail.cursor = tail.cursor.moved_to(CursorStage.REWRITTEN)
        tail.watch_until = None
        await self.progress.checkpoint(tail.cursor)
