"""Stopping the worker: the data plane is closed only once the ticks under way have ended (they
settle and checkpoint their cycles in flight), and not later than the stop grace."""

from __future__ import annotations

import asyncio

import pytest

from hyperdata_sidecar import plugin

from test_web_routes import make_app


@pytest.fixture
def sidecar(tmp_path):
    _app, sidecar = make_app(tmp_path)
    closed: list[str] = []

    async def close(_timeout: float) -> int:
        closed.append("data plane closed")
        return 0

    sidecar.dataplane.close = close
    sidecar.order = closed
    return sidecar


async def test_the_data_plane_closes_after_the_tick_under_way_has_ended(sidecar):
    sidecar.ticking.add("node_fills_streaming")

    async def tick_ends() -> None:
        await asyncio.sleep(0.2)
        sidecar.order.append("tick ended")
        sidecar.ticking.discard("node_fills_streaming")

    ending = asyncio.create_task(tick_ends())
    await sidecar.disconnect()
    await ending
    assert sidecar.order == ["tick ended", "data plane closed"]


async def test_a_tick_that_does_not_end_holds_the_stop_for_the_grace_only(sidecar, monkeypatch):
    monkeypatch.setattr(plugin, "STOP_GRACE_S", 0.1)
    sidecar.ticking.add("node_fills_streaming")
    await asyncio.wait_for(sidecar.disconnect(), timeout=5.0)
    assert sidecar.order == ["data plane closed"]
