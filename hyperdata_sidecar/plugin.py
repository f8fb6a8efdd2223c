"""Installs the sidecar into a Faust app: topics, tables, timers, agents, a runtime service and pages.

``hyperdata_sidecar.app`` is one app built this way; another Faust app embeds the sidecar by calling
:func:`install` on itself. Every registration has an explicit name under ``hyperdata_sidecar.``, so
it cannot collide with the host app's own agents or be registered twice by autodiscovery.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import confluent_kafka
import faust
from aiokafka.errors import KafkaError
from mode import Service

from hyperdata_sidecar import aiokafka_backoff, broker_login
from hyperdata_sidecar.backup import make_sink
from hyperdata_sidecar.broker_login import LoginRefused
from hyperdata_sidecar.config import ConfigError, Settings, check_runtime, load_settings
from hyperdata_sidecar.core.backlog import Estimate
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.backup_status import status_of
from hyperdata_sidecar.core.cursor import FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.handover import Occasion, needs_handover
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.lifecycle import Lifecycle, Phase
from hyperdata_sidecar.core.records import Regression
from hyperdata_sidecar.core.seal import SealManifest, revision_of
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.dataplane import DataPlane, DataPlaneError
from hyperdata_sidecar.engines import NATIVE_MODULE, Engine, EngineUnavailable, select
from hyperdata_sidecar.incidents import IncidentHistory
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.ports import TrackedView
from hyperdata_sidecar.progress_topic import ProgressTopic
from hyperdata_sidecar.publishing import STOP_GRACE_S
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.snapshot_offsets import OffsetsUnavailable, resume_offsets
from hyperdata_sidecar.snapshots import SnapshotWatcher
from hyperdata_sidecar.state_writer import StateWriter, reopen_rocksdb
from hyperdata_sidecar.table_backlogs import TableBacklogs
from hyperdata_sidecar.tailer import Abandoned, TableTailer
from hyperdata_sidecar.topics import apply_contract, load_contract

INSTALLED_ATTR = "_hyperdata_sidecar"
# No value_type: Faust would call dict.from_data() on every changelog record during recovery.
JSON_SCHEMA: dict[str, Any] = dict(key_type=str, key_serializer="json", value_serializer="json")
CONNECT_FIRST_BACKOFF_S, CONNECT_MAX_BACKOFF_S = 0.5, 30.0
STOP_CHECK_S = 0.5  # how soon a back-off notices that the worker is stopping
CLOSE_TIMEOUT_S = 5.0  # on shutdown, how long records still in the producer may take to be delivered
SNAPSHOT_POLL_S = 1.0  # how often periodic_abci_states is looked at (a few snapshots an hour)
READINESS_EVERY_S = 1.0  # holds, unreadable trees and a vanished WATCH_DIR come and go between moves


class Sidecar:
    """The sidecar's parts on one Faust app. Created by :func:`install`; reach it as ``app._hyperdata_sidecar``.

    It wires the rooms together and hosts the tailers and the snapshot watcher: readiness
    (:class:`Readiness`), the incident history (:class:`IncidentHistory`), the progress topic and
    start-up barrier (:class:`ProgressTopic`) and every table write (:class:`StateWriter`) each
    live in a module of their own.
    """

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.metrics = SidecarMetrics()
        self.log = EventLog(node=settings.node_id)
        self.state_writer = StateWriter(self.metrics, self.log, str(settings.state_path), self.pause, reopen_rocksdb)
        self.readiness = Readiness(settings, self.metrics, self.log, self.state_problem)
        self.incidents = IncidentHistory(self.metrics, self.log)
        self.dataplane = DataPlane(
            settings,
            self.log,
            on_broker=self.readiness.broker_state,
            on_login_refused=self.readiness.broker_refused_login,
            on_error=self.metrics.producer_error,
            on_fatal=self._fatal,
        )
        self.sink = make_sink(settings.backup_sink, settings.backup_dir)
        prefix = app.conf.id
        self.rotations_topic = app.topic(
            f"{prefix}-sidecar-rotations", partitions=1, internal=True, key_serializer="json", value_serializer="raw"
        )
        self.backup_attempts_topic = app.topic(
            backup_attempts_topic_name(prefix), partitions=1, internal=True, key_serializer="json", value_serializer="json"
        )
        self.snapshot_events_topic = app.topic(
            f"{prefix}-sidecar-snapshot-events", partitions=1, internal=True, key_serializer="json", value_serializer="json"
        )
        schema: faust.Schema[str, Any] = faust.Schema(**JSON_SCHEMA)
        self.offsets = app.Table("sidecar-offsets", partitions=1, store="rocksdb://", schema=schema, help="per-file tail state")
        self.seals = app.Table("sidecar-seals", partitions=1, store="rocksdb://", schema=schema, help="sealed hour files")
        self.backups = app.Table("sidecar-backups", partitions=1, store="rocksdb://", schema=schema, help="backup results")
        self.snapshots = app.Table(
            "sidecar-snapshots", partitions=1, store="rocksdb://", schema=schema, help="published node snapshot events"
        )
        progress_topic = app.topic(
            f"{prefix}-sidecar-progress", partitions=1, internal=True, key_serializer="json", value_serializer="json"
        )
        self.progress = ProgressTopic(
            progress_topic,
            self.offsets,
            (self.offsets, self.seals, self.backups, self.snapshots),
            self.state_writer,
            self.metrics,
            self.log,
        )
        self.snapshot_watcher: SnapshotWatcher | None = None
        self.tailers: dict[str, TableTailer] = {}
        self.ticking: set[str] = set()  # the tables whose tick is under way
        self.backlogs = TableBacklogs(self.metrics, self.log)
        self.chosen_engine: Engine | None = None  # by choose_engine, when the worker starts
        self.started_at = time.time()
        self.run_id = uuid.uuid4().hex  # this process's backup attempt records carry it
        self._sync_lock = asyncio.Lock()
        self._handovers: set[asyncio.Task[None]] = set()  # kept: the loop holds only weak references to tasks

    # ------------------------------------------------------------------ lifecycle and readiness

    @property
    def lifecycle(self) -> Lifecycle:
        return self.readiness.lifecycle

    def move_to(self, phase: Phase) -> None:
        self.readiness.move_to(phase)

    def not_ready_reasons(self) -> list[str]:
        return self.readiness.not_ready_reasons()

    @property
    def broker_connected(self) -> bool:
        return self.readiness.broker_connected

    @property
    def connected(self) -> bool:
        return self.lifecycle.connected

    def state_problem(self) -> str | None:
        """Why the state store cannot take writes now (None when it can)."""
        return self.state_writer.problem

    # ------------------------------------------------------------------ the line engine

    @property
    def engine(self) -> Engine:
        """The line engine in use; :meth:`choose_engine` chooses it when the worker starts."""
        if self.chosen_engine is None:
            raise RuntimeError("the line engine is chosen when the worker starts (Sidecar.choose_engine)")
        return self.chosen_engine

    def choose_engine(self) -> Engine:
        """Choose the line engine ``SIDECAR_ENGINE`` asks for, once (later calls return the same one).

        Called when the worker starts, before the data plane connects: by the standalone app before
        anything else (so a refusal is one line and exit code 2) and by :meth:`connect` (an
        embedding app). Logs ``engine_fallback`` when ``auto`` found the native engine installed and
        broken, and sets ``hyperdata_sidecar_engine_info``. Raises :class:`ConfigError` naming
        ``SIDECAR_ENGINE`` when ``native`` is asked for and cannot be used.
        """
        if self.chosen_engine is not None:
            return self.chosen_engine
        try:
            engine = select(self.settings.engine)
        except EngineUnavailable as exc:
            raise ConfigError("SIDECAR_ENGINE", f"is native and {exc}") from None
        if engine.fallback_reason is not None:
            self.log.warning("engine_fallback", engine=engine.label(), reason=engine.fallback_reason)
        self.metrics.engine_chosen(engine.name, engine.version)
        if engine.name == "native":
            # The data plane runs the engine's own producer: every record of the worker goes through one.
            self.dataplane.engine_module = importlib.import_module(NATIVE_MODULE)
        self.chosen_engine = engine
        return engine

    # ------------------------------------------------------------------ incidents (read model and TailerHost)

    @property
    def lost(self) -> Sequence[Mapping[str, Any]]:
        return self.incidents.lost

    @property
    def late_appends(self) -> Sequence[Mapping[str, Any]]:
        return self.incidents.late_appends

    @property
    def rewritten(self) -> Sequence[Mapping[str, Any]]:
        return self.incidents.rewritten

    @property
    def regressions(self) -> Mapping[str, Mapping[str, Any]]:
        return self.incidents.regressions

    def file_lost(self, table: str, path: str, reason: str, published_to: int, size_seen: int) -> None:
        self.incidents.file_lost(table, path, reason, published_to, size_seen)

    def block_regression(self, table: str, path: str, regression: Regression) -> None:
        self.incidents.block_regression(table, path, regression)

    def late_append(self, table: str, path: str, revision: int, sealed_size: int, size: int) -> None:
        self.incidents.late_append(table, path, revision, sealed_size, size)

    def sealed_file_rewritten(self, table: str, path: str, reason: str, sealed_size: int, size: int) -> None:
        self.incidents.sealed_file_rewritten(table, path, reason, sealed_size, size)

    # ------------------------------------------------------------------ SidecarView (the read model of web/)

    @property
    def app_id(self) -> str:
        return str(self.app.conf.id)

    def tracked(self) -> dict[str, dict[str, TrackedView]]:
        """Every tracked file by table: the tailers' cursors once running (with the size now of the
        files still growing), the offsets table's before."""
        views: dict[str, dict[str, TrackedView]] = {spec.dir_name: {} for spec in TABLES}
        if self.lifecycle.running:
            for table, tailer in self.tailers.items():
                views[table] = {path: tailer.view(path) for path in tailer.files}
            return views
        for path, record in self.offsets.items():
            hour = HourFile.parse(path)
            if hour is not None:
                views.setdefault(hour.table, {})[path] = TrackedView(hour, FileCursor.from_record(record), None)
        return views

    def records(self, table: str) -> dict[str, Mapping[str, Any]]:
        """The contents of the ``seals``, ``backups`` or ``snapshots`` table (one pass over its local store)."""
        return dict({"seals": self.seals, "backups": self.backups, "snapshots": self.snapshots}[table].items())

    def backlog(self) -> dict[str, Estimate]:
        return self.backlogs.estimates()

    def sample_backlogs(self) -> None:
        """One sample of every table's backlog (the readiness timer takes one a second)."""
        self.backlogs.sample(time.monotonic(), {table: tailer.backlog for table, tailer in self.tailers.items()})

    def snapshots_waiting(self) -> list[dict[str, Any]]:
        return self.snapshot_watcher.waiting() if self.snapshot_watcher is not None else []

    # ------------------------------------------------------------------ TailerHost

    @property
    def stopping(self) -> bool:
        return bool(self.app.should_stop)

    async def checkpoint(self, cursor: FileCursor) -> None:
        await self.progress.checkpoint(cursor)

    async def rotate(self, manifest: SealManifest) -> None:
        await self.rotations_topic.send(key=manifest.path, value=manifest.to_json())

    async def forget(self, path: str) -> None:
        await self.progress.forget(path)

    def sealed(self, path: str, revision: int) -> bool:
        return revision_of(self.seals.get(path)) >= revision

    def hold(self, table: str, reason: str | None) -> None:
        self.readiness.hold(table, reason)

    # ------------------------------------------------------------------ SnapshotHost

    def published_past(self, height: int) -> dict[str, bool]:
        return {
            table: tailer.published_block is not None and tailer.published_block > height
            for table, tailer in self.tailers.items()
        }

    async def resume_offsets(self, height: int) -> dict[str, dict[int, int]] | None:
        partitions = {topic: self.dataplane.partitions[topic] for topic in self.settings.topics.values()}
        config = {"bootstrap.servers": self.settings.kafka_bootstrap, **self.settings.security.librdkafka_config()}
        try:
            return await asyncio.to_thread(resume_offsets, config, partitions, height)
        except OffsetsUnavailable as exc:
            self.log.limited(logging.WARNING, "snapshot_offsets_unavailable", str(height), 60.0, height=height, error=str(exc))
            return None

    async def announce(self, event: dict[str, Any]) -> None:
        await self.snapshot_events_topic.send(key=event["path"], value=event)

    async def forget_snapshot(self, relpath: str) -> None:
        self.log.info("snapshot_pruned", path=relpath)
        await self.forget(relpath)

    async def tick_snapshots(self) -> None:
        """One look at the node's snapshots (called by the snapshot loop once the tables are synced)."""
        if self.snapshot_watcher is not None:
            await self.snapshot_watcher.tick()

    def _fatal(self, error: confluent_kafka.KafkaError) -> None:
        """librdkafka's producer cannot go on: stop the worker (a restart resumes from the checkpoints)."""
        # Kept, since the event loop holds only a weak reference to a task (it could vanish unrun).
        self._crash_task = asyncio.ensure_future(self.app.crash(confluent_kafka.KafkaException(error)))

    # ------------------------------------------------------------------ lifecycle

    async def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the worker stops; False if it is stopping."""
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:  # noqa: ASYNC110 - `stopping` is a flag, not an Event
            await asyncio.sleep(min(left, STOP_CHECK_S))
        return not self.stopping

    def connect_error(self, exc: BaseException) -> str:
        """One line for a failed connection; names the security protocol, since a TLS or SASL
        mismatch often surfaces from the client as a bare connection error."""
        text = f"{type(exc).__name__}: {exc}".rstrip(": ")
        protocol = self.settings.security.protocol
        if protocol != "PLAINTEXT":
            text += f" (security protocol {protocol}: check the listener, credentials and certificates)"
        return text

    def connect_failed(self, exc: BaseException, attempt: int, retry_in_s: float) -> str:
        """Log one line for a failed connection attempt (``broker_login_refused``, counted, when the
        broker refused the login; else ``broker_connect_failed``) and return its error."""
        self.readiness.broker_state(False)
        if isinstance(exc, LoginRefused):
            self.readiness.broker_refused_login(str(exc))
            self.metrics.producer_error("login_refused")
            self.log.error(
                "broker_login_refused",
                bootstrap=self.settings.kafka_bootstrap,
                mechanism=exc.mechanism,
                user=exc.user,
                attempt=attempt,
                error=str(exc),
                retry_in_s=retry_in_s,
            )
            return str(exc)
        error = self.connect_error(exc)
        self.log.warning(
            "broker_connect_failed", bootstrap=self.settings.kafka_bootstrap, attempt=attempt, error=error, retry_in_s=retry_in_s
        )
        return error

    async def wait_for_broker(self) -> None:
        """Return once a Kafka client can bootstrap from KAFKA_BOOTSTRAP, logging one line per failed try."""
        backoff = Backoff(CONNECT_FIRST_BACKOFF_S, CONNECT_MAX_BACKOFF_S)
        while not self.stopping:
            attempt = backoff.tries + 1
            try:
                await broker_login.bootstrap(self.settings.kafka_bootstrap, self.settings.security)
                self.readiness.broker_wait = None
                return
            except (TimeoutError, KafkaError, OSError, LoginRefused) as exc:
                error = self.connect_failed(exc, attempt, backoff.delay)
                self.readiness.broker_wait = f"waiting for Kafka at {self.settings.kafka_bootstrap}: {error} (attempt {attempt}, next in {backoff.delay:g}s)"
            await backoff.wait(self.pause)

    async def connect(self) -> None:
        """Check the watch dir, choose the line engine, apply the topic contract and connect the
        producer, retrying the broker."""
        check_runtime(self.settings)
        self.choose_engine()
        self.move_to(Phase.CONNECTING)
        backoff = Backoff(CONNECT_FIRST_BACKOFF_S, CONNECT_MAX_BACKOFF_S)
        while not self.stopping:
            attempt = backoff.tries + 1
            try:
                # First the login: aiokafka's admin client and librdkafka's would only say that no
                # broker answered.
                await broker_login.bootstrap(self.settings.kafka_bootstrap, self.settings.security)
                if self.settings.topics_apply_on_start:
                    await apply_contract(
                        self.settings.kafka_bootstrap,
                        load_contract(self.settings.topic_names()),
                        replication_factor=self.settings.topic_replication_factor,
                        admin_kwargs=self.settings.security.client_kwargs(),
                    )
                await self.dataplane.connect(self.settings.contract_topics())
            except (TimeoutError, KafkaError, OSError, DataPlaneError, LoginRefused) as exc:
                self.connect_failed(exc, attempt, backoff.delay)
                await backoff.wait(self.pause)
                continue
            self.readiness.broker_state(True)
            self.move_to(Phase.SYNCING)
            return

    async def disconnect(self) -> None:
        if self.lifecycle.phase is not Phase.STOPPING:
            self.move_to(Phase.STOPPING)
        await self.ticks_finished(STOP_GRACE_S + STOP_CHECK_S)
        left = await self.dataplane.close(CLOSE_TIMEOUT_S)
        if left:
            self.log.warning("records_not_delivered_at_stop", records=left, note="published again after the restart")

    async def ticks_finished(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the ticks under way to end. A tick that sees the worker
        stopping settles and checkpoints the cycles it has in flight (for at most STOP_GRACE_S):
        the data plane must serve their reports until then, and the poll loops must not be
        cancelled in the middle of a read (a native read runs in a worker thread, for most of a
        catch-up), or every cycle in flight would be published again after the restart."""
        deadline = time.monotonic() + timeout
        while self.ticking and time.monotonic() < deadline:  # noqa: ASYNC110 - a set the ticks keep, not an Event
            await asyncio.sleep(STOP_CHECK_S / 10)

    async def tick(self, table: str) -> None:
        """One poll of one table (called by that table's timer)."""
        self.ticking.add(table)
        try:
            await self._tick(table)
        finally:
            self.ticking.discard(table)

    async def _tick(self, table: str) -> None:
        if self.lifecycle.phase is Phase.SYNCING:
            await self._sync()
        if not self.lifecycle.running:
            return
        try:
            await self.tailers[table].tick()
        except Abandoned:
            return
        except (OSError, EOFError) as exc:
            # A file the sidecar cannot read (permissions, a race with a rename, a file cut short
            # while it was being hashed): the table keeps its position, is not ready, and tries
            # again at the next poll, which sees what became of the file.
            error = f"{type(exc).__name__}: {exc}"
            self.metrics.read_failed(table)
            self.readiness.unreadable[table] = error
            self.log.limited(logging.ERROR, "tick_failed", table, 10.0, table=table, error=error)
            return
        self.readiness.unreadable.pop(table, None)

    async def _sync(self) -> None:
        """Wait until every checkpoint sent before this process started is in the offsets table."""
        async with self._sync_lock:
            if self.lifecycle.phase is not Phase.SYNCING:
                return
            await self.progress.barrier()
            stored: dict[str, dict[str, FileCursor]] = {spec.dir_name: {} for spec in TABLES}
            for path, record in self.offsets.items():
                cursor = FileCursor.from_record(record)
                stored.setdefault(path.split("/", 1)[0], {})[path] = cursor
            for spec in TABLES:
                self.tailers[spec.dir_name] = TableTailer(spec, self.settings, self, self.dataplane, stored[spec.dir_name])
            await self._resend_rotations((c for files in stored.values() for c in files.values()), Occasion.START)
            await self._resend_snapshot_backups()
            self.snapshot_watcher = SnapshotWatcher(self.settings, self, set(self.snapshots.keys()))
            self.move_to(Phase.RUNNING)
            self.log.info(
                "startup",
                config=self.settings.public_summary(),
                engine=self.engine.label(),
                files_discovered={table: len(tailer.discovered()) for table, tailer in self.tailers.items()},
                # After files_discovered: its scan is what the backlog is measured from.
                backlog={table: tailer.backlog._asdict() for table, tailer in self.tailers.items()},
                resume_points={path: c.byte_offset for files in stored.values() for path, c in files.items()},
            )

    async def _resend_rotations(self, cursors: Iterable[FileCursor], occasion: Occasion) -> None:
        """Hand finalized files whose seal or backup of their latest revision is not recorded to the
        agents again (:func:`needs_handover`).

        At start this covers every crash window between finalization and the agents' table writes,
        and gives every failed or parked backup a new series of tries; after a rebalance, the
        rotation records Faust committed for an agent that never ran on them. The agents skip files
        that turn out to be sealed or backed up already.
        """
        for cursor in list(cursors):
            if not needs_handover(cursor, self.seals.get(cursor.path), self.backups.get(cursor.path), occasion):
                continue
            manifest = manifest_from_cursor(cursor, self.settings.node_id)
            if manifest is not None:
                self.log.info("rotation_resent", path=cursor.path, occasion=occasion.value)
                await self.rotate(manifest)

    def rebalanced(self, *_: Any, **__: Any) -> None:
        """Receiver of Faust's ``on_rebalance_complete`` signal (the partitions are assigned, the
        tables recovered, the consumer sought to the committed offsets): start the handover of
        :meth:`hand_over_after_rebalance`.

        Not awaited: Faust resumes the streams only after its receivers return, and the handover
        may wait for :meth:`_sync`, whose barrier needs the progress stream to run.
        """
        task = asyncio.ensure_future(self.hand_over_after_rebalance())
        self._handovers.add(task)
        task.add_done_callback(self._handovers.discard)

    async def hand_over_after_rebalance(self) -> None:
        """Hand the finalized files the agents have not finished to them again, from the tailers'
        cursors (fresher than the offsets table, whose progress records cross the same rebalance).

        Before the tables are synced there is nothing to do: :meth:`_sync` hands them over after
        this assignment. A rotation topic that refuses the records is counted (``seal`` producer
        error), logged and tried again after a back-off until the worker stops.
        """
        backoff = Backoff(CONNECT_FIRST_BACKOFF_S, CONNECT_MAX_BACKOFF_S)
        while not self.stopping:
            async with self._sync_lock:
                if not self.lifecycle.running:
                    return
                cursors = [tail.cursor for tailer in self.tailers.values() for tail in tailer.files.values()]
                try:
                    await self._resend_rotations(cursors, Occasion.REBALANCE)
                    return
                except (TimeoutError, KafkaError, OSError) as exc:
                    self.metrics.producer_error("seal")
                    self.log.limited(
                        logging.WARNING,
                        "rotation_resend_failed",
                        "rebalance",
                        60.0,
                        error=f"{type(exc).__name__}: {exc}",
                        retry_in_s=backoff.delay,
                    )
            await backoff.wait(self.pause)

    async def _resend_snapshot_backups(self) -> None:
        """Hand published snapshots whose backup is not done to the snapshot agent again (it skips
        publishing them and backs them up)."""
        for path, event in list(self.snapshots.items()):
            if not status_of(self.backups.get(path)).is_done:
                await self.announce({k: v for k, v in event.items() if k != "published_at"})

    # ------------------------------------------------------------------ agent side (inside stream events)

    @property
    def progress_topic(self) -> faust.types.TopicT:
        return self.progress.topic

    async def apply_progress(self, record: dict[str, Any]) -> None:
        """Apply one progress record to the tables; runs inside the ``progress`` agent."""
        await self.progress.apply(record)


def backup_attempts_topic_name(app_id: str) -> str:
    """The internal topic of backup attempts of the app ``app_id`` (the ``backup-retry`` command writes to it too)."""
    return f"{app_id}-sidecar-backup-attempts"


class SidecarRuntime(Service):
    """Connects the data plane once the app is up (tables recovered) and closes it on shutdown."""

    sidecar: Sidecar

    async def on_start(self) -> None:
        try:
            await self.sidecar.connect()
        except ConfigError as exc:
            self.sidecar.log.error("config_error", setting=exc.setting, error=str(exc))
            await self.crash(exc)
            return
        self.add_future(self.sidecar.dataplane.serve())

    async def on_stop(self) -> None:
        await self.sidecar.disconnect()


def install(app: faust.App, settings: Settings | None = None) -> Sidecar:
    """Install the sidecar on ``app`` and return it.

    Called once per app, before the worker starts. Also installs, once per process, pauses after a
    failed aiokafka metadata refresh or connection (:mod:`hyperdata_sidecar.aiokafka_backoff`). Registers: the
    internal progress, rotation, backup-attempt and snapshot-event topics, the
    ``sidecar-offsets``/``sidecar-seals``/``sidecar-backups``/``sidecar-snapshots`` RocksDB tables, one
    polling loop per node table and one for the node's snapshots, the
    ``progress``/``seal``/``backup``/``backup_attempts``/``snapshot`` agents and the timer that sends
    backup retries when they are due, the runtime service and the web pages. ``settings`` defaults to :func:`load_settings` (``faust.ini`` + environment).
    Raises ``RuntimeError`` if the app already has a sidecar, :class:`ConfigError` on bad settings.
    """
    from hyperdata_sidecar.agents import install_agents
    from hyperdata_sidecar.web import install_pages

    aiokafka_backoff.install()

    if getattr(app, INSTALLED_ATTR, None) is not None:
        raise RuntimeError(f"hyperdata-sidecar is already installed on app {app.conf.id!r}")
    sidecar = Sidecar(app, settings or load_settings())
    setattr(app, INSTALLED_ATTR, sidecar)
    for spec in TABLES:
        _install_poll_loop(sidecar, spec.dir_name)
    _install_snapshot_loop(sidecar)
    install_agents(sidecar)
    app.on_rebalance_complete.connect(sidecar.rebalanced)
    app.service(type("SidecarRuntime", (SidecarRuntime,), {"sidecar": sidecar}))
    install_pages(app, sidecar)

    @app.timer(READINESS_EVERY_S, name="hyperdata_sidecar.readiness")
    async def refresh_readiness() -> None:
        sidecar.readiness.refresh()
        sidecar.sample_backlogs()

    return sidecar


def _install_poll_loop(sidecar: Sidecar, table: str) -> None:
    """One polling loop per table, started (like Faust timers) after table recovery.

    A plain task rather than ``app.timer``: a catch-up tick runs for as long as there is backlog, and
    a timer would log that it "is overlapping" on every such tick.
    """

    async def poll() -> None:
        interval = sidecar.settings.poll_interval_s
        while not sidecar.stopping:
            started = time.monotonic()
            try:
                await sidecar.tick(table)
            except Exception as exc:
                # Unknown state in memory: stop the worker rather than go on from it. A restart
                # resumes from the last checkpoint, which never covers unacknowledged lines.
                sidecar.log.error("poll_crashed", table=table, error=f"{type(exc).__name__}: {exc}")
                await sidecar.app.crash(exc)
                raise
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    poll.__name__ = poll.__qualname__ = f"hyperdata_sidecar.poll.{table}"
    sidecar.app.task(poll)


def _install_snapshot_loop(sidecar: Sidecar) -> None:
    """The loop that watches ``WATCH_DIR/periodic_abci_states`` (:class:`SnapshotWatcher`)."""

    async def watch_snapshots() -> None:
        while not sidecar.stopping:
            if sidecar.lifecycle.running:
                try:
                    await sidecar.tick_snapshots()
                except (TimeoutError, OSError, KafkaError) as exc:
                    # Unreadable snapshot dir, or the internal topic cannot take the event now: the next look tries again.
                    sidecar.log.limited(
                        logging.ERROR, "snapshot_poll_failed", "snapshots", 60.0, error=f"{type(exc).__name__}: {exc}"
                    )
                except Exception as exc:
                    sidecar.log.error("poll_crashed", table="snapshots", error=f"{type(exc).__name__}: {exc}")
                    await sidecar.app.crash(exc)
                    raise
            await asyncio.sleep(SNAPSHOT_POLL_S)

    watch_snapshots.__name__ = watch_snapshots.__qualname__ = "hyperdata_sidecar.poll.snapshots"
    sidecar.app.task(watch_snapshots)
