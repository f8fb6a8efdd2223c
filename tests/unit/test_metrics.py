"""SidecarMetrics: names and types on /metrics, bounded per-file series, scrape-time lags, isolation."""

from __future__ import annotations

import calendar
import re
from pathlib import Path

import prometheus_client
import pytest

from hyperdata_sidecar.core.lineinfo import REASONS
from hyperdata_sidecar.core.times import epoch_of, hour_start_epoch
from hyperdata_sidecar.metrics import EXPORTED, SidecarMetrics

BLOCK_TIME = "2026-06-10T12:56:15.035481067"
BLOCK_EPOCH = calendar.timegm((2026, 6, 10, 12, 56, 15)) + 0.035481
BOOK = "node_raw_book_diffs_streaming"
FILLS = "node_fills_streaming"
REPO = Path(__file__).resolve().parents[2]
# Where metric names are written outside the code: alerts, dashboard, docs, tests, benchmarks.
NAMED_IN = ("docs", "deploy", "tests", "scripts", "bench", "examples")
TEXT_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".json", ".sh", ".txt", ".toml"}
# The native engine's Python module (engine/) is named like a metric and is none; the metric
# hyperdata_sidecar_engine_info is one (a test below holds the two apart).
METRIC_NAME = re.compile(r"\bhyperdata_sidecar_(?!engine\b)[a-z][a-z0-9_]*")


class Clock:
    """A settable wall clock, so lag values are exact."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scrape(metrics: SidecarMetrics) -> str:
    body, _content_type = metrics.render()
    return body.decode()


def value(metrics: SidecarMetrics, name: str, **labels: str) -> float | None:
    """The sample ``name{labels}`` as the registry exposes it, or None when the series does not exist."""
    return metrics.registry.get_sample_value(name, labels)


def declared_types(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))


# -- exposition --------------------------------------------------------------------------------


def exported_families(metrics: SidecarMetrics) -> dict[str, str]:
    """The registry's metric families by their exposition name (``_total`` on counters) and type."""
    return {f.name + ("_total" if f.type == "counter" else ""): f.type for f in metrics.registry.collect()}


def sample_names(families: dict[str, str]) -> set[str]:
    """The names a query can select: each family's, and a histogram's bucket, sum and count."""
    names = set(families)
    for name, kind in families.items():
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


def test_the_registry_exports_exactly_the_listed_metrics() -> None:
    assert exported_families(SidecarMetrics()) == EXPORTED


def test_every_metric_is_declared_with_its_prometheus_type() -> None:
    types = declared_types(scrape(SidecarMetrics()))

    assert {name: types.get(name) for name in EXPORTED} == EXPORTED


def test_every_metric_name_written_in_the_repository_is_exported() -> None:
    files = [REPO / "README.md"] + [
        path for top in NAMED_IN for path in sorted((REPO / top).rglob("*")) if path.suffix in TEXT_SUFFIXES
    ]
    named = {(path.relative_to(REPO).as_posix(), name) for path in files for name in METRIC_NAME.findall(path.read_text())}
    exported = sample_names(EXPORTED)

    assert len({name for _path, name in named}) >= len(EXPORTED) // 2  # the scan found the alerts, tests and docs
    assert sorted((path, name) for path, name in named if name not in exported) == []


def test_the_scan_passes_over_the_engine_module_and_finds_the_engine_metric() -> None:
    text = "import hyperdata_sidecar_engine; hyperdata_sidecar_engine.pyi; hyperdata_sidecar_engine_info{engine}"

    assert METRIC_NAME.findall(text) == ["hyperdata_sidecar_engine_info"]


def test_every_metric_name_has_the_sidecar_prefix() -> None:
    names = declared_types(scrape(SidecarMetrics()))

    assert all(name.startswith("hyperdata_sidecar_") for name in names)


def test_render_returns_the_prometheus_text_content_type() -> None:
    _body, content_type = SidecarMetrics().render()

    assert content_type == prometheus_client.CONTENT_TYPE_LATEST


def test_known_tables_are_exposed_at_zero_before_any_event() -> None:
    metrics = SidecarMetrics(tables=[BOOK, FILLS])

    assert value(metrics, "hyperdata_sidecar_lines_published_total", table=BOOK) == 0
    assert value(metrics, "hyperdata_sidecar_bytes_read_total", table=FILLS) == 0
    assert value(metrics, "hyperdata_sidecar_publish_lag_seconds", table=FILLS) == 0


def test_late_appends_rewrites_regressions_and_read_failures_are_exposed_at_zero_per_table() -> None:
    metrics = SidecarMetrics(tables=[BOOK, FILLS])

    for table in (BOOK, FILLS):
        assert value(metrics, "hyperdata_sidecar_late_appends_total", table=table) == 0
        assert value(metrics, "hyperdata_sidecar_block_regressions_total", table=table) == 0
        assert value(metrics, "hyperdata_sidecar_read_failures_total", table=table) == 0
        for reason in ("truncated", "replaced"):
            assert value(metrics, "hyperdata_sidecar_sealed_files_rewritten_total", table=table, reason=reason) == 0


def test_late_appends_rewrites_regressions_and_read_failures_count_per_table() -> None:
    metrics = SidecarMetrics()
    metrics.late_append(FILLS)
    metrics.block_regression(BOOK)
    metrics.block_regression(BOOK)
    metrics.sealed_file_rewritten(FILLS, "replaced")
    metrics.read_failed(FILLS)

    assert value(metrics, "hyperdata_sidecar_late_appends_total", table=FILLS) == 1
    assert value(metrics, "hyperdata_sidecar_block_regressions_total", table=BOOK) == 2
    assert value(metrics, "hyperdata_sidecar_sealed_files_rewritten_total", table=FILLS, reason="replaced") == 1
    assert value(metrics, "hyperdata_sidecar_read_failures_total", table=FILLS) == 1
    with pytest.raises(ValueError, match="truncated"):
        metrics.sealed_file_rewritten(FILLS, "moved")


def test_parked_backups_follow_the_last_count() -> None:
    metrics = SidecarMetrics()
    metrics.set_backups_parked(2)
    metrics.set_backups_parked(1)

    assert value(metrics, "hyperdata_sidecar_backups_parked") == 1


def test_backup_results_are_exposed_at_zero_before_any_backup() -> None:
    metrics = SidecarMetrics()
    counts = [value(metrics, "hyperdata_sidecar_backups_total", result=r) for r in ("ok", "noop", "failed")]

    assert counts == [0, 0, 0]


# -- events ------------------------------------------------------------------------------------


def test_published_lines_and_read_bytes_accumulate_per_table() -> None:
    metrics = SidecarMetrics()
    metrics.lines_published(BOOK, 3)
    metrics.lines_published(BOOK, 2)
    metrics.bytes_read(BOOK, 1000)

    assert value(metrics, "hyperdata_sidecar_lines_published_total", table=BOOK) == 5
    assert value(metrics, "hyperdata_sidecar_bytes_read_total", table=BOOK) == 1000
    assert value(metrics, "hyperdata_sidecar_lines_published_total", table=FILLS) == 0


def test_dlq_lines_are_counted_per_table_and_reason() -> None:
    metrics = SidecarMetrics()
    metrics.dlq(BOOK, "malformed")
    metrics.dlq(BOOK, "malformed", 2)
    metrics.dlq(BOOK, "oversize")

    assert value(metrics, "hyperdata_sidecar_dlq_lines_total", table=BOOK, reason="malformed") == 3
    assert value(metrics, "hyperdata_sidecar_dlq_lines_total", table=BOOK, reason="oversize") == 1


def test_seal_counts_per_table_and_observes_its_latency() -> None:
    metrics = SidecarMetrics()
    metrics.seal_emitted(FILLS, 0.2)

    assert value(metrics, "hyperdata_sidecar_seals_emitted_total", table=FILLS) == 1
    assert value(metrics, "hyperdata_sidecar_seal_latency_seconds_count") == 1
    assert value(metrics, "hyperdata_sidecar_seal_latency_seconds_bucket", le="0.5") == 1
    assert value(metrics, "hyperdata_sidecar_seal_latency_seconds_bucket", le="0.1") == 0


def test_poll_cycle_histogram_spans_a_millisecond_to_ten_seconds() -> None:
    metrics = SidecarMetrics()
    metrics.tick_done(BOOK, 0.0005)
    metrics.tick_done(BOOK, 9.0)

    assert value(metrics, "hyperdata_sidecar_poll_cycle_seconds_bucket", table=BOOK, le="0.001") == 1
    assert value(metrics, "hyperdata_sidecar_poll_cycle_seconds_bucket", table=BOOK, le="10.0") == 2


def test_backup_attempts_are_counted_by_result_with_their_bytes_and_time_by_sink() -> None:
    metrics = SidecarMetrics()
    metrics.backup_attempt_ended("ok", sink="local", nbytes=3_000, seconds=2.0)
    metrics.backup_attempt_ended("failed", sink="local", nbytes=500, seconds=0.2)
    metrics.backup_attempt_ended("failed", sink="local", nbytes=0, seconds=0.05)

    assert value(metrics, "hyperdata_sidecar_backups_total", result="failed") == 2
    assert value(metrics, "hyperdata_sidecar_backup_bytes_total", sink="local", result="ok") == 3_000
    assert value(metrics, "hyperdata_sidecar_backup_bytes_total", sink="local", result="failed") == 500
    assert value(metrics, "hyperdata_sidecar_backup_seconds_count", sink="local", result="failed") == 2
    assert value(metrics, "hyperdata_sidecar_backup_seconds_bucket", sink="local", result="ok", le="1.0") == 0
    assert value(metrics, "hyperdata_sidecar_backup_seconds_bucket", sink="local", result="ok", le="5.0") == 1


def test_an_unknown_backup_result_is_rejected() -> None:
    with pytest.raises(ValueError, match="noop"):
        SidecarMetrics().backup_attempt_ended("skipped", sink="local", nbytes=0, seconds=0.0)


def test_the_sinks_byte_and_time_series_start_at_zero_for_every_result() -> None:
    metrics = SidecarMetrics()
    metrics.backup_sink("local")

    for result in ("ok", "noop", "failed"):
        assert value(metrics, "hyperdata_sidecar_backup_bytes_total", sink="local", result=result) == 0
        assert value(metrics, "hyperdata_sidecar_backup_seconds_count", sink="local", result=result) == 0


def test_file_lifecycle_producer_and_state_counters() -> None:
    metrics = SidecarMetrics()
    metrics.file_deleted(BOOK, "unpublished")
    metrics.file_truncated(BOOK)
    metrics.producer_error("transport")
    metrics.producer_error("transport")
    metrics.producer_retry(3)
    metrics.state_persist_failed()

    assert value(metrics, "hyperdata_sidecar_deleted_files_total", table=BOOK, reason="unpublished") == 1
    assert value(metrics, "hyperdata_sidecar_truncated_files_total", table=BOOK) == 1
    assert value(metrics, "hyperdata_sidecar_producer_errors_total", kind="transport") == 2
    assert value(metrics, "hyperdata_sidecar_producer_retries_total") == 3
    assert value(metrics, "hyperdata_sidecar_state_persist_failures_total") == 1


def test_every_producer_error_kind_is_exported_from_zero_and_no_other_is_taken() -> None:
    metrics = SidecarMetrics()
    for kind in ("hold", "seal", "snapshot", "transport", "client", "fatal"):
        assert value(metrics, "hyperdata_sidecar_producer_errors_total", kind=kind) == 0
    with pytest.raises(ValueError, match="transport"):
        metrics.producer_error("_TRANSPORT")  # a librdkafka error name: unbounded labels


def test_health_gauges_follow_the_last_reported_state() -> None:
    metrics = SidecarMetrics()
    metrics.set_ready(True)
    metrics.set_broker_connected(True)
    metrics.set_broker_connected(False)
    metrics.set_files_tailed(BOOK, 4)

    assert value(metrics, "hyperdata_sidecar_ready") == 1
    assert value(metrics, "hyperdata_sidecar_broker_connected") == 0
    assert value(metrics, "hyperdata_sidecar_files_tailed", table=BOOK) == 4


def test_the_engine_info_is_absent_until_the_worker_chose_then_names_the_engine_and_version() -> None:
    metrics = SidecarMetrics()
    assert "hyperdata_sidecar_engine_info{" not in scrape(metrics)

    metrics.engine_chosen("native", "0.1.0")

    assert value(metrics, "hyperdata_sidecar_engine_info", engine="native", version="0.1.0") == 1
    assert scrape(metrics).count("hyperdata_sidecar_engine_info{") == 1


# -- bounded per-file series -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setter", "name"),
    [
        ("set_tail_lag", "hyperdata_sidecar_tail_offset_lag_bytes"),
        ("set_partial_held", "hyperdata_sidecar_partial_line_held_bytes"),
    ],
)
def test_moving_to_a_new_file_removes_the_previous_files_series(setter: str, name: str) -> None:
    metrics = SidecarMetrics()
    old, new = f"{BOOK}/hourly/20260610/23", f"{BOOK}/hourly/20260611/0"
    getattr(metrics, setter)(BOOK, old, 500)
    getattr(metrics, setter)(BOOK, new, 7)

    assert value(metrics, name, table=BOOK, file=old) is None
    assert value(metrics, name, table=BOOK, file=new) == 7
    assert scrape(metrics).count(f"{name}{{") == 1


def test_a_tables_current_file_does_not_remove_another_tables_series() -> None:
    metrics = SidecarMetrics()
    metrics.set_tail_lag(BOOK, "b/0", 1)
    metrics.set_tail_lag(FILLS, "f/0", 2)
    metrics.set_tail_lag(FILLS, "f/1", 3)

    assert value(metrics, "hyperdata_sidecar_tail_offset_lag_bytes", table=BOOK, file="b/0") == 1


def test_updating_the_same_file_keeps_one_series() -> None:
    metrics = SidecarMetrics()
    metrics.set_tail_lag(BOOK, "b/0", 100)
    metrics.set_tail_lag(BOOK, "b/0", 40)

    assert value(metrics, "hyperdata_sidecar_tail_offset_lag_bytes", table=BOOK, file="b/0") == 40


# -- lags computed at scrape time --------------------------------------------------------------


def test_publish_lag_is_now_minus_the_newest_published_block_time() -> None:
    clock = Clock(BLOCK_EPOCH + 30.0)
    metrics = SidecarMetrics(clock=clock)
    metrics.lines_published(BOOK, 10, newest_block_time=BLOCK_TIME)

    assert value(metrics, "hyperdata_sidecar_publish_lag_seconds", table=BOOK) == pytest.approx(30.0)


def test_publish_lag_keeps_growing_while_nothing_is_published() -> None:
    clock = Clock(BLOCK_EPOCH + 1.0)
    metrics = SidecarMetrics(clock=clock)
    metrics.lines_published(BOOK, 1, newest_block_time=BLOCK_TIME)
    clock.now += 120.0

    assert value(metrics, "hyperdata_sidecar_publish_lag_seconds", table=BOOK) == pytest.approx(121.0)


def test_publish_lag_ignores_an_unparseable_block_time() -> None:
    clock = Clock(BLOCK_EPOCH + 5.0)
    metrics = SidecarMetrics(clock=clock)
    metrics.lines_published(BOOK, 1, newest_block_time=BLOCK_TIME)
    metrics.lines_published(BOOK, 1, newest_block_time="not a time")

    assert value(metrics, "hyperdata_sidecar_publish_lag_seconds", table=BOOK) == pytest.approx(5.0)


def test_publish_lag_is_tracked_for_a_table_not_declared_up_front() -> None:
    metrics = SidecarMetrics(tables=[], clock=Clock(BLOCK_EPOCH + 2.0))
    metrics.lines_published("extra_table", 1, newest_block_time=BLOCK_TIME)

    assert value(metrics, "hyperdata_sidecar_publish_lag_seconds", table="extra_table") == pytest.approx(2.0)


def test_oldest_unsealed_age_counts_from_finalization_and_resets_when_all_are_sealed() -> None:
    clock = Clock(1_000_000.0)
    metrics = SidecarMetrics(clock=clock)
    metrics.set_oldest_unsealed(FILLS, 999_940.0)
    aged = value(metrics, "hyperdata_sidecar_oldest_unsealed_finalized_age_seconds", table=FILLS)
    metrics.set_oldest_unsealed(FILLS, None)

    assert aged == 60.0
    assert value(metrics, "hyperdata_sidecar_oldest_unsealed_finalized_age_seconds", table=FILLS) == 0


def test_oldest_unsealed_hour_age_counts_from_the_end_of_that_hour() -> None:
    clock = Clock(hour_start_epoch("20260610", "13") + 1800)
    metrics = SidecarMetrics(clock=clock)
    metrics.set_oldest_unsealed_hour_end(FILLS, hour_start_epoch("20260610", "14"))
    running = value(metrics, "hyperdata_sidecar_oldest_unsealed_hour_age_seconds", table=FILLS)
    clock.now += 3600
    overdue = value(metrics, "hyperdata_sidecar_oldest_unsealed_hour_age_seconds", table=FILLS)
    metrics.set_oldest_unsealed_hour_end(FILLS, None)

    assert (running, overdue) == (0, 1800)
    assert value(metrics, "hyperdata_sidecar_oldest_unsealed_hour_age_seconds", table=FILLS) == 0


# -- for alerts ------------------------------------------------------------------------------


def test_lost_files_are_counted_per_table_from_zero() -> None:
    metrics = SidecarMetrics(tables=[BOOK, FILLS])
    metrics.file_lost(FILLS)
    metrics.file_lost(FILLS)

    assert value(metrics, "hyperdata_sidecar_files_lost_total", table=BOOK) == 0
    assert value(metrics, "hyperdata_sidecar_files_lost_total", table=FILLS) == 2


def test_every_dlq_reason_of_every_table_starts_at_zero() -> None:
    metrics = SidecarMetrics(tables=[BOOK, FILLS])

    assert {
        (table, reason): value(metrics, "hyperdata_sidecar_dlq_lines_total", table=table, reason=reason)
        for table in (BOOK, FILLS)
        for reason in REASONS
    } == {(table, reason): 0 for table in (BOOK, FILLS) for reason in REASONS}


def test_newest_hour_file_is_absent_until_set_then_holds_the_hour_start() -> None:
    metrics = SidecarMetrics()
    before = value(metrics, "hyperdata_sidecar_newest_hour_file_start_seconds", table=BOOK)
    metrics.set_newest_hour_file(BOOK, hour_start_epoch("20260611", "0"))

    assert before is None  # no file seen yet is not "a file from 1970"
    assert value(metrics, "hyperdata_sidecar_newest_hour_file_start_seconds", table=BOOK) == calendar.timegm(
        (2026, 6, 11, 0, 0, 0)
    )


def test_lag_warn_threshold_is_exposed_for_alerts() -> None:
    metrics = SidecarMetrics()
    metrics.set_lag_warn_bytes(268_435_456)

    assert value(metrics, "hyperdata_sidecar_lag_warn_bytes") == 268_435_456


@pytest.mark.parametrize(
    ("date", "hour", "utc"),
    [
        ("20260610", "9", (2026, 6, 10, 9)),
        ("20260610", "09", (2026, 6, 10, 9)),
        ("20261231", "23", (2026, 12, 31, 23)),
        ("20240229", "0", (2024, 2, 29, 0)),
    ],
)
def test_hour_start_is_the_utc_hour_the_file_is_named_for(date: str, hour: str, utc: tuple[int, ...]) -> None:
    assert hour_start_epoch(date, hour) == calendar.timegm((*utc, 0, 0))


# -- isolation ---------------------------------------------------------------------------------


def test_two_instances_in_one_process_keep_separate_values() -> None:
    first, second = SidecarMetrics(), SidecarMetrics()
    first.lines_published(BOOK, 7)

    assert value(first, "hyperdata_sidecar_lines_published_total", table=BOOK) == 7
    assert value(second, "hyperdata_sidecar_lines_published_total", table=BOOK) == 0


def test_nothing_is_registered_in_the_global_registry() -> None:
    SidecarMetrics().lines_published(BOOK, 1)

    assert b"hyperdata_sidecar_" not in prometheus_client.generate_latest(prometheus_client.REGISTRY)


def test_a_given_registry_is_used() -> None:
    registry = prometheus_client.CollectorRegistry()
    SidecarMetrics(registry).lines_published(BOOK, 2)

    assert registry.get_sample_value("hyperdata_sidecar_lines_published_total", {"table": BOOK}) == 2


# -- block_time parsing ------------------------------------------------------------------------


def test_block_time_with_nanoseconds_and_no_zone_is_utc() -> None:
    assert epoch_of(BLOCK_TIME) == pytest.approx(BLOCK_EPOCH, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    ["2026-06-10T12:56:15Z", "2026-06-10T14:56:15+02:00", "2026-06-10T12:56:15", "2026-06-10 12:56:15.000"],
)
def test_block_time_accepts_iso_variants(text: str) -> None:
    assert epoch_of(text) == calendar.timegm((2026, 6, 10, 12, 56, 15))


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-10T12:56:15", "2026-06-10T25:00:00", "1781096175"])
def test_block_time_returns_none_for_what_is_not_a_timestamp(text: str) -> None:
    assert epoch_of(text) is None


# -- reading back ------------------------------------------------------------------------------


def test_lines_published_totals_lists_every_known_table_with_its_count() -> None:
    metrics = SidecarMetrics(tables=[BOOK, FILLS])
    metrics.lines_published(FILLS, 4)
    metrics.lines_published(FILLS, 3)

    assert metrics.lines_published_totals() == {BOOK: 0, FILLS: 7}


def test_dlq_counts_are_grouped_by_table_then_reason() -> None:
    metrics = SidecarMetrics()
    metrics.dlq(BOOK, "blank", 2)
    metrics.dlq(BOOK, "malformed")
    metrics.dlq(FILLS, "blank")

    assert metrics.dlq_counts() == {BOOK: {"blank": 2, "malformed": 1}, FILLS: {"blank": 1}}


def test_publish_lag_reads_back_as_none_before_the_first_line_then_as_the_gauge() -> None:
    clock = Clock(BLOCK_EPOCH + 12.0)
    metrics = SidecarMetrics(clock=clock)
    before = metrics.publish_lag_seconds(BOOK)
    metrics.lines_published(BOOK, 1, newest_block_time=BLOCK_TIME)

    assert before is None
    assert metrics.publish_lag_seconds(BOOK) == pytest.approx(12.0)


def test_snapshot_age_is_the_age_of_the_newest_snapshot_seen():
    clock = Clock(1_000_000.0)
    metrics = SidecarMetrics(clock=clock)
    assert value(metrics, "hyperdata_sidecar_snapshot_age_seconds") == 0

    metrics.set_newest_snapshot(clock.now - 300)
    metrics.set_newest_snapshot(clock.now - 900)  # an older one found later does not count
    clock.now += 60
    metrics.snapshot_emitted()

    assert value(metrics, "hyperdata_sidecar_snapshot_age_seconds") == 360
    assert value(metrics, "hyperdata_sidecar_snapshots_emitted_total") == 1
