"""The node snapshots of a watch tree and their backup copies: what the sidecar owes an event for.

Read apart from the sidecar's watcher; only the naming (``SnapshotFile``) comes from the core. A
snapshot is ``periodic_abci_states/<YYYYMMDD>/<height>.rmp``, a regular file in a real directory
(symlinks are not followed, as by the sidecar). It is *complete*, and owed an event, once it is not
empty and has not changed (mtime) for ``grace_s``: the sidecar's SNAPSHOT_GRACE_MS, seen from
outside.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR, SnapshotFile

_READ_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class SnapshotCopy:
    """A snapshot's bytes as found on disk (in the watch tree or a backup dir): size and sha256."""

    relpath: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ExpectedSnapshot:
    """One snapshot file of the tree: what it holds and whether it is owed an event yet."""

    file: SnapshotFile
    size: int
    sha256: str
    complete: bool

    @property
    def relpath(self) -> str:
        return self.file.relpath


def snapshot_files(watch_dir: Path) -> list[SnapshotFile]:
    """The snapshots under ``watch_dir``, lowest height first; other names and symlinks are left out."""
    found = []
    try:
        dates = list(os.scandir(watch_dir / SNAPSHOT_DIR))
    except FileNotFoundError:
        return []
    for date in dates:
        if not date.is_dir(follow_symlinks=False):
            continue
        try:
            entries = list(os.scandir(date.path))
        except FileNotFoundError:
            continue
        for entry in entries:
            parsed = SnapshotFile.parse(f"{SNAPSHOT_DIR}/{date.name}/{entry.name}")
            if parsed is not None and entry.is_file(follow_symlinks=False):
                found.append(parsed)
    return sorted(found)


def read_snapshots(watch_dir: Path, *, grace_s: float = 0.0, now: float | None = None) -> list[ExpectedSnapshot]:
    """Every snapshot of the tree, hashed (blocking: a real one is ~1.3 GB), lowest height first.
    ``now``: the wall clock the grace is measured against (default: the current time)."""
    now = time.time() if now is None else now
    out = []
    for snapshot in snapshot_files(watch_dir):
        try:
            modified = (watch_dir / snapshot.relpath).stat().st_mtime
        except FileNotFoundError:
            continue  # pruned while the tree was read
        copy = read_copy(watch_dir, snapshot.relpath)
        if copy is None:
            continue
        complete = copy.size > 0 and now - modified >= grace_s
        out.append(ExpectedSnapshot(snapshot, copy.size, copy.sha256, complete))
    return out


def read_copy(root: Path, relpath: str) -> SnapshotCopy | None:
    """Size and sha256 of ``root/relpath`` (blocking), or None if it does not exist."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open(root / relpath, "rb") as source:
            while block := source.read(_READ_BYTES):
                digest.update(block)
                size += len(block)
    except FileNotFoundError:
        return None
    return SnapshotCopy(relpath, size, digest.hexdigest())
