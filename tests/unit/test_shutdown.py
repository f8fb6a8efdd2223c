"""The worker's one sleep: a pause lasts its length while the worker runs, and ends as soon as the
worker stops (a back-off of minutes never holds up a stop). The stop request is a flag the test sets."""

from __future__ import annotations

import asyncio

import pytest

from hyperdata_sidecar import shutdown
from hyperdata_sidecar.shutdown import Shutdown


def test_stopping_is_what_the_request_says():
    flag = [0]
    stop = Shutdown(lambda: flag[0])
    assert stop.stopping is False
    flag[0] = 1
    assert stop.stopping is True


async def test_a_pause_while_the_worker_runs_sleeps_and_says_it_may_go_on():
    assert await Shutdown(lambda: False).pause(0.01) is True


async def test_a_pause_once_the_worker_is_stopping_returns_at_once_saying_so():
    assert await asyncio.wait_for(Shutdown(lambda: True).pause(3600), timeout=5) is False


async def test_a_long_pause_wakes_when_the_worker_stops(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(shutdown, "STOP_CHECK_S", 0.001)
    looks = 0

    def requested() -> bool:
        nonlocal looks
        looks += 1
        return looks > 3  # the stop comes while the pause is under way

    assert await asyncio.wait_for(Shutdown(requested).pause(3600), timeout=5) is False
    assert looks > 3
