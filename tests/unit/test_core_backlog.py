"""Backlog and time to live: shrinking, growing, new hour files appearing, a table with no files."""

from __future__ import annotations

from hyperdata_sidecar.core.backlog import Backlog, BacklogMeter, backlog_of

MiB = 1024 * 1024


def test_the_backlog_is_the_unpublished_part_of_the_current_file_and_every_later_file_whole():
    assert backlog_of([(100 * MiB, 40 * MiB), (70 * MiB, 0), (5, 0)]) == Backlog(60 * MiB + 70 * MiB + 5, 3)


def test_a_table_with_no_files_or_everything_published_has_no_backlog():
    assert backlog_of([]) == Backlog(0, 0)
    assert backlog_of([(100, 100), (0, 0)]) == Backlog(0, 0)


def test_a_shrinking_backlog_has_a_drain_rate_and_a_time_to_live():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(1000 * MiB, 5))
    estimate = meter.sample(10.0, Backlog(900 * MiB, 5))
    assert estimate.drain_bytes_per_s == 10 * MiB
    assert estimate.eta_s == 90.0
    assert not estimate.falling_behind


def test_a_growing_backlog_has_no_time_to_live_and_falls_behind_once_half_a_window_has_passed():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(100 * MiB, 1))
    early = meter.sample(10.0, Backlog(110 * MiB, 1))
    assert early.eta_s is None and early.drain_bytes_per_s is not None and early.drain_bytes_per_s < 0
    assert not early.falling_behind
    late = meter.sample(30.0, Backlog(130 * MiB, 2))
    assert late.eta_s is None and late.falling_behind


def test_a_new_hour_file_appearing_raises_the_backlog_and_the_rate_says_so():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(500 * MiB, 2))
    estimate = meter.sample(20.0, Backlog(400 * MiB + 200 * MiB, 3))  # read 100 MiB, a 200 MiB file appeared
    assert estimate.drain_bytes_per_s == -5 * MiB
    assert estimate.eta_s is None


def test_a_backlog_within_a_few_seconds_of_writes_is_live():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(MiB // 2, 1))
    estimate = meter.sample(40.0, Backlog(MiB, 1))
    assert estimate.eta_s == 0.0 and not estimate.falling_behind


def test_the_rate_is_measured_over_the_last_window_only():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(10_000 * MiB, 9))  # an old burst, forgotten after a minute
    for t in range(10, 200, 10):
        estimate = meter.sample(float(t), Backlog(5000 * MiB - t * MiB, 5))
    assert estimate.drain_bytes_per_s == MiB


def test_one_sample_has_no_rate_yet():
    estimate = BacklogMeter(live_bytes=MiB).sample(0.0, Backlog(10 * MiB, 1))
    assert estimate.drain_bytes_per_s is None and estimate.eta_s is None and not estimate.falling_behind


def test_a_small_backlog_spread_over_several_hour_files_is_not_live():
    meter = BacklogMeter(window_s=60.0, live_bytes=MiB)
    meter.sample(0.0, Backlog(MiB // 2, 3))
    estimate = meter.sample(10.0, Backlog(MiB // 4, 2))
    assert estimate.eta_s == 10.0
