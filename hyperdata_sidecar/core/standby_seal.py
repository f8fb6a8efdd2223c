"""What a stream's standby seals of its own node's files (STREAM_ID), and what such a seal says.

A standby publishes nothing, but its node's files are its own to keep: once a file is finished
(a later file of its table exists and it has not grown for ``SEAL_GRACE_MS``) and has no seal
recorded, the standby hashes it, reads the blocks of its first and last good lines and hands a
seal marked ``standby`` to the seal and backup agents, which keep it in the
sidecar's state (never on the seal topic) and back the file up. A file that grew after its standby
seal (a late append) is sealed again, the next revision, as an active seals a late append.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hyperdata_sidecar.core.finalization import is_finalized
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.seal import SealManifest, revision_of
from hyperdata_sidecar.core.tables import TABLE_BY_DIR


@dataclass(frozen=True)
class OnDisk:
    """An hour file as listed: its path under WATCH_DIR, its size and when it last changed."""

    path: str
    size: int
    modified: float


def files_to_seal(
    table_files: Sequence[OnDisk],
    seals: Mapping[str, Any],
    *,
    now: float,
    grace_s: float,
    handed: Mapping[str, int] | None = None,
    passed: frozenset[str] = frozenset(),
) -> list[OnDisk]:
    """Of one table's files (oldest first), those a standby seals now, oldest first: every file but
    the newest (its node may still append to it) that has not changed for ``grace_s``, has no seal
    recorded in ``seals`` or only a standby's of a smaller size (it grew since), was not handed over
    at its present size (``handed``: path → size) and is not in ``passed`` (put aside for now)."""
    handed = handed or {}
    return [
        f
        for f in table_files[:-1]
        if _unsealed_or_grown(seals.get(f.path), f.size)
        and handed.get(f.path) != f.size
        and f.path not in passed
        and is_finalized(has_later_file=True, last_growth_at=f.modified, now=now, grace_s=grace_s)
    ]


def _unsealed_or_grown(seal: Mapping[str, Any] | None, size: int) -> bool:
    """No seal recorded, or a standby's seal of a smaller file (a published seal is the active's
    business: it watches its files for late appends)."""
    return seal is None or (seal.get("standby") is True and int(seal.get("size", size)) < size)


def next_standby_revision(seal: Mapping[str, Any] | None) -> int:
    """The revision of a standby's next seal of a file: 1, or one more than its standby seal's."""
    return 1 if seal is None else revision_of(seal) + 1


def first_good_block(table: str, lines: Sequence[bytes]) -> int | None:
    """The block of the first of ``lines`` that is a good line of ``table`` (None if none is)."""
    spec = TABLE_BY_DIR[table]
    for line in lines:
        info = inspect_line(spec, line)
        if type(info) is LineInfo:
            return info.block_number
    return None


def standby_manifest(
    path: str,
    *,
    size: int,
    sha256: str,
    blocks: tuple[int | None, int | None],
    node: str,
    finalized_at: str,
    revision: int = 1,
) -> SealManifest:
    """The seal of ``path`` a standby keeps: the whole file's ``size`` and ``sha256``, ``blocks``
    its first and last good lines' blocks (no range unless both are known), no lines counted (a
    standby reads no line but those; counting them would double what sealing costs it). Raises
    ValueError for a path that is not an hour file."""
    hour = HourFile.parse(path)
    if hour is None:
        raise ValueError(f"{path!r} is not an hour file")
    first, last = blocks
    return SealManifest(
        table=hour.table,
        path=path,
        date=hour.date,
        hour=hour.hour,
        block_range=(first, last) if first is not None and last is not None else None,
        size=size,
        sha256=sha256,
        finalized_at=finalized_at,
        lines=0,
        dlq_lines=0,
        node=node,
        revision=revision,
        standby=True,
    )
