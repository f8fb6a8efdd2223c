"""Whether the sidecar is ready, and why not: the one writer of the readiness gauge.

:class:`Readiness` owns the lifecycle phase, the tables held (cannot publish) or unreadable (their
polls fail), the broker's state and the wait for it at start, and asks the state writer whether the
state store takes writes. ``/readyz`` and the status page show :meth:`Readiness.not_ready_reasons`.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.lifecycle import Lifecycle, Phase
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics


class Readiness:
    """The lifecycle and every condition that makes the sidecar not ready."""

    def __init__(
        self, settings: Settings, metrics: SidecarMetrics, log: EventLog, state_problem: Callable[[], str | None]
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self.log = log
        self._state_problem = state_problem
        self.lifecycle = Lifecycle()
        self.broker_connected = False
        self.broker_wait: str | None = None  # while the worker waits for the broker at start: why
        self.login_refused: str | None = None  # the broker refused the producer's login: its words, until it connects
        self.holds: dict[str, str] = {}  # table -> why it cannot publish now
        self.unreadable: dict[str, str] = {}  # table -> the error of its last poll, while its polls fail

    def move_to(self, phase: Phase) -> None:
        """Move the lifecycle to ``phase`` (an illegal move raises) and write readiness."""
        self.lifecycle.move(phase)
        self.log.info("lifecycle", phase=phase.value)
        self.refresh()

    def refresh(self) -> None:
        """Write the readiness gauge (on every lifecycle move, and every second)."""
        self._metrics.set_ready(not self.not_ready_reasons())

    def broker_state(self, connected: bool) -> None:
        if connected:
            self.login_refused = None
        if connected != self.broker_connected:
            self.broker_connected = connected
            self._metrics.set_broker_connected(connected)
            self.log.info("broker_connected" if connected else "broker_unreachable", bootstrap=self._settings.kafka_bootstrap)

    def broker_refused_login(self, why: str) -> None:
        """The broker refused the producer's login (a password changed on one side only): said as
        the reason the worker is not ready, instead of an unreachable broker, until it connects."""
        self.login_refused = why

    def hold(self, table: str, reason: str | None) -> None:
        if reason is None:
            self.holds.pop(table, None)
        else:
            self.holds[table] = reason

    def not_ready_reasons(self) -> list[str]:
        """Why the sidecar is not ready; empty when it is (running, producer connected, WATCH_DIR
        readable, the state store taking writes)."""
        reasons = []
        not_running = self.lifecycle.not_running_reason()
        if not_running is not None:
            reasons.append(not_running)
        if self.broker_wait is not None:
            reasons.append(self.broker_wait)
        elif not self.broker_connected and self.lifecycle.phase is not Phase.STOPPING:
            reasons.append(self.login_refused or f"broker unreachable ({self._settings.kafka_bootstrap})")
        reasons += [f"{table}: cannot publish, keeping its position: {reason}" for table, reason in sorted(self.holds.items())]
        reasons += [
            f"{table}: cannot read the watched tree, keeping its position: {error}"
            for table, error in sorted(self.unreadable.items())
        ]
        watch = self._settings.watch_dir
        if not (os.path.isdir(watch) and os.access(watch, os.R_OK | os.X_OK)):
            reasons.append(f"WATCH_DIR {watch} is not a readable directory")
        state_problem = self._state_problem()
        if state_problem is not None:
            reasons.append(f"{state_problem} (the tailers read nothing new until the state store takes writes again)")
        return reasons
