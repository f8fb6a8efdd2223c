"""The sha256 of an hour file, kept while tailing so a seal never waits for a full re-read."""

from __future__ import annotations

import hashlib
from pathlib import Path

SLICE_BYTES = 8 * 1024 * 1024


class RunningDigest:
    """sha256 over a file's bytes ``[0, upto)``.

    The tailer feeds every chunk it reads; a chunk only counts when it starts exactly at ``upto``.
    After a restart the digest starts at 0 while the tailer resumes mid-file, so :meth:`catch_up`
    re-reads the gap from disk (in slices, off the event loop) until the two meet again.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.upto = 0

    def feed(self, offset: int, data: bytes) -> None:
        if offset == self.upto and data:
            self._hash.update(data)
            self.upto += len(data)

    def catch_up(self, path: Path, end: int, budget: int | None = None) -> None:
        """Blocking: hash ``path`` from ``upto`` towards ``end`` (at most ``budget`` bytes).

        Raises ``OSError`` if the file cannot be read, ``EOFError`` if it is shorter than ``end``.
        """
        stop = end if budget is None else min(end, self.upto + budget)
        with open(path, "rb") as f:
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
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    digest.feed(offset, data)
    return data


def read_head(path: Path, length: int) -> bytes:
    """Blocking: the first ``length`` bytes of ``path`` (fewer if it is shorter)."""
    with open(path, "rb") as f:
        return f.read(length)


def last_line_start(path: Path, size: int, window: int) -> int:
    """Blocking: offset just past the last newline within the final ``window`` bytes before ``size``.

    Returns 0 when there is none (the whole window is one line still being written).
    """
    start = max(0, size - window)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(size - start)
    newline = data.rfind(b"\n")
    return 0 if newline < 0 else start + newline + 1


def read_range(path: Path, start: int, end: int) -> bytes:
    """Blocking: bytes ``[start, end)`` of ``path``; raises ``EOFError`` if the file is shorter."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    if len(data) != end - start:
        raise EOFError(f"{path} ended at {start + len(data)}, expected {end} bytes")
    return data
