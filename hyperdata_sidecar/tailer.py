"""One table's tailer: the poll cycle read → publish → broker ack → checkpoint.

Files of a table are worked strictly in (date, hour) order: the next hour file is not read before the
previous one is finalized, which keeps ``seq_in_block`` exact when a block straddles two files.
The tailer never writes Faust tables itself; it hands checkpoints and rotation records to its
:class:`TailerHost` (the Faust shell), which routes them through internal topics to agents.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.finalization import FileStage, finalization_stage
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.lineinfo import LineInfo, fast_inspector, inspect_line
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.seal import SealManifest, iso_utc
from hyperdata_sidecar.core.sequencer import BlockSequencer
from hyperdata_sidecar.core.splitter import Line, LineSplitter, OversizeLine
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.digest import RunningDigest, last_line_start, read_chunk, read_head
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics, block_time_to_epoch
from hyperdata_sidecar.producer import DataPlaneProducer, Outbox, PublishError, Record

HEAD_BYTES = 64  # enough of the first line (its local_time has ns precision) to tell a replaced file
DIGEST_SLICE = 64 * 1024 * 1024  # digest catch-up per idle cycle after a restart
MAX_BACKOFF_S = 5.0  # publish retries: a returning broker is used within seconds
MAX_IN_FLIGHT = 6  # cycles per file published but not yet acked (memory: this many read budgets)


class TailerHost(Protocol):
    """What a tailer needs from the shell that runs it."""

    producer: DataPlaneProducer
    metrics: SidecarMetrics
    log: EventLog

    @property
    def stopping(self) -> bool:
        """True once the worker is shutting down: abandon the cycle in flight."""

    async def checkpoint(self, cursor: FileCursor) -> None:
        """Persist ``cursor`` (called only after the broker acked everything it covers)."""

    async def rotate(self, manifest: SealManifest) -> None:
        """Hand a finalized file to the seal and backup agents."""

    async def forget(self, path: str) -> None:
        """Drop every piece of state about ``path`` (the file is gone)."""

    def broker_state(self, connected: bool) -> None:
        """Report whether the last publish reached the broker."""

    async def pause(self, seconds: float) -> bool:
        """Back off for up to ``seconds``; False (early) when the worker is stopping."""


class Abandoned(Exception):
    """The worker is stopping; the cycle in flight was not checkpointed."""


@dataclass
class TrackedFile:
    """A file the tailer knows: its persisted cursor plus what lives only in memory."""

    hour: HourFile
    cursor: FileCursor
    path: Path
    sequencer: BlockSequencer
    splitter: LineSplitter
    running: FileCursor  # the cursor once every cycle read so far is acked
    head: str  # hex of the file's first bytes (see HEAD_BYTES)
    digest: RunningDigest = field(default_factory=RunningDigest)
    in_flight: deque[InFlight] = field(default_factory=deque)
    read_pos: int = 0
    last_size: int = -1
    last_growth_at: float = field(default_factory=time.monotonic)

    @classmethod
    def resume(cls, hour: HourFile, cursor: FileCursor, path: Path, max_line_bytes: int) -> TrackedFile:
        return cls(
            hour=hour,
            cursor=cursor,
            path=path,
            sequencer=BlockSequencer(cursor.seq_block, cursor.seq_next),
            splitter=LineSplitter(cursor.byte_offset, max_line_bytes),
            running=cursor,
            head=cursor.head,
            read_pos=cursor.byte_offset,
        )


@dataclass
class InFlight:
    """One published cycle waiting for its acks; ``cursor`` is the file's cursor once it is acked."""

    outbox: Outbox
    acks: list[asyncio.Future] | None  # None: the batches could not even be queued
    cursor: FileCursor
    lines: int
    newest_block_time: str | None
    settled: bool = False


@dataclass
class CycleTotals:
    lines: int = 0
    dlq_lines: int = 0
    first_block: int | None = None
    last_block: int | None = None
    newest_block_time: str | None = None


class TableTailer:
    """Tails the hour files of one node table."""

    def __init__(self, spec: TableSpec, settings: Settings, host: TailerHost, stored: dict[str, FileCursor]) -> None:
        self.spec = spec
        self.settings = settings
        self.host = host
        self.root = settings.watch_dir / spec.dir_name / "hourly"
        self.files: dict[str, TrackedFile] = {}
        self._fresh_start = not stored
        self._carry = BlockSequencer()
        self._dir_missing_logged = False
        self._ignored: set[str] = set()
        self._counts: tuple[int, int] | None = None  # partitions of (data topic, DLQ topic)
        self._route: dict[str, tuple[bytes, int]] = {}
        self._inspect_fast = fast_inspector(spec)
        self._table_bytes = spec.dir_name.encode()
        for path, cursor in stored.items():
            hour = HourFile.parse(path)
            if hour is not None and hour.table == spec.dir_name:
                self.files[path] = TrackedFile.resume(hour, cursor, settings.watch_dir / path, settings.max_line_bytes)

    # ------------------------------------------------------------------ the tick

    async def tick(self) -> None:
        """One poll: catch every file up as far as it has grown, finalize what is finished."""
        started = time.perf_counter()
        hours = self._scan()
        await self._drop_deleted({h.relpath for h in hours})
        for index, hour in enumerate(hours):
            tracked = self.files.get(hour.relpath) or await self._adopt(hour, is_newest=index == len(hours) - 1)
            if tracked.cursor.stage is not CursorStage.TAILING:
                if tracked.cursor.stage is CursorStage.FINALIZED:
                    self._carry = BlockSequencer(tracked.cursor.seq_block, tracked.cursor.seq_next)
                continue
            finished = await self._drive(tracked, has_later_file=index < len(hours) - 1)
            if not finished:
                break
        self.host.metrics.set_files_tailed(self.spec.dir_name, len(self.files))
        self.host.metrics.poll_cycle(self.spec.dir_name, time.perf_counter() - started)

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
                self.host.log.warning("table_dir_missing", table=self.spec.dir_name, path=str(self.root))
                self._dir_missing_logged = True
            return found
        self._dir_missing_logged = False
        for date in dates:
            if not date.is_dir(follow_symlinks=False):
                continue
            try:
                entries = list(os.scandir(date.path))
            except FileNotFoundError:
                continue
            for entry in entries:
                hour = HourFile.parse(f"{self.spec.dir_name}/hourly/{date.name}/{entry.name}")
                if hour is None:
                    continue
                if entry.is_file(follow_symlinks=False):
                    found.append(hour)
                elif hour.relpath not in self._ignored:
                    # The node writes regular files; a link could point anywhere (even at a backup).
                    self._ignored.add(hour.relpath)
                    self.host.log.warning("hour_file_ignored", path=hour.relpath, reason="not a regular file")
        found.sort()
        return found

    async def _adopt(self, hour: HourFile, *, is_newest: bool) -> TrackedFile:
        """Start tracking a file that has no stored state."""
        path = self.settings.watch_dir / hour.relpath
        seq_block, seq_next = self._carry.state
        cursor = FileCursor(path=hour.relpath, seq_block=seq_block, seq_next=seq_next, seq0_block=seq_block, seq0_next=seq_next)
        if self._fresh_start and self.settings.initial_position == "end":
            if not is_newest:
                cursor = cursor.with_changes(stage=CursorStage.SKIPPED)
            else:
                size = path.stat().st_size
                start = await asyncio.to_thread(last_line_start, path, size, self.settings.max_line_bytes + 1)
                cursor = cursor.with_changes(byte_offset=start, size=size)
                self._fresh_start = False
            await self.host.checkpoint(cursor)
            self.host.log.info("file_adopted", path=hour.relpath, start_offset=cursor.byte_offset, stage=cursor.stage.value)
        else:
            self._fresh_start = False
            self.host.log.info("file_adopted", path=hour.relpath, start_offset=0, stage=cursor.stage.value)
        tracked = TrackedFile.resume(hour, cursor, path, self.settings.max_line_bytes)
        self.files[hour.relpath] = tracked
        return tracked

    async def _drop_deleted(self, present: set[str]) -> None:
        for path in [p for p in self.files if p not in present]:
            tracked = self.files.pop(path)
            if tracked.cursor.stage is CursorStage.TAILING:
                self._carry = tracked.sequencer
                self.host.metrics.file_deleted(self.spec.dir_name, "unsealed")
                self.host.log.error(
                    "file_deleted_before_seal", path=path, published_to=tracked.cursor.byte_offset, size_seen=tracked.last_size
                )
            else:
                self.host.metrics.file_deleted(self.spec.dir_name, "pruned")
                self.host.log.info("file_pruned", path=path)
            await self.host.forget(path)

    # ------------------------------------------------------------------ one file

    async def _drive(self, tracked: TrackedFile, *, has_later_file: bool) -> bool:
        """Catch ``tracked`` up; finalize it if it is done. True when the next file may be worked."""
        while True:
            try:
                size = tracked.path.stat().st_size
            except FileNotFoundError:
                return True  # picked up as deleted on the next scan
            if size != tracked.last_size:
                tracked.last_size, tracked.last_growth_at = size, time.monotonic()
                restarted = await self._restart_if_rewritten(tracked, size)
                if restarted is not None:
                    tracked = restarted
                    continue
            if size > tracked.read_pos:
                await self._cycle(tracked, size)
                if self.host.stopping:
                    # Shutting down: persist what the broker acked (the acks of cycles in flight
                    # come within milliseconds), so a restart repeats as little as possible.
                    await self._settle_all(tracked)
                    return False
                continue
            break
        await self._settle_all(tracked)
        self._report_lag(tracked, size)
        stage = finalization_stage(
            has_later_file=has_later_file,
            caught_up=True,
            last_growth_at=tracked.last_growth_at,
            now=time.monotonic(),
            grace_s=self.settings.seal_grace_s,
        )
        if stage is FileStage.FINALIZED:
            await self._finalize(tracked, size)
            return True
        if tracked.digest.upto < tracked.read_pos:
            await asyncio.to_thread(tracked.digest.catch_up, tracked.path, tracked.read_pos, DIGEST_SLICE)
        return False

    async def _restart_if_rewritten(self, tracked: TrackedFile, size: int) -> TrackedFile | None:
        """A file that shrank or whose first bytes changed is re-read from byte 0 (same line ids).

        Returns the fresh :class:`TrackedFile`, or None when the file is the one we were reading.
        """
        known = tracked.head
        reason = None
        if size < tracked.read_pos:
            reason = "truncated"
        else:
            head = await asyncio.to_thread(read_head, tracked.path, HEAD_BYTES)
            if head[: len(known) // 2].hex() != known:
                reason = "replaced"
            elif len(head) * 2 > len(known):
                tracked.head = head.hex()
        if reason is None:
            return None
        await self._settle_all(tracked)
        self.host.metrics.file_truncated(self.spec.dir_name)
        self.host.log.error(
            "file_restarted", path=tracked.cursor.path, reason=reason, size=size, published_to=tracked.cursor.byte_offset
        )
        cursor = tracked.cursor.restarted()
        fresh = TrackedFile.resume(tracked.hour, cursor, tracked.path, self.settings.max_line_bytes)
        self.files[cursor.path] = fresh
        await self.host.checkpoint(cursor)
        return fresh

    async def _cycle(self, tracked: TrackedFile, size: int) -> None:
        """Read one budget of new bytes and publish its complete lines; settle the oldest cycle
        once more than MAX_IN_FLIGHT are waiting for acks (reading goes on while the broker works)."""
        await self._wait_for_partition_counts()
        want = min(size - tracked.read_pos, self.settings.read_budget_bytes)
        chunk = await asyncio.to_thread(read_chunk, tracked.path, tracked.read_pos, want, tracked.digest)
        if not chunk:
            return
        tracked.read_pos += len(chunk)
        self.host.metrics.bytes_read(self.spec.dir_name, len(chunk))
        outbox = Outbox()
        totals = CycleTotals()
        self._prepare(tracked, tracked.splitter.feed(chunk), outbox, totals)
        tracked.running = self._advanced(tracked, totals)
        try:
            acks = await self.host.producer.enqueue(outbox) if outbox.count else []
        except PublishError:
            acks = None
        tracked.in_flight.append(InFlight(outbox, acks, tracked.running, totals.lines, totals.newest_block_time))
        while len(tracked.in_flight) > MAX_IN_FLIGHT:
            await self._settle_oldest(tracked)

    async def _settle_all(self, tracked: TrackedFile) -> None:
        while tracked.in_flight:
            await self._settle_oldest(tracked)

    async def _settle_oldest(self, tracked: TrackedFile) -> None:
        """Wait for the oldest cycle's acks and checkpoint it. If it failed, every cycle still in
        flight is published again, in order, until the broker acks it (duplicates, never gaps)."""
        flight = tracked.in_flight[0]
        if not flight.settled:
            try:
                if flight.acks is None:
                    raise PublishError("batches could not be queued")
                await self.host.producer.settle(flight.acks)
                self.host.broker_state(True)
            except PublishError as exc:
                # Possibly an old failure (batches queued before an outage): _publish below says
                # whether the broker is reachable now.
                self._report_publish_failure(flight.outbox, exc, retry_in_s=0, broker_down=False)
                for waiting in tracked.in_flight:
                    if waiting.acks:
                        await asyncio.gather(*waiting.acks, return_exceptions=True)
                for waiting in tracked.in_flight:
                    await self._publish(waiting.outbox)
                    waiting.settled = True
        tracked.in_flight.popleft()
        await self._commit(tracked, flight.cursor, flight.lines, flight.newest_block_time)

    async def _wait_for_partition_counts(self) -> None:
        """Learn the partition counts before reading, so nothing read can fail to be routed."""
        delay = 0.5
        while self._counts is None:
            try:
                self._counts = (
                    await self.host.producer.partition_count(self.settings.topic_for(self.spec)),
                    await self.host.producer.partition_count(self.settings.topic_dlq),
                )
            except PublishError as exc:
                self.host.log.limited(logging.WARNING, "topic_metadata_unavailable", self.spec.dir_name, 10.0, error=str(exc))
                if not await self.host.pause(delay):
                    raise Abandoned() from exc
                delay = min(delay * 2, MAX_BACKOFF_S)
                await self.host.producer.recover()

    def _prepare(self, tracked: TrackedFile, items: list[Line | OversizeLine], outbox: Outbox, totals: CycleTotals) -> None:
        """Turn lines into records (data or DLQ), assigning line ids in file order. The hot loop."""
        topic = self.settings.topic_for(self.spec)
        by_partition: list[list[Record]] = [[] for _ in range(self._counts[0])]
        route = self._route
        inspect_fast = self._inspect_fast
        assign = tracked.sequencer.assign
        table = self._table_bytes
        source = tracked.cursor.path.encode()
        for item in items:
            if type(item) is not Line:
                ref = orjson.dumps(
                    {"source": tracked.cursor.path, "offset": item.offset, "length": item.length, "sha256": item.sha256}
                )
                self._dead_letter(outbox, totals, source, item.offset, "oversize", ref)
                continue
            info = inspect_fast(item.data) or inspect_line(self.spec, item.data)
            if type(info) is not LineInfo:
                self._dead_letter(outbox, totals, source, item.offset, info.reason, item.data)
                continue
            block = info.block_number
            key, partition = route.get(info.coin) or self._new_route(info.coin)
            headers = [
                ("line_id", b"%s|%d|%d" % (table, block, assign(block, info.n_events))),
                ("source", source),
                ("offset", b"%d" % item.offset),
            ]
            by_partition[partition].append((key, item.data, headers))
            if totals.first_block is None:
                totals.first_block = block
            totals.last_block = block
            totals.newest_block_time = info.block_time
            totals.lines += 1
        for partition, records in enumerate(by_partition):
            outbox.extend(topic, partition, records)

    def _new_route(self, coin: str) -> tuple[bytes, int]:
        """Key bytes and murmur2 partition of a coin, cached (a table has a few hundred coins)."""
        key = coin.encode()
        route = self._route[coin] = (key, partition_for(key, self._counts[0]))
        return route

    def _dead_letter(self, outbox: Outbox, totals: CycleTotals, source: bytes, offset: int, reason: str, value: bytes) -> None:
        topic = self.settings.topic_dlq
        key = self.spec.dir_name.encode()
        partition = partition_for(key, self._counts[1])
        headers = [("source", source), ("offset", str(offset).encode()), ("reason", reason.encode())]
        outbox.add(topic, partition, (key, value, headers))
        totals.dlq_lines += 1
        self.host.metrics.dlq(self.spec.dir_name, reason)
        self.host.log.limited(
            logging.WARNING, "dlq", f"{self.spec.dir_name}|{reason}", 10.0,
            table=self.spec.dir_name, reason=reason, source=source.decode(), offset=offset,
        )

    async def _publish(self, outbox: Outbox) -> None:
        """Publish until the broker acks everything; back off while it does not."""
        if not outbox.count:
            return
        delay = 0.5
        while True:
            try:
                await self.host.producer.publish(outbox)
            except PublishError as exc:
                self._report_publish_failure(outbox, exc, retry_in_s=delay)
                if not await self.host.pause(delay):
                    raise Abandoned() from exc
                delay = min(delay * 2, MAX_BACKOFF_S)
                self.host.metrics.producer_retry()
                await self.host.producer.recover()
                continue
            self.host.broker_state(True)
            return

    def _report_publish_failure(self, outbox: Outbox, exc: PublishError, *, retry_in_s: float, broker_down: bool = True) -> None:
        if broker_down:
            self.host.broker_state(False)
        self.host.metrics.producer_error("publish")
        self.host.log.limited(
            logging.WARNING, "publish_failed", self.spec.dir_name, 10.0,
            table=self.spec.dir_name, records=outbox.count, error=str(exc), retry_in_s=retry_in_s,
        )

    def _advanced(self, tracked: TrackedFile, totals: CycleTotals) -> FileCursor:
        """The running cursor moved past the lines just prepared (what to persist once they are acked)."""
        running = tracked.running
        block, next_seq = tracked.sequencer.state
        return running.with_changes(
            byte_offset=tracked.splitter.offset,
            last_line_complete=tracked.splitter.held_bytes == 0,
            seq_block=block,
            seq_next=next_seq,
            lines=running.lines + totals.lines,
            dlq_lines=running.dlq_lines + totals.dlq_lines,
            first_block=running.first_block if running.first_block is not None else totals.first_block,
            last_block=totals.last_block if totals.last_block is not None else running.last_block,
            size=tracked.last_size,
        )

    async def _commit(self, tracked: TrackedFile, cursor: FileCursor, lines: int, newest_block_time: str | None) -> None:
        """Persist ``cursor``: everything it covers is acked."""
        tracked.cursor = cursor.with_changes(head=tracked.head)
        if lines:
            self.host.metrics.lines_published(self.spec.dir_name, lines, newest_block_time)
            self._warn_if_behind(newest_block_time)
        await self.host.checkpoint(tracked.cursor)

    def _warn_if_behind(self, block_time: str | None) -> None:
        epoch = block_time_to_epoch(block_time) if block_time else None
        lag = time.time() - epoch if epoch is not None else 0.0
        if lag > self.settings.lag_warn_seconds:
            table = self.spec.dir_name
            self.host.log.limited(
                logging.WARNING, "publish_lag", table, 30.0, table=table, lag_seconds=round(lag, 1), block_time=block_time
            )

    async def _finalize(self, tracked: TrackedFile, size: int) -> None:
        """Flush the unterminated tail to the DLQ, complete the digest, hand the file to the sealers."""
        totals = CycleTotals()
        partial = tracked.splitter.flush_partial()
        if partial is not None:
            outbox = Outbox()
            source = tracked.cursor.path.encode()
            value = partial.data if type(partial) is Line else orjson.dumps(
                {"source": tracked.cursor.path, "offset": partial.offset, "length": partial.length, "sha256": partial.sha256}
            )
            await self._wait_for_partition_counts()
            self._dead_letter(outbox, totals, source, partial.offset, "unterminated", value)
            await self._publish(outbox)
        await asyncio.to_thread(tracked.digest.catch_up, tracked.path, size)
        tracked.running = self._advanced(tracked, totals).with_changes(
            stage=CursorStage.FINALIZED, size=size, finalized_at=iso_utc(time.time()), sha256=tracked.digest.hexdigest()
        )
        cursor = tracked.running.with_changes(head=tracked.head)
        await self.host.rotate(manifest_from_cursor(cursor, self.settings.node_id))
        await self._commit(tracked, cursor, 0, None)
        self._carry = BlockSequencer(*tracked.sequencer.state)
        self.host.metrics.set_tail_lag(self.spec.dir_name, cursor.path, 0)
        self.host.log.info("file_finalized", path=cursor.path, size=size, lines=cursor.lines, dlq_lines=cursor.dlq_lines)

    def _report_lag(self, tracked: TrackedFile, size: int) -> None:
        lag = size - tracked.cursor.byte_offset
        table = self.spec.dir_name
        self.host.metrics.set_tail_lag(table, tracked.cursor.path, lag)
        self.host.metrics.set_partial_held(table, tracked.cursor.path, tracked.splitter.held_bytes)
        if lag > self.settings.lag_warn_bytes:
            self.host.log.limited(logging.WARNING, "tail_lag", table, 30.0, table=table, path=tracked.cursor.path, lag_bytes=lag)
