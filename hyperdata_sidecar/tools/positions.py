"""Positions the sidecar announces in the data topics, checked against what the partitions hold. Pure.

Two announcements carry positions:

- **A snapshot's resume offsets.** ``offsets[topic][partition]`` of the snapshot at height H is
  where a consumer that loaded the snapshot starts reading the partition: every record before it
  has a block <= H, every record at or after it a block > H. At-least-once duplicates aside: after
  a crash the sidecar publishes its unacknowledged window again, so a partition may step back in
  block order once, and the resume offset may lie at either of the two places where the blocks
  cross H (the sidecar's search finds one of them). So a record before the offset with a block
  above H is allowed when the same line (its ``line_id``) comes again at or after the offset (the
  consumer reads that copy), and a record at or after it with a block <= H when the same line came
  before it (the snapshot holds it; the consumer drops the copy by its line id).
- **A seal's offset ranges.** ``offsets[topic][partition] = [first, last]``: the records at first
  and at last are lines of the sealed file, and every line of the file in that partition has a
  copy within the range (a copy published again after a crash may lie outside).

A record's block is the second field of its ``line_id`` header, ``<table>|<block>|<seq>`` with
optional suffixes (``|r<epoch>``, ``|late-<date>-<hour>``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_NO_BLOCK_LOW = -1  # stands in for a record without a readable block in the running max
_NO_BLOCK_HIGH = 1 << 63  # ... and in the running min: such a record is never misplaced


def block_of(line_id: bytes | None) -> int | None:
    """The block number in a ``line_id`` (``<table>|<block>|<seq>...``), or None if it has none."""
    if line_id is None:
        return None
    fields = line_id.split(b"|", 2)
    if len(fields) < 3 or not fields[1].isdigit():
        return None
    return int(fields[1])


@dataclass(frozen=True)
class Misplaced:
    """A record on the wrong side of a resume offset: ``before`` it with a block above the height,
    or at or after it with a block at or below."""

    offset: int
    block: int
    line_id: bytes
    before: bool

    def describe(self, height: int) -> str:
        side, relation = ("before", ">") if self.before else ("at or after", "<=")
        return f"offset {self.offset} ({side} it) has block {self.block} {relation} {height}: {self.line_id.decode(errors='replace')}"


class PartitionBlocks:
    """One partition's records as (offset, block, line_id), in offset order, indexed for checking
    any number of resume offsets against it."""

    def __init__(self, records: Iterable[tuple[int, int | None, bytes | None]]) -> None:
        self.offsets: list[int] = []
        self.blocks: list[int | None] = []
        self.line_ids: list[bytes | None] = []
        for offset, block, line_id in records:
            self.offsets.append(offset)
            self.blocks.append(block)
            self.line_ids.append(line_id)
        # Running max of the blocks before each index and min from each index on: most partitions
        # of most snapshots need no scan at all.
        self._max_before = [_NO_BLOCK_LOW]
        for block in self.blocks:
            self._max_before.append(max(self._max_before[-1], _NO_BLOCK_LOW if block is None else block))
        self._min_from = [_NO_BLOCK_HIGH]
        for block in reversed(self.blocks):
            self._min_from.append(min(self._min_from[-1], _NO_BLOCK_HIGH if block is None else block))
        self._min_from.reverse()

    def misplaced(self, height: int, resume: int, *, partial: bool = False) -> list[Misplaced]:
        """The records on the wrong side of ``resume`` for the snapshot at ``height``, duplicates
        aside (module docstring), in offset order. ``partial``: the event names this partition's
        table as quiet, so its offset is the partition's end at that moment and lines at or below
        the height may still come after it; only the records before it are checked."""
        cut = bisect.bisect_left(self.offsets, resume)
        early = self._max_before[cut] > height
        late = not partial and self._min_from[cut] <= height
        if not early and not late:
            return []
        before_ids = set(self.line_ids[:cut]) if late else set()
        after_ids = set(self.line_ids[cut:]) if early else set()
        out = []
        for i, (offset, block, line_id) in enumerate(zip(self.offsets, self.blocks, self.line_ids, strict=True)):
            if block is None or line_id is None:
                continue
            if i < cut and block > height and line_id not in after_ids:
                out.append(Misplaced(offset, block, line_id, before=True))
            elif i >= cut and late and block <= height and line_id not in before_ids:
                out.append(Misplaced(offset, block, line_id, before=False))
        return out


def misplaced_records(
    height: int, resume: int, records: Sequence[tuple[int, int | None, bytes | None]], *, partial: bool = False
) -> list[Misplaced]:
    """The records of one partition, (offset, block, line_id) in offset order, on the wrong side of
    ``resume`` for the snapshot at ``height`` (see :meth:`PartitionBlocks.misplaced`)."""
    return PartitionBlocks(records).misplaced(height, resume, partial=partial)


def range_problems(
    path: str, first: int, last: int, records: Sequence[tuple[int, str | None, int | None]], *, every_line: bool = True
) -> list[str]:
    """What is wrong with a seal's claim that ``[first, last]`` of one partition holds the lines of
    ``path`` there. ``records``: the partition's records as (offset, source, line offset), in offset
    order. Empty when the records at first and at last are lines of ``path`` and (``every_line``)
    every line of ``path`` in the partition has a copy within the range. An earlier revision's
    seal is checked without ``every_line``: lines appended after it lie beyond its range."""
    if first > last:
        return [f"range [{first}, {last}] ends before it begins"]
    at = {offset: (source, line_offset) for offset, source, line_offset in records}
    out = []
    for name, offset in (("first", first), ("last", last)):
        if offset not in at:
            out.append(f"{name} offset {offset} holds no record")
        elif at[offset][0] != path:
            source, line_offset = at[offset]
            out.append(f"{name} offset {offset} holds a line of {source}@{line_offset}, not of this file")
    if not every_line:
        return out
    mine = [(offset, line_offset) for offset, source, line_offset in records if source == path]
    inside = {line_offset for offset, line_offset in mine if first <= offset <= last}
    outside = [(offset, line_offset) for offset, line_offset in mine if line_offset not in inside]
    if outside:
        offset, line_offset = outside[0]
        out.append(
            f"{len(outside)} record(s) of the file outside [{first}, {last}] with no copy inside, "
            f"e.g. offset {offset} (line @{line_offset})"
        )
    return out
