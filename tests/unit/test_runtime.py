"""The runtime's stop: the data plane is closed only once the ticks under way have ended (they settle
and checkpoint their cycles in flight), and not later than the stop grace; what is still undelivered
then is said in one line. With fakes for the node tables and the data plane."""

from __future__ import annotations

import asyncio
import logging

import pytest

from hyperdata_sidecar import runtime
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.node_tables import NodeTables
from hyperdata_sidecar.runtime import Runtime, stop

from test_readiness import make_readiness

LOGGER = "tests.runtime"


class FakeDataPlane:
    def __init__(self, order: list[str], left: int = 0) -> None:
        self.order = order
        self.left = left

    async def finish(self) -> None:
        self.order.append("transaction finished")

    async def close(self, _timeout: float) -> int:
        self.order.append("data plane closed")
        return self.left


def make_runtime(tmp_path, order: list[str], left: int = 0) -> Runtime:
    readiness = make_readiness(tmp_path)
    log = EventLog(logging.getLogger(LOGGER))
    node_tables = NodeTables(readiness._settings, {}, readiness, None, None, log)  # type: ignore[arg-type]
    fields = dict.fromkeys(Runtime._fields)
    fields.update(dataplane=FakeDataPlane(order, left), readiness=readiness, node_tables=node_tables, log=log)
    return Runtime(**fields)  # type: ignore[arg-type]


async def test_the_data_plane_closes_after_the_tick_under_way_has_ended(tmp_path):
    order: list[str] = []
    stopping = make_runtime(tmp_path, order)
    stopping.node_tables.ticking.add("node_fills_streaming")

    async def tick_ends() -> None:
        await asyncio.sleep(0.2)
        order.append("tick ended")
        stopping.node_tables.ticking.discard("node_fills_streaming")

    ending = asyncio.create_task(tick_ends())
    await stop(stopping)
    await ending
    assert order == ["tick ended", "transaction finished", "data plane closed"]
    assert stopping.readiness.lifecycle.phase is Phase.STOPPING


async def test_a_tick_that_does_not_end_holds_the_stop_for_the_grace_only(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "STOP_GRACE_S", 0.1)
    order: list[str] = []
    stopping = make_runtime(tmp_path, order)
    stopping.node_tables.ticking.add("node_fills_streaming")
    await asyncio.wait_for(stop(stopping), timeout=5.0)
    assert order == ["transaction finished", "data plane closed"]


async def test_records_left_undelivered_at_the_stop_are_said_in_one_line(tmp_path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=LOGGER)
    await stop(make_runtime(tmp_path, [], left=7))
    [line] = [r for r in caplog.records if r.getMessage() == "records_not_delivered_at_stop"]
    assert line.fields["records"] == 7  # type: ignore[attr-defined]


class HangingApp:
    """A Faust app whose crash starts a stop that never ends (Faust's consumer stuck in its commit)."""

    def __init__(self) -> None:
        self.crashed: list[BaseException] = []

    async def crash(self, exc: BaseException) -> None:
        self.crashed.append(exc)
        await asyncio.Event().wait()


async def test_a_worker_that_must_stop_and_does_not_exits_after_the_bound(monkeypatch, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger=LOGGER)
    exits: list[int] = []
    monkeypatch.setattr(runtime, "HARD_STOP_S", 0.05)
    monkeypatch.setattr(runtime.os, "_exit", exits.append)
    app = HangingApp()
    fatal = runtime.FatalProducer(app, EventLog(logging.getLogger(LOGGER)))  # type: ignore[arg-type]
    fatal.demoted("the stream's group elected node-b (term 4)")
    fatal.fenced("ignored: the stop is under way")
    await asyncio.sleep(0.2)
    assert [str(e) for e in app.crashed] == ["no longer the stream's active: the stream's group elected node-b (term 4)"]
    assert exits == [1]
    overdue = [r for r in caplog.records if r.getMessage() == "stop_overdue"]
    assert len(overdue) == 1 and overdue[0].fields["waited_s"] == 0.05  # type: ignore[attr-defined]
