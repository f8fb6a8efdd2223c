"""Every table's backlog sampled into its meter: exported as gauges, one log line per turn into and
out of falling behind."""

from __future__ import annotations

import logging

import pytest

from hyperdata_sidecar.core.backlog import LIVE_BYTES, RATE_WINDOW_S, Backlog
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.table_backlogs import TableBacklogs

FILLS = "node_fills_streaming"
BOOK = "node_raw_book_diffs_streaming"
BIG = 4 * LIVE_BYTES


LOGGER = "tests.table_backlogs"


def backlogs() -> tuple[TableBacklogs, SidecarMetrics]:
    metrics = SidecarMetrics()
    return TableBacklogs(metrics, EventLog(logging.getLogger(LOGGER))), metrics


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.getMessage(), r.fields["table"]) for r in caplog.records if r.name == LOGGER]


def gauge(metrics: SidecarMetrics, name: str, table: str) -> float | None:
    return metrics.registry.get_sample_value(f"hyperdata_sidecar_{name}", {"table": table})


def test_each_sample_sets_the_tables_backlog_gauges() -> None:
    meters, metrics = backlogs()
    meters.sample(0.0, {FILLS: Backlog(BIG, 3), BOOK: Backlog(0, 0)})
    meters.sample(1.0, {FILLS: Backlog(BIG - 100, 2), BOOK: Backlog(10, 1)})

    assert (gauge(metrics, "backlog_bytes", FILLS), gauge(metrics, "backlog_files", FILLS)) == (BIG - 100, 2)
    assert (gauge(metrics, "backlog_bytes", BOOK), gauge(metrics, "backlog_files", BOOK)) == (10, 1)


def test_the_estimates_are_each_tables_latest() -> None:
    meters, _ = backlogs()
    meters.sample(0.0, {FILLS: Backlog(BIG, 3)})
    meters.sample(10.0, {FILLS: Backlog(BIG - 1000, 3)})

    estimate = meters.estimates()[FILLS]
    assert (estimate.backlog, estimate.drain_bytes_per_s, estimate.eta_s) == (Backlog(BIG - 1000, 3), 100.0, (BIG - 1000) / 100)


def test_falling_behind_is_logged_once_when_it_starts_and_once_when_it_ends(caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    meters, _ = backlogs()
    for second in range(int(RATE_WINDOW_S)):
        meters.sample(float(second), {FILLS: Backlog(BIG + second, 3)})  # grows for a minute
    meters.sample(RATE_WINDOW_S + 30, {FILLS: Backlog(0, 0)})  # then published to the end

    assert events(caplog) == [("falling_behind", FILLS), ("falling_behind_ended", FILLS)]


def test_a_shrinking_backlog_logs_nothing(caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    meters, _ = backlogs()
    for second in range(int(RATE_WINDOW_S) * 2):
        meters.sample(float(second), {FILLS: Backlog(BIG - second * 1000, 3)})

    assert events(caplog) == []
