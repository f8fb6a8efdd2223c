"""Whether the sidecar is ready, and why not: the one writer of the readiness gauge.

:class:`Readiness` owns the lifecycle phase and the tables held (cannot publish) or unreadable
(their polls fail), and asks the rooms that know the other reasons: the broker link, the state
writer (does the state store take writes), the disk (is ``WATCH_DIR`` readable). ``/readyz`` and the
status page show :meth:`Readiness.not_ready_reasons`.
"""

from __future__ import annotations

import os
from typing import Protocol

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.lifecycle import Lifecycle, Phase
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics


class ReasonGiver(Protocol):
    """A room that may keep the worker from being ready (the broker link)."""

    def not_ready_reason(self) -> str | None: ...


class TopicRefusals(Protocol):
    """The data plane, as readiness asks which topics it may not write."""

    def refused_topics(self) -> dict[str, str]: ...


class StateProblem(Protocol):
    """The state writer, as readiness asks after the state store."""

    @property
    def problem(self) -> str | None: ...


class Readiness:
    """The lifecycle and every condition that makes the sidecar not ready."""

    def __init__(
        self,
        settings: Settings,
        metrics: SidecarMetrics,
        log: EventLog,
        broker: ReasonGiver,
        state: StateProblem,
        transactions: ReasonGiver | None = None,
        *,
        topics: TopicRefusals | None = None,
        stream: ReasonGiver | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self.log = log
        self._broker = broker
        self._transactions = transactions
        self._topics = topics
        self._stream = stream  # STREAM_ID: the leadership group's consumer
        self._state = state
        self.lifecycle = Lifecycle()
        self.holds: dict[str, str] = {}  # table -> why it cannot publish now
        self.node_outputs: dict[str, str] = {}  # table -> the other output layout the node writes it in
        self.syncing_on: str | None = None  # syncing: what the progress barrier waits for, when it is named
        self.unreadable: dict[str, str] = {}  # table -> the error of its last poll, while its polls fail
        self.handover: dict[str, str] = {}  # STREAM_ID, taken over: held table -> why it cannot continue the stream yet

    def move_to(self, phase: Phase) -> None:
        """Move the lifecycle to ``phase`` (an illegal move raises) and write readiness."""
        self.lifecycle.move(phase)
        self.log.info("lifecycle", phase=phase.value)
        self.refresh()

    def redo_reads(self) -> None:
        """exactly_once: a transaction was aborted; the tables go back to syncing and redo their reads
        from the last committed progress (:meth:`~hyperdata_sidecar.table_sync.TableSync.at_start`)."""
        if self.lifecycle.phase is Phase.RUNNING:
            self.move_to(Phase.SYNCING)

    def refresh(self) -> None:
        """Write the readiness gauge (on every lifecycle move, and every second)."""
        self._metrics.set_ready(not self.not_ready_reasons())

    def drop_holds(self) -> None:
        """exactly_once: the tables are built again after an aborted transaction, and the holds of
        the old tailers end with them (a new tailer holds again if its topic still refuses)."""
        self.holds.clear()

    def hold(self, table: str, reason: str | None) -> None:
        """``table`` cannot publish (``reason``) and keeps its position; None once it can again."""
        if reason is None:
            self.holds.pop(table, None)
        else:
            self.holds[table] = reason

    def node_output(self, table: str, reason: str | None) -> None:
        """The node writes ``table`` in another layout than the one the sidecar reads (``reason``:
        which, and the flag to change); None once the table's own tree is there."""
        if reason is None:
            self.node_outputs.pop(table, None)
        else:
            self.node_outputs[table] = reason

    def not_ready_reasons(self) -> list[str]:
        """Why the sidecar is not ready; empty when it is (running, producer connected, WATCH_DIR
        readable, the state store taking writes)."""
        reasons = []
        not_running = self.lifecycle.not_running_reason()
        if not_running is not None:
            reasons.append(not_running)
        if self.syncing_on is not None and self.lifecycle.phase is Phase.SYNCING:
            reasons.append(self.syncing_on)
        broker = self._broker.not_ready_reason()
        if broker is not None and self.lifecycle.phase not in (Phase.STOPPING, Phase.STANDBY):
            reasons.append(broker)  # a standby connects its producer once elected
        stream = self._stream.not_ready_reason() if self._stream is not None else None
        if stream is not None:
            reasons.append(stream)
        transactions = self._transactions.not_ready_reason() if self._transactions is not None else None
        if transactions is not None:
            reasons.append(transactions)
        reasons += [f"{table}: {reason}" for table, reason in sorted(self.node_outputs.items())]
        # Held at a handover: named while syncing and after, as long as the table waits (released
        # tables leave the map; a worker that stops or stands by again is a new process).
        reasons += [f"{table}: {reason}" for table, reason in sorted(self.handover.items())]
        reasons += [f"{table}: cannot publish, keeping its position: {reason}" for table, reason in sorted(self.holds.items())]
        refused = self._topics.refused_topics() if self._topics is not None else {}
        reasons += [
            f"may not write {topic}: {why}"
            for topic, why in refused.items()
            if not any(reason.startswith(f"{topic}: ") for reason in self.holds.values())
        ]
        reasons += [
            f"{table}: cannot read the watched tree, keeping its position: {error}"
            for table, error in sorted(self.unreadable.items())
        ]
        watch = self._settings.watch_dir
        if not (os.path.isdir(watch) and os.access(watch, os.R_OK | os.X_OK)):
            reasons.append(f"WATCH_DIR {watch} is not a readable directory")
        state_problem = self._state.problem
        if state_problem is not None:
            reasons.append(f"{state_problem} (the tailers read nothing new until the state store takes writes again)")
        return reasons
