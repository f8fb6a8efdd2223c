"""One hour file on disk, as the tailer reads it: position, head fingerprint, digest, restarts.

Every blocking file operation runs in a worker thread (``asyncio.to_thread``); the standard
library's file objects are what those threads use (aiofiles would add a thread hop per call and
nothing else here).
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

from hyperdata_sidecar.digest import PYTHON_READS, ChunkReads, ReadChunk, last_line_start, read_head, read_range

HEAD_BYTES = 64  # enough of the first line (its local_time has ns precision) to tell a replaced file
DIGEST_SLICE = 64 * 1024 * 1024  # digest catch-up per idle poll after a restart


class HourFileReader:
    """Reads one hour file forward from ``position`` and keeps what tells a rewritten file.

    ``head`` is the hex of the file's first bytes as first seen (up to :data:`HEAD_BYTES`); the
    digest covers ``[0, digest.upto)`` and follows the reads once it has caught up with them.
    ``reads``: how the bytes are read and hashed (the compiled engine's reads when the worker runs
    it, see :mod:`hyperdata_sidecar.digest`).
    """

    def __init__(self, path: Path, position: int, head: str, reads: ChunkReads = PYTHON_READS) -> None:
        self.path = path
        self.position = position
        self.head = head
        self.reads = reads
        self.digest = reads.digest()
        self.last_size = -1
        self.last_growth_at = time.monotonic()
        self.changed = False  # the last stat() saw another size than the one before

    def stat(self) -> int | None:
        """The file's size now, or None if it is gone or no longer a regular file (a link, pipe or
        directory in its place is not followed). Notes growth for the finalization grace."""
        try:
            found = os.stat(self.path, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(found.st_mode):
            return None
        size = found.st_size
        self.changed = size != self.last_size
        if self.changed:
            self.last_size, self.last_growth_at = size, time.monotonic()
        return size

    async def rewritten(self, size: int) -> str | None:
        """``"truncated"`` if the file is now shorter than what was read, ``"replaced"`` if its
        first bytes changed, else None (and the head fingerprint grows while the file is short).
        The first bytes are read again only when the last :meth:`stat` saw the size change."""
        if size < self.position:
            return "truncated"
        if not self.changed:
            return None
        head = await asyncio.to_thread(read_head, self.path, HEAD_BYTES)
        if head[: len(self.head) // 2].hex() != self.head:
            return "replaced"
        if len(head) * 2 > len(self.head):
            self.head = head.hex()
        return None

    async def read(self, length: int) -> ReadChunk:
        """Up to ``length`` bytes at the position (fewer at the end of the file); advances past them."""
        chunk = await asyncio.to_thread(self.reads.read, self.path, self.position, length, self.digest)
        self.position += len(chunk)
        return chunk

    async def read_range(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` again (to rebuild the records of a cycle); raises ``EOFError`` if short."""
        return await asyncio.to_thread(read_range, self.path, start, end)

    async def catch_up_digest(self, end: int, budget: int | None = DIGEST_SLICE) -> None:
        """Hash towards ``end`` (at most ``budget`` bytes; all of it when None)."""
        if self.digest.upto < end:
            await asyncio.to_thread(self.digest.catch_up, self.path, end, budget)

    async def last_line_start(self, size: int, window: int) -> int:
        """Offset just past the last newline within the final ``window`` bytes before ``size`` (0 if none)."""
        return await asyncio.to_thread(last_line_start, self.path, size, window)
