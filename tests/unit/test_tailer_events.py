"""A tailer's events: each one's metric, log line, and the incident or hold it reports. A real
SidecarMetrics and EventLog (on a test logger, read with caplog); recorders stand in for the record
of incidents and for readiness's holds."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.output_mode import OtherOutput, OutputMode
from hyperdata_sidecar.core.records import DeadLetter, Record, Regression, Tally
from hyperdata_sidecar.core.times import hour_start_epoch, iso_utc
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.tailer_events import TailerEvents

LOGGER = "tests.tailer_events"
FILLS = "node_fills_streaming"
PATH = f"{FILLS}/hourly/20260610/22"
LAG_WARN_BYTES = 1000
LAG_WARN_S = 60.0


@dataclass
class Incidents:
    """The record of incidents: keeps each call as (method, arguments)."""

    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def file_lost(self, *args: Any) -> None:
        self.calls.append(("file_lost", args))

    def block_regression(self, *args: Any) -> None:
        self.calls.append(("block_regression", args))

    def late_append(self, *args: Any) -> None:
        self.calls.append(("late_append", args))

    def sealed_file_rewritten(self, *args: Any) -> None:
        self.calls.append(("sealed_file_rewritten", args))


@dataclass
class Holds:
    """Readiness's holds: keeps each call as (method, table, reason)."""

    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    def hold(self, table: str, reason: str | None) -> None:
        self.calls.append(("hold", table, reason))

    def node_output(self, table: str, reason: str | None) -> None:
        self.calls.append(("node_output", table, reason))


@dataclass
class Parts:
    events: TailerEvents
    metrics: SidecarMetrics
    incidents: Incidents
    holds: Holds

    def sample(self, name: str, **labels: str) -> float | None:
        return self.metrics.registry.get_sample_value(name, labels)


@pytest.fixture
def parts(caplog: pytest.LogCaptureFixture) -> Parts:
    caplog.set_level(logging.INFO, logger=LOGGER)
    metrics, incidents, holds = SidecarMetrics(), Incidents(), Holds()
    events = TailerEvents(
        FILLS,
        metrics,
        EventLog(logging.getLogger(LOGGER)),
        incidents,
        holds,
        lag_warn_bytes=LAG_WARN_BYTES,
        lag_warn_s=LAG_WARN_S,
    )
    return Parts(events, metrics, incidents, holds)


def lines(caplog: pytest.LogCaptureFixture, event: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(level, event, fields) of the lines written, of ``event`` only when given."""
    return [
        (r.levelname, r.getMessage(), r.fields)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == LOGGER and (event is None or r.getMessage() == event)
    ]


def cursor(**changes: Any) -> FileCursor:
    return FileCursor(path=PATH, **changes)


def good_line(block_time: str) -> bytes:
    return orjson.dumps({"block_number": 7, "block_time": block_time, "events": []})


# -- ticks and files ------------------------------------------------------------------------------


def test_the_newest_hour_file_sets_the_gauge_to_the_start_of_its_hour(parts):
    parts.events.newest_hour_file("20260610", "22")
    assert parts.sample("hyperdata_sidecar_newest_hour_file_start_seconds", table=FILLS) == hour_start_epoch("20260610", "22")


def test_a_missing_table_dir_is_a_warning_naming_the_table_and_path(parts, caplog):
    parts.events.table_dir_missing("/watch/node_fills_streaming/hourly")
    assert lines(caplog) == [("WARNING", "table_dir_missing", {"table": FILLS, "path": "/watch/node_fills_streaming/hourly"})]


def test_another_output_layout_is_a_hold_on_readiness_and_one_error_line_with_the_flag_to_change(parts, caplog):
    other = OtherOutput(OutputMode.BY_BLOCK, "node_fills_by_block")
    parts.events.node_output(other)
    parts.events.node_output(other)
    assert parts.holds.calls == [("node_output", FILLS, other.reason(FILLS))]
    assert lines(caplog) == [
        (
            "ERROR",
            "node_output_mode",
            {
                "table": FILLS,
                "found": "node_fills_by_block",
                "mode": "by-block",
                "flag": "--batch-by-block",
                "fix": "start hl-visor with --stream-with-block-info",
            },
        )
    ]


def test_the_other_layout_gone_clears_the_hold_without_a_line(parts, caplog):
    parts.events.node_output(OtherOutput(OutputMode.PLAIN, "node_fills"))
    caplog.clear()
    parts.events.node_output(None)
    parts.events.node_output(None)
    assert parts.holds.calls[1:] == [("node_output", FILLS, None)]
    assert lines(caplog) == []


def test_nothing_found_at_the_first_look_is_no_hold_and_no_line(parts, caplog):
    parts.events.node_output(None)
    assert parts.holds.calls == [] and lines(caplog) == []


def test_an_ignored_hour_file_is_a_warning_with_the_reason(parts, caplog):
    parts.events.hour_file_ignored(f"{FILLS}/hourly/20260610/x", "not an hour file")
    assert lines(caplog) == [
        ("WARNING", "hour_file_ignored", {"path": f"{FILLS}/hourly/20260610/x", "reason": "not an hour file"})
    ]


def test_a_tick_done_sets_the_files_tailed_and_observes_its_duration(parts):
    parts.events.tick_done(0.003, 4)
    assert parts.sample("hyperdata_sidecar_files_tailed", table=FILLS) == 4
    assert parts.sample("hyperdata_sidecar_poll_cycle_seconds_count", table=FILLS) == 1
    assert parts.sample("hyperdata_sidecar_poll_cycle_seconds_sum", table=FILLS) == pytest.approx(0.003)


def test_an_adopted_file_is_an_info_line_with_its_start_offset_and_stage(parts, caplog):
    parts.events.file_adopted(cursor(byte_offset=512, stage=CursorStage.SKIPPED))
    assert lines(caplog) == [("INFO", "file_adopted", {"path": PATH, "start_offset": 512, "stage": "skipped"})]


def test_bytes_read_are_counted_for_the_table(parts):
    parts.events.bytes_read(100)
    parts.events.bytes_read(23)
    assert parts.sample("hyperdata_sidecar_bytes_read_total", table=FILLS) == 123


def test_tail_lag_sets_the_lag_and_held_bytes_of_the_file_without_a_line_at_or_below_the_warning(parts, caplog):
    parts.events.tail_lag(PATH, LAG_WARN_BYTES, 17)
    assert parts.sample("hyperdata_sidecar_tail_offset_lag_bytes", table=FILLS, file=PATH) == LAG_WARN_BYTES
    assert parts.sample("hyperdata_sidecar_partial_line_held_bytes", table=FILLS, file=PATH) == 17
    assert lines(caplog) == []


def test_tail_lag_above_the_warning_is_one_warning_per_table_rate_limited(parts, caplog):
    parts.events.tail_lag(PATH, LAG_WARN_BYTES + 1, 0)
    parts.events.tail_lag(PATH, LAG_WARN_BYTES + 2, 0)
    assert lines(caplog) == [("WARNING", "tail_lag", {"table": FILLS, "path": PATH, "lag_bytes": LAG_WARN_BYTES + 1})]


def test_a_restarted_file_counts_as_truncated_and_is_an_error_line_with_what_was_published(parts, caplog):
    parts.events.file_restarted(cursor(byte_offset=900), "truncated", 300)
    assert parts.sample("hyperdata_sidecar_truncated_files_total", table=FILLS) == 1
    assert lines(caplog) == [("ERROR", "file_restarted", {"path": PATH, "reason": "truncated", "size": 300, "published_to": 900})]


def test_a_file_deleted_with_nothing_lost_is_pruned_an_info_line_and_no_incident(parts, caplog):
    parts.events.file_deleted(cursor(byte_offset=900), None, 900)
    assert parts.sample("hyperdata_sidecar_deleted_files_total", table=FILLS, reason="pruned") == 1
    assert parts.sample("hyperdata_sidecar_deleted_files_total", table=FILLS, reason="unsealed") is None
    assert lines(caplog) == [("INFO", "file_pruned", {"path": PATH})]
    assert parts.incidents.calls == []


def test_a_file_deleted_with_something_lost_is_unsealed_and_a_lost_file_incident(parts, caplog):
    parts.events.file_deleted(cursor(byte_offset=900), "deleted before its seal", 1200)
    assert parts.sample("hyperdata_sidecar_deleted_files_total", table=FILLS, reason="unsealed") == 1
    assert parts.incidents.calls == [("file_lost", (FILLS, PATH, "deleted before its seal", 900, 1200))]
    assert lines(caplog) == []  # the record of incidents writes the line


def test_a_late_append_is_an_incident_naming_the_next_revision_and_both_sizes(parts):
    parts.events.late_append(cursor(revision=1, size=1000), 1500)
    assert parts.incidents.calls == [("late_append", (FILLS, PATH, 2, 1000, 1500))]


def test_a_rewritten_sealed_file_is_an_incident_with_its_sealed_size(parts):
    parts.events.sealed_file_rewritten(cursor(size=1000), "replaced", 1000)
    assert parts.incidents.calls == [("sealed_file_rewritten", (FILLS, PATH, "replaced", 1000, 1000))]


def test_a_file_finalized_the_first_time_zeroes_its_tail_lag_and_is_an_info_line_with_its_figures(parts, caplog):
    parts.events.tail_lag(PATH, 50, 0)
    finalized = cursor(size=1000, lines=9, dlq_lines=1, revision=1, block_regressions=2)
    parts.events.file_finalized(finalized, first=True)
    assert parts.sample("hyperdata_sidecar_tail_offset_lag_bytes", table=FILLS, file=PATH) == 0
    assert lines(caplog, "file_finalized") == [
        (
            "INFO",
            "file_finalized",
            {"path": PATH, "size": 1000, "lines": 9, "dlq_lines": 1, "revision": 1, "block_regressions": 2},
        )
    ]


def test_a_file_finalized_again_leaves_the_tail_lag_alone(parts):
    parts.events.tail_lag(PATH, 50, 0)
    parts.events.file_finalized(cursor(size=1000, revision=2), first=False)
    assert parts.sample("hyperdata_sidecar_tail_offset_lag_bytes", table=FILLS, file=PATH) == 50


# -- commits --------------------------------------------------------------------------------------


def test_a_commit_counts_its_lines_and_takes_the_publish_lag_from_the_last_lines_block_time(parts):
    tally = Tally()
    tally.lines, tally.last_line = 5, good_line(iso_utc(time.time() - 3 * LAG_WARN_S))
    parts.events.committed(PATH, tally)
    assert parts.sample("hyperdata_sidecar_lines_published_total", table=FILLS) == 5
    assert parts.metrics.publish_lag_seconds(FILLS) == pytest.approx(3 * LAG_WARN_S, abs=LAG_WARN_S)


def test_a_commit_of_lines_older_than_the_warning_is_a_publish_lag_warning_rate_limited(parts, caplog):
    old = iso_utc(time.time() - 3600)
    for _ in range(2):
        tally = Tally()
        tally.lines, tally.last_line = 1, good_line(old)
        parts.events.committed(PATH, tally)
    [(level, _, fields)] = lines(caplog, "publish_lag")
    assert level == "WARNING" and fields["table"] == FILLS and fields["block_time"] == old
    assert fields["lag_seconds"] > LAG_WARN_S


def test_a_commit_of_recent_lines_is_no_warning(parts, caplog):
    tally = Tally()
    tally.lines, tally.last_line = 1, good_line(iso_utc(time.time()))
    parts.events.committed(PATH, tally)
    assert lines(caplog) == []


def test_a_commit_without_lines_counts_none(parts):
    parts.events.committed(PATH, Tally())
    assert parts.sample("hyperdata_sidecar_lines_published_total", table=FILLS) == 0
    assert parts.metrics.publish_lag_seconds(FILLS) is None


def test_each_regression_of_a_commit_is_an_incident(parts):
    tally = Tally()
    first, second = Regression(10, 100, 99, 1), Regression(20, 99, 98, 2)
    tally.regressions = [first, second]
    parts.events.committed(PATH, tally)
    assert parts.incidents.calls == [("block_regression", (FILLS, PATH, first)), ("block_regression", (FILLS, PATH, second))]


def test_each_dead_letter_of_a_commit_is_counted_by_reason_and_logged_once_per_reason_rate_limited(parts, caplog):
    tally = Tally()
    tally.dead_letters = [DeadLetter("malformed", 0), DeadLetter("malformed", 40), DeadLetter("oversize", 80)]
    parts.events.committed(PATH, tally)
    assert parts.sample("hyperdata_sidecar_dlq_lines_total", table=FILLS, reason="malformed") == 2
    assert parts.sample("hyperdata_sidecar_dlq_lines_total", table=FILLS, reason="oversize") == 1
    assert lines(caplog, "dlq") == [
        ("WARNING", "dlq", {"table": FILLS, "reason": "malformed", "source": PATH, "offset": 0}),
        ("WARNING", "dlq", {"table": FILLS, "reason": "oversize", "source": PATH, "offset": 80}),
    ]


# -- the producer ---------------------------------------------------------------------------------


def test_a_held_table_is_a_hold_on_readiness_a_hold_error_and_one_line_rate_limited(parts, caplog):
    parts.events.held("hyperliquid.fills: UNKNOWN_TOPIC_OR_PART", retry_in_s=2.0, records=30)
    parts.events.held("hyperliquid.fills: UNKNOWN_TOPIC_OR_PART", retry_in_s=4.0, records=30)
    assert parts.holds.calls == [("hold", FILLS, "hyperliquid.fills: UNKNOWN_TOPIC_OR_PART")] * 2
    assert parts.sample("hyperdata_sidecar_producer_errors_total", kind="hold") == 2
    assert lines(caplog) == [
        (
            "ERROR",
            "topic_not_writable",
            {"table": FILLS, "reason": "hyperliquid.fills: UNKNOWN_TOPIC_OR_PART", "records": 30, "retry_in_s": 2.0},
        )
    ]


def test_a_released_table_clears_its_hold_and_says_so(parts, caplog):
    parts.events.released()
    assert parts.holds.calls == [("hold", FILLS, None)]
    assert lines(caplog) == [("INFO", "topic_writable_again", {"table": FILLS})]


def test_a_failed_metadata_refresh_is_one_warning_per_topic_rate_limited(parts, caplog):
    parts.events.metadata_refresh_failed("hyperliquid.fills", "timed out")
    parts.events.metadata_refresh_failed("hyperliquid.fills", "timed out")
    parts.events.metadata_refresh_failed("hyperliquid.dlq", "timed out")
    assert lines(caplog) == [
        ("WARNING", "topic_metadata_refresh_failed", {"topic": "hyperliquid.fills", "error": "timed out"}),
        ("WARNING", "topic_metadata_refresh_failed", {"topic": "hyperliquid.dlq", "error": "timed out"}),
    ]


def test_records_resent_are_counted_as_producer_retries(parts):
    parts.events.records_resent(3)
    parts.events.records_resent(2)
    assert parts.sample("hyperdata_sidecar_producer_retries_total") == 5


def test_a_rejected_record_is_a_rejected_dead_letter_and_an_error_line_with_its_offset(parts, caplog):
    record = Record("hyperliquid.fills", 3, b"BTC", b"{}", [("line_id", b"x"), ("offset", b"4096")])
    parts.events.record_rejected(record, PATH, "MSG_SIZE_TOO_LARGE", "1048577 bytes")
    assert parts.sample("hyperdata_sidecar_dlq_lines_total", table=FILLS, reason="rejected") == 1
    assert lines(caplog) == [
        (
            "ERROR",
            "record_rejected",
            {
                "table": FILLS,
                "topic": "hyperliquid.fills",
                "source": PATH,
                "offset": 4096,
                "error": "MSG_SIZE_TOO_LARGE",
                "detail": "1048577 bytes",
            },
        )
    ]
