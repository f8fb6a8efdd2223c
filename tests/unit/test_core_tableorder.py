"""The table's file order: where each new file starts, and what a fresh start skips."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.tableorder import Adoption, Role, TableOrder


def test_beginning_publishes_every_file_from_its_first_byte():
    order = TableOrder(initial_position="beginning", fresh=True)
    assert [order.adopt(is_newest=n) for n in (False, False, True)] == [Adoption.FROM_START] * 3


def test_end_on_a_fresh_start_skips_every_older_file_of_the_first_scan_and_starts_the_newest_at_its_end():
    order = TableOrder(initial_position="end", fresh=True)
    assert [order.adopt(is_newest=n) for n in (False, False, False, True)] == [Adoption.SKIP] * 3 + [Adoption.AT_END]


def test_end_applies_to_the_first_scan_only_files_appearing_later_are_published_whole():
    order = TableOrder(initial_position="end", fresh=True)
    order.scanned()
    assert order.adopt(is_newest=True) is Adoption.FROM_START


def test_end_with_stored_state_is_no_fresh_start():
    assert TableOrder(initial_position="end", fresh=False).adopt(is_newest=False) is Adoption.FROM_START


def test_an_unknown_initial_position_is_refused():
    with pytest.raises(ValueError):
        TableOrder(initial_position="middle", fresh=True)


def finalized(path: str, carry: tuple[int | None, int, int]) -> FileCursor:
    cursor = FileCursor.adopted(path, (None, 0, 0)).with_changes(seq_block=999, seq_next=9, seq_epoch=2)
    return cursor.finalized(
        size=1, finalized_at="2026-06-10T13:00:00Z", sha256="0" * 64, head="", unterminated_at=None, writer_seq=carry
    )


def test_a_new_file_starts_from_the_end_of_the_previous_files_first_revision():
    order = TableOrder(initial_position="beginning", fresh=False)
    sealed = finalized("t/hourly/20260610/13", (1005, 3, 0))
    assert order.role(sealed) is Role.SEALED
    assert order.carry == (1005, 3, 0)
    # Lines appended after the seal move the file's own sequencer, not where the next file starts.
    reopened = sealed.reopened().with_changes(seq_block=1007, seq_next=1)
    assert order.role(reopened) is Role.REOPENED and order.carry == (1005, 3, 0)


def test_roles_follow_the_stage():
    order = TableOrder(initial_position="beginning", fresh=False)
    tailing = FileCursor.adopted("t/hourly/20260610/14", (1, 2, 0))
    assert order.role(tailing) is Role.CURRENT
    assert order.role(tailing.with_changes(stage=CursorStage.SKIPPED)) is Role.PASSED
    assert order.role(finalized("t/hourly/20260610/13", (5, 1, 0)).moved_to(CursorStage.REWRITTEN)) is Role.PASSED
    assert order.carry == (5, 1, 0)


def test_the_carry_moves_when_the_current_file_is_finished_or_lost():
    order = TableOrder(initial_position="beginning", fresh=False)
    order.finished((10, 4, 1))
    assert order.carry == (10, 4, 1)
    order.lost((12, 0, 1))
    assert order.carry == (12, 0, 1)


def test_only_a_fresh_start_at_the_end_leaves_unadopted_files_out_of_the_backlog():
    assert not TableOrder(initial_position="end", fresh=True).publishes_unadopted()
    assert TableOrder(initial_position="end", fresh=False).publishes_unadopted()
    assert TableOrder(initial_position="beginning", fresh=True).publishes_unadopted()
    order = TableOrder(initial_position="end", fresh=True)
    order.scanned()
    assert order.publishes_unadopted()  # files that appear after the first scan are published whole
