"""Lines per second per table, from periodic samples of the ``lines_published`` counters."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping


class LineRates:
    """A sliding-window rate over counter samples.

    :meth:`observe` records the counters at a moment (the web module samples them once a second);
    :meth:`per_second` is the increase between the oldest and newest sample in the window divided
    by the time between them, so a table that stops publishing drops to 0 within one window.
    """

    def __init__(self, window_s: float = 10.0) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._samples: deque[tuple[float, dict[str, int]]] = deque()

    def observe(self, now: float, totals: Mapping[str, int]) -> None:
        """Record ``totals`` (table → lines published so far) at monotonic time ``now``."""
        self._samples.append((now, dict(totals)))
        # Keep one sample at or before the window's start, so the rate always spans the full window.
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
            self._samples.popleft()

    def per_second(self, table: str) -> float | None:
        """Lines/s of ``table`` over the window; None until two samples exist.

        A counter that went down (a restarted process) restarts the rate from zero rather than
        reporting a negative rate.
        """
        if len(self._samples) < 2:
            return None
        (first_at, first), (last_at, last) = self._samples[0], self._samples[-1]
        if last_at <= first_at:
            return None
        increase = last.get(table, 0) - first.get(table, 0)
        return max(0, increase) / (last_at - first_at)
