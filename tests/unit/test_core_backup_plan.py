"""The backup retry policy and schedule: spaced tries, parking after BACKUP_MAX_TRIES, giving up on a gone source."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.backup_plan import MAX_DELAY_S, Outcome, RetrySchedule, Step, after_failure, superseded
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.seal import SealManifest


def manifest(path: str = "node_fills_streaming/hourly/20260610/13", revision: int = 1) -> SealManifest:
    hour = path.rsplit("/", 1)[1]
    return SealManifest(
        table="node_fills_streaming",
        path=path,
        date="20260610",
        hour=hour,
        block_range=None,
        size=1,
        sha256="a" * 64,
        finalized_at="2026-06-10T14:00:00.000Z",
        lines=0,
        dlq_lines=0,
        node="n",
        revision=revision,
    )


def test_tries_are_spaced_one_second_doubling_up_to_a_minute():
    delays = [after_failure(n, "io_error", 20).delay_s for n in range(1, 10)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]


def test_the_last_try_parks_the_file():
    assert after_failure(3, "unsafe_path", 3) == Step(Outcome.PARK)
    assert after_failure(2, "unsafe_path", 3).outcome is Outcome.RETRY


def test_a_missing_source_is_given_up_at_once():
    assert after_failure(1, "source_missing", 20) == Step(Outcome.GIVE_UP)


@given(st.integers(1, 10_000), st.integers(1, 100))
def test_a_retry_never_waits_longer_than_a_minute_and_a_series_never_exceeds_its_tries(tries, max_tries):
    step = after_failure(tries, "no_space", max_tries)
    assert (step.outcome is Outcome.PARK) == (tries >= max_tries)
    assert 0 <= step.delay_s <= MAX_DELAY_S


def test_retries_come_due_in_order_and_leave_the_schedule():
    schedule = RetrySchedule()
    a, b = manifest(), manifest("node_fills_streaming/hourly/20260610/14")
    schedule.retry(b, at=5.0)
    schedule.retry(a, at=3.0)
    assert schedule.due(2.0) == []
    assert schedule.due(6.0) == [a, b]
    assert schedule.due(100.0) == []


def test_one_file_has_one_retry_pending_and_a_new_revision_starts_a_new_series():
    schedule = RetrySchedule()
    first, second = manifest(), manifest(revision=2)
    assert [schedule.failed(first) for _ in range(3)] == [1, 2, 3]
    schedule.retry(first, at=1.0)
    schedule.retry(second, at=2.0)
    assert schedule.due(10.0) == [second]
    assert (schedule.failed(second), schedule.tries(first.path, 1)) == (1, 0)


def test_an_ended_series_forgets_its_tries_and_its_retry():
    schedule = RetrySchedule()
    schedule.failed(manifest())
    schedule.retry(manifest(), at=1.0)
    schedule.end(manifest().path)
    assert (schedule.tries(manifest().path, 1), schedule.due(10.0)) == (0, [])


@pytest.mark.parametrize("revision", [1, 2])
def test_tries_are_counted_per_revision(revision):
    schedule = RetrySchedule()
    schedule.failed(manifest(revision=revision))
    assert schedule.tries(manifest().path, revision) == 1


@pytest.mark.parametrize(
    ("stage", "cursor_revision", "manifest_revision", "expected"),
    [
        (CursorStage.FINALIZED, 1, 1, False),
        (CursorStage.REOPENED, 1, 1, True),  # the file grew: revision 2 follows
        (CursorStage.REOPENED, 1, 2, False),  # an older cursor in the table than the rotation in hand
        (CursorStage.FINALIZED, 2, 1, True),
        (CursorStage.TAILING, 0, 1, False),  # the finalized cursor has not reached the table yet
    ],
)
def test_a_revision_is_superseded_once_the_file_grew_past_it(stage, cursor_revision, manifest_revision, expected):
    cursor = FileCursor(path=manifest().path, stage=stage, revision=cursor_revision)
    assert superseded(cursor, manifest(revision=manifest_revision)) is expected
