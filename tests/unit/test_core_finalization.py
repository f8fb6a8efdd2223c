import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.finalization import FileStage, finalization_stage

NOW = 1_781_100_000.0


def stage(*, has_later_file=True, caught_up=True, quiet_for=10.0, grace_s=5.0):
    return finalization_stage(
        has_later_file=has_later_file,
        caught_up=caught_up,
        last_growth_at=NOW - quiet_for,
        now=NOW,
        grace_s=grace_s,
    )


def test_file_with_a_later_file_read_to_its_end_and_quiet_past_the_grace_is_finalized():
    assert stage() is FileStage.FINALIZED


def test_file_quiet_for_exactly_the_grace_period_is_finalized():
    assert stage(quiet_for=5.0, grace_s=5.0) is FileStage.FINALIZED


def test_file_that_grew_within_the_grace_period_is_settling():
    assert stage(quiet_for=4.999, grace_s=5.0) is FileStage.SETTLING


def test_file_that_grew_after_now_is_settling():
    assert stage(quiet_for=-1.0) is FileStage.SETTLING


def test_file_not_read_to_its_end_is_tailing():
    assert stage(caught_up=False) is FileStage.TAILING


def test_newest_file_is_tailing_even_when_quiet_and_read_to_its_end():
    assert stage(has_later_file=False) is FileStage.TAILING


def test_zero_grace_finalizes_as_soon_as_the_file_is_read_and_superseded():
    assert stage(quiet_for=0.0, grace_s=0.0) is FileStage.FINALIZED


@pytest.mark.parametrize("caught_up", [True, False])
@given(last_growth_at=st.floats(allow_nan=False), now=st.floats(allow_nan=False), grace_s=st.floats(0, 1e6))
def test_newest_file_is_never_finalized(caught_up, last_growth_at, now, grace_s):
    result = finalization_stage(
        has_later_file=False, caught_up=caught_up, last_growth_at=last_growth_at, now=now, grace_s=grace_s
    )
    assert result is FileStage.TAILING


@given(
    has_later_file=st.booleans(),
    caught_up=st.booleans(),
    last_growth_at=st.floats(0, 4e9),
    now=st.floats(0, 4e9),
    grace_s=st.floats(0, 3600),
)
def test_finalized_exactly_when_superseded_caught_up_and_quiet(
    has_later_file, caught_up, last_growth_at, now, grace_s
):
    result = finalization_stage(
        has_later_file=has_later_file,
        caught_up=caught_up,
        last_growth_at=last_growth_at,
        now=now,
        grace_s=grace_s,
    )
    expected = has_later_file and caught_up and now - last_growth_at >= grace_s
    assert (result is FileStage.FINALIZED) == expected
