"""The upload's bandwidth limit: a token bucket on a clock the test makes up."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.token_bucket import TokenBucket

MIB = 1024 * 1024


def test_a_send_within_the_burst_goes_at_once():
    bucket = TokenBucket(rate=MIB, burst=4 * MIB, now=0.0)

    assert bucket.take(4 * MIB, now=0.0) == 0.0


def test_a_send_beyond_what_the_bucket_holds_waits_for_the_rate():
    bucket = TokenBucket(rate=MIB, burst=4 * MIB, now=0.0)
    bucket.take(4 * MIB, now=0.0)

    assert bucket.take(2 * MIB, now=0.0) == pytest.approx(2.0)


def test_a_send_larger_than_the_burst_leaves_a_debt_the_next_send_waits_off():
    bucket = TokenBucket(rate=MIB, burst=MIB, now=0.0)

    assert bucket.take(3 * MIB, now=0.0) == pytest.approx(2.0)
    assert bucket.take(MIB, now=2.0) == pytest.approx(1.0)  # the debt is paid at 2 s, this one at 3 s


def test_quiet_time_refills_no_more_than_the_burst():
    bucket = TokenBucket(rate=MIB, burst=2 * MIB, now=0.0)
    bucket.take(2 * MIB, now=0.0)

    assert bucket.take(2 * MIB, now=100.0) == 0.0
    assert bucket.take(MIB, now=100.0) == pytest.approx(1.0)


def test_a_clock_that_steps_back_adds_nothing():
    bucket = TokenBucket(rate=MIB, burst=MIB, now=10.0)
    bucket.take(MIB, now=10.0)

    assert bucket.take(MIB, now=5.0) == pytest.approx(1.0)


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (1, 0), (-1, 1)])
def test_a_bucket_needs_a_positive_rate_and_burst(rate, burst):
    with pytest.raises(ValueError, match="positive rate and burst"):
        TokenBucket(rate=rate, burst=burst, now=0.0)


@given(
    rate=st.integers(1, 100 * MIB),
    burst=st.integers(1, 16 * MIB),
    sends=st.lists(st.tuples(st.integers(1, 8 * MIB), st.floats(0, 5)), min_size=1, max_size=50),
)
def test_paced_sends_never_beat_the_rate_beyond_the_burst(rate, burst, sends):
    """A sender that waits as told, however its sends are sized and spaced, has sent by any moment
    at most ``burst + rate * elapsed`` bytes."""
    bucket = TokenBucket(rate=rate, burst=burst, now=0.0)
    now = 0.0
    sent = 0
    for nbytes, pause in sends:
        now += pause
        now += bucket.take(nbytes, now)  # the send happens after the wait
        sent += nbytes
        assert sent <= (burst + rate * now) * (1 + 1e-9) + 1
