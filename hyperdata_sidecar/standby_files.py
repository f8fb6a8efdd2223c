"""STREAM_ID: a standby seals and backs up its own node's finished hour files.

While this sidecar stands by, each look (:meth:`StandbyFiles.tick`, once a second) picks the
oldest finished file of its node that has no seal recorded
(:func:`~hyperdata_sidecar.core.standby_seal.files_to_seal`), hashes up to :data:`HASH_BUDGET_BYTES`
of it in a thread (a large file takes several looks), and once the whole file is read hands its
standby seal to the seal and backup agents (:meth:`~hyperdata_sidecar.rotations.Rotations.rotate_standby`):
the seal agent keeps it in ``sidecar-seals`` (``"standby": true``), the backup agent backs the
file up. Nothing is published. The first look after a start hands the standby seals whose backup
is not done to the agents again, as a start does for an active's finalized files. A file that grew
after its standby seal (a late append) is hashed and sealed again, its next revision, and backed up
again (the backup agent copies a later revision).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backup_status import status_of
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.standby_seal import OnDisk, files_to_seal, first_good_block, next_standby_revision, standby_manifest
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.digest import RunningDigest, open_regular
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.rotations import Rotations
from hyperdata_sidecar.scanner import table_hour_files

HASH_BUDGET_BYTES = 32 * 1024 * 1024  # hashed per look (once a second): ~1.6x the node's ~20 MB/s
EDGE_BYTES = 1024 * 1024  # where the first and last good lines are looked for, at each end of a file
UNREADABLE_WAIT_S = 60.0  # a file that could not be read is looked at again after this


@dataclass
class _Hashing:
    """One file being read: its sha256 over ``[0, size)``, as far as read."""

    path: str
    size: int
    revision: int
    digest: RunningDigest = field(default_factory=RunningDigest)

    def advance(self, watch_dir: Path, budget: int) -> bool:
        """Blocking: read on for at most ``budget`` bytes; True once the whole file is read.
        Raises ``OSError`` if it cannot be read, ``EOFError`` if it is now shorter."""
        self.digest.catch_up(watch_dir / self.path, self.size, budget)
        return self.digest.upto >= self.size


def _edge_blocks(watch_dir: Path, path: str, size: int) -> tuple[int | None, int | None]:
    """Blocking: the blocks of the first good line in the file's first MiB and of the last good
    line in its last MiB (complete lines only)."""
    table = path.split("/", 1)[0]
    with open_regular(watch_dir / path) as f:
        head = f.read(min(size, EDGE_BYTES))
        f.seek(max(0, size - EDGE_BYTES))
        tail = f.read(min(size, EDGE_BYTES))
    first = first_good_block(table, head.split(b"\n")[:-1])
    tail_lines = tail.split(b"\n")[:-1]
    if size > EDGE_BYTES:
        tail_lines = tail_lines[1:]  # the first may be the end of a line cut by the window
    return first, first_good_block(table, tail_lines[::-1])


class StandbyFiles:
    """Seals and backs up this node's finished files while the sidecar stands by (see the module)."""

    def __init__(
        self, settings: Settings, seals: Mapping[str, Any], backups: Mapping[str, Any], rotations: Rotations, log: EventLog
    ) -> None:
        self.settings = settings
        self.seals = seals
        self.backups = backups
        self.rotations = rotations
        self.log = log
        self._hashing: _Hashing | None = None
        self._handed: dict[str, int] = {}  # path -> the size handed to the agents by this process
        self._unreadable: dict[str, float] = {}  # path -> when it could not be read
        self._resent = False

    async def tick(self) -> None:
        """One look: hash on (at most :data:`HASH_BUDGET_BYTES`); a file read whole is handed over."""
        if not self._resent:
            await self._resend_unfinished_backups()
            self._resent = True
        if self._hashing is None:
            self._hashing = await asyncio.to_thread(self._next_file)
            if self._hashing is None:
                return
        hashing, watch = self._hashing, self.settings.watch_dir
        try:
            if not await asyncio.to_thread(hashing.advance, watch, HASH_BUDGET_BYTES):
                return
            blocks = await asyncio.to_thread(_edge_blocks, watch, hashing.path, hashing.size)
        except (OSError, EOFError) as exc:
            self._hashing = None
            self._unreadable[hashing.path] = time.monotonic()
            self.log.limited(
                logging.WARNING,
                "standby_seal_failed",
                hashing.path,
                60.0,
                path=hashing.path,
                error=f"{type(exc).__name__}: {exc}",
                retry_in_s=UNREADABLE_WAIT_S,
            )
            return
        manifest = standby_manifest(
            hashing.path,
            size=hashing.size,
            sha256=hashing.digest.hexdigest(),
            blocks=blocks,
            node=self.settings.node_id,
            finalized_at=iso_utc(time.time()),
            revision=hashing.revision,
        )
        await self.rotations.rotate_standby(manifest)
        self._handed[hashing.path] = hashing.size
        self._hashing = None

    def _next_file(self) -> _Hashing | None:
        """Blocking: the oldest file of any table to seal now, or None."""
        now, wall = time.monotonic(), time.time()
        self._unreadable = {p: at for p, at in self._unreadable.items() if now - at < UNREADABLE_WAIT_S}
        passed = frozenset(self._unreadable)
        candidates: list[OnDisk] = []
        for spec in TABLES:
            listed = []
            for path in table_hour_files(self.settings.watch_dir, spec.dir_name):
                try:
                    st = os.stat(self.settings.watch_dir / path, follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing
                listed.append(OnDisk(path, st.st_size, st.st_mtime))
            candidates += files_to_seal(
                listed, self.seals, now=wall, grace_s=self.settings.seal_grace_s, handed=self._handed, passed=passed
            )[:1]
        if not candidates:
            return None
        oldest = min(candidates, key=lambda f: f.modified)
        return _Hashing(oldest.path, oldest.size, next_standby_revision(self.seals.get(oldest.path)))

    async def _resend_unfinished_backups(self) -> None:
        """The standby seals whose backup is not done, handed to the agents again (the seal agent
        skips what is recorded; the backup agent tries again)."""
        for path, record in list(self.seals.items()):
            if record.get("standby") is not True or status_of(self.backups.get(path)).is_done:
                continue
            try:
                manifest = SealManifest.from_record(record)
            except ValueError:
                continue
            self.log.info("rotation_resent", path=path, occasion="standby")
            await self.rotations.rotate_standby(manifest)
