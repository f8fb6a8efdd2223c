"""The last hour of each table's lines/s and publish lag, for the status page's charts."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping

SPAN_S = 3600.0
EVERY_S = 15.0

Point = tuple[float, float | None]
"""(epoch seconds, value); the value is None where it was not known (a publish lag before the first line)."""


class History:
    """Samples of the lines-published counters and publish lags over the last ``span_s`` seconds.

    The caller records one sample every ``every_s`` seconds; at most ``span_s / every_s + 1`` are
    kept, whatever it does, so memory stays bounded. The lines/s at a sample is the counter's
    increase since the previous sample divided by the time between them.
    """

    def __init__(self, span_s: float = SPAN_S, every_s: float = EVERY_S) -> None:
        if span_s <= 0 or every_s <= 0:
            raise ValueError(f"span_s and every_s must be positive, got {span_s} and {every_s}")
        self.span_s = span_s
        self._samples: deque[tuple[float, dict[str, int], dict[str, float | None]]] = deque(maxlen=int(span_s // every_s) + 1)

    def record(self, now: float, totals: Mapping[str, int], publish_lags: Mapping[str, float | None]) -> None:
        """Record, at epoch ``now``, the lines published so far and the publish lag of each table."""
        self._samples.append((now, dict(totals), dict(publish_lags)))
        while self._samples[0][0] < now - self.span_s:
            self._samples.popleft()

    def lines_per_s(self, table: str) -> list[Point]:
        """``table``'s lines/s between consecutive samples, at the later one's time, oldest first."""
        samples = list(self._samples)
        return [
            (at, (totals.get(table, 0) - before.get(table, 0)) / (at - before_at))
            for (before_at, before, _), (at, totals, _) in itertools.pairwise(samples)
            if at > before_at
        ]

    def publish_lag(self, table: str) -> list[Point]:
        """``table``'s publish lag at each sample, oldest first."""
        return [(at, lags.get(table)) for at, _totals, lags in self._samples]
