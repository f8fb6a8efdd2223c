"""LineRates: lines/s from counter samples over a sliding window."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.web.rates import LineRates

T = "node_fills_streaming"


def test_rate_is_unknown_until_two_samples_exist() -> None:
    rates = LineRates(window_s=10)
    rates.observe(100.0, {T: 5})

    assert rates.per_second(T) is None


def test_rate_is_the_increase_over_the_time_between_samples() -> None:
    rates = LineRates(window_s=10)
    rates.observe(100.0, {T: 0})
    rates.observe(102.0, {T: 500})

    assert rates.per_second(T) == 250.0


def test_old_samples_leave_the_window_so_a_stopped_table_drops_to_zero() -> None:
    rates = LineRates(window_s=10)
    rates.observe(0.0, {T: 0})
    rates.observe(1.0, {T: 1_000})
    for second in range(2, 30):
        rates.observe(float(second), {T: 1_000})

    assert rates.per_second(T) == 0.0


def test_the_window_keeps_one_sample_from_before_its_start() -> None:
    rates = LineRates(window_s=10)
    for second in range(25):
        rates.observe(float(second), {T: second * 10})

    assert rates.per_second(T) == pytest.approx(10.0)


def test_a_table_missing_from_the_samples_has_rate_zero() -> None:
    rates = LineRates()
    rates.observe(0.0, {T: 1})
    rates.observe(1.0, {T: 2})

    assert rates.per_second("node_raw_book_diffs_streaming") == 0.0


def test_a_counter_that_went_down_gives_zero_not_a_negative_rate() -> None:
    rates = LineRates()
    rates.observe(0.0, {T: 900})
    rates.observe(1.0, {T: 10})

    assert rates.per_second(T) == 0.0


def test_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="window_s"):
        LineRates(window_s=0)
