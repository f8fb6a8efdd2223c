"""FileCursor: what a file's persisted state says, its stage moves, and records written before a field existed."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor, manifest_from_cursor

PATH = "node_fills_streaming/hourly/20260610/13"


def finalized(**changes) -> FileCursor:
    fields = dict(
        path=PATH,
        byte_offset=120,
        size=120,
        stage=CursorStage.FINALIZED,
        revision=1,
        sha256="ab" * 32,
        finalized_at="2026-06-10T14:00:03.120Z",
        seq_block=7,
        seq_next=3,
        carry_block=7,
        carry_next=3,
        lines=4,
        dlq_lines=1,
        first_block=5,
        last_block=7,
    )
    fields.update(changes)
    return FileCursor(**fields)


def test_a_record_round_trips():
    cursor = finalized(seq_epoch=2, block_regressions=2, unterminated_at=100)
    assert FileCursor.from_record(cursor.to_record()) == cursor


def test_a_record_from_before_revisions_is_a_first_revision_that_hands_its_end_state_on():
    record = finalized().to_record()
    for name in (
        "revision",
        "carry_block",
        "carry_next",
        "carry_epoch",
        "seq_epoch",
        "seq0_epoch",
        "block_regressions",
        "unterminated_at",
    ):
        del record[name]
    cursor = FileCursor.from_record(record)
    assert (cursor.revision, cursor.carry_state, cursor.seq_state, cursor.block_regressions) == (1, (7, 3, 0), (7, 3, 0), 0)


def test_a_tailing_record_from_before_revisions_is_at_revision_zero():
    record = FileCursor(path=PATH, byte_offset=10).to_record()
    del record["revision"]
    assert FileCursor.from_record(record).revision == 0


# The contract's stage moves, written out: tailing -> finalized or skipped; finalized -> reopened
# (it grew after its seal) or rewritten; reopened -> finalized again (the next revision) or
# rewritten; skipped and rewritten are final.
ALLOWED_MOVES = {
    (CursorStage.TAILING, CursorStage.FINALIZED),
    (CursorStage.TAILING, CursorStage.SKIPPED),
    (CursorStage.FINALIZED, CursorStage.REOPENED),
    (CursorStage.FINALIZED, CursorStage.REWRITTEN),
    (CursorStage.REOPENED, CursorStage.FINALIZED),
    (CursorStage.REOPENED, CursorStage.REWRITTEN),
}


@pytest.mark.parametrize("start", list(CursorStage))
@pytest.mark.parametrize("target", list(CursorStage))
def test_only_the_contracts_stage_moves_are_allowed(start, target):
    cursor = FileCursor(path=PATH, stage=start)
    if (start, target) in ALLOWED_MOVES:
        assert cursor.moved_to(target).stage is target
    else:
        with pytest.raises(ValueError, match=start.value):
            cursor.moved_to(target)


def test_a_reopened_file_resumes_at_its_end():
    reopened = finalized().reopened()
    assert (reopened.stage, reopened.byte_offset, reopened.seq_state, reopened.revision) == (
        CursorStage.REOPENED,
        120,
        (7, 3, 0),
        1,
    )


def test_a_reopened_file_resumes_where_its_unterminated_line_starts():
    reopened = finalized(unterminated_at=100, dlq_lines=2).reopened()
    assert (reopened.byte_offset, reopened.unterminated_at, reopened.dlq_lines) == (100, None, 2)


def test_a_restarted_file_starts_over_from_its_state_at_byte_zero_epoch_included():
    cursor = FileCursor.adopted(PATH, (7, 3, 1)).advanced(
        byte_offset=50,
        last_line_complete=True,
        seq_state=(9, 0, 2),
        lines=2,
        dlq_lines=0,
        regressions=1,
        first_block=7,
        last_block=9,
        size=50,
    )
    assert cursor.restarted() == FileCursor.adopted(PATH, (7, 3, 1))
    assert (cursor.block_regressions, cursor.seq_state) == (1, (9, 0, 2))


def test_the_manifest_carries_the_revision_and_the_regressions():
    manifest = manifest_from_cursor(finalized(revision=2, block_regressions=3), "node-1")
    assert manifest is not None
    assert (manifest.revision, manifest.block_regressions, manifest.size, manifest.block_range) == (2, 3, 120, (5, 7))


@pytest.mark.parametrize("stage", [CursorStage.TAILING, CursorStage.REOPENED, CursorStage.REWRITTEN, CursorStage.SKIPPED])
def test_only_a_finalized_cursor_has_a_manifest(stage):
    assert manifest_from_cursor(finalized(stage=stage), "node-1") is None
