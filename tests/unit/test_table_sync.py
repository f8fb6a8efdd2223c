"""The tables' start and the handover after a rebalance (drill 14: a rotation record committed across
a rebalance was backed up, never sealed). A real Readiness and Rotations (its topic a recorder, the
tables plain mappings), fakes for the progress topic, the node tables, the announcements and the
snapshot watcher."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.core.txn import TxnPhase
from hyperdata_sidecar.engines.python import PythonEngine
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.state_writer import StateTables
from hyperdata_sidecar.stream_handover import Resumed
from hyperdata_sidecar.table_sync import TableSync
from hyperdata_sidecar.transactions import TransactionAborted, Transactions

from fake_broker import transactions
from test_readiness import make_readiness
from test_rotations import DONE, FILLS, PARKED, TAILING, UNSEALED, TopicRecorder, finalized, rotations_with
from test_transactions import make, started

LOGGER = "tests.table_sync"


@dataclass
class Progress:
    """The progress topic: its barrier returns once ``release`` is set."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    barriers: int = 0
    holder: str | None = None  # what held_elsewhere says

    async def barrier(self) -> None:
        self.barriers += 1
        await self.release.wait()

    def held_elsewhere(self) -> str | None:
        return self.holder

    def consumer_view(self) -> dict[str, Any]:
        return {"applied": {"0": 41}, "partitions": {"0": {"position": 42, "last_stable_offset": 44}}}

    async def rewind_if_skipped(self) -> dict[str, int] | None:
        return None


@dataclass
class NodeTables:
    started: dict[str, dict[str, FileCursor]] | None = None
    held: list[FileCursor] = field(default_factory=list)

    held_tables: set[str] = field(default_factory=set)

    def start(self, _rooms: Any, stored: dict[str, dict[str, FileCursor]], held: Any = ()) -> None:
        self.started = {table: files for table, files in stored.items() if table not in held}
        self.held_tables = set(held)
        self.held = [c for files in self.started.values() for c in files.values()]

    def start_table(self, _rooms: Any, table: str, cursors: dict[str, FileCursor]) -> None:
        assert self.started is not None and table in self.held_tables
        self.held_tables.discard(table)
        self.started[table] = cursors
        self.held += cursors.values()

    def cursors(self) -> list[FileCursor]:
        return list(self.held)

    def startup_summary(self) -> dict[str, Any]:
        return {"files_discovered": {}, "backlog": {}}

    async def ticks_finished(self, _timeout: float) -> None:
        return None


@dataclass
class Announcements:
    resent: int = 0

    async def resend_unbacked(self) -> None:
        self.resent += 1


@dataclass
class Watcher:
    announced: set[str] | None = None

    def start(self, announced: set[str]) -> None:
        self.announced = announced


@dataclass
class Parts:
    sync: TableSync
    topic: TopicRecorder
    progress: Progress
    node_tables: NodeTables
    announcements: Announcements
    watcher: Watcher
    readiness: Readiness
    metrics: SidecarMetrics


class Handover:
    """A stream's handover that holds the fills table until ``agree`` is set."""

    def __init__(self) -> None:
        self.agree = asyncio.Event()
        self.releases = 0

    async def resume(self, stored: dict[str, dict[str, FileCursor]]) -> Resumed:
        return Resumed({t: files for t, files in stored.items() if t != FILLS}, {FILLS: stored[FILLS]})

    async def release(self, held: dict[str, dict[str, FileCursor]]) -> dict[str, dict[str, FileCursor]]:
        self.releases += 1
        await self.agree.wait()
        return dict(held)


def parts(
    tmp_path: Path,
    refusals: int = 0,
    stopping: list[bool] | None = None,
    txn: Transactions | None = None,
    handover: Handover | None = None,
) -> Parts:
    topic = TopicRecorder(refusals)
    rotations = rotations_with(topic)
    offsets = {c.path: c.to_record() for c in (finalized(UNSEALED), finalized(DONE), finalized(PARKED))}
    offsets[TAILING] = FileCursor(path=TAILING, byte_offset=10).to_record()
    tables = StateTables(offsets, rotations.seals, rotations.backups, {"periodic_abci_states/20260610/100.rmp": {}})  # type: ignore[arg-type]
    progress, node_tables, announcements, watcher = Progress(), NodeTables(), Announcements(), Watcher()
    readiness, metrics = make_readiness(tmp_path), SidecarMetrics()
    flags = stopping if stopping is not None else [False]
    sync = TableSync(
        readiness._settings,
        progress=progress,  # type: ignore[arg-type]
        tables=tables,
        node_tables=node_tables,  # type: ignore[arg-type]
        tailer_rooms=None,  # type: ignore[arg-type]
        rotations=rotations,
        announcements=announcements,  # type: ignore[arg-type]
        watcher=watcher,  # type: ignore[arg-type]
        readiness=readiness,
        engine=PythonEngine("test"),
        txn=txn or transactions(),
        shutdown=Shutdown(lambda: flags[0]),
        metrics=metrics,
        log=EventLog(logging.getLogger(LOGGER)),
        handover=handover,  # type: ignore[arg-type]
    )
    return Parts(sync, topic, progress, node_tables, announcements, watcher, readiness, metrics)


def syncing(p: Parts) -> Parts:
    p.readiness.move_to(Phase.CONNECTING)
    p.readiness.move_to(Phase.SYNCING)
    return p


async def test_the_start_waits_for_the_barrier_then_builds_hands_over_and_runs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = syncing(parts(tmp_path))
    starting = asyncio.ensure_future(p.sync.at_start())
    await asyncio.sleep(0.01)
    assert p.progress.barriers == 1 and p.node_tables.started is None and not p.readiness.lifecycle.running
    p.progress.release.set()
    await starting

    assert p.node_tables.started is not None
    assert sorted(p.node_tables.started[FILLS]) == sorted([UNSEALED, DONE, PARKED, TAILING])
    assert sorted(m.path for m in p.topic.sent) == sorted([UNSEALED, PARKED])  # at start a parked backup gets a new series
    assert p.announcements.resent == 1
    assert p.watcher.announced == {"periodic_abci_states/20260610/100.rmp"}
    assert p.readiness.lifecycle.running
    [startup] = [r for r in caplog.records if r.getMessage() == "startup"]
    assert startup.fields["resume_points"][TAILING] == 10  # type: ignore[attr-defined]


async def test_a_held_table_starts_once_it_agrees_and_its_files_are_handed_over_then(tmp_path):
    handover = Handover()
    p = syncing(parts(tmp_path, handover=handover))
    p.progress.release.set()
    await p.sync.at_start()
    assert p.readiness.lifecycle.running and p.node_tables.held_tables == {FILLS}
    assert p.topic.sent == []  # nothing of the held table handed over yet
    await asyncio.sleep(0.01)
    assert handover.releases == 1
    handover.agree.set()
    await asyncio.sleep(0.01)
    assert p.node_tables.held_tables == set()
    assert sorted(p.node_tables.started[FILLS]) == sorted([UNSEALED, DONE, PARKED, TAILING])  # type: ignore[index]
    assert sorted(m.path for m in p.topic.sent) == sorted([UNSEALED, PARKED])


async def test_reads_redone_look_at_the_held_tables_again_not_the_earlier_look(tmp_path):
    handover = Handover()
    p = syncing(parts(tmp_path, handover=handover))
    p.progress.release.set()
    await p.sync.at_start()
    await asyncio.sleep(0.01)
    earlier = p.sync._releasing
    p.readiness.move_to(Phase.SYNCING)  # as after an aborted transaction
    await p.sync.at_start()
    await asyncio.sleep(0.01)
    assert earlier is not None and earlier.cancelled() and handover.releases == 2
    handover.agree.set()
    await asyncio.sleep(0.01)
    assert p.node_tables.held_tables == set()


async def test_a_barrier_waiting_for_another_worker_names_it_in_readiness_until_it_passes(tmp_path, monkeypatch):
    monkeypatch.setattr("hyperdata_sidecar.table_sync.BARRIER_LOOK_S", 0.01)
    p = syncing(parts(tmp_path))
    p.progress.holder = "waiting for the progress topic: another worker of app a holds it"
    starting = asyncio.ensure_future(p.sync.at_start())
    await asyncio.sleep(0.05)
    assert p.progress.holder in p.readiness.not_ready_reasons()
    p.progress.holder = None
    p.progress.release.set()
    await starting
    assert p.readiness.syncing_on is None and p.readiness.lifecycle.running


async def test_a_barrier_that_waits_long_logs_what_the_consumer_knows_each_period(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    monkeypatch.setattr("hyperdata_sidecar.table_sync.BARRIER_LOOK_S", 0.01)
    monkeypatch.setattr("hyperdata_sidecar.table_sync.BARRIER_SLOW_S", 0.2)
    p = syncing(parts(tmp_path))
    starting = asyncio.ensure_future(p.sync.at_start())

    def slow() -> list[Any]:
        return [r.fields for r in caplog.records if r.getMessage() == "progress_barrier_slow"]  # type: ignore[attr-defined]

    for _ in range(500):
        if len(slow()) >= 2:
            break
        await asyncio.sleep(0.01)
    p.progress.release.set()
    await starting
    first, second = slow()[:2]
    assert 0.2 <= first["waited_s"] < second["waited_s"]  # once per period, not before the first
    assert first["consumer"]["partitions"]["0"]["last_stable_offset"] == 44 and first["held_elsewhere"] is None
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.getMessage() == "progress_barrier_slow")


async def test_the_start_is_made_once_whichever_table_polls_first(tmp_path):
    p = syncing(parts(tmp_path))
    p.progress.release.set()
    await asyncio.gather(p.sync.at_start(), p.sync.at_start(), p.sync.at_start())
    await p.sync.at_start()
    assert p.progress.barriers == 1 and p.announcements.resent == 1


async def test_a_transaction_aborted_while_the_reads_are_redone_is_redone_again_not_lost(tmp_path, caplog):
    """exactly_once: the abort that sends the tables back to syncing may come while they are being
    built again (a record of the new transaction failed); then the build raises and the next poll
    builds them again, instead of running with the transaction aborted. The old tailers' holds end
    with them: a hold left by a tick the abort ended kept the worker not ready for good (the frozen
    worker's stall, reliability.md). The purged records of the aborted transaction report their
    failure late, possibly after the next one began: those change nothing."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    txn, _clock, _aborts, _fenced = make()
    p = syncing(parts(tmp_path, txn=txn))
    txn._on_abort = lambda _reason: p.readiness.redo_reads()
    producer = await started(txn)
    p.progress.release.set()
    await p.sync.at_start()

    held = f"{FILLS}: cannot publish, keeping its position: fills: _STATE"
    p.readiness.hold(FILLS, held)  # the old tailer's hold, which its tick left when the abort ended it
    txn.record_failed("a record was not delivered")
    await txn.close()
    assert txn.phase is TxnPhase.ABORTED and p.readiness.lifecycle.phase is Phase.SYNCING
    p.progress.release.clear()
    rebuilding = asyncio.ensure_future(p.sync.at_start())
    await asyncio.sleep(0.01)
    assert txn.phase is TxnPhase.OPEN and txn.number == 2  # the build waits for its barrier
    txn.record_failed("a purged record of transaction 1", 1)
    assert txn.abort_reason is None
    txn.record_failed("a progress record of transaction 2 was not delivered", 2)
    await txn.close()
    assert txn.phase is TxnPhase.ABORTED and p.readiness.lifecycle.phase is Phase.SYNCING
    p.progress.release.set()
    with pytest.raises(TransactionAborted):
        await rebuilding
    assert p.readiness.lifecycle.phase is Phase.SYNCING and producer.calls.count("abort") == 2

    await p.sync.at_start()
    assert txn.phase is TxnPhase.OPEN and txn.number == 3 and p.readiness.lifecycle.running
    assert p.readiness.not_ready_reasons() == []  # the stale hold went with the old tailers
    assert [r.getMessage() for r in caplog.records].count("reads_redone") == 1


async def rebalance(p: Parts) -> None:
    """What Faust's ``on_rebalance_complete`` does; returns once the handover it started ended."""
    p.sync.rebalanced()
    await asyncio.gather(*p.sync._handovers)


async def test_a_rebalance_hands_the_unsealed_file_to_the_agents_again_from_the_tailers_cursors(tmp_path):
    p = syncing(parts(tmp_path))
    p.progress.release.set()
    await p.sync.at_start()
    p.topic.sent.clear()
    await rebalance(p)
    assert [m.path for m in p.topic.sent] == [UNSEALED]  # a parked backup stays parked after a rebalance


async def test_a_rebalance_before_the_tables_are_synced_leaves_the_handover_to_the_start(tmp_path):
    p = parts(tmp_path)
    await rebalance(p)
    assert p.topic.sent == []


async def test_a_rebalance_during_the_start_waits_for_it_then_hands_over(tmp_path):
    p = syncing(parts(tmp_path))
    starting = asyncio.ensure_future(p.sync.at_start())
    await asyncio.sleep(0.01)
    p.sync.rebalanced()
    await asyncio.sleep(0.01)
    assert p.topic.sent == []
    p.progress.release.set()
    await starting
    await asyncio.gather(*p.sync._handovers)
    assert sorted(m.path for m in p.topic.sent) == sorted([UNSEALED, PARKED, UNSEALED])


async def test_a_refused_handover_is_counted_logged_and_tried_again(tmp_path, caplog: pytest.LogCaptureFixture, monkeypatch):
    monkeypatch.setattr("hyperdata_sidecar.table_sync.FIRST_BACKOFF_S", 0.01)
    p = syncing(parts(tmp_path))
    p.progress.release.set()
    await p.sync.at_start()
    p.topic.sent.clear()
    p.topic.refusals = 1
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await rebalance(p)

    assert [m.path for m in p.topic.sent] == [UNSEALED]
    assert p.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": "seal"}) == 1
    assert "rotation_resend_failed" in caplog.text
