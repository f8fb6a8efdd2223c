"""The sha256 of an hour file, kept while tailing so a seal never waits for a full re-read."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO, Protocol

SLICE_BYTES = 8 * 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: Path) -> BinaryIO:
    """Blocking: ``path`` opened for reading, only if it is a regular file.

    A symlink, pipe or device swapped in for an hour file is refused with ``OSError`` (a link is
    not followed; a pipe is not waited on, because the open does not block).
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Hasher(Protocol):
    """A running sha256: hashlib's, or the compiled engine's ``Sha256``."""

    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


class RunningDigest:
    """sha256 over a file's bytes ``[0, upto)``.

    The tailer feeds every chunk it reads; a chunk only counts when it starts exactly at ``upto``.
    After a restart the digest starts at 0 while the tailer resumes mid-file, so :meth:`catch_up`
    re-reads the gap from disk (in slices, off the event loop) until the two meet again.
    ``hasher``: hashlib's sha256 unless given (the compiled engine's, which its reads update).
    """

    def __init__(self, hasher: Hasher | None = None) -> None:
        self._hash: Hasher = hashlib.sha256() if hasher is None else hasher
        self.upto = 0

    def feed(self, offset: int, data: bytes) -> None:
        if offset == self.upto and data:
            self._hash.update(data)
            self.upto += len(data)

    def hasher_at(self, offset: int) -> Hasher | None:
        """The hasher, when a read at ``offset`` counts (it starts at :attr:`upto`); else None.
        Whoever reads then hashes the bytes into it and reports them with :meth:`hashed`."""
        return self._hash if offset == self.upto else None

    def hashed(self, length: int) -> None:
        """``length`` bytes read at :attr:`upto` were hashed into :meth:`hasher_at`'s hasher."""
        self.upto += length

    def catch_up(self, path: Path, end: int, budget: int | None = None) -> None:
        """Blocking: hash ``path`` from ``upto`` towards ``end`` (at most ``budget`` bytes).

        Raises ``OSError`` if the file cannot be read, ``EOFError`` if it is shorter than ``end``.
        """
        stop = end if budget is None else min(end, self.upto + budget)
        with open_regular(path) as f:
            f.seek(self.upto)
            while self.upto < stop:
                data = f.read(min(SLICE_BYTES, stop - self.upto))
                if not data:
                    raise EOFError(f"{path} ended at {self.upto}, expected {end} bytes")
                self._hash.update(data)
                self.upto += len(data)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def read_chunk(path: Path, offset: int, length: int, digest: RunningDigest) -> bytes:
    """Blocking: read up to ``length`` bytes at ``offset`` and feed them to ``digest``."""
    with open_regular(path) as f:
        f.seek(offset)
        data = f.read(length)
    digest.feed(offset, data)
    return data


class ReadChunk(Protocol):
    """The bytes of one read: ``bytes`` (:class:`PythonReads`), or the compiled engine's ``Chunk``
    (``engines.native.NativeReads``), which only its own line engine is handed, without a copy."""

    def __len__(self) -> int: ...


class ChunkReads(Protocol):
    """How a tailer reads an hour file's new bytes and keeps its digest (both blocking)."""

    def digest(self) -> RunningDigest:
        """A new digest of a file, at byte 0."""

    def read(self, path: Path, offset: int, length: int, digest: RunningDigest) -> ReadChunk:
        """Up to ``length`` bytes at ``offset`` (fewer at the end), fed to ``digest`` when they count."""


class PythonReads:
    """The standard library's reads and hashlib's sha256, in two passes over a read."""

    def digest(self) -> RunningDigest:
        return RunningDigest()

    def read(self, path: Path, offset: int, length: int, digest: RunningDigest) -> ReadChunk:
        return read_chunk(path, offset, length, digest)


PYTHON_READS = PythonReads()


def read_head(path: Path, length: int) -> bytes:
    """Blocking: the first ``length`` bytes of ``path`` (fewer if it is shorter)."""
    with open_regular(path) as f:
        return f.read(length)


def last_line_start(path: Path, size: int, window: int) -> int:
    """Blocking: offset just past the last newline within the final ``window`` bytes before ``size``.

    Returns 0 when there is none (the whole window is one line still being written).
    """
    start = max(0, size - window)
    with open_regular(path) as f:
        f.seek(start)
        data = f.read(size - start)
    newline = data.rfind(b"\n")
    return 0 if newline < 0 else start + newline + 1


def read_range(path: Path, start: int, end: int) -> bytes:
    """Blocking: bytes ``[start, end)`` of ``path``; raises ``EOFError`` if the file is shorter."""
    with open_regular(path) as f:
        f.seek(start)
        data = f.read(end - start)
    if len(data) != end - start:
        raise EOFError(f"{path} ended at {start + len(data)}, expected {end} bytes")
    return data
