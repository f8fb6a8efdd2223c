"""The window of cycles: reads of one file handed to the producer and not yet committed, without I/O.

A *cycle* is one read of a file turned into records: its start state (offset, sequencer, block
range), the delivery results of its records by (topic, partition), and its end state. The window
holds up to :data:`MAX_IN_FLIGHT` of them so that reading goes on while the broker works; they are
committed strictly oldest first, each once every record of it was reported, so a persisted cursor
never covers a record that was not delivered.

The window belongs to one file at a time (:attr:`Window.path`): it is emptied before the tailer
moves to another file, and :meth:`Window.open` refuses a cycle of another file while it is not.
Each cycle's end cursor is built from the previous cycle's (:meth:`Window.close`), the cursor a
commit persists is built in :meth:`Window.commit`, and a data line the broker refused for good is
reclassified as a dead letter in every cursor of the window that counts it (:meth:`Window.rejected`).
This is the seam a line engine fills: it produces a cycle's records from its start state and reports
its end state; the window does the rest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import SeqState, Tally
from hyperdata_sidecar.core.seal import merge_ranges
from hyperdata_sidecar.core.splitter import Line, OversizeLine

MAX_IN_FLIGHT = 4
"""Cycles of a file handed to the producer and not yet reported; also what a crash may publish again."""


class WriterState(NamedTuple):
    """Where a file's record writer stands: the next line's offset, the sequencer, the block range so far."""

    offset: int
    seq: SeqState
    first_block: int | None
    last_block: int | None


@dataclass
class Cycle:
    """One read of a file handed to the producer; settled once every record of it was reported.

    ``start`` (the writer's state before the read) lets the records be rebuilt from the file to find
    the one behind a failed report; ``partial`` is set for the cycle that dead-letters a file's
    unterminated last line at its finalization.
    """

    start: WriterState
    partial: Line | OversizeLine | None = None
    deliveries: Deliveries = field(default_factory=Deliveries)
    tally: Tally = field(default_factory=Tally)
    end: int = 0  # the offset after its last line, once closed
    cursor: FileCursor | None = None  # the file's cursor once this cycle is delivered, once closed
    resolved: bool = False  # its failed records, if any, were dealt with

    @property
    def written(self) -> bool:
        """Every record of the read was handed to the producer (the cycle was closed)."""
        return self.cursor is not None

    def failed(self) -> bool:
        """Failed records not yet dealt with, or records to send again or a topic to check first (a
        topic distrusted or suspected)."""
        deliveries = self.deliveries
        return (not self.resolved and bool(deliveries.failures())) or bool(deliveries.distrusted) or bool(deliveries.suspected)

    def settled(self) -> bool:
        return self.written and self.deliveries.reported() == self.tally.produced


class Window:
    """The cycles in flight of one file, oldest first."""

    def __init__(self, limit: int = MAX_IN_FLIGHT) -> None:
        self.limit = limit
        self.path: str | None = None
        self._cycles: deque[Cycle] = deque()

    def __len__(self) -> int:
        return len(self._cycles)

    def __iter__(self) -> Iterator[Cycle]:
        return iter(self._cycles)

    def open(
        self, path: str, start: WriterState, partial: Line | OversizeLine | None = None, deliveries: Deliveries | None = None
    ) -> Cycle:
        """A new cycle of ``path`` from ``start``, its reports counted in ``deliveries`` (a fresh
        :class:`Deliveries` when None); raises ValueError while cycles of another file are in flight."""
        if self._cycles and path != self.path:
            raise ValueError(f"cycles of {self.path} are in flight; {path} must wait until they are committed")
        self.path = path
        cycle = Cycle(start, partial, deliveries if deliveries is not None else Deliveries())
        self._cycles.append(cycle)
        return cycle

    def running(self, persisted: FileCursor) -> FileCursor:
        """The file's cursor once every cycle handed over so far is delivered (``persisted`` when none is)."""
        closed = (cycle.cursor for cycle in reversed(self._cycles) if cycle.cursor is not None)
        return next(closed, persisted)

    def close(self, cycle: Cycle, persisted: FileCursor, end: WriterState, *, size: int, complete: bool) -> FileCursor:
        """Everything of ``cycle`` was handed over and the writer stands at ``end``: the file's cursor
        once the cycle is delivered (the previous cycle's, advanced by this one's tally)."""
        base = self.running(persisted)
        cycle.end = end.offset
        cycle.cursor = base.advanced(
            byte_offset=end.offset,
            last_line_complete=complete,
            seq_state=end.seq,
            lines=cycle.tally.lines,
            dlq_lines=cycle.tally.dlq,
            regressions=len(cycle.tally.regressions),
            first_block=end.first_block,
            last_block=end.last_block,
            size=size,
        )
        return cycle.cursor

    def over_limit(self) -> bool:
        """More cycles are in flight than the window holds: the oldest must be committed first."""
        return len(self._cycles) > self.limit

    def oldest(self) -> Cycle:
        return self._cycles[0]

    def commit(self, persisted: FileCursor, *, head: str, data_topic: str) -> tuple[Cycle, FileCursor]:
        """Take the oldest cycle out (settled, its failures resolved): it and the cursor to persist for
        its file, ``persisted`` moved to the cycle's end with the offsets its data records landed at."""
        cycle = self._cycles[0]
        if not cycle.settled() or cycle.failed() or cycle.cursor is None:
            raise ValueError("only a settled cycle whose failures are resolved can be committed")
        self._cycles.popleft()
        offsets = merge_ranges(persisted.offsets, data_topic, cycle.deliveries.offset_ranges(data_topic))
        return cycle, cycle.cursor.with_changes(head=head, offsets=offsets)

    def rejected(self, cycle: Cycle) -> None:
        """A data line of ``cycle`` was refused for good and replaced by its dead letter: it counts
        as a DLQ line, in the cycle's tally and in its cursor and every later one."""
        cycle.tally.lines -= 1
        cycle.tally.dlq += 1
        later = False
        for other in self._cycles:
            later = later or other is cycle
            if later and other.cursor is not None:
                other.cursor = other.cursor.with_changes(lines=other.cursor.lines - 1, dlq_lines=other.cursor.dlq_lines + 1)
