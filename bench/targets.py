"""The targets the harness reports against (met / missed) and never asserts: issue 7's for the
sidecar as a whole, issue 20's for each line engine, issue 29's for backups."""

from __future__ import annotations

from dataclasses import dataclass

from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S

PRODUCTION_RATE = sum(PRODUCTION_LINES_PER_S.values())
"""Lines per second the node writes across the three tables (~39.3k)."""

NODE_BYTES_PER_S = 20e6
"""What the node writes across the three tables, bytes a second (~1.7 TB a day)."""

CATCHUP_LINES_PER_S = 200_000.0
"""Catch-up from a backlog: at least 5x production."""

SEAL_S = 2.0
"""Seal record on the topic at most this long after finalization, for a 1 GB file."""


@dataclass(frozen=True)
class Bound:
    """A target on one figure: the figure is at most (``at_most``) or at least ``limit``."""

    limit: float
    at_most: bool
    unit: str = ""

    def met(self, value: float) -> bool:
        return value <= self.limit if self.at_most else value >= self.limit

    def __str__(self) -> str:
        return f"{'≤' if self.at_most else '≥'} {self.limit:g}{self.unit}"


BACKUP_RSS_MB = 100.0
"""A 4 GB file backed up with a peak RSS less than this many MB above the process before it."""

BACKUP_LIVE_P99_RATIO = 1.2
"""The live tail's p99 with a backup running, at most this multiple of the run's without one."""

LIVE_P50 = Bound(0.5, at_most=True, unit=" s")
"""Live at production rate: append-to-receive p50, whichever engine."""

STANDBY_CPU_PCT = Bound(5, at_most=True, unit="%")
"""With ``STREAM_ID``: a standby's CPU while its node writes at production rate, % of one core (issue 28)."""


@dataclass(frozen=True)
class EngineTargets:
    """What one line engine must reach in a run, where it comes from in ``basis``."""

    cpu_us_per_line: Bound
    """Worker CPU per line over the catch-up, all its threads (librdkafka's included)."""
    vs_kcat: Bound
    """Catch-up lines/s as a multiple of kcat's on the same backlog and broker, in the same run."""
    peak_rss_mb: Bound
    live_cpu_pct: Bound
    """The worker's CPU at production rate, % of one core."""
    live_p99_s: Bound
    """Append-to-receive p99 at production rate."""
    basis: str


ENGINE_TARGETS = {
    "native": EngineTargets(
        cpu_us_per_line=Bound(3.5, at_most=True, unit=" µs"),
        vs_kcat=Bound(1.1, at_most=False, unit="×"),
        peak_rss_mb=Bound(300, at_most=True, unit=" MB"),
        live_cpu_pct=Bound(12, at_most=True, unit="%"),
        live_p99_s=Bound(0.5, at_most=True, unit=" s"),
        basis="issue 20's targets for the compiled engine",
    ),
    # "No slower than today": main before the compiled engine, as issue 20 measured it on a quiet
    # 2-core machine (make bench's catch-up; live: the worse of its two runs).
    "python": EngineTargets(
        cpu_us_per_line=Bound(6.4, at_most=True, unit=" µs"),
        vs_kcat=Bound(0.64, at_most=False, unit="×"),
        peak_rss_mb=Bound(300, at_most=True, unit=" MB"),
        live_cpu_pct=Bound(37, at_most=True, unit="%"),
        live_p99_s=Bound(0.61, at_most=True, unit=" s"),
        basis="issue 20: no slower than main before the compiled engine",
    ),
}
