"""The record of incidents the status page lists: each lost file, late append and rewritten sealed file
is a metric, an error line and an entry of a history kept to the last SHOWN; block regressions are
counted per table with the last one kept. A real SidecarMetrics and EventLog on a test logger."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hyperdata_sidecar.core.records import Regression
from hyperdata_sidecar.incidents import SHOWN, IncidentHistory
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

LOGGER = "tests.incidents"
FILLS = "node_fills_streaming"
BOOK = "node_order_statuses_streaming"
PATH = f"{FILLS}/hourly/20260610/22"


@pytest.fixture
def history(caplog: pytest.LogCaptureFixture) -> IncidentHistory:
    caplog.set_level(logging.INFO, logger=LOGGER)
    return IncidentHistory(SidecarMetrics(), EventLog(logging.getLogger(LOGGER)))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


def sample(history: IncidentHistory, name: str, **labels: str) -> float | None:
    return history._metrics.registry.get_sample_value(name, labels)


def without_time(entry: dict[str, Any]) -> dict[str, Any]:
    assert entry["at"].endswith("Z")
    return {k: v for k, v in entry.items() if k != "at"}


def test_a_lost_file_is_counted_kept_and_an_error_line(history, caplog):
    history.file_lost(FILLS, PATH, "deleted before its seal", 900, 1200)
    assert sample(history, "hyperdata_sidecar_files_lost_total", table=FILLS) == 1
    assert [without_time(e) for e in history.lost] == [
        {"path": PATH, "reason": "deleted before its seal", "published_to": 900, "size_seen": 1200}
    ]
    assert lines(caplog) == [
        (
            "ERROR",
            "file_lost",
            {"table": FILLS, "path": PATH, "reason": "deleted before its seal", "published_to": 900, "size_seen": 1200},
        )
    ]


def test_a_late_append_is_counted_kept_and_an_error_line(history, caplog):
    history.late_append(FILLS, PATH, 2, 1000, 1500)
    assert sample(history, "hyperdata_sidecar_late_appends_total", table=FILLS) == 1
    assert [without_time(e) for e in history.late_appends] == [{"path": PATH, "revision": 2, "sealed_size": 1000, "size": 1500}]
    assert lines(caplog) == [
        ("ERROR", "late_append", {"table": FILLS, "path": PATH, "sealed_size": 1000, "size": 1500, "revision": 2})
    ]


def test_a_rewritten_sealed_file_is_counted_by_reason_kept_and_an_error_line(history, caplog):
    history.sealed_file_rewritten(FILLS, PATH, "truncated", 1000, 10)
    assert sample(history, "hyperdata_sidecar_sealed_files_rewritten_total", table=FILLS, reason="truncated") == 1
    assert sample(history, "hyperdata_sidecar_sealed_files_rewritten_total", table=FILLS, reason="replaced") == 0
    assert [without_time(e) for e in history.rewritten] == [
        {"path": PATH, "reason": "truncated", "sealed_size": 1000, "size": 10}
    ]
    assert lines(caplog) == [
        ("ERROR", "sealed_file_rewritten", {"table": FILLS, "path": PATH, "reason": "truncated", "sealed_size": 1000, "size": 10})
    ]


RECORDS = {
    "lost": lambda history, path, size: history.file_lost(FILLS, path, "gone", 0, size),
    "late_appends": lambda history, path, size: history.late_append(FILLS, path, 2, 0, size),
    "rewritten": lambda history, path, size: history.sealed_file_rewritten(FILLS, path, "replaced", 0, size),
}


@pytest.mark.parametrize("kind", list(RECORDS))
def test_each_history_keeps_the_last_shown_entries(history, kind):
    for n in range(SHOWN + 5):
        RECORDS[kind](history, f"{FILLS}/hourly/20260610/{n}", n)
    kept = getattr(history, kind)
    assert [e["size_seen" if kind == "lost" else "size"] for e in kept] == list(range(5, SHOWN + 5))


def test_block_regressions_are_counted_per_table_with_the_last_one_kept(history):
    history.block_regression(FILLS, PATH, Regression(10, 100, 99, 1))
    history.block_regression(FILLS, f"{FILLS}/hourly/20260610/23", Regression(20, 120, 110, 2))
    history.block_regression(BOOK, PATH, Regression(5, 7, 6, 1))
    assert sample(history, "hyperdata_sidecar_block_regressions_total", table=FILLS) == 2
    assert sample(history, "hyperdata_sidecar_block_regressions_total", table=BOOK) == 1
    assert without_time(history.regressions[FILLS]) == {
        "count": 2,
        "path": f"{FILLS}/hourly/20260610/23",
        "offset": 20,
        "previous": 120,
        "block": 110,
        "epoch": 2,
    }
    assert history.regressions[BOOK]["count"] == 1


def test_a_block_regression_is_a_warning_per_table_rate_limited_with_the_count_since_start(history, caplog):
    history.block_regression(FILLS, PATH, Regression(10, 100, 99, 1))
    history.block_regression(FILLS, PATH, Regression(20, 120, 110, 2))
    history.block_regression(BOOK, PATH, Regression(5, 7, 6, 1))
    assert lines(caplog) == [
        (
            "WARNING",
            "block_regression",
            {"table": FILLS, "path": PATH, "offset": 10, "previous_block": 100, "block": 99, "epoch": 1, "since_start": 1},
        ),
        (
            "WARNING",
            "block_regression",
            {"table": BOOK, "path": PATH, "offset": 5, "previous_block": 7, "block": 6, "epoch": 1, "since_start": 1},
        ),
    ]
