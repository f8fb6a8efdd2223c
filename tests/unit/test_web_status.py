"""The status picture: per-table progress and the list of problems an operator should see."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hyperdata_sidecar.core.backlog import Backlog, Estimate
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.transfer import estimate_transfer
from hyperdata_sidecar.web.files import LiveFile, file_statuses
from hyperdata_sidecar.web.status import (
    Problem,
    RunningBackup,
    TableStatus,
    Thresholds,
    catch_up_line,
    problems,
    table_status,
)

FILLS = "node_fills_streaming"
BOOK = "node_raw_book_diffs_streaming"
NOW = datetime(2026, 6, 10, 14, 0, 0, tzinfo=UTC).timestamp()
THRESHOLDS = Thresholds(lag_seconds=30, lag_bytes=1_000)


def path(hour: str, table: str = FILLS) -> str:
    return f"{table}/hourly/20260610/{hour}"


def fills_status(files, **overrides):
    fields = {"lines_published": 10, "publish_lag_s": 1.5, "lines_per_s": 3.0, "dlq": {}}
    fields.update(overrides)
    return table_status(FILLS, "hyperliquid.fills", files, **fields)


def test_table_status_follows_the_current_file_and_counts_only_its_own_files() -> None:
    cursors = {
        path("12"): FileCursor(path=path("12"), stage=CursorStage.FINALIZED),
        path("13"): FileCursor(path=path("13"), byte_offset=100),
        path("13", BOOK): FileCursor(path=path("13", BOOK)),
    }
    files = file_statuses(cursors, {path("13"): LiveFile(size=160, held_bytes=60)}, {}, {})

    status = fills_status(files)

    assert (status.current_file, status.current_state, status.lag_bytes, status.held_bytes, status.files) == (
        path("13"),
        "tailing",
        60,
        60,
        2,
    )


def test_table_status_without_files_has_no_current_file() -> None:
    status = fills_status([])

    assert (status.current_file, status.lag_bytes, status.files) == (None, 0, 0)


def test_a_healthy_sidecar_has_no_problems() -> None:
    files = file_statuses({path("13"): FileCursor(path=path("13"))}, {}, {}, {})

    assert problems(not_ready=[], tables=[fills_status(files)], files=files, thresholds=THRESHOLDS, now=NOW) == []


def test_not_ready_reasons_are_the_first_errors_and_lags_come_last_as_warnings() -> None:
    found = problems(
        not_ready=["broker unreachable (k:9092)"],
        tables=[fills_status([], dlq={"blank": 1}, publish_lag_s=31.0)],
        files=[],
        thresholds=THRESHOLDS,
        now=NOW,
    )

    assert [p.level for p in found] == ["error", "error", "warning"]
    assert found[0] == Problem("error", "broker unreachable (k:9092)")


def test_a_native_engine_that_did_not_load_is_the_first_warning_with_its_reason() -> None:
    reason = "the native line engine (module hyperdata_sidecar_engine) is installed but does not import (ImportError: x)"
    found = problems(
        not_ready=[],
        tables=[fills_status([], publish_lag_s=31.0)],
        files=[],
        thresholds=THRESHOLDS,
        now=NOW,
        engine_fallback=reason,
    )

    assert found[0] == Problem("warning", f"line engine: {reason}; the Python engine runs instead")
    assert [p.level for p in found] == ["warning", "warning"]


def test_lags_above_their_thresholds_are_problems() -> None:
    files = file_statuses({path("13"): FileCursor(path=path("13"))}, {path("13"): LiveFile(size=5_000, held_bytes=0)}, {}, {})

    found = problems(not_ready=[], tables=[fills_status(files, publish_lag_s=95.0)], files=files, thresholds=THRESHOLDS, now=NOW)

    assert found == [
        Problem("warning", f"{FILLS}: publish lag 1 m 35 s (warn above 30 s)"),
        Problem("warning", f"{FILLS}: tail lag 4.9 KiB (warn above 1000 B)"),
    ]


def test_a_failed_backup_and_a_long_unsealed_file_are_problems_but_a_fresh_one_is_not() -> None:
    cursors = {
        path("10"): FileCursor(path=path("10"), stage=CursorStage.FINALIZED, finalized_at="2026-06-10T13:58:00.000Z"),
        path("11"): FileCursor(path=path("11"), stage=CursorStage.FINALIZED, finalized_at="2026-06-10T13:59:50.000Z"),
        path("12"): FileCursor(path=path("12"), stage=CursorStage.FINALIZED, finalized_at="2026-06-10T13:00:00.000Z"),
    }
    backups = {path("12"): {"status": "failed", "reason": "hash_mismatch", "attempts": 4}}
    files = file_statuses(cursors, {}, {path("12"): {"sealed_at": "x"}}, backups)

    found = problems(not_ready=[], tables=[], files=files, thresholds=THRESHOLDS, now=NOW)

    assert found == [
        Problem("error", f"{path('10')}: finalized 2 m 00 s ago, no seal recorded"),
        Problem("error", f"{path('12')}: backup failed (hash_mismatch, attempt 4)"),
    ]


def test_dlq_lines_are_one_problem_per_table_with_counts_by_reason() -> None:
    found = problems(
        not_ready=[],
        tables=[fills_status([], dlq={"malformed": 2, "blank": 1, "no_coin": 0})],
        files=[],
        thresholds=THRESHOLDS,
        now=NOW,
    )

    assert found == [Problem("error", f"{FILLS}: 3 line(s) sent to the DLQ (blank 1, malformed 2)")]


def test_late_appends_and_rewritten_sealed_files_are_errors_and_regressions_a_warning_per_table() -> None:
    found = problems(
        not_ready=[],
        tables=[],
        files=[],
        thresholds=THRESHOLDS,
        now=NOW,
        late_appends=[{"path": path("12"), "revision": 2, "sealed_size": 900, "size": 1_000}],
        rewritten=[{"path": path("11"), "reason": "truncated", "sealed_size": 900, "size": 10}],
        regressions={FILLS: {"count": 2, "path": path("13"), "offset": 4_096, "previous": 9, "block": 7, "epoch": 2}},
    )

    assert found == [
        Problem(
            "error",
            f"{path('12')}: grew from 900 to 1000 bytes after its seal; the late lines are published"
            " (line ids tagged |late-…) and sealed again as revision 2",
        ),
        Problem(
            "error",
            f"{path('11')}: shrank after its seal (900 → 10 bytes); it is no longer read, and Kafka and its"
            " seal keep what was sealed",
        ),
        Problem(
            "warning",
            f"{FILLS}: 2 block regression(s) since start, the last in {path('13')} at byte 4096"
            " (block 7 after 9); line ids now end in |r2",
        ),
    ]


def test_a_parked_backup_is_an_error_that_says_how_to_try_again() -> None:
    cursors = {path("12"): FileCursor(path=path("12"), stage=CursorStage.FINALIZED, revision=1)}
    backups = {path("12"): {"status": "parked", "reason": "unsafe_path", "attempts": 20, "revision": 1}}
    files = file_statuses(cursors, {}, {path("12"): {"sealed_at": "x"}}, backups)

    found = problems(not_ready=[], tables=[], files=files, thresholds=THRESHOLDS, now=NOW)

    assert found == [
        Problem(
            "error",
            f"{path('12')}: backup parked after 20 failed tries (unsafe_path); it is tried again on the next"
            f" start, or now with: faust -A hyperdata_sidecar backup-retry {path('12')}",
        ),
    ]


# ---------------------------------------------------------------------- backlog and time to live

GIB = 1024**3


def behind(table: str, nbytes: int, files: int, rate: float | None, eta: float | None, falling: bool = False) -> TableStatus:
    estimate = Estimate(Backlog(nbytes, files), rate, eta, falling)
    return table_status(table, "t", [], lines_published=0, publish_lag_s=None, lines_per_s=None, dlq={}, backlog=estimate)


@pytest.mark.parametrize(
    ("rate", "eta", "falling", "said"),
    [
        (5e6, 0.0, False, "live"),
        (None, None, False, "measuring the rate"),
        (0.0, None, False, "not shrinking"),
        (-1e6, None, True, "falling behind"),
        (1e6, 7_500.0, False, "live in 2 h 05 m"),
    ],
)
def test_a_tables_backlog_says_when_it_will_be_live(rate, eta, falling, said) -> None:
    assert behind(FILLS, 3 * GIB, 4, rate, eta, falling).backlog.live_in() == said


def test_no_catch_up_line_while_every_table_is_live_or_before_a_sample() -> None:
    live = behind(FILLS, 1000, 1, 10.0, 0.0)
    unsampled = fills_status([])

    assert catch_up_line([live, unsampled]) is None


def test_the_catch_up_line_sums_the_tables_behind_and_gives_the_slowest_ones_time() -> None:
    tables = [behind(FILLS, 2 * GIB, 3, 1e6, 600.0), behind(BOOK, GIB, 2, 1e6, 7_500.0), behind("x", 10, 1, 1.0, 0.0)]

    assert catch_up_line(tables) == "3.0 GiB in 5 hour file(s) not yet published; live in 2 h 05 m at the last minute's rate"


def test_the_catch_up_line_names_each_tables_state_while_one_has_no_time_to_live() -> None:
    tables = [behind(FILLS, 2 * GIB, 3, 1e6, 600.0), behind(BOOK, GIB, 2, None, None)]

    assert (
        catch_up_line(tables)
        == "3.0 GiB in 5 hour file(s) not yet published; fills live in 10 m 00 s, raw_book_diffs measuring the rate"
    )


def test_the_catch_up_line_names_the_tables_falling_behind() -> None:
    tables = [behind(FILLS, 2 * GIB, 3, -1e6, None, True), behind(BOOK, GIB, 2, 1e6, 60.0)]

    assert catch_up_line(tables) == (
        "3.0 GiB in 5 hour file(s) not yet published; falling behind: fills (the backlog does not shrink)"
    )


def test_a_table_falling_behind_is_a_warning() -> None:
    table = behind(FILLS, 2 * GIB, 3, -1e6, None, True)

    assert problems(not_ready=[], tables=[table], files=[], thresholds=THRESHOLDS, now=NOW) == [
        Problem(
            "warning",
            f"{FILLS}: falling behind: 2.0 GiB in 3 hour file(s) not yet published,"
            " and the backlog has not shrunk for the last half minute",
        )
    ]


# -- the running backup ---------------------------------------------------------------------------


def running(done: int, total: int, elapsed_s: float) -> RunningBackup:
    return RunningBackup.of(path("12"), "local", estimate_transfer(done, total, elapsed_s), "copy_file_range")


def test_the_running_backup_says_how_much_is_done_how_fast_and_how_long_is_left() -> None:
    assert running(GIB, 3 * GIB, 10.0).line() == "1.0 GiB of 3.0 GiB (33%) at 102.4 MiB/s, 20 s left"


def test_a_backup_just_started_has_no_rate_yet() -> None:
    assert running(0, GIB, 0.0).line() == "0 B of 1.0 GiB (0%), just started"


def test_a_backup_that_has_moved_nothing_does_not_guess_the_time_left() -> None:
    assert running(0, GIB, 5.0).line() == "0 B of 1.0 GiB (0%) at 0 B/s, time left unknown"


def test_the_running_backup_carries_its_file_sink_and_how_it_copies() -> None:
    backup = running(GIB, 2 * GIB, 4.0)

    assert (backup.path, backup.sink, backup.via, backup.done_bytes, backup.total_bytes) == (
        path("12"),
        "local",
        "copy_file_range",
        GIB,
        2 * GIB,
    )
    assert (backup.rate_bytes_per_s, backup.eta_s) == (GIB / 4, 4.0)
