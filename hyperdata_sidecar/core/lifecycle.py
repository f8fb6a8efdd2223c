"""The sidecar runtime's one lifecycle: its phases and the moves allowed between them."""

from __future__ import annotations

import enum


class Phase(str, enum.Enum):
    """Where the runtime is. Only :data:`RUNNING` and :data:`STANDBY` can be ready."""

    STARTING = "starting"  # installed; Faust starts and recovers the tables (the standalone app may wait for the broker first)
    STANDBY = "standby"  # STREAM_ID: another sidecar of the stream is active; this one waits to be elected, publishing nothing
    CONNECTING = "connecting"  # applying the topic contract and connecting the data-plane producer, retrying the broker
    SYNCING = "syncing"  # connected; waiting for every earlier checkpoint to reach the offsets table, then building the tailers
    RUNNING = "running"  # the tailers publish
    STOPPING = "stopping"  # the worker stops: nothing new is read, the producer is flushed and closed


MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.STARTING: frozenset({Phase.STANDBY, Phase.CONNECTING, Phase.STOPPING}),
    Phase.STANDBY: frozenset({Phase.CONNECTING, Phase.STOPPING}),
    Phase.CONNECTING: frozenset({Phase.SYNCING, Phase.STOPPING}),
    Phase.SYNCING: frozenset({Phase.RUNNING, Phase.STOPPING}),
    Phase.RUNNING: frozenset({Phase.SYNCING, Phase.STOPPING}),
    Phase.STOPPING: frozenset(),
}
"""Allowed moves: forward one phase at a time (standby only for a sidecar of a stream, until it is
elected), or to stopping from anywhere (once); and back from running to syncing when an aborted transaction's reads are redone (``DELIVERY=exactly_once``)."""


class Lifecycle:
    """The runtime's phase; :meth:`move` enforces :data:`MOVES`."""

    def __init__(self) -> None:
        self.phase = Phase.STARTING

    def move(self, to: Phase) -> None:
        """Go to ``to``; raises ValueError for a move :data:`MOVES` does not allow."""
        if to not in MOVES[self.phase]:
            raise ValueError(f"the sidecar cannot go from {self.phase.value} to {to.value}")
        self.phase = to

    @property
    def connected(self) -> bool:
        """True once the data plane is connected and until the worker stops."""
        return self.phase in (Phase.SYNCING, Phase.RUNNING)

    @property
    def running(self) -> bool:
        return self.phase is Phase.RUNNING

    def not_running_reason(self) -> str | None:
        """Why the runtime is not running yet (for readiness), or None when it runs or stands by
        (a standby of a stream does its job: it is ready to take over)."""
        return {
            Phase.STARTING: "tables not recovered yet",
            Phase.STANDBY: None,
            Phase.CONNECTING: "connecting to Kafka (topic contract, data-plane producer)",
            Phase.SYNCING: "tables not recovered yet (waiting for earlier checkpoints)",
            Phase.RUNNING: None,
            Phase.STOPPING: "stopping",
        }[self.phase]
