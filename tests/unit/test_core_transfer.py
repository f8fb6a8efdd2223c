"""The running backup's estimate: the fraction done, the average rate and the time left at it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.transfer import estimate_transfer

GIB = 1024**3


def test_the_rate_is_the_average_since_the_start_and_the_time_left_is_the_rest_at_that_rate() -> None:
    estimate = estimate_transfer(GIB, 4 * GIB, 10.0)

    assert estimate.rate_bytes_per_s == GIB / 10
    assert estimate.eta_s == pytest.approx(30.0)
    assert estimate.fraction == 0.25


def test_before_any_time_has_passed_neither_rate_nor_time_left_is_known() -> None:
    estimate = estimate_transfer(0, GIB, 0.0)

    assert (estimate.rate_bytes_per_s, estimate.eta_s, estimate.fraction) == (None, None, 0.0)


def test_a_copy_that_has_moved_nothing_yet_has_a_zero_rate_and_no_time_left() -> None:
    estimate = estimate_transfer(0, GIB, 5.0)

    assert (estimate.rate_bytes_per_s, estimate.eta_s) == (0.0, None)


def test_a_finished_copy_has_no_time_left() -> None:
    assert estimate_transfer(GIB, GIB, 8.0).eta_s == 0.0


def test_more_bytes_than_expected_count_as_done() -> None:
    estimate = estimate_transfer(GIB + 1, GIB, 8.0)

    assert (estimate.fraction, estimate.eta_s) == (1.0, 0.0)


def test_an_empty_file_is_done_at_once() -> None:
    estimate = estimate_transfer(0, 0, 0.0)

    assert (estimate.fraction, estimate.eta_s) == (1.0, 0.0)


@given(
    total=st.integers(min_value=1, max_value=2**50),
    share=st.floats(min_value=0.0, max_value=1.0),
    elapsed=st.floats(min_value=0.001, max_value=1e6),
)
def test_elapsed_plus_time_left_is_the_whole_copy_at_the_average_rate(total: int, share: float, elapsed: float) -> None:
    done = int(total * share)
    estimate = estimate_transfer(done, total, elapsed)

    assert 0.0 <= estimate.fraction <= 1.0
    if done > 0:
        assert estimate.eta_s is not None
        assert elapsed + estimate.eta_s == pytest.approx(total / (done / elapsed), rel=1e-9)
