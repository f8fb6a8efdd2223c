"""History: the last hour of lines/s and publish lag per table, in bounded memory."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.web.history import History

T = "node_fills_streaming"
BOOK = "node_raw_book_diffs_streaming"


def test_lines_per_s_is_the_increase_between_samples_at_the_later_ones_time() -> None:
    history = History(span_s=3600, every_s=15)
    history.record(1000.0, {T: 0}, {})
    history.record(1015.0, {T: 300}, {})
    history.record(1030.0, {T: 300}, {})

    assert history.lines_per_s(T) == [(1015.0, 20.0), (1030.0, 0.0)]


def test_a_table_missing_from_the_counters_publishes_nothing() -> None:
    history = History()
    history.record(0.0, {T: 5}, {})
    history.record(15.0, {T: 9}, {})

    assert history.lines_per_s(BOOK) == [(15.0, 0.0)]


def test_publish_lag_is_kept_per_sample_and_unknown_before_the_first_line() -> None:
    history = History()
    history.record(0.0, {T: 0}, {T: None})
    history.record(15.0, {T: 7}, {T: 2.5})

    assert history.publish_lag(T) == [(0.0, None), (15.0, 2.5)]
    assert history.publish_lag(BOOK) == [(0.0, None), (15.0, None)]


def test_samples_older_than_the_span_are_dropped() -> None:
    history = History(span_s=60, every_s=15)
    for second in range(0, 301, 15):
        history.record(float(second), {T: second}, {T: 0.0})

    assert [at for at, _lag in history.publish_lag(T)] == [240.0, 255.0, 270.0, 285.0, 300.0]


def test_memory_stays_bounded_when_samples_come_faster_than_promised() -> None:
    history = History(span_s=60, every_s=15)
    for tenth in range(600):
        history.record(tenth / 10, {T: tenth}, {})

    assert len(history.publish_lag(T)) == 60 // 15 + 1
    assert history.publish_lag(T)[-1][0] == pytest.approx(59.9)


@pytest.mark.parametrize(("span_s", "every_s"), [(0, 15), (3600, 0), (-1, 15)])
def test_span_and_cadence_must_be_positive(span_s: float, every_s: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        History(span_s=span_s, every_s=every_s)
