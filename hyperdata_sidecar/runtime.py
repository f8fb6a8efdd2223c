"""The worker's running parts on a Faust app: the runtime service, the polling loops, the readiness timer.

:class:`SidecarRuntime` connects the data plane once the app is up (tables recovered) and closes it
on shutdown, after the ticks under way have ended. One polling loop per node table ticks it (the
first poll of each waits for :meth:`~hyperdata_sidecar.table_sync.TableSync.at_start`); one more
watches the node's snapshots; a timer refreshes readiness and samples the backlogs every second.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import NamedTuple

import confluent_kafka
import faust
from aiokafka.errors import KafkaError
from mode import Service

from hyperdata_sidecar.broker import BrokerLink
from hyperdata_sidecar.config import ConfigError, Settings, check_runtime
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.dataplane import DataPlane
from hyperdata_sidecar.leadership import Leadership
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.node_tables import NodeTables
from hyperdata_sidecar.publishing import STOP_GRACE_S, Abandoned
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.shutdown import STOP_CHECK_S, Shutdown
from hyperdata_sidecar.snapshots import SnapshotWatcher
from hyperdata_sidecar.standby_files import StandbyFiles
from hyperdata_sidecar.stream_follow import StandbyFollow
from hyperdata_sidecar.stream_heads import StreamHeads
from hyperdata_sidecar.table_sync import TableSync
from hyperdata_sidecar.transactions import TransactionAborted

CLOSE_TIMEOUT_S = 5.0  # on shutdown, how long records still in the producer may take to be delivered
SNAPSHOT_POLL_S = 1.0  # how often periodic_abci_states is looked at (a few snapshots an hour)
READINESS_EVERY_S = 1.0  # holds, unreadable trees and a vanished WATCH_DIR come and go between moves
STANDBY_FILES_EVERY_S = 1.0  # how often a standby looks at its node's finished files (and hashes on)
HARD_STOP_S = 30.0  # a worker stopping because it must (fatal, fenced, demoted, yielding) exits by then


class Runtime(NamedTuple):
    """What the runtime service and the loops drive."""

    settings: Settings
    broker: BrokerLink
    dataplane: DataPlane
    readiness: Readiness
    node_tables: NodeTables
    sync: TableSync
    watcher: SnapshotWatcher
    shutdown: Shutdown
    log: EventLog
    leadership: Leadership | None = None  # STREAM_ID: the stream's group, which elects the active
    heads: StreamHeads | None = None  # STREAM_ID: the nodes' heads, announced and followed
    standby_files: StandbyFiles | None = None  # STREAM_ID: this node's finished files, sealed while standing by
    follow: StandbyFollow | None = None  # STREAM_ID: the stream's position, found in this node's files while standing by


class SidecarRuntime(Service):
    """Connects the data plane once the app is up (tables recovered) and closes it on shutdown. A
    sidecar of a stream (``STREAM_ID``) joins the stream's group first and stands by until elected."""

    runtime: Runtime

    async def on_start(self) -> None:
        runtime = self.runtime
        try:
            check_runtime(runtime.settings)
        except ConfigError as exc:
            runtime.log.error("config_error", setting=exc.setting, error=str(exc))
            await self.crash(exc)
            return
        leadership = runtime.leadership
        if leadership is None:
            await self._connect()
            return
        runtime.readiness.move_to(Phase.STANDBY)
        self.add_future(leadership.run(runtime.shutdown.pause))
        if runtime.heads is not None:
            self.add_future(runtime.heads.run(runtime.shutdown.pause))
        self.add_future(self._when_elected(leadership))

    async def _when_elected(self, leadership: Leadership) -> None:
        await leadership.elected()
        if self.runtime.follow is not None:
            self.runtime.follow.elected()
        if not self.runtime.shutdown.stopping:
            await self._connect()

    async def _connect(self) -> None:
        """Connect the data plane (with ``STREAM_ID``, its ``init_transactions`` fences the former
        active) and serve it; the first poll then syncs the tables."""
        runtime = self.runtime
        runtime.readiness.move_to(Phase.CONNECTING)
        if await runtime.broker.connect(runtime.dataplane):
            runtime.readiness.move_to(Phase.SYNCING)
        self.add_future(runtime.dataplane.serve())
        self.add_future(runtime.dataplane.commit_loop(lambda: runtime.shutdown.stopping))

    async def on_stop(self) -> None:
        await stop(self.runtime)
        if self.runtime.heads is not None:
            self.runtime.heads.stop()
        if self.runtime.leadership is not None:
            await self.runtime.leadership.leave()  # after the data path: a standby is elected at once


async def stop(runtime: Runtime) -> None:
    """Stop the worker's data path: the ticks under way end first (they settle and checkpoint their
    cycles in flight, for at most the stop grace), then the data plane closes."""
    if runtime.readiness.lifecycle.phase is not Phase.STOPPING:
        runtime.readiness.move_to(Phase.STOPPING)
    await runtime.node_tables.ticks_finished(STOP_GRACE_S + STOP_CHECK_S)
    await runtime.dataplane.finish()
    left = await runtime.dataplane.close(CLOSE_TIMEOUT_S)
    if left:
        runtime.log.warning("records_not_delivered_at_stop", records=left, note="published again after the restart")


def install_runtime(app: faust.App, runtime: Runtime) -> None:
    """Register on ``app`` the runtime service, one polling loop per node table, the snapshot loop
    and the readiness timer. The loops are ``app.task``s, which Faust starts (like timers) after
    table recovery: a catch-up tick runs as long as there is backlog, and a timer would log that it
    "is overlapping" on every such tick."""
    app.service(type("SidecarRuntime", (SidecarRuntime,), {"runtime": runtime}))
    for spec in TABLES:
        _install_poll_loop(app, runtime, spec.dir_name)
    _install_snapshot_loop(app, runtime)
    if runtime.standby_files is not None and runtime.follow is not None:
        _install_standby_loop(app, runtime, runtime.standby_files, runtime.follow)

    @app.timer(READINESS_EVERY_S, name="hyperdata_sidecar.readiness")
    async def refresh_readiness() -> None:
        runtime.readiness.refresh()
        runtime.node_tables.sample_backlogs()


def _install_poll_loop(app: faust.App, runtime: Runtime, table: str) -> None:
    async def poll() -> None:
        interval = runtime.settings.poll_interval_s
        while not runtime.shutdown.stopping:
            started = time.monotonic()
            try:
                if runtime.readiness.lifecycle.phase is Phase.SYNCING:
                    await runtime.sync.at_start()
                if runtime.readiness.lifecycle.running:
                    await runtime.node_tables.tick(table)
            except TransactionAborted:
                pass  # exactly_once: the syncing phase redoes the reads (TableSync.at_start, next poll)
            except Abandoned:
                pass  # the worker stops (a stream's handover was waiting)
            except Exception as exc:
                # Unknown state in memory: stop the worker rather than go on from it. A restart
                # resumes from the last checkpoint, which never covers unacknowledged lines.
                runtime.log.error("poll_crashed", table=table, error=f"{type(exc).__name__}: {exc}")
                await app.crash(exc)
                raise
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    poll.__name__ = poll.__qualname__ = f"hyperdata_sidecar.poll.{table}"
    app.task(poll)


def _install_snapshot_loop(app: faust.App, runtime: Runtime) -> None:
    """The loop that watches ``WATCH_DIR/periodic_abci_states`` (:class:`SnapshotWatcher`)."""

    async def watch_snapshots() -> None:
        while not runtime.shutdown.stopping:
            if runtime.readiness.lifecycle.running:
                try:
                    await runtime.watcher.tick()
                except (TimeoutError, OSError, KafkaError, TransactionAborted) as exc:
                    # Unreadable snapshot dir, or the internal topic cannot take the event now (or its
                    # transaction was aborted): the next look tries again.
                    runtime.log.limited(
                        logging.ERROR, "snapshot_poll_failed", "snapshots", 60.0, error=f"{type(exc).__name__}: {exc}"
                    )
                except Exception as exc:
                    runtime.log.error("poll_crashed", table="snapshots", error=f"{type(exc).__name__}: {exc}")
                    await app.crash(exc)
                    raise
            await asyncio.sleep(SNAPSHOT_POLL_S)

    watch_snapshots.__name__ = watch_snapshots.__qualname__ = "hyperdata_sidecar.poll.snapshots"
    app.task(watch_snapshots)


def _install_standby_loop(app: faust.App, runtime: Runtime, files: StandbyFiles, follow: StandbyFollow) -> None:
    """STREAM_ID: the loop that, while this sidecar stands by, seals and backs up its node's finished
    files (:class:`StandbyFiles`; once elected, the tailers do) and follows the stream's position in
    them (:class:`StandbyFollow`)."""

    async def seal_as_standby() -> None:
        while not runtime.shutdown.stopping:
            if runtime.readiness.lifecycle.phase is Phase.STANDBY:
                try:
                    await follow.tick()  # says what it could not read: raises no Kafka or disk error
                    await files.tick()
                except (TimeoutError, KafkaError) as exc:
                    # The rotation topic cannot take the seal now: the next look hands it over again.
                    runtime.log.limited(
                        logging.WARNING, "standby_seal_failed", "rotations", 60.0, error=f"{type(exc).__name__}: {exc}"
                    )
                except Exception as exc:
                    runtime.log.error("poll_crashed", table="standby files", error=f"{type(exc).__name__}: {exc}")
                    await app.crash(exc)
                    raise
            await asyncio.sleep(STANDBY_FILES_EVERY_S)

    seal_as_standby.__name__ = seal_as_standby.__qualname__ = "hyperdata_sidecar.poll.standby_files"
    app.task(seal_as_standby)


class FatalProducer:
    """The data plane's ``on_fatal``: librdkafka's producer cannot go on, so the worker stops (a
    restart resumes from the checkpoints). Also the stop of a fenced, demoted or yielding worker. A
    stop that has not ended after :data:`HARD_STOP_S` ends the process (``stop_overdue``, exit 1)."""

    def __init__(self, app: faust.App, log: EventLog) -> None:
        self.app = app
        self.log = log
        self._crash: asyncio.Future[None] | None = None

    def __call__(self, error: confluent_kafka.KafkaError) -> None:
        self._stop(confluent_kafka.KafkaException(error))

    def demoted(self, reason: str) -> None:
        """STREAM_ID: the stream's group elected another sidecar (its ``init_transactions`` fences
        this one's producer): the worker stops, and its restart stands by."""
        self._stop(RuntimeError(f"no longer the stream's active: {reason}"))

    def yielded(self, reason: str) -> None:
        """STREAM_ID: a standby's node is ahead of this active's: the worker stops, leaving the
        group (the standby is elected at once), and its restart stands by."""
        self._stop(RuntimeError(f"yielded the stream: {reason}"))

    def fenced(self, reason: str) -> None:
        """exactly_once: another producer took this worker's ``transactional.id`` (a second worker
        with the same NODE_ID started, or with STREAM_ID the stream's new active): this one has
        published nothing since, and stops."""
        self._stop(RuntimeError(f"fenced by another worker with the same transactional.id: {reason}"))

    def _stop(self, exc: BaseException) -> None:
        if self._crash is None:
            # Kept, since the event loop holds only a weak reference to a task (it could vanish unrun).
            self._crash = asyncio.ensure_future(self.app.crash(exc))
            # What the worker published is committed or fenced: nothing is lost by not finishing the
            # stop. Faust's own consumer can hang in its final commit after the process was frozen
            # past its session (drill 19), and the restart must not wait for it.
            asyncio.get_running_loop().call_later(HARD_STOP_S, self._exit_now, exc)

    def _exit_now(self, exc: BaseException) -> None:
        self.log.error("stop_overdue", waited_s=HARD_STOP_S, reason=f"{type(exc).__name__}: {exc}")
        os._exit(1)
