"""The back-off: doubling waits up to a cap, taken through the shell's pause."""

from __future__ import annotations

from hyperdata_sidecar.core.backoff import Backoff


def test_waits_double_up_to_the_cap():
    backoff = Backoff(0.5, 3.0)
    assert [backoff.step() for _ in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert backoff.tries == 6


def test_delay_is_the_next_wait():
    backoff = Backoff(5.0, 60.0)
    assert backoff.delay == 5.0 and backoff.tries == 0
    backoff.step()
    assert backoff.delay == 10.0


async def test_wait_takes_the_next_wait_and_says_whether_to_go_on():
    taken: list[float] = []

    async def pause(seconds: float) -> bool:
        taken.append(seconds)
        return len(taken) < 2  # the worker stops during the second wait

    backoff = Backoff(1.0, 8.0)
    assert await backoff.wait(pause) is True
    assert await backoff.wait(pause) is False
    assert taken == [1.0, 2.0]
