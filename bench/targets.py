"""The targets of issue 7, which the harness reports against (met / missed) and never asserts."""

from __future__ import annotations

from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S

PRODUCTION_RATE = sum(PRODUCTION_LINES_PER_S.values())
"""Lines per second the node writes across the three tables (~39.3k)."""

CATCHUP_LINES_PER_S = 200_000.0
"""Catch-up from a backlog: at least 5x production."""

CATCHUP_VS_KCAT = 0.5
"""Catch-up throughput as a share of kcat's on the same backlog and broker."""

PEAK_RSS_MB = 300.0
"""Peak resident memory of the worker during a catch-up of any size."""

LIVE_P50_S = 0.5
LIVE_P99_S = 1.0
LIVE_CPU_PCT = 50.0
"""Live at production rate: append-to-receive p50 and p99, and the sidecar's CPU in % of one core."""

SEAL_S = 2.0
"""Seal record on the topic at most this long after finalization, for a 1 GB file."""
