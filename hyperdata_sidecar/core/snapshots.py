"""The node's full-state snapshots and where a consumer that loaded one resumes in the data topics.

A node writes ``periodic_abci_states/<YYYYMMDD>/<height>.rmp`` every ~10k blocks. For a snapshot at
height H, the resume offset of a data-topic partition is where a consumer that loaded the snapshot
starts reading it: every record before it has block_number <= H, every record at or after it
block_number > H. :class:`BlockIndex` learns, from the producer's delivery reports, where each block
starts in each partition, and answers that question without reading Kafka back.
"""

from __future__ import annotations

import datetime
import re
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from typing import NamedTuple

SNAPSHOT_DIR = "periodic_abci_states"
_HEIGHT = re.compile(r"(0|[1-9][0-9]{0,18})\.rmp")
_DATE = re.compile(r"[0-9]{8}")


class SnapshotFile(NamedTuple):
    """One snapshot file: its height and its date directory."""

    height: int
    date: str

    @property
    def relpath(self) -> str:
        return f"{SNAPSHOT_DIR}/{self.date}/{self.height}.rmp"

    @classmethod
    def parse(cls, relpath: str) -> SnapshotFile | None:
        """The snapshot at ``periodic_abci_states/<YYYYMMDD>/<height>.rmp`` (a calendar date, a decimal
        height without leading zeros), or None for any other path."""
        parts = relpath.split("/")
        if len(parts) != 3 or parts[0] != SNAPSHOT_DIR or _DATE.fullmatch(parts[1]) is None:
            return None
        match = _HEIGHT.fullmatch(parts[2])
        if match is None:
            return None
        try:
            datetime.date(int(parts[1][:4]), int(parts[1][4:6]), int(parts[1][6:]))
        except ValueError:
            return None
        return cls(int(match.group(1)), parts[1])


def is_complete(*, size: int, stable_since: float, now: float, grace_s: float) -> bool:
    """A snapshot is complete once its size (non-zero) has not changed for ``grace_s`` seconds."""
    return size > 0 and now - stable_since >= grace_s


class PartitionBlocks:
    """Where each block starts in one partition, in block order, and the partition's last offset seen.

    Blocks are recorded as they are reported delivered: the first offset of each block the
    partition received, the lowest first. A block at or below the last recorded one (a block that
    spans two cycles, or a chain regression) keeps its first recording.
    """

    __slots__ = ("blocks", "offsets", "last_offset")

    def __init__(self) -> None:
        self.blocks = array("q")
        self.offsets = array("q")
        self.last_offset = -1

    def record(self, block: int, first_offset: int, last_offset: int) -> None:
        if not self.blocks or block > self.blocks[-1]:
            self.blocks.append(block)
            self.offsets.append(first_offset)
        self.last_offset = max(self.last_offset, last_offset)

    def resume_offset(self, height: int) -> int | None:
        """The first offset of the first block above ``height``, or None when none was recorded."""
        index = bisect_right(self.blocks, height)
        return self.offsets[index] if index < len(self.blocks) else None

    def forget_through(self, height: int) -> None:
        """Drop the blocks below ``height`` but the last of them (memory stays bounded); heights from
        ``height`` on are answered as before."""
        keep = max(0, bisect_right(self.blocks, height) - 1)
        if keep:
            del self.blocks[:keep]
            del self.offsets[:keep]


class Resume(NamedTuple):
    """The resume offsets of a snapshot: ``offsets[topic][partition]``, and the partitions that had
    no record above the height (their offset is just past their last record: ``quiet``)."""

    offsets: dict[str, dict[int, int]]
    quiet: list[tuple[str, int]]


class BlockIndex:
    """:class:`PartitionBlocks` for every data-topic partition the sidecar writes, since this
    process started.

    :meth:`seed` gives each partition its end offset at start, before the sidecar produced anything;
    :meth:`covers` says whether the index alone can answer for a height: only if no record above
    it can have been published before the process started.
    """

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], PartitionBlocks] = {}
        self._first_block: dict[str, int] = {}

    def seed(self, topic: str, partition: int, end_offset: int) -> None:
        """``partition`` of ``topic`` ended at ``end_offset`` (its next offset) when the process started."""
        self._blocks(topic, partition).last_offset = max(self._blocks(topic, partition).last_offset, end_offset - 1)

    def record(self, topic: str, partition: int, block: int, first_offset: int, last_offset: int) -> None:
        """``partition`` of ``topic`` holds records of ``block`` from ``first_offset`` to ``last_offset``."""
        self._first_block.setdefault(topic, block)
        self._blocks(topic, partition).record(block, first_offset, last_offset)

    def covers(self, topic: str, height: int) -> bool:
        """True when every record of ``topic`` above ``height`` came after the process started, so
        :meth:`resume` answers from the index: the first block recorded is at most ``height + 1``."""
        first = self._first_block.get(topic)
        return first is not None and first <= height + 1

    def resume(self, height: int, partitions: Iterable[tuple[str, int]]) -> Resume:
        """The resume offsets of a snapshot at ``height`` for ``partitions``.

        Exact when :meth:`covers` holds for their topics and every record the table streams hold at
        or below ``height`` was reported delivered (the caller's conditions): a partition without a
        block above it resumes just past its last record (its end at start when it got none since).
        """
        offsets: dict[str, dict[int, int]] = {}
        quiet: list[tuple[str, int]] = []
        for topic, partition in partitions:
            blocks = self._partitions.get((topic, partition))
            start = blocks.resume_offset(height) if blocks is not None else None
            if start is None:
                quiet.append((topic, partition))
                start = blocks.last_offset + 1 if blocks is not None else 0
            offsets.setdefault(topic, {})[partition] = start
        return Resume(offsets, quiet)

    def forget_through(self, height: int) -> None:
        for blocks in self._partitions.values():
            blocks.forget_through(height)

    def __len__(self) -> int:
        """How many (partition, block) starts the index holds."""
        return sum(len(blocks.blocks) for blocks in self._partitions.values())

    def _blocks(self, topic: str, partition: int) -> PartitionBlocks:
        blocks = self._partitions.get((topic, partition))
        if blocks is None:
            blocks = self._partitions[(topic, partition)] = PartitionBlocks()
        return blocks
