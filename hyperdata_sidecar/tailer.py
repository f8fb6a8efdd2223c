"""One table's tailer: the poll cycle read → produce → delivery reports → checkpoint.

:class:`TableTailer` schedules a table: which hour files exist, in which order they are worked,
when one is finalized, and the window of cycles handed to the producer but not yet reported. The
files of a table are worked strictly in (date, hour) order: the next hour file is not read before
the previous one is finalized, which keeps ``seq_in_block`` exact when a block straddles two files.
Each file is read by an :class:`~hyperdata_sidecar.reader.HourFileReader` and turned into records
by the core's :class:`~hyperdata_sidecar.core.records.RecordWriter`.

A finalized file stays watched for LATE_APPEND_WATCH_S after its seal, one ``stat`` per poll. If it
grows, the late lines are published (ids continuing the file's own sequence, tagged
``|late-<date>-<hour>``: the next hour file already continued the table's stream from the file's
first end) and the file is finalized again, a new revision with a seal of its own. This does not
hold the current file back. A sealed file that shrinks or whose first bytes change is reported and
no longer read.

A table's read → produce → report → checkpoint path shares no mutable state with the other
tables' (the producer is thread-safe and orders records per partition), so a tailer could run in a
process of its own. The tailer never writes Faust tables itself; it hands checkpoints and rotation
records to its :class:`TailerHost` (the Faust shell), which routes them through internal topics.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.cursor import GROWING, CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.delivery import Deliveries, Verdict, verdict
from hyperdata_sidecar.core.finalization import is_finalized
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.lineinfo import block_time_of
from hyperdata_sidecar.core.records import (
    SEQ_START,
    Collector,
    CycleAcks,
    Record,
    RecordWriter,
    Regression,
    Routes,
    SeqState,
    Tally,
    Topics,
    dead_letter_partition,
    refusal_name,
)
from hyperdata_sidecar.core.seal import SealManifest, merge_ranges
from hyperdata_sidecar.core.splitter import Line, LineSplitter, OversizeLine
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.times import epoch_of, hour_start_epoch, iso_utc
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.ports import LiveFile, TrackedView
from hyperdata_sidecar.reader import HourFileReader

MAX_IN_FLIGHT = 4  # cycles per table handed to the producer and not yet fully reported
HOLD_BACKOFF_S = (5.0, 60.0)  # first and longest wait before sending records of a held topic again
ROOM_WAIT_S = 0.01  # the producer's queue is full: wait this long for reports, then try again
STOP_GRACE_S = 5.0  # on shutdown, how long cycles in flight may take to be reported


class Publisher(Protocol):
    """What a tailer needs of the data plane (:class:`~hyperdata_sidecar.dataplane.DataPlane`)."""

    partitions: Mapping[str, int]

    @property
    def produce(self) -> Callable[..., None]:
        """confluent-kafka's ``Producer.produce``."""

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` holds, checked after every served report; False on timeout."""


class TailerHost(Protocol):
    """What a tailer needs from the shell that runs it."""

    metrics: SidecarMetrics
    log: EventLog

    @property
    def stopping(self) -> bool:
        """True once the worker is shutting down."""

    async def checkpoint(self, cursor: FileCursor) -> None:
        """Persist ``cursor`` (called only once every record it covers was reported delivered)."""

    async def rotate(self, manifest: SealManifest) -> None:
        """Hand a finalized file to the seal and backup agents."""

    async def forget(self, path: str) -> None:
        """Drop every piece of state about ``path`` (the file is gone)."""

    def sealed(self, path: str, revision: int) -> bool:
        """True once the seal of ``path`` at ``revision`` (or a later one) is recorded."""

    def file_lost(self, table: str, path: str, reason: str, published_to: int, size_seen: int) -> None:
        """``path`` was deleted before its lines were all published, or before its seal."""

    def block_regression(self, table: str, path: str, regression: Regression) -> None:
        """A line of ``path`` (delivered) has a lower block than the table's previous line."""

    def late_append(self, table: str, path: str, revision: int, sealed_size: int, size: int) -> None:
        """``path`` grew from ``sealed_size`` to ``size`` after its seal; ``revision`` will seal it again."""

    def sealed_file_rewritten(self, table: str, path: str, reason: str, sealed_size: int, size: int) -> None:
        """``path`` was ``"truncated"`` or ``"replaced"`` after its seal; it is no longer read."""

    def hold(self, table: str, reason: str | None) -> None:
        """The table cannot publish (``reason``) and keeps its position; None once it can again."""

    async def pause(self, seconds: float) -> bool:
        """Back off for up to ``seconds``; False (early) when the worker is stopping."""

    def state_problem(self) -> str | None:
        """Why the state store cannot take writes now (None when it can). While it is not None the
        tailer reads nothing new: cycles in flight settle and are checkpointed, nothing past them is published."""


class Abandoned(Exception):
    """The worker is stopping; cycles in flight were not checkpointed."""


@dataclass
class TrackedFile:
    """A file the tailer knows: its persisted cursor, its reader, splitter and record writer."""

    hour: HourFile
    cursor: FileCursor  # persisted: everything before cursor.byte_offset is delivered
    running: FileCursor  # once every cycle written so far is delivered
    reader: HourFileReader
    splitter: LineSplitter
    writer: RecordWriter
    watch_until: float | None = None  # finalized: stat'ed for late appends until then (epoch seconds)


class Pending(NamedTuple):
    """A record whose delivery failed: the cycle it belongs to, what was produced, the error.
    ``is_replacement``: the record is the dead letter that already replaced a refused one."""

    cycle: Cycle
    record: Record
    error: Any
    is_replacement: bool

    def resent_as_is(self) -> bool:
        """True when the record is sent again unchanged (rather than replaced by its dead letter)."""
        return verdict(self.error) is Verdict.HOLD or self.is_replacement


@dataclass
class Cycle:
    """One read of a file handed to the producer; settled once every record of it was reported.

    ``start`` and the writer's state there (``seq_start``, ``blocks_start``) let the records be
    rebuilt from the file to find the one behind a failed report.
    """

    file: TrackedFile
    start: int
    seq_start: SeqState
    blocks_start: tuple[int | None, int | None]
    deliveries: Deliveries = field(default_factory=Deliveries)
    tally: Tally = field(default_factory=Tally)
    partial: Line | OversizeLine | None = None  # the unterminated tail a finalization dead-letters
    end: int = 0
    cursor: FileCursor | None = None  # the file's cursor once this cycle is delivered
    written: bool = False
    resolved: bool = False  # its failed records, if any, were dealt with

    def failed(self) -> bool:
        return not self.resolved and bool(self.deliveries.failures())

    def settled(self) -> bool:
        return self.written and self.deliveries.reported() == self.tally.produced


class TableTailer:
    """Tails the hour files of one node table."""

    def __init__(
        self, spec: TableSpec, settings: Settings, host: TailerHost, publisher: Publisher, stored: dict[str, FileCursor]
    ) -> None:
        self.spec = spec
        self.settings = settings
        self.host = host
        self.publisher = publisher
        self.table = spec.dir_name
        self.root = settings.watch_dir / spec.dir_name / "hourly"
        topic, dlq = settings.topic_for(spec), settings.topic_dlq
        self.topics = Topics(topic, publisher.partitions[topic], dlq, publisher.partitions[dlq])
        self.routes = Routes(self.topics.data_partitions)
        self.files: dict[str, TrackedFile] = {}
        self.window: deque[Cycle] = deque()
        self._dlq_partition = dead_letter_partition(spec, self.topics)
        self._fresh_start = not stored
        self._carry: SeqState = SEQ_START
        self._dir_missing_logged = False
        self._ignored: set[str] = set()
        self._stop_deadline: float | None = None
        # The highest block of a line this table has delivered (None before any), for snapshot events.
        self.published_block: int | None = max((c.last_block for c in stored.values() if c.last_block is not None), default=None)
        for path, cursor in stored.items():
            hour = HourFile.parse(path)
            if hour is not None and hour.table == self.table:
                self.files[path] = self._track(hour, cursor)

    def _track(self, hour: HourFile, cursor: FileCursor, reader: HourFileReader | None = None) -> TrackedFile:
        """Track ``hour`` from ``cursor``; ``reader`` keeps the one already open (its digest) at the cursor's offset."""
        if reader is None:
            reader = HourFileReader(self.settings.watch_dir / hour.relpath, cursor.byte_offset, cursor.head)
        else:
            reader.position = cursor.byte_offset
        return TrackedFile(
            hour=hour,
            cursor=cursor,
            running=cursor,
            reader=reader,
            splitter=LineSplitter(cursor.byte_offset, self.settings.max_line_bytes),
            writer=self._writer(hour, cursor),
            watch_until=self._watch_until(cursor),
        )

    def _writer(self, hour: HourFile, cursor: FileCursor) -> RecordWriter:
        """The record writer of ``hour`` at ``cursor``; a reopened file's ids carry its late tag."""
        return RecordWriter(
            self.spec,
            self.topics,
            self.routes,
            hour.relpath,
            self.publisher.produce,
            offset=cursor.byte_offset,
            seq_state=cursor.seq_state,
            first_block=cursor.first_block,
            last_block=cursor.last_block,
            late_tag=late_tag(hour) if cursor.stage is CursorStage.REOPENED else b"",
        )

    def _watch_until(self, cursor: FileCursor) -> float | None:
        if cursor.stage is not CursorStage.FINALIZED or cursor.finalized_at is None or self.settings.late_append_watch_s <= 0:
            return None
        finalized = epoch_of(cursor.finalized_at)
        return None if finalized is None else finalized + self.settings.late_append_watch_s

    # ------------------------------------------------------------------ the tick

    async def tick(self) -> None:
        """One poll: catch every file up as far as it has grown, finalize what is finished."""
        started = time.perf_counter()
        await self._settle_all()  # cycles left by an interrupted tick
        if self.host.state_problem() is not None:
            return
        hours = self._scan()
        if hours:
            self.host.metrics.set_newest_hour_file(self.table, hour_start_epoch(hours[-1].date, hours[-1].hour))
        await self._drop_deleted({h.relpath for h in hours})
        for index, hour in enumerate(hours):
            tracked = self.files.get(hour.relpath) or await self._adopt(hour, is_newest=index == len(hours) - 1)
            stage = tracked.cursor.stage
            if stage is CursorStage.SKIPPED:
                continue
            if stage is not CursorStage.TAILING:
                self._carry = tracked.cursor.carry_state
                if stage is CursorStage.FINALIZED:
                    await self._watch_sealed(tracked)
                elif stage is CursorStage.REOPENED:
                    await self._drive(tracked, has_later_file=True)
                continue
            finished = await self._drive(tracked, has_later_file=index < len(hours) - 1)
            if not finished:
                break
        self.host.metrics.set_files_tailed(self.table, len(self.files))
        self.host.metrics.poll_cycle(self.table, time.perf_counter() - started)

    def view(self, path: str) -> TrackedView:
        """What the read model shows of the tracked file ``path``: its cursor and, while it grows,
        its size now (a fresh ``stat``) and the partial line held back."""
        tracked = self.files[path]
        live = None
        if tracked.cursor.stage in GROWING:
            try:
                size = os.stat(tracked.reader.path).st_size
            except OSError:
                size = tracked.reader.last_size
            live = LiveFile(size=size, held_bytes=tracked.splitter.held_bytes)
        return TrackedView(tracked.hour, tracked.cursor, live)

    def discovered(self) -> list[str]:
        """The hour files of this table on disk now, oldest first (for the startup summary)."""
        return [hour.relpath for hour in self._scan()]

    def _scan(self) -> list[HourFile]:
        """Hour files of this table on disk, oldest first. A missing table dir is waited for."""
        found: list[HourFile] = []
        try:
            dates = list(os.scandir(self.root))
        except FileNotFoundError:
            if not self._dir_missing_logged:
                self.host.log.warning("table_dir_missing", table=self.table, path=str(self.root))
                self._dir_missing_logged = True
            return found
        self._dir_missing_logged = False
        for date in dates:
            if not date.is_dir(follow_symlinks=False):
                if date.is_symlink():
                    self._ignore(f"{self.table}/hourly/{date.name}", "a symlinked date directory is not followed")
                continue
            try:
                entries = list(os.scandir(date.path))
            except FileNotFoundError:
                continue
            for entry in entries:
                hour = HourFile.parse(f"{self.table}/hourly/{date.name}/{entry.name}")
                if hour is None:
                    continue
                if entry.is_file(follow_symlinks=False):
                    found.append(hour)
                else:
                    # The node writes regular files; a link could point anywhere (even at a backup).
                    self._ignore(hour.relpath, "not a regular file")
        found.sort()
        return found

    def _ignore(self, relpath: str, reason: str) -> None:
        """Log once that ``relpath`` is passed over, and why."""
        if relpath not in self._ignored:
            self._ignored.add(relpath)
            self.host.log.warning("hour_file_ignored", path=relpath, reason=reason)

    async def _adopt(self, hour: HourFile, *, is_newest: bool) -> TrackedFile:
        """Start tracking a file that has no stored state."""
        cursor = FileCursor.adopted(hour.relpath, self._carry)
        if self._fresh_start and self.settings.initial_position == "end":
            if not is_newest:
                cursor = cursor.with_changes(stage=CursorStage.SKIPPED)
            else:
                probe = HourFileReader(self.settings.watch_dir / hour.relpath, 0, "")
                size = probe.stat() or 0
                start = await probe.last_line_start(size, self.settings.max_line_bytes + 1)
                cursor = cursor.with_changes(byte_offset=start, size=size)
                self._fresh_start = False
            await self.host.checkpoint(cursor)
        self._fresh_start = False
        self.host.log.info("file_adopted", path=hour.relpath, start_offset=cursor.byte_offset, stage=cursor.stage.value)
        tracked = self.files[hour.relpath] = self._track(hour, cursor)
        return tracked

    async def _drop_deleted(self, present: set[str]) -> None:
        for path in [p for p in self.files if p not in present]:
            tracked = self.files.pop(path)
            cursor = tracked.cursor
            if cursor.stage is CursorStage.TAILING:
                self._carry = tracked.writer.seq_state
                self.host.metrics.file_deleted(self.table, "unsealed")
                self.host.file_lost(
                    self.table, path, "deleted before it was fully published", cursor.byte_offset, tracked.reader.last_size
                )
            elif cursor.stage is CursorStage.REOPENED:
                self.host.metrics.file_deleted(self.table, "unsealed")
                self.host.file_lost(
                    self.table,
                    path,
                    "deleted before the lines appended after its seal were published",
                    cursor.byte_offset,
                    tracked.reader.last_size,
                )
            elif cursor.stage is CursorStage.FINALIZED and not self.host.sealed(path, cursor.revision):
                self.host.metrics.file_deleted(self.table, "unsealed")
                self.host.file_lost(self.table, path, "deleted before its seal", cursor.byte_offset, cursor.size)
            else:
                self.host.metrics.file_deleted(self.table, "pruned")
                self.host.log.info("file_pruned", path=path)
            await self.host.forget(path)

    # ------------------------------------------------------------------ one file

    async def _drive(self, tracked: TrackedFile, *, has_later_file: bool) -> bool:
        """Catch ``tracked`` (tailing or reopened) up; finalize it if it is done. True when the next
        file may be worked."""
        reopened = tracked.cursor.stage is CursorStage.REOPENED
        while True:
            size = tracked.reader.stat()
            if size is None:
                await self._settle_all()
                return True  # picked up as deleted on the next scan
            reason = await tracked.reader.rewritten(size)
            if reason is not None:
                if reopened:
                    await self._sealed_file_rewritten(tracked, reason, size)
                    return True
                tracked = await self._restart(tracked, reason, size)
                continue
            if size > tracked.reader.position:
                await self._cycle(tracked, size)
                if not reopened:
                    self._report_lag(tracked, size)
                if self.host.stopping:
                    await self._settle_all()
                    return False
                continue
            break
        await self._settle_all()
        if not reopened:
            self._report_lag(tracked, size)
        if is_finalized(
            has_later_file=has_later_file,
            last_growth_at=tracked.reader.last_growth_at,
            now=time.monotonic(),
            grace_s=self.settings.seal_grace_s,
        ):
            await self._finalize(tracked, size)
            return True
        await tracked.reader.catch_up_digest(tracked.reader.position)
        return False

    async def _restart(self, tracked: TrackedFile, reason: str, size: int) -> TrackedFile:
        """Re-read a file that shrank or whose first bytes changed from byte 0 (same line ids)."""
        await self._settle_all()
        self.host.metrics.file_truncated(self.table)
        self.host.log.error(
            "file_restarted", path=tracked.cursor.path, reason=reason, size=size, published_to=tracked.cursor.byte_offset
        )
        cursor = tracked.cursor.restarted()
        fresh = self.files[cursor.path] = self._track(tracked.hour, cursor)
        await self.host.checkpoint(cursor)
        return fresh

    # ------------------------------------------------------------------ sealed files

    async def _watch_sealed(self, tracked: TrackedFile) -> None:
        """One ``stat`` of a sealed file within LATE_APPEND_WATCH_S of its seal: publish what was
        appended since (and seal it again), or report a file that shrank or was replaced."""
        if tracked.watch_until is None or time.time() > tracked.watch_until:
            return
        cursor = tracked.cursor
        size = tracked.reader.stat()
        if size is None or size == cursor.size:
            return
        reason = await tracked.reader.rewritten(size)
        if reason is not None:
            await self._sealed_file_rewritten(tracked, reason, size)
            return
        self.host.late_append(self.table, cursor.path, cursor.revision + 1, cursor.size, size)
        reopened = cursor.reopened()
        tracked = self.files[cursor.path] = self._track(tracked.hour, reopened, tracked.reader)
        await self.host.checkpoint(reopened)
        await self._drive(tracked, has_later_file=True)

    async def _sealed_file_rewritten(self, tracked: TrackedFile, reason: str, size: int) -> None:
        """A sealed file shrank or its first bytes changed: report it and stop reading it (nothing is
        published again; what was published and sealed stays as it is)."""
        await self._settle_all()
        cursor = tracked.cursor
        self.host.sealed_file_rewritten(self.table, cursor.path, reason, cursor.size, size)
        tracked.cursor = tracked.running = cursor.moved_to(CursorStage.REWRITTEN)
        tracked.watch_until = None
        await self.host.checkpoint(tracked.cursor)

    async def _cycle(self, tracked: TrackedFile, size: int) -> None:
        """Read one budget of new bytes and hand its complete lines to the producer; settle the
        oldest cycle once more than MAX_IN_FLIGHT are waiting (reading goes on while the broker works)."""
        want = min(size - tracked.reader.position, self.settings.read_budget_bytes)
        chunk = await tracked.reader.read(want)
        if not chunk:
            return
        self.host.metrics.bytes_read(self.table, len(chunk))
        items = tracked.splitter.feed(chunk)
        writer = tracked.writer
        cycle = Cycle(tracked, writer.offset, writer.seq_state, (writer.first_block, writer.last_block))
        self.window.append(cycle)
        acks = cycle.deliveries.cycle_acks(self.topics, self._dlq_partition)
        await self._write(cycle, acks, lambda start: writer.write(items, acks, cycle.tally, start), len(items))
        self._close_cycle(cycle, tracked.splitter.held_bytes == 0)
        while len(self.window) > MAX_IN_FLIGHT:
            await self._settle_oldest()

    async def _write(self, cycle: Cycle, acks: CycleAcks, write: Callable[[int], int], count: int) -> None:
        """Run ``write`` until it has handed over all ``count`` items: wait while the producer's queue
        is full; hold the table (not ready, slow retries) while the client refuses a record."""
        index = write(0)
        backoff = Backoff(*HOLD_BACKOFF_S)
        while index < count:
            refusal = cycle.file.writer.refusal
            if refusal is None:
                await self._wait_for_room()
            else:
                reason = f"{self.topics.data}: {refusal_name(refusal)} ({refusal})"
                self._hold(reason, retry_in_s=backoff.delay)
                if not await backoff.wait(self.host.pause):
                    raise Abandoned()
            index = write(index)
        if backoff.tries:
            self.host.hold(self.table, None)

    def _close_cycle(self, cycle: Cycle, complete: bool) -> None:
        """Everything of ``cycle`` is handed over: note where the file stands once it is delivered."""
        tracked, writer = cycle.file, cycle.file.writer
        cycle.end = writer.offset
        cycle.cursor = tracked.running = tracked.running.advanced(
            byte_offset=writer.offset,
            last_line_complete=complete,
            seq_state=writer.seq_state,
            lines=cycle.tally.lines,
            dlq_lines=cycle.tally.dlq,
            regressions=len(cycle.tally.regressions),
            first_block=writer.first_block,
            last_block=writer.last_block,
            size=tracked.reader.last_size,
        )
        cycle.written = True

    # ------------------------------------------------------------------ delivery reports

    async def _settle_all(self) -> None:
        while self.window:
            await self._settle_oldest()

    async def _settle_oldest(self) -> None:
        """Wait for the oldest cycle's reports; resolve failures; checkpoint it."""
        cycle = self.window[0]
        await self._until(cycle.settled)
        if cycle.failed():
            await self._resolve()
        self.window.popleft()
        await self._commit(cycle)

    async def _until(self, predicate: Callable[[], bool]) -> None:
        """Wait for ``predicate``; once the worker stops, for at most STOP_GRACE_S in all."""
        while not predicate():
            if self.host.stopping:
                if self._stop_deadline is None:
                    self._stop_deadline = time.monotonic() + STOP_GRACE_S
                left = self._stop_deadline - time.monotonic()
                if left <= 0:
                    raise Abandoned()
                await self.publisher.until(predicate, timeout=left)
            else:
                await self.publisher.until(predicate, timeout=1.0)

    async def _resolve(self) -> None:
        """Deal with every failed record of the window, then let it be checkpointed in order.

        A record the broker refuses for good becomes a ``rejected`` dead letter (its reference on
        the DLQ). A record of a topic that cannot be written now (missing, not authorized, ...) is
        sent again, slowly, while the table is held (not ready), and so is a dead letter that
        cannot be written. Nothing is read meanwhile: the file keeps its position.
        """
        for cycle in self.window:
            await self._until(cycle.settled)
        pending: list[Pending] = []
        for cycle in self.window:
            if cycle.failed():
                failures = cycle.deliveries.failures()
                records = await self._rebuild(cycle)
                pending += [Pending(cycle, records[(f.topic, f.partition)][f.position], f.error, False) for f in failures]
            cycle.resolved = True
        backoff = Backoff(*HOLD_BACKOFF_S)
        while pending:
            if any(verdict(p.error) is Verdict.FATAL for p in pending):
                raise Abandoned()  # the data plane stops the worker; a restart resumes from the checkpoint
            resend = [p for p in pending if p.resent_as_is()]
            if resend:
                reason = f"{resend[0].record.topic}: {resend[0].error.name()} ({resend[0].error.str()})"
                self._hold(reason, retry_in_s=backoff.delay, records=len(resend))
                if not await backoff.wait(self.host.pause):
                    raise Abandoned()
            repairs, produced = Deliveries(), 0
            sent: dict[tuple[str, int], list[Pending]] = {}
            for item in pending:
                record = item.record if item.resent_as_is() else self._rejected(item)
                await self._produce_with_room(record, _widening(repairs.callback(record.topic, record.partition), item.cycle))
                sent.setdefault((record.topic, record.partition), []).append(
                    Pending(item.cycle, record, None, item.is_replacement or not item.resent_as_is())
                )
                produced += 1
            self.host.metrics.producer_retry(sum(1 for item in pending if item.resent_as_is()))
            await self._until(lambda: repairs.reported() == produced)  # noqa: B023 - awaited in this iteration
            pending = [sent[(f.topic, f.partition)][f.position]._replace(error=f.error) for f in repairs.failures()]
        if backoff.tries:
            self.host.hold(self.table, None)
            self.host.log.info("topic_writable_again", table=self.table)

    async def _rebuild(self, cycle: Cycle) -> dict[tuple[str, int], list[Record]]:
        """The records ``cycle`` produced, by (topic, partition) in order, rebuilt from the file."""
        collector = Collector()
        first, last = cycle.blocks_start
        writer = RecordWriter(
            self.spec,
            self.topics,
            self.routes,
            cycle.file.hour.relpath,
            collector,
            offset=cycle.start,
            seq_state=cycle.seq_start,
            first_block=first,
            last_block=last,
            late_tag=cycle.file.writer.late_tag,
        )
        acks = collector.acks(self.topics.data_partitions)
        if cycle.partial is not None:
            writer.write_unterminated(cycle.partial, acks, Tally())
        else:
            data = await cycle.file.reader.read_range(cycle.start, cycle.end)
            writer.write(LineSplitter(cycle.start, self.settings.max_line_bytes).feed(data), acks, Tally())
        return collector.groups

    def _rejected(self, item: Pending) -> Record:
        """The dead letter for a record the broker refused for good; counts, logs and reports it."""
        cycle, record, error = item.cycle, item.record, item.error
        rejection = cycle.file.writer.rejection(record, error.name(), error.str())
        if record.topic == self.topics.data:
            # It was counted as a published line; it is a DLQ line now, here and in the later cycles' cursors.
            cycle.tally.lines -= 1
            later = False
            for other in self.window:
                later = later or other is cycle
                if later and other.cursor is not None:
                    other.cursor = other.cursor.with_changes(lines=other.cursor.lines - 1, dlq_lines=other.cursor.dlq_lines + 1)
            cycle.file.running = self.window[-1].cursor or cycle.file.running
        self.host.metrics.dlq(self.table, "rejected")
        self.host.log.error(
            "record_rejected",
            table=self.table,
            topic=record.topic,
            source=cycle.file.hour.relpath,
            offset=int(record.header("offset") or b"0"),
            error=error.name(),
            detail=error.str(),
        )
        return rejection

    async def _produce_with_room(self, record: Record, callback: Callable[[Any, Any], None]) -> None:
        """Produce one record, waiting while the producer's queue is full."""
        while True:
            try:
                self.publisher.produce(
                    record.topic, record.value, record.key, record.partition, callback, None, 0, record.headers
                )
                return
            except BufferError:
                await self._wait_for_room()

    async def _wait_for_room(self) -> None:
        """The producer's queue is full: let delivery reports come in for a moment."""
        if self.host.stopping:
            raise Abandoned()
        await self.publisher.until(_never, timeout=ROOM_WAIT_S)

    def _hold(self, reason: str, *, retry_in_s: float, records: int | None = None) -> None:
        self.host.hold(self.table, reason)
        self.host.metrics.producer_error("hold")
        self.host.log.limited(
            logging.ERROR,
            "topic_not_writable",
            self.table,
            60.0,
            table=self.table,
            reason=reason,
            records=records,
            retry_in_s=retry_in_s,
        )

    async def _commit(self, cycle: Cycle) -> None:
        """Persist ``cycle.cursor``: every record before it was delivered."""
        tracked = cycle.file
        assert cycle.cursor is not None
        offsets = merge_ranges(tracked.cursor.offsets, self.topics.data, cycle.deliveries.offset_ranges(self.topics.data))
        tracked.cursor = cycle.cursor.with_changes(head=tracked.reader.head, offsets=offsets)
        tally = cycle.tally
        if tally.lines:
            if cycle.cursor.last_block is not None and (
                self.published_block is None or cycle.cursor.last_block > self.published_block
            ):
                self.published_block = cycle.cursor.last_block
            block_time = block_time_of(tally.last_line) if tally.last_line is not None else None
            self.host.metrics.lines_published(self.table, tally.lines, block_time)
            self._warn_if_behind(block_time)
        for regression in tally.regressions:
            self.host.block_regression(self.table, tracked.hour.relpath, regression)
        for record in tally.dead_letters:
            reason = (record.header("reason") or b"").decode()
            self.host.metrics.dlq(self.table, reason)
            self.host.log.limited(
                logging.WARNING,
                "dlq",
                f"{self.table}|{reason}",
                10.0,
                table=self.table,
                reason=reason,
                source=tracked.hour.relpath,
                offset=int(record.header("offset") or b"0"),
            )
        await self.host.checkpoint(tracked.cursor)

    def _warn_if_behind(self, block_time: str | None) -> None:
        epoch = epoch_of(block_time) if block_time else None
        lag = time.time() - epoch if epoch is not None else 0.0
        if lag > self.settings.lag_warn_seconds:
            self.host.log.limited(
                logging.WARNING,
                "publish_lag",
                self.table,
                30.0,
                table=self.table,
                lag_seconds=round(lag, 1),
                block_time=block_time,
            )

    # ------------------------------------------------------------------ finalization

    async def _finalize(self, tracked: TrackedFile, size: int) -> None:
        """Dead-letter the unterminated tail, complete the digest, hand the file to the sealers.

        The first finalization is revision 1 and fixes where the next hour file's sequence starts
        (``carry``); a reopened file's finalization is the next revision and leaves that alone.
        """
        partial = tracked.splitter.flush_partial()
        if partial is not None:
            writer = tracked.writer
            cycle = Cycle(tracked, writer.offset, writer.seq_state, (writer.first_block, writer.last_block), partial=partial)
            self.window.append(cycle)
            acks = cycle.deliveries.cycle_acks(self.topics, self._dlq_partition)

            def write(_start: int) -> int:
                try:
                    writer.write_unterminated(partial, acks, cycle.tally)
                except BufferError:
                    writer.refusal = None
                    return 0
                except Exception as exc:  # noqa: BLE001 - produce's refusal, kept as the writer's like in write()
                    writer.refusal = exc
                    return 0
                return 1

            await self._write(cycle, acks, write, 1)
            self._close_cycle(cycle, True)
            await self._settle_all()
        await tracked.reader.catch_up_digest(size, None)
        running = tracked.running
        first = running.stage is CursorStage.TAILING
        carry = tracked.writer.seq_state if first else running.carry_state
        cursor = running.moved_to(
            CursorStage.FINALIZED,
            size=size,
            finalized_at=iso_utc(time.time()),
            offsets=tracked.cursor.offsets,
            sha256=tracked.reader.digest.hexdigest(),
            head=tracked.reader.head,
            revision=running.revision + 1,
            unterminated_at=partial.offset if partial is not None else None,
            carry_block=carry[0],
            carry_next=carry[1],
            carry_epoch=carry[2],
        )
        manifest = manifest_from_cursor(cursor, self.settings.node_id)
        assert manifest is not None
        await self.host.rotate(manifest)
        tracked.cursor = tracked.running = cursor
        tracked.watch_until = self._watch_until(cursor)
        await self.host.checkpoint(cursor)
        self._carry = carry
        if first:
            self.host.metrics.set_tail_lag(self.table, cursor.path, 0)
        self.host.log.info(
            "file_finalized",
            path=cursor.path,
            size=size,
            lines=cursor.lines,
            dlq_lines=cursor.dlq_lines,
            revision=cursor.revision,
            block_regressions=cursor.block_regressions,
        )

    def _report_lag(self, tracked: TrackedFile, size: int) -> None:
        """Tail lag of the file being read, from the size just seen: gauge, and a warning (rate-limited)."""
        lag = size - tracked.cursor.byte_offset
        self.host.metrics.set_tail_lag(self.table, tracked.cursor.path, lag)
        self.host.metrics.set_partial_held(self.table, tracked.cursor.path, tracked.splitter.held_bytes)
        if lag > self.settings.lag_warn_bytes:
            self.host.log.limited(
                logging.WARNING, "tail_lag", self.table, 30.0, table=self.table, path=tracked.cursor.path, lag_bytes=lag
            )


def late_tag(hour: HourFile) -> bytes:
    """What ends the line id of every line appended to ``hour`` after its first seal: the file's
    own sequence continues there, and the tag keeps those ids apart from the next hour file's,
    which continued the table's stream from the file's first end."""
    return b"|late-%s-%s" % (hour.date.encode(), hour.hour.encode())


def _widening(report: Callable[[Any, Any], None], cycle: Cycle) -> Callable[[Any, Any], None]:
    """``report``, and a record sent again that is delivered counts among ``cycle``'s offsets."""

    def on_delivery(error: Any, message: Any) -> None:
        report(error, message)
        if error is None:
            cycle.deliveries.widen(message.topic(), message.partition(), message.offset())

    return on_delivery


def _never() -> bool:
    return False
