"""Which finalized files go to the seal and backup agents again, at start and after a rebalance."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.handover import Occasion, needs_handover

PATH = "node_fills_streaming/hourly/20260610/22"
BOTH = list(Occasion)


def finalized(revision: int = 1) -> FileCursor:
    return FileCursor(path=PATH, stage=CursorStage.FINALIZED, revision=revision, finalized_at="2026-06-10T23:00:03.000Z")


def seal(revision: int = 1) -> dict[str, object]:
    return {"path": PATH, "revision": revision}


def backup(status: str, revision: int = 1) -> dict[str, object]:
    return {"status": status, "revision": revision}


@pytest.mark.parametrize("occasion", BOTH)
def test_a_file_backed_up_but_not_sealed_is_handed_over(occasion: Occasion) -> None:
    assert needs_handover(finalized(), None, backup("ok"), occasion)


@pytest.mark.parametrize("occasion", BOTH)
def test_a_file_sealed_but_never_backed_up_is_handed_over(occasion: Occasion) -> None:
    assert needs_handover(finalized(), seal(), None, occasion)


@pytest.mark.parametrize("occasion", BOTH)
@pytest.mark.parametrize("status", ["ok", "disabled"])
def test_a_file_sealed_and_backed_up_is_not_handed_over(occasion: Occasion, status: str) -> None:
    assert not needs_handover(finalized(), seal(), backup(status), occasion)


@pytest.mark.parametrize("occasion", BOTH)
def test_a_seal_and_backup_of_an_earlier_revision_do_not_count(occasion: Occasion) -> None:
    assert needs_handover(finalized(revision=2), seal(1), backup("ok", 2), occasion)
    assert needs_handover(finalized(revision=2), seal(2), backup("ok", 1), occasion)


@pytest.mark.parametrize("occasion", BOTH)
def test_a_failed_backup_is_handed_over(occasion: Occasion) -> None:
    assert needs_handover(finalized(), seal(), backup("failed"), occasion)


def test_a_parked_backup_gets_a_new_series_at_start_only() -> None:
    assert needs_handover(finalized(), seal(), backup("parked"), Occasion.START)
    assert not needs_handover(finalized(), seal(), backup("parked"), Occasion.REBALANCE)


def test_a_rebalance_hands_over_a_parked_backup_of_an_earlier_revision() -> None:
    assert needs_handover(finalized(revision=2), seal(2), backup("parked", 1), Occasion.REBALANCE)


@pytest.mark.parametrize("occasion", BOTH)
@pytest.mark.parametrize("stage", [s for s in CursorStage if s is not CursorStage.FINALIZED])
def test_only_finalized_files_are_handed_over(occasion: Occasion, stage: CursorStage) -> None:
    assert not needs_handover(FileCursor(path=PATH, stage=stage), None, None, occasion)
