"""Where a stream of several sidecars stands per table, and finding that place in a node's own files.

Two nodes write the same events for a block in the same order; only ``local_time`` differs, so the
byte offsets differ and the line id (``<table>|<block>|<seq_in_block>``) does not. The active
sidecar writes a :class:`StreamPosition` per table into every transaction that moves the table: the
line id of the last good line it committed, that line's event digest (:func:`event_digest`, the line
without ``local_time``) and the sequencer after it. A sidecar taking over reads the last committed
one and walks its own lines of that block (:func:`find`): the line with that ``seq_in_block`` must be
the same event, and publishing continues right after it with the stream's sequencer. Nothing here
does I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.lineinfo import LineInfo, Rejection
from hyperdata_sidecar.core.records import SEQ_START, SeqState


def event_digest(line: bytes) -> str:
    """The sha256 (hex) of a line as every node writes it: its JSON object without ``local_time``,
    keys sorted; a line that is not a JSON object is hashed as it is (it is never a good line)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return hashlib.sha256(line).hexdigest()
    if isinstance(value, dict):
        value.pop("local_time", None)
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


class StreamPosition(NamedTuple):
    """The stream's last committed good line of one table: its block, ``seq_in_block`` and event
    digest, the sequencer after it (``next_seq`` in ``block``, the regression ``epoch``), and where
    the node that published it read it (``node``, ``source``, ``offset`` of the line: for people)."""

    table: str
    block: int
    seq: int
    next_seq: int
    epoch: int
    event: str
    node: str
    source: str
    offset: int

    @property
    def line_id(self) -> str:
        return f"{self.table}|{self.block}|{self.seq}" + (f"|r{self.epoch}" if self.epoch else "")

    @property
    def order(self) -> tuple[int, int, int]:
        """Where the line is in the stream: a later line has a larger ``(epoch, block, seq)``."""
        return (self.epoch, self.block, self.seq)

    @property
    def seq_state(self) -> SeqState:
        """The sequencer state publishing continues from."""
        return (self.block, self.next_seq, self.epoch)

    def to_record(self) -> dict[str, Any]:
        return {**self._asdict(), "line_id": self.line_id}

    @classmethod
    def from_record(cls, record: Any) -> StreamPosition | None:
        """The position in a record of the stream topic, or None for one this version cannot read."""
        if not isinstance(record, dict):
            return None
        try:
            position = cls(**{name: record[name] for name in cls._fields})
        except (KeyError, TypeError):
            return None
        ints: tuple[object, ...] = (position.block, position.seq, position.next_seq, position.epoch, position.offset)
        texts: tuple[object, ...] = (position.table, position.event, position.node, position.source)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in ints):
            return None
        if not all(isinstance(t, str) for t in texts) or position.next_seq <= position.seq:
            return None
        return position


def position_after(
    table: str, seq: SeqState, line: bytes, info: LineInfo, *, node: str, source: str, offset: int
) -> StreamPosition:
    """The position after ``line`` (the last good line of a commit, at ``offset`` in ``source``),
    the sequencer being at ``seq`` after it."""
    block, next_seq, epoch = seq
    if block != info.block_number:
        raise ValueError(f"the sequencer is in block {block}, the last line in block {info.block_number}")
    return StreamPosition(table, block, next_seq - info.n_events, next_seq, epoch, event_digest(line), node, source, offset)


class Found(NamedTuple):
    """The stream's line in this node's files: publishing continues at ``offset`` of ``path``."""

    path: str
    offset: int


class Disagreement(NamedTuple):
    """This node's files do not hold the stream's line: where they part, and how."""

    path: str
    offset: int
    reason: str


class WalkedLine(NamedTuple):
    """One line of this node's files, in file order: where it is, its inspection, its bytes."""

    path: str
    start: int
    end: int
    info: LineInfo | Rejection
    line: bytes


def find(position: StreamPosition, lines: Iterable[WalkedLine]) -> Found | Disagreement | None:
    """Walk this node's lines from the first line of ``position.block`` (or any earlier line) and
    find the stream's line: the good line of that block whose ``seq_in_block`` is ``position.seq``.

    Found: it is the same event (same digest) and takes the events the stream counted; publishing
    continues after it. Disagreement: the line there is another event, or the block holds other
    events (the count skips over the line's seq, or the block ends first). None: the lines end
    before the walk could decide (this node has not written that far yet).
    """
    seq = 0
    for walked in lines:
        info = walked.info
        if isinstance(info, Rejection) or info.block_number < position.block:
            continue
        if info.block_number > position.block:
            return Disagreement(
                walked.path,
                walked.start,
                f"block {position.block} ends here after {seq} events; the stream's line {position.line_id} is event {position.seq}",
            )
        if seq == position.seq:
            if event_digest(walked.line) != position.event:
                return Disagreement(walked.path, walked.start, f"another event than the stream's line {position.line_id}")
            if seq + info.n_events != position.next_seq:
                return Disagreement(
                    walked.path,
                    walked.start,
                    f"{info.n_events} events, the stream's line {position.line_id} had {position.next_seq - seq}",
                )
            return Found(walked.path, walked.end)
        seq += info.n_events
        if seq > position.seq:
            return Disagreement(
                walked.path,
                walked.start,
                f"no line of block {position.block} starts at event {position.seq} here (this one spans it)",
            )
    return None


class Following(NamedTuple):
    """A standby's look at the stream's newest line of one table in its own node's files: ``ready``
    (the same event: a takeover continues at ``offset`` of ``path``), ``not_written`` (this node has
    not written that far yet), ``disagree`` (another event there: ``reason``) or ``unreadable``."""

    state: str
    line_id: str
    published_by: str
    at: float
    path: str | None = None
    offset: int | None = None
    reason: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"


def following(position: StreamPosition, found: Found | Disagreement | None, at: float) -> Following:
    """What :func:`find` (through ``position_search.locate``) said of ``position``, for the status."""
    if isinstance(found, Found):
        return Following("ready", position.line_id, position.node, at, found.path, found.offset)
    if isinstance(found, Disagreement):
        return Following("disagree", position.line_id, position.node, at, found.path, found.offset, found.reason)
    return Following("not_written", position.line_id, position.node, at)


def resume_cursors(
    stored: Mapping[str, FileCursor], files: Sequence[str], found: Found, position: StreamPosition
) -> dict[str, FileCursor]:
    """This node's cursors of one table once it takes the stream over at ``found`` (``files``: the
    table's hour files on disk, in order). Every earlier file it was publishing or never adopted is
    skipped (the stream's other node published its lines); the found file continues right after the
    stream's line with the stream's sequencer; finished files and later ones keep what they have."""
    cursors = dict(stored)
    for path in files:
        if path == found.path:
            break
        cursor = cursors.get(path)
        if cursor is None:
            cursors[path] = FileCursor.adopted(path, SEQ_START).moved_to(CursorStage.SKIPPED)
        elif cursor.stage is CursorStage.TAILING:
            cursors[path] = cursor.moved_to(CursorStage.SKIPPED)
    current = cursors.get(found.path)
    if current is None or current.stage is CursorStage.TAILING:
        block, next_seq, epoch = position.seq_state
        base = current if current is not None else FileCursor.adopted(found.path, position.seq_state)
        cursors[found.path] = base.with_changes(
            byte_offset=found.offset, last_line_complete=True, seq_block=block, seq_next=next_seq, seq_epoch=epoch
        )
    return cursors
