"""The node's full-state snapshots and where a consumer that loaded one resumes in the data topics.

A node writes ``periodic_abci_states/<YYYYMMDD>/<height>.rmp`` every ~10k blocks. For a snapshot at
height H, the resume offset of a data-topic partition is where a consumer that loaded the snapshot
starts reading it: every record before it has block_number <= H, every record at or after it
block_number > H (:func:`resume_offset`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import orjson

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


def resume_offset(height: int, begin: int, end: int, block_at: Callable[[int], int]) -> int:
    """Where a consumer that loaded the snapshot at ``height`` starts reading a partition that holds
    offsets ``[begin, end)``: the first offset whose record's block is above ``height``, or ``end``.

    ``block_at(offset)`` is the block of the record at ``offset``. The sidecar writes a partition
    in block order, so a binary search takes about log2(end - begin) reads. (Lines published again
    after a crash step back in block order once; the offset found is then one of the two places
    where the blocks cross the height, and a consumer starting there misses no line.)
    """
    low, high = begin, end
    while low < high:
        middle = (low + high) // 2
        if block_at(middle) > height:
            high = middle
        else:
            low = middle + 1
    return low


class SnapshotBackup(NamedTuple):
    """A published snapshot as the backup worker copies it (archive only, like an hour file)."""

    path: str
    sha256: str
    size: int
    revision: int = 1  # written once by the node: a snapshot has one revision

    @classmethod
    def of_event(cls, event: dict[str, Any]) -> SnapshotBackup:
        return cls(str(event["path"]), str(event["sha256"]), int(event["size"]))

    def to_json(self) -> bytes:
        return orjson.dumps({"path": self.path, "sha256": self.sha256, "size": self.size})

    @classmethod
    def from_json(cls, data: bytes) -> SnapshotBackup:
        """Raises ValueError if ``data`` is not what :meth:`to_json` writes."""
        try:
            obj = orjson.loads(data)
            return cls(_typed(obj["path"], str), _typed(obj["sha256"], str), _typed(obj["size"], int))
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"not a snapshot backup record: {exc}") from exc


def _typed(value: Any, kind: type) -> Any:
    if type(value) is not kind:
        raise TypeError(f"{value!r} is not {kind.__name__}")
    return value
