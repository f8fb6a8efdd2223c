import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.finalization import is_finalized

NOW = 1_781_100_000.0


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


@given(last_growth_at=st.floats(allow_nan=False), now=st.floats(allow_nan=False), grace_s=st.floats(0, 1e6))
def test_the_newest_file_is_never_finalized(last_growth_at, now, grace_s):
    assert not is_finalized(has_later_file=False, last_growth_at=last_growth_at, now=now, grace_s=grace_s)


@pytest.mark.parametrize("has_later_file", [True, False])
@given(last_growth_at=st.floats(0, 4e9), now=st.floats(0, 4e9), grace_s=st.floats(0, 3600))
def test_finalized_exactly_when_superseded_and_quiet(has_later_file, last_growth_at, now, grace_s):
    result = is_finalized(has_later_file=has_later_file, last_growth_at=last_growth_at, now=now, grace_s=grace_s)
    assert result == (has_later_file and now - last_growth_at >= grace_s)
