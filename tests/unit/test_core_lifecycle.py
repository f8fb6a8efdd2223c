"""The runtime's lifecycle: forward one phase at a time or to stopping, back from running to syncing
(the reads of an aborted transaction redone), through standby only for a sidecar of a stream,
nothing else."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.lifecycle import MOVES, Lifecycle, Phase

FORWARD = [Phase.STARTING, Phase.CONNECTING, Phase.SYNCING, Phase.RUNNING, Phase.STOPPING]
STANDBY_FORWARD = [Phase.STARTING, Phase.STANDBY, Phase.CONNECTING, Phase.SYNCING, Phase.RUNNING, Phase.STOPPING]


def test_a_start_goes_through_every_phase_in_order():
    lifecycle = Lifecycle()
    seen = [lifecycle.phase]
    for phase in FORWARD[1:]:
        lifecycle.move(phase)
        seen.append(lifecycle.phase)
    assert seen == FORWARD


@pytest.mark.parametrize("start", list(Phase))
@pytest.mark.parametrize("to", list(Phase))
def test_only_the_next_phase_or_stopping_is_allowed(start, to):
    lifecycle = Lifecycle()
    lifecycle.phase = start
    order = FORWARD if start is not Phase.STANDBY else STANDBY_FORWARD
    index = order.index(start)
    allowed = to is not Phase.STOPPING and index + 1 < len(order) and order[index + 1] is to
    allowed = allowed or (start is Phase.STARTING and to is Phase.STANDBY)
    allowed = allowed or (to is Phase.STOPPING and start is not Phase.STOPPING)
    allowed = allowed or (start is Phase.RUNNING and to is Phase.SYNCING)
    assert (to in MOVES[start]) is allowed
    if allowed:
        lifecycle.move(to)
        assert lifecycle.phase is to
    else:
        with pytest.raises(ValueError, match=f"from {start.value} to {to.value}"):
            lifecycle.move(to)
        assert lifecycle.phase is start


def test_connected_from_syncing_until_stopping_and_only_running_is_running():
    lifecycle = Lifecycle()
    states = []
    for phase in FORWARD[1:]:
        lifecycle.move(phase)
        states.append((phase, lifecycle.connected, lifecycle.running, lifecycle.not_running_reason() is None))
    assert states == [
        (Phase.CONNECTING, False, False, False),
        (Phase.SYNCING, True, False, False),
        (Phase.RUNNING, True, True, True),
        (Phase.STOPPING, False, False, False),
    ]


def test_a_standby_is_ready_but_neither_connected_nor_running():
    lifecycle = Lifecycle()
    lifecycle.move(Phase.STANDBY)
    assert (lifecycle.connected, lifecycle.running, lifecycle.not_running_reason()) == (False, False, None)
    lifecycle.move(Phase.CONNECTING)
    assert lifecycle.not_running_reason() is not None
