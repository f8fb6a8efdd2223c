"""How far a copy of one file has come and when it will be done, without I/O: the running backup
attempt as the status page shows it.

The rate is the average since the attempt began: a backup reads and writes at a steady pace (the
disk's, or a bandwidth limit's), and the average needs no sampling. Time left is what remains at
that rate.
"""

from __future__ import annotations

from typing import NamedTuple


class TransferEstimate(NamedTuple):
    """``done_bytes`` of ``total_bytes`` after ``elapsed_s``; the rate in bytes per second (None
    before any time has passed); the seconds left at that rate (0 once every byte is done, None
    while nothing has moved)."""

    done_bytes: int
    total_bytes: int
    elapsed_s: float
    rate_bytes_per_s: float | None
    eta_s: float | None

    @property
    def fraction(self) -> float:
        """How much of the file is done, from 0 to 1 (an empty file is done)."""
        if self.total_bytes <= 0:
            return 1.0
        return min(1.0, self.done_bytes / self.total_bytes)


def estimate_transfer(done_bytes: int, total_bytes: int, elapsed_s: float) -> TransferEstimate:
    """The estimate for ``done_bytes`` of ``total_bytes`` copied in ``elapsed_s`` seconds. More
    bytes done than expected (a file that grew) count as done."""
    rate = done_bytes / elapsed_s if elapsed_s > 0 else None
    if done_bytes >= total_bytes:
        eta: float | None = 0.0
    elif rate:
        eta = (total_bytes - done_bytes) / rate
    else:
        eta = None
    return TransferEstimate(done_bytes, total_bytes, elapsed_s, rate, eta)
