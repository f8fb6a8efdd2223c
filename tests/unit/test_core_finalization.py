"""When an hour file is finished: concrete cases, and the properties any correct rule has."""

from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.finalization import is_finalized

NOW = 1_781_100_000.0

# Whole seconds: the properties below add and subtract them exactly.
moments = st.integers(0, 4_000_000_000).map(float)
graces = st.integers(0, 3600).map(float)


def finalized(*, has_later_file=True, quiet_for=10.0, grace_s=5.0) -> bool:
    return is_finalized(has_later_file=has_later_file, last_growth_at=NOW - quiet_for, now=NOW, grace_s=grace_s)


def test_a_file_with_a_later_file_quiet_past_the_grace_is_finalized():
    assert finalized()


def test_a_file_quiet_for_exactly_the_grace_period_is_finalized():
    assert finalized(quiet_for=5.0, grace_s=5.0)


def test_a_file_that_grew_within_the_grace_period_is_not():
    assert not finalized(quiet_for=4.999, grace_s=5.0)


def test_a_file_that_grew_after_now_is_not():
    assert not finalized(quiet_for=-1.0)


def test_the_newest_file_is_not_even_when_quiet():
    assert not finalized(has_later_file=False)


def test_zero_grace_finalizes_as_soon_as_the_file_is_superseded():
    assert finalized(quiet_for=0.0, grace_s=0.0)


def test_the_default_grace_of_three_seconds_finalizes_a_superseded_file_three_seconds_after_its_last_growth():
    assert not finalized(quiet_for=2.0, grace_s=3.0)
    assert finalized(quiet_for=3.0, grace_s=3.0)


@given(last_growth_at=st.floats(allow_nan=False), now=st.floats(allow_nan=False), grace_s=st.floats(0, 1e6))
def test_the_newest_file_is_never_finalized(last_growth_at, now, grace_s):
    assert not is_finalized(has_later_file=False, last_growth_at=last_growth_at, now=now, grace_s=grace_s)


@given(last_growth_at=moments, grace_s=graces)
def test_a_superseded_file_turns_finalized_the_second_its_grace_ends_and_not_one_second_before(last_growth_at, grace_s):
    def at(now: float) -> bool:
        return is_finalized(has_later_file=True, last_growth_at=last_growth_at, now=now, grace_s=grace_s)

    assert at(last_growth_at + grace_s)
    assert not at(last_growth_at + grace_s - 1)


@given(last_growth_at=moments, grace_s=graces, now=moments, later_by=st.integers(0, 10**6))
def test_once_finalized_a_file_stays_finalized_as_time_passes(last_growth_at, grace_s, now, later_by):
    def at(moment: float) -> bool:
        return is_finalized(has_later_file=True, last_growth_at=last_growth_at, now=moment, grace_s=grace_s)

    if at(now):
        assert at(now + later_by)


@given(last_growth_at=moments, now=moments, grace_s=graces, longer_by=st.integers(0, 3600))
def test_a_longer_grace_never_finalizes_a_file_sooner(last_growth_at, now, grace_s, longer_by):
    def with_grace(grace: float) -> bool:
        return is_finalized(has_later_file=True, last_growth_at=last_growth_at, now=now, grace_s=grace)

    if with_grace(grace_s + longer_by):
        assert with_grace(grace_s)
