"""The per-file state machine: every branch the tailer takes about one file, by its inputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.cursor import CursorStage
from hyperdata_sidecar.core.filestep import Step, loss_on_deletion, sealed_step, tail_step

TAILING, REOPENED = CursorStage.TAILING, CursorStage.REOPENED


def step(stage=TAILING, size=100, position=100, rewrite=None, later=True, grown_at=0.0, now=10.0, grace=5.0) -> Step:
    return tail_step(
        stage=stage,
        size=size,
        position=position,
        rewrite=rewrite,
        has_later_file=later,
        last_growth_at=grown_at,
        now=now,
        grace_s=grace,
    )


def test_a_file_with_bytes_past_the_position_is_read():
    assert step(size=150, position=100) is Step.READ


def test_a_file_read_to_its_end_with_a_later_file_and_quiet_for_the_grace_is_finalized():
    assert step(grown_at=0.0, now=5.0, grace=5.0) is Step.FINALIZE


def test_the_newest_file_is_never_finalized_however_long_it_is_quiet():
    assert step(later=False, now=1e9) is Step.WAIT


def test_a_file_that_grew_within_the_grace_waits():
    assert step(grown_at=8.0, now=10.0, grace=5.0) is Step.WAIT


def test_a_vanished_file_is_gone_whatever_else_holds():
    assert step(size=None, rewrite="truncated") is Step.GONE
    assert step(stage=REOPENED, size=None) is Step.GONE


@pytest.mark.parametrize("reason", ["truncated", "replaced"])
def test_a_rewritten_tailing_file_restarts_and_a_rewritten_reopened_one_is_only_reported(reason):
    assert step(rewrite=reason, size=500, position=100) is Step.RESTART
    assert step(stage=REOPENED, rewrite=reason, size=500, position=100) is Step.MARK_REWRITTEN


@pytest.mark.parametrize("stage", [CursorStage.FINALIZED, CursorStage.SKIPPED, CursorStage.REWRITTEN])
def test_only_a_file_being_published_has_a_tail_step(stage):
    with pytest.raises(ValueError):
        step(stage=stage)


@given(
    size=st.integers(0, 10**9),
    position=st.integers(0, 10**9),
    later=st.booleans(),
    quiet=st.floats(0, 100),
    grace=st.floats(0, 100),
)
def test_reading_comes_before_finalizing_a_file_is_finalized_only_when_read_to_its_end(size, position, later, quiet, grace):
    result = step(size=size, position=position, later=later, grown_at=0.0, now=quiet, grace=grace)
    if size > position:
        assert result is Step.READ
    else:
        assert result in (Step.FINALIZE, Step.WAIT)
        assert (result is Step.FINALIZE) == (later and quiet >= grace)


def test_a_sealed_file_is_looked_at_only_within_its_watch():
    assert sealed_step(watched=False, size=200, sealed_size=100, rewrite=None) is Step.WAIT
    assert sealed_step(watched=True, size=200, sealed_size=100, rewrite=None) is Step.REOPEN


def test_a_sealed_file_of_its_sealed_size_or_gone_waits():
    assert sealed_step(watched=True, size=100, sealed_size=100, rewrite=None) is Step.WAIT
    assert sealed_step(watched=True, size=None, sealed_size=100, rewrite=None) is Step.WAIT


def test_a_sealed_file_that_shrank_or_changed_is_marked_rewritten_not_reopened():
    assert sealed_step(watched=True, size=50, sealed_size=100, rewrite="truncated") is Step.MARK_REWRITTEN
    assert sealed_step(watched=True, size=200, sealed_size=100, rewrite="replaced") is Step.MARK_REWRITTEN


def test_a_deletion_loses_lines_before_the_seal_and_nothing_after_it():
    assert loss_on_deletion(CursorStage.TAILING, sealed=False) == "deleted before it was fully published"
    assert (
        loss_on_deletion(CursorStage.REOPENED, sealed=True) == "deleted before the lines appended after its seal were published"
    )
    assert loss_on_deletion(CursorStage.FINALIZED, sealed=False) == "deleted before its seal"
    assert loss_on_deletion(CursorStage.FINALIZED, sealed=True) is None
    assert loss_on_deletion(CursorStage.SKIPPED, sealed=False) is None
    assert loss_on_deletion(CursorStage.REWRITTEN, sealed=False) is None
