"""The node's tables as the worker runs them: a tick that cannot read a file makes its table
unreadable in readiness (counted, logged, never raised) until a tick ends well; the ticks under way,
and the stop's wait for them (bounded); how far each table has published; every tracked file, from
the offsets table before the tailers are built and from the tailers after; each table's backlog
sampled. Fake tailers put into ``NodeTables.tailers``; a real Readiness, TableBacklogs and metrics;
the real tailers built by ``start`` on tests/unit/fake_broker.py's rooms."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar.core.backlog import Backlog
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.node_tables import NodeTables
from hyperdata_sidecar.ports import TrackedView
from hyperdata_sidecar.publishing import Abandoned
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.table_backlogs import TableBacklogs

from fake_broker import FakeBroker, FakeHost, rooms
from test_readiness import make_readiness

LOGGER = "tests.node_tables"
BOOK, STATUSES, FILLS = (spec.dir_name for spec in TABLES)
FILLS_22 = f"{FILLS}/hourly/20260610/22"
FILLS_23 = f"{FILLS}/hourly/20260610/23"
BOOK_5 = f"{BOOK}/hourly/20260611/5"
SNAPSHOT = "periodic_abci_states/20260610/100.rmp"


@dataclass
class Tail:
    cursor: FileCursor


@dataclass
class Tailer:
    """A table's tailer: its tick raises ``fails`` once (when set), or waits for ``release`` (when set)."""

    published_block: int | None = None
    files: dict[str, Tail] = field(default_factory=dict)
    backlog: Backlog = field(default_factory=lambda: Backlog(0, 0))
    fails: BaseException | None = None
    release: asyncio.Event | None = None
    ticks: int = 0

    async def tick(self) -> None:
        self.ticks += 1
        if self.release is not None:
            await self.release.wait()
        if self.fails is not None:
            failure, self.fails = self.fails, None
            raise failure

    def view(self, path: str) -> TrackedView:
        hour = HourFile.parse(path)
        assert hour is not None
        return TrackedView(hour, self.files[path].cursor, None)


@dataclass
class Parts:
    tables: NodeTables
    readiness: Readiness
    metrics: SidecarMetrics

    def tailer(self, table: str) -> Tailer:
        return self.tables.tailers[table]  # type: ignore[return-value]

    def read_failures(self, table: str) -> float | None:
        return self.metrics.registry.get_sample_value("hyperdata_sidecar_read_failures_total", {"table": table})


def parts(tmp_path: Path, offsets: dict[str, Any] | None = None, *, fakes: bool = True) -> Parts:
    readiness = make_readiness(tmp_path)
    metrics, log = SidecarMetrics(), EventLog(logging.getLogger(LOGGER))
    tables = NodeTables(readiness._settings, offsets or {}, readiness, TableBacklogs(metrics, log), metrics, log)
    if fakes:
        tables.tailers = {spec.dir_name: Tailer() for spec in TABLES}  # type: ignore[misc]
    return Parts(tables, readiness, metrics)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


# -- ticks ----------------------------------------------------------------------------------------


async def test_a_tick_runs_the_tables_tailer(tmp_path):
    p = parts(tmp_path)
    await p.tables.tick(FILLS)
    assert [p.tailer(t).ticks for t in (BOOK, STATUSES, FILLS)] == [0, 0, 1]


@pytest.mark.parametrize(
    "failure, error",
    [
        (PermissionError(13, "Permission denied"), "PermissionError: [Errno 13] Permission denied"),
        (EOFError("the file ended 10 bytes early"), "EOFError: the file ended 10 bytes early"),
    ],
)
async def test_a_tick_that_cannot_read_makes_the_table_unreadable_counted_and_logged_not_raised(tmp_path, caplog, failure, error):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = parts(tmp_path)
    p.tailer(FILLS).fails = failure
    await p.tables.tick(FILLS)
    assert p.readiness.unreadable == {FILLS: error}
    assert p.read_failures(FILLS) == 1 and p.read_failures(BOOK) == 0
    assert lines(caplog) == [("ERROR", "tick_failed", {"table": FILLS, "error": error})]


async def test_the_lines_of_a_table_that_stays_unreadable_are_rate_limited(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = parts(tmp_path)
    for table in (FILLS, FILLS, BOOK):
        p.tailer(table).fails = OSError("gone")
        await p.tables.tick(table)
    assert [f["table"] for _, _, f in lines(caplog)] == [FILLS, BOOK]
    assert p.read_failures(FILLS) == 2


async def test_a_tick_that_ends_well_clears_the_tables_unreadable_reason(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).fails = OSError("gone")
    await p.tables.tick(FILLS)
    await p.tables.tick(FILLS)
    assert p.readiness.unreadable == {}


async def test_an_abandoned_tick_is_swallowed_and_leaves_readiness_as_it_was(tmp_path):
    p = parts(tmp_path)
    p.readiness.unreadable[FILLS] = "OSError: gone"
    p.tailer(FILLS).fails = Abandoned()
    await p.tables.tick(FILLS)
    assert p.readiness.unreadable == {FILLS: "OSError: gone"} and p.read_failures(FILLS) == 0


async def test_any_other_error_of_a_tick_is_raised(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).fails = ValueError("a bug")
    with pytest.raises(ValueError):
        await p.tables.tick(FILLS)
    assert p.tables.ticking == set()


async def test_a_table_is_ticking_while_its_tick_is_under_way_only(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).release = asyncio.Event()
    ticking = asyncio.ensure_future(p.tables.tick(FILLS))
    await asyncio.sleep(0)
    assert p.tables.ticking == {FILLS}
    p.tailer(FILLS).release.set()
    await ticking
    assert p.tables.ticking == set()


async def test_a_failed_tick_is_no_longer_ticking(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).fails = OSError("gone")
    await p.tables.tick(FILLS)
    assert p.tables.ticking == set()


async def test_the_stop_waits_for_the_ticks_under_way_to_end(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).release = release = asyncio.Event()
    ticking = asyncio.ensure_future(p.tables.tick(FILLS))
    await asyncio.sleep(0)
    waiting = asyncio.ensure_future(p.tables.ticks_finished(timeout=60))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    release.set()
    await asyncio.wait_for(waiting, timeout=5)
    await ticking


async def test_the_stops_wait_for_a_tick_that_does_not_end_is_bounded_by_its_timeout(tmp_path):
    p = parts(tmp_path)
    p.tables.ticking.add(FILLS)  # a tick that never ends
    await asyncio.wait_for(p.tables.ticks_finished(timeout=0.1), timeout=5)
    assert p.tables.ticking == {FILLS}


# -- what the others ask --------------------------------------------------------------------------


def test_a_table_has_published_past_a_height_once_it_delivered_a_block_above_it(tmp_path):
    p = parts(tmp_path)
    p.tailer(BOOK).published_block = 101
    p.tailer(STATUSES).published_block = 100
    assert p.tables.published_past(100) == {BOOK: True, STATUSES: False, FILLS: False}


def test_before_start_the_tracked_files_are_the_offsets_tables_hour_files_by_table(tmp_path):
    stored = {
        FILLS_22: FileCursor(path=FILLS_22, stage=CursorStage.FINALIZED, revision=1).to_record(),
        BOOK_5: FileCursor(path=BOOK_5, byte_offset=10).to_record(),
        SNAPSHOT: {"path": SNAPSHOT},  # the offsets table also keys a forgotten snapshot's state: not an hour file
    }
    p = parts(tmp_path, stored, fakes=False)
    tracked = p.tables.tracked()
    assert set(tracked) == {BOOK, STATUSES, FILLS} and tracked[STATUSES] == {}
    assert tracked[FILLS] == {FILLS_22: TrackedView(HourFile.parse(FILLS_22), FileCursor.from_record(stored[FILLS_22]), None)}
    assert tracked[BOOK] == {BOOK_5: TrackedView(HourFile.parse(BOOK_5), FileCursor(path=BOOK_5, byte_offset=10), None)}


def test_once_started_the_tracked_files_are_the_tailers_views(tmp_path):
    p = parts(tmp_path, {FILLS_22: FileCursor(path=FILLS_22).to_record()})
    p.tailer(FILLS).files = {FILLS_23: Tail(FileCursor(path=FILLS_23, byte_offset=7))}
    tracked = p.tables.tracked()
    assert tracked[FILLS] == {FILLS_23: TrackedView(HourFile.parse(FILLS_23), FileCursor(path=FILLS_23, byte_offset=7), None)}
    assert tracked[BOOK] == {} and tracked[STATUSES] == {}


def test_the_cursors_are_every_tailers_files_cursors(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).files = {FILLS_22: Tail(FileCursor(path=FILLS_22)), FILLS_23: Tail(FileCursor(path=FILLS_23))}
    p.tailer(BOOK).files = {BOOK_5: Tail(FileCursor(path=BOOK_5))}
    assert sorted(c.path for c in p.tables.cursors()) == sorted([FILLS_22, FILLS_23, BOOK_5])


def test_a_backlog_sample_exports_each_tables_backlog(tmp_path):
    p = parts(tmp_path)
    p.tailer(FILLS).backlog = Backlog(4096, 2)
    p.tables.sample_backlogs()

    def backlog(table: str) -> tuple[float | None, float | None]:
        sample = p.metrics.registry.get_sample_value
        return (
            sample("hyperdata_sidecar_backlog_bytes", {"table": table}),
            sample("hyperdata_sidecar_backlog_files", {"table": table}),
        )

    assert backlog(FILLS) == (4096, 2) and backlog(BOOK) == (0, 0)
    assert set(p.tables.backlogs.estimates()) == {BOOK, STATUSES, FILLS}


def test_start_builds_one_tailer_per_table_from_its_stored_cursors(tmp_path):
    p = parts(tmp_path, fakes=False)
    stored = {FILLS: {FILLS_22: FileCursor(path=FILLS_22, stage=CursorStage.FINALIZED, revision=1, last_block=900)}}
    partitions = dict.fromkeys(p.tables.settings.contract_topics(), 1)
    p.tables.start(rooms(FakeHost(), FakeBroker(partitions)), stored)
    assert set(p.tables.tailers) == {BOOK, STATUSES, FILLS}
    assert [c.path for c in p.tables.cursors()] == [FILLS_22]
    assert p.tables.published_past(899) == {BOOK: False, STATUSES: False, FILLS: True}
    assert p.tables.tracked()[FILLS][FILLS_22].cursor == stored[FILLS][FILLS_22]


async def test_a_held_table_has_no_tailer_until_started_its_polls_do_nothing_and_it_has_published_nothing(tmp_path):
    stored_fills = FileCursor(path=FILLS_22, stage=CursorStage.FINALIZED, revision=1, last_block=900)
    p = parts(tmp_path, {FILLS_22: stored_fills.to_record()}, fakes=False)
    partitions = dict.fromkeys(p.tables.settings.contract_topics(), 1)
    room = rooms(FakeHost(), FakeBroker(partitions))
    p.tables.start(room, {FILLS: {FILLS_22: stored_fills}}, held={FILLS})
    assert set(p.tables.tailers) == {BOOK, STATUSES}
    await p.tables.tick(FILLS)
    assert p.tables.ticking == set() and p.readiness.unreadable == {}
    assert p.tables.published_past(899) == {BOOK: False, STATUSES: False, FILLS: False}
    assert p.tables.tracked()[FILLS][FILLS_22].cursor == stored_fills  # from the offsets table meanwhile
    p.tables.start_table(room, FILLS, {FILLS_22: stored_fills})
    assert set(p.tables.tailers) == {BOOK, STATUSES, FILLS} and p.tables.published_past(899)[FILLS]
