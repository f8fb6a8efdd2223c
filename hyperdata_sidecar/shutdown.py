"""Whether the worker is stopping, and the one sleep that wakes when it does.

Every back-off of the sidecar (broker connects, holds, refused table writes, publish-once retries)
sleeps through :meth:`Shutdown.pause`, so a stopping worker never waits out a long back-off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

STOP_CHECK_S = 0.5  # how soon a pause notices that the worker is stopping


class Shutdown:
    """``requested``: a callable that says whether the worker is stopping (Faust's ``app.should_stop``)."""

    def __init__(self, requested: Callable[[], bool]) -> None:
        self._requested = requested

    @property
    def stopping(self) -> bool:
        """True once the worker is shutting down."""
        return bool(self._requested())

    async def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the worker stops; False if it is stopping."""
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:  # noqa: ASYNC110 - `stopping` is a flag, not an Event
            await asyncio.sleep(min(left, STOP_CHECK_S))
        return not self.stopping
