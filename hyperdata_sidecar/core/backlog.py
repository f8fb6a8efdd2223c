"""How far behind a table is and when it will be live, without I/O.

A table's *backlog* is what is on disk and not yet published: the bytes past the published offset of
the file being read (and of a sealed file reopened by a late append) plus every later hour file
already on disk, whole. The tailer measures it from the sizes it already has (its reads' ``stat``
and the directory scan), never by reading files. :class:`BacklogMeter` keeps a minute of samples and
derives how fast the backlog drains and when it reaches zero at that rate; a backlog that does not
shrink while it is more than a few seconds of writes (or spans several files) is *falling behind*.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

RATE_WINDOW_S = 60.0  # the drain rate is measured over this much time
LIVE_BYTES = 64 * 1024 * 1024  # a backlog this small, in at most one file, counts as live (a few seconds of the node's writes)


class Backlog(NamedTuple):
    """Bytes and files of a table on disk and not yet published."""

    bytes: int
    files: int


def backlog_of(files: list[tuple[int, int]]) -> Backlog:
    """The backlog of a table whose files still to publish are ``(size on disk, published offset)``
    (0 for a file not read yet)."""
    pending = [size - offset for size, offset in files if size > offset]
    return Backlog(sum(pending), len(pending))


class Estimate(NamedTuple):
    """A table's backlog now, the rate it drained at over the last minute (bytes per second, negative
    while it grows; None until a minute's samples span some time), and the seconds to live at that
    rate (0 when live, None while it does not shrink)."""

    backlog: Backlog
    drain_bytes_per_s: float | None
    eta_s: float | None
    falling_behind: bool


class BacklogMeter:
    """Samples of one table's backlog over the last :data:`RATE_WINDOW_S`."""

    def __init__(self, window_s: float = RATE_WINDOW_S, live_bytes: int = LIVE_BYTES) -> None:
        self.window_s = window_s
        self.live_bytes = live_bytes
        self._samples: deque[tuple[float, Backlog]] = deque()

    def sample(self, now: float, backlog: Backlog) -> Estimate:
        """Record ``backlog`` at ``now`` (seconds, any monotonic clock) and estimate from the window."""
        self._samples.append((now, backlog))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window_s:
            self._samples.popleft()
        return self.estimate()

    def estimate(self) -> Estimate:
        if not self._samples:
            return Estimate(Backlog(0, 0), None, 0.0, False)
        first_at, first = self._samples[0]
        now, backlog = self._samples[-1]
        span = now - first_at
        rate = (first.bytes - backlog.bytes) / span if span > 0 else None
        if backlog.bytes <= self.live_bytes and backlog.files <= 1:
            return Estimate(backlog, rate, 0.0, False)
        if rate is None:
            return Estimate(backlog, None, None, False)
        if rate <= 0:
            return Estimate(backlog, rate, None, span >= self.window_s / 2)
        return Estimate(backlog, rate, backlog.bytes / rate, False)
