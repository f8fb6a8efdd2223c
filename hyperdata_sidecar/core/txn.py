"""When a transaction of the data plane closes, and the phases it goes through (``DELIVERY=exactly_once``).

A transaction carries the records of one or more reads of any tables, their dead letters and the
progress records that cover them. It is closed once it is ``max_s`` old or its reads handed over
``max_bytes``, whichever comes first, and only if something was written in it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TxnPhase(str, enum.Enum):
    """Where the data plane's transaction is."""

    OFF = "off"  # at_least_once, or before the producer is made
    OPEN = "open"  # records go in
    CLOSING = "closing"  # no new read starts; the reads in flight settle and write their progress
    COMMITTING = "committing"  # nothing is written until the commit returns
    ABORTED = "aborted"  # what it held is gone: nothing is written until the tables redo their reads
    FENCED = "fenced"  # another producer with the same transactional.id took over: this worker stops


@dataclass
class TxnBudget:
    """What the open transaction has taken, and whether it is due to close."""

    max_s: float
    max_bytes: int
    opened_at: float = 0.0
    bytes: int = 0
    writes: int = 0

    def opened(self, now: float) -> None:
        self.opened_at, self.bytes, self.writes = now, 0, 0

    def took(self, nbytes: int) -> None:
        self.bytes += nbytes
        self.writes += 1

    def due(self, now: float) -> bool:
        """True once the transaction holds something and is old or large enough to close."""
        return self.writes > 0 and (now - self.opened_at >= self.max_s or self.bytes >= self.max_bytes)

    def wait_s(self, now: float) -> float:
        """How long until :meth:`due` can turn true by age alone."""
        return max(0.0, self.opened_at + self.max_s - now)
