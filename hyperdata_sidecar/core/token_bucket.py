"""The bandwidth limit of a backup upload: a token bucket that says how long to wait before sending.

Pure: the caller passes the clock's reading and does the waiting, so the pacing is tested with
made-up times. Tokens are bytes, refilled at ``rate`` per second up to ``burst``. A send larger than
what the bucket holds is allowed and leaves it in debt, which later sends wait off: the long-run
rate never exceeds ``rate`` whatever the sizes sent.
"""

from __future__ import annotations


class TokenBucket:
    """``rate`` bytes a second on average, at most ``burst`` bytes at once after a quiet time."""

    __slots__ = ("rate", "burst", "_tokens", "_at")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError(f"a token bucket needs a positive rate and burst (got {rate}, {burst})")
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._at = now

    def take(self, nbytes: int, now: float) -> float:
        """Spend ``nbytes`` at time ``now``; returns the seconds to wait before sending them."""
        self._refill(now)
        self._tokens -= nbytes
        return -self._tokens / self.rate if self._tokens < 0 else 0.0

    def _refill(self, now: float) -> None:
        # A clock read earlier than the last one (two readers, a coarse clock) adds nothing.
        if now > self._at:
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
