"""File states for the web view: cursor stage + seals + backups, ordering, lag and recency."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.web.files import (
    FileState,
    LiveFile,
    current_file,
    file_state,
    file_statuses,
    parked_backups,
    recent_backups,
    recent_seals,
)

FILLS = "node_fills_streaming"
BOOK = "node_raw_book_diffs_streaming"


def path(hour: str, date: str = "20260610", table: str = FILLS) -> str:
    return f"{table}/hourly/{date}/{hour}"


@pytest.mark.parametrize(
    ("stage", "sealed", "backup", "expected"),
    [
        (CursorStage.TAILING, False, None, FileState.TAILING),
        (CursorStage.SKIPPED, False, None, FileState.SKIPPED),
        (CursorStage.FINALIZED, False, None, FileState.FINALIZED),
        (CursorStage.FINALIZED, False, "ok", FileState.FINALIZED),
        (CursorStage.FINALIZED, True, None, FileState.SEALED),
        (CursorStage.FINALIZED, True, "disabled", FileState.SEALED),
        (CursorStage.FINALIZED, True, "ok", FileState.BACKED_UP),
        (CursorStage.FINALIZED, True, "failed", FileState.BACKUP_FAILED),
        (CursorStage.FINALIZED, False, "failed", FileState.BACKUP_FAILED),
        (CursorStage.FINALIZED, True, "parked", FileState.BACKUP_PARKED),
        (CursorStage.FINALIZED, False, "parked", FileState.BACKUP_PARKED),
        (CursorStage.REOPENED, True, "ok", FileState.REOPENED),
        (CursorStage.REWRITTEN, True, "ok", FileState.REWRITTEN),
    ],
)
def test_state_combines_cursor_stage_seal_and_backup(stage, sealed, backup, expected) -> None:
    assert file_state(stage, sealed=sealed, backup_status=backup) is expected


def test_statuses_are_ordered_by_table_then_date_and_hour_as_numbers() -> None:
    cursors = {p: FileCursor(path=p) for p in (path("10"), path("9"), path("0", "20260611"), path("3", table=BOOK))}

    rows = file_statuses(cursors, {}, {}, {})

    assert [r.path for r in rows] == [path("9"), path("10"), path("0", "20260611"), path("3", table=BOOK)]


def test_paths_that_are_not_hour_files_are_left_out() -> None:
    cursors = {"elsewhere/file": FileCursor(path="elsewhere/file"), path("1"): FileCursor(path=path("1"))}

    assert [r.path for r in file_statuses(cursors, {}, {}, {})] == [path("1")]


def test_a_tailing_file_reports_its_live_size_lag_and_held_bytes() -> None:
    cursor = FileCursor(path=path("13"), byte_offset=1_000, size=1_000, lines=7, dlq_lines=1)

    [row] = file_statuses({cursor.path: cursor}, {cursor.path: LiveFile(size=1_250, held_bytes=40)}, {}, {})

    assert (row.state, row.offset, row.size, row.lag_bytes, row.held_bytes) == ("tailing", 1_000, 1_250, 250, 40)
    assert (row.table, row.date, row.hour, row.lines, row.dlq_lines) == (FILLS, "20260610", "13", 7, 1)


def test_a_file_the_tailer_has_not_sized_yet_reports_its_cursor_size() -> None:
    cursor = FileCursor(path=path("13"), byte_offset=10, size=30)

    [row] = file_statuses({cursor.path: cursor}, {cursor.path: LiveFile(size=-1, held_bytes=0)}, {}, {})

    assert (row.size, row.lag_bytes) == (30, 20)


def test_a_finished_file_has_no_lag_and_carries_its_seal_time_and_backup() -> None:
    cursor = FileCursor(
        path=path("12"), byte_offset=900, size=900, stage=CursorStage.FINALIZED, finalized_at="2026-06-10T13:00:04.000Z"
    )
    seals = {cursor.path: {"path": cursor.path, "sealed_at": "2026-06-10T13:00:05.000Z"}}
    backups = {cursor.path: {"status": "ok", "sink": "local", "attempts": 1, "ref": "/b/x", "sha256": "ab", "at": "t"}}

    [row] = file_statuses({cursor.path: cursor}, {}, seals, backups)

    assert (row.state, row.lag_bytes, row.sealed_at) == ("backed_up", 0, "2026-06-10T13:00:05.000Z")
    assert row.backup == {"status": "ok", "sink": "local", "attempts": 1, "ref": "/b/x", "at": "t"}


def test_current_file_is_the_first_tailing_file_of_the_table() -> None:
    cursors = {
        path("11"): FileCursor(path=path("11"), stage=CursorStage.FINALIZED),
        path("12"): FileCursor(path=path("12")),
        path("13"): FileCursor(path=path("13")),
        path("5", table=BOOK): FileCursor(path=path("5", table=BOOK)),
    }
    rows = file_statuses(cursors, {}, {}, {})

    assert current_file(rows, FILLS).path == path("12")


def test_current_file_of_a_table_with_nothing_tailing_is_its_newest_and_none_without_files() -> None:
    cursors = {p: FileCursor(path=p, stage=CursorStage.FINALIZED) for p in (path("11"), path("12"))}
    rows = file_statuses(cursors, {}, {}, {})

    assert current_file(rows, FILLS).path == path("12")
    assert current_file(rows, BOOK) is None


def test_recent_seals_are_newest_first_and_bounded() -> None:
    seals = {path(str(h)): {"path": path(str(h)), "sealed_at": f"2026-06-10T{h:02d}:00:01.000Z"} for h in range(5)}

    assert [s["path"] for s in recent_seals(seals, 3)] == [path("4"), path("3"), path("2")]


def test_recent_backups_carry_their_path_and_are_most_recent_first() -> None:
    backups = {
        path("1"): {"status": "ok", "attempts": 1, "at": "2026-06-10T02:00:00.000Z"},
        path("2"): {"status": "failed", "attempts": 3, "reason": "io", "at": "2026-06-10T03:00:00.000Z"},
    }

    assert recent_backups(backups, 5) == [
        {"path": path("2"), "status": "failed", "attempts": 3, "reason": "io", "at": "2026-06-10T03:00:00.000Z"},
        {"path": path("1"), "status": "ok", "attempts": 1, "at": "2026-06-10T02:00:00.000Z"},
    ]


def test_parked_backups_are_every_parked_one_with_its_reason_parked_longest_ago_first() -> None:
    backups = {
        path("1"): {"status": "parked", "attempts": 5, "reason": "no_space", "error": "full", "at": "2026-06-10T04:00:00.000Z"},
        path("2"): {"status": "failed", "attempts": 1, "reason": "io_error", "at": "2026-06-10T05:00:00.000Z"},
        path("3"): {"status": "parked", "attempts": 5, "reason": "permission", "at": "2026-06-10T01:00:00.000Z"},
        path("4"): {"status": "ok", "ref": "file:///b/4", "at": "2026-06-10T06:00:00.000Z"},
    }

    assert [(b["path"], b["reason"]) for b in parked_backups(backups)] == [(path("3"), "permission"), (path("1"), "no_space")]
    assert parked_backups(backups)[1]["error"] == "full"


def test_a_seal_and_a_backup_of_an_earlier_revision_leave_the_new_revision_finalized() -> None:
    cursor = FileCursor(path=path("12"), byte_offset=900, size=900, stage=CursorStage.FINALIZED, revision=2)
    earlier = {"revision": 1, "sealed_at": "x"}
    [status] = file_statuses({path("12"): cursor}, {}, {path("12"): earlier}, {path("12"): {"status": "ok", "revision": 1}})
    assert (status.state, status.revision) == (FileState.FINALIZED.value, 2)
    [status] = file_statuses(
        {path("12"): cursor}, {}, {path("12"): {"revision": 2}}, {path("12"): {"status": "ok", "revision": 1}}
    )
    assert status.state == FileState.SEALED.value


def test_a_reopened_file_shows_how_far_its_late_lines_are_published() -> None:
    cursor = FileCursor(path=path("12"), byte_offset=900, size=900, stage=CursorStage.REOPENED, revision=1)
    [status] = file_statuses({path("12"): cursor}, {path("12"): LiveFile(size=1_000, held_bytes=10)}, {}, {})
    assert (status.state, status.lag_bytes, status.held_bytes) == (FileState.REOPENED.value, 100, 10)
