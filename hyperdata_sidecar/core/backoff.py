"""The one back-off of the sidecar: waits that double from a first one up to a cap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable


class Backoff:
    """Doubling waits: ``first``, ``2 * first``, ... up to ``cap``. ``delay`` is the next wait (what
    a log line announces as ``retry_in_s``), ``tries`` how many waits were taken."""

    __slots__ = ("cap", "delay", "tries")

    def __init__(self, first: float, cap: float) -> None:
        self.delay = first
        self.cap = cap
        self.tries = 0

    def step(self) -> float:
        """The next wait; the one after it is twice as long (at most ``cap``)."""
        wait = self.delay
        self.delay = min(self.delay * 2, self.cap)
        self.tries += 1
        return wait

    async def wait(self, pause: Callable[[float], Awaitable[bool]]) -> bool:
        """Take the next wait with ``pause`` (the shell's sleep that wakes when the worker stops);
        False when the worker is stopping."""
        return await pause(self.step())
