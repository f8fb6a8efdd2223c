"""Installs the sidecar into a Faust app: topics, tables, agents, loops, a runtime service and pages.

``hyperdata_sidecar.app`` is one app built this way; another Faust app embeds the sidecar by calling
:func:`install` on itself. Every registration has an explicit name under ``hyperdata_sidecar.``, so
it cannot collide with the host app's own agents or be registered twice by autodiscovery.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import faust

from hyperdata_sidecar import aiokafka_backoff, read_committed
from hyperdata_sidecar.agents import (
    BackupWorker,
    PublishOnce,
    Sealer,
    SnapshotPublisher,
    install_backup_agent,
    install_progress_agent,
    install_seal_agent,
    install_snapshot_agent,
)
from hyperdata_sidecar.backup import make_sink
from hyperdata_sidecar.broker import BrokerLink
from hyperdata_sidecar.config import ConfigError, Settings, load_settings
from hyperdata_sidecar.dataplane import DataPlane
from hyperdata_sidecar.engines import Engine, EngineUnavailable, select
from hyperdata_sidecar.incidents import IncidentHistory
from hyperdata_sidecar.internal_topics import InternalTopic
from hyperdata_sidecar.leadership import Leadership, stream_topic_name
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.node_tables import NodeTables
from hyperdata_sidecar.ports import SidecarView
from hyperdata_sidecar.progress_topic import ProgressTopic
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.rotations import Rotations
from hyperdata_sidecar.runtime import FatalProducer, Runtime, install_runtime
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.snapshot_offsets import SnapshotOffsets
from hyperdata_sidecar.snapshots import SnapshotAnnouncements, SnapshotWatcher
from hyperdata_sidecar.standby_files import StandbyFiles
from hyperdata_sidecar.state_writer import StateTables, StateWriter, reopen_rocksdb
from hyperdata_sidecar.stream_follow import StandbyFollow
from hyperdata_sidecar.stream_handover import StreamHandover
from hyperdata_sidecar.stream_heads import StreamHeads
from hyperdata_sidecar.stream_positions import StreamPositions
from hyperdata_sidecar.table_backlogs import TableBacklogs
from hyperdata_sidecar.table_sync import TableSync
from hyperdata_sidecar.tailer import TailerRooms
from hyperdata_sidecar.topics import internal_topic_name
from hyperdata_sidecar.transactions import Transactions
from hyperdata_sidecar.web import install_pages

INSTALLED_ATTR = "_hyperdata_sidecar"
# No value_type: Faust would call dict.from_data() on every changelog record during recovery.
JSON_SCHEMA: dict[str, Any] = dict(key_type=str, key_serializer="json", value_serializer="json")


class Sidecar:
    """The sidecar's rooms on one Faust app, built and wired; reach it as ``app._hyperdata_sidecar``.

    Nothing here runs: the runtime service and loops (:mod:`.runtime`), the agents (``agents/``) and
    the pages (``web/``) do, each given the rooms it uses. docs/architecture.md draws the house.
    """

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.metrics = metrics = SidecarMetrics()
        self.log = log = EventLog(node=settings.node_id)
        self.shutdown = shutdown = Shutdown(lambda: bool(app.should_stop))
        self.engine = engine = chosen_engine(settings, metrics, log)
        self.tables = tables = StateTables(*(self._table(name, about) for name, about in STATE_TABLES))
        self.state_writer = writer = StateWriter(metrics, log, str(settings.state_path), shutdown.pause, reopen_rocksdb)
        self.broker = broker = BrokerLink(settings, metrics, log, shutdown)
        fatal = FatalProducer(app, log)
        stream = settings.stream_id
        self.leadership = leadership = (
            Leadership(settings, metrics, log, client_id=f"{app.conf.id}-stream", on_demoted=fatal.demoted) if stream else None
        )
        heads = StreamHeads(settings, leadership, metrics, log, on_yield=fatal.yielded) if leadership else None
        self.transactions = txn = Transactions(
            settings,
            engine,
            metrics,
            log,
            # A stream's sidecars share one: the new active's init_transactions fences the former one.
            transactional_id=f"{stream_topic_name(stream)}-data" if stream else f"{app.conf.id}-sidecar",
            on_abort=lambda _reason: readiness.redo_reads(),
            on_fenced=fatal.fenced,
            shared=bool(stream),
        )
        self.dataplane = dataplane = DataPlane(
            settings,
            log,
            engine,
            txn,
            on_broker=broker.reachable,
            on_login_refused=broker.login_refused,
            on_error=metrics.producer_error,
            on_fatal=fatal,
        )
        self.readiness = readiness = Readiness(settings, metrics, log, broker, writer, txn, topics=dataplane, stream=leadership)
        positions = StreamPositions(settings, stream_topic_name(stream), dataplane) if stream else None
        follow = StandbyFollow(settings, positions, heads, metrics, log) if positions and heads else None
        self.incidents = incidents = IncidentHistory(metrics, log)
        self.progress = progress = ProgressTopic(
            progress_topic := self._topic("progress", "json"),
            tables.offsets,
            (tables.offsets, tables.seals, tables.backups, tables.snapshots),
            writer,
            metrics,
            log,
            out=InternalTopic(progress_topic, dataplane),
        )
        rotations_topic, events_topic = self._topic("rotations", "raw"), self._topic("snapshot-events", "json")
        self.rotations = rotations = Rotations(
            rotations_topic, tables.seals, tables.backups, settings.node_id, log, out=InternalTopic(rotations_topic, dataplane)
        )
        self.announcements = SnapshotAnnouncements(
            events_topic, tables.snapshots, tables.backups, out=InternalTopic(events_topic, dataplane)
        )
        self.backlogs = TableBacklogs(metrics, log)
        self.node_tables = NodeTables(settings, tables.offsets, readiness, self.backlogs, metrics, log)
        txn.quiet = self.node_tables.quiet
        self.watcher = SnapshotWatcher(
            settings, self.node_tables, SnapshotOffsets(settings, dataplane, log), self.announcements, progress, metrics, log
        )
        rooms = TailerRooms(
            engine, dataplane, progress, rotations, writer, incidents, readiness, shutdown, metrics, log, positions
        )
        self.sync = TableSync(
            settings,
            progress=progress,
            tables=tables,
            node_tables=self.node_tables,
            tailer_rooms=rooms,
            rotations=rotations,
            announcements=self.announcements,
            watcher=self.watcher,
            readiness=readiness,
            engine=engine,
            txn=txn,
            shutdown=shutdown,
            metrics=metrics,
            log=log,
            handover=StreamHandover(settings, positions, readiness, shutdown, metrics, log) if positions else None,
        )
        self.once = PublishOnce(dataplane, settings, readiness.lifecycle, shutdown, metrics, log)
        self.backup_worker = BackupWorker(
            settings=settings,
            sink=make_sink(settings.backup_sink, settings),
            tables=tables,
            attempts=self._topic("backup-attempts", "json"),
            writer=writer,
            run_id=uuid.uuid4().hex,
            metrics=metrics,
            log=log,
        )
        self.view = SidecarView(
            settings,
            metrics,
            str(app.conf.id),
            time.time(),
            engine,
            readiness,
            broker,
            incidents,
            self.node_tables,
            tables,
            self.backlogs,
            self.watcher,
            self.backup_worker,
            follow,
        )
        self.runtime = Runtime(
            settings,
            broker,
            dataplane,
            readiness,
            self.node_tables,
            self.sync,
            self.watcher,
            shutdown,
            log,
            leadership,
            heads,
            StandbyFiles(settings, tables.seals, tables.backups, rotations, log) if stream else None,
            follow,
        )

    def install(self) -> None:
        """Register the agents, the runtime and the pages on the app (once, before the worker starts)."""
        app = self.app
        install_progress_agent(app, self.progress)
        install_seal_agent(app, self.rotations.topic, Sealer(self.tables.seals, self.once, self.state_writer))
        install_backup_agent(app, self.rotations.topic, self.backup_worker)
        publisher = SnapshotPublisher(self.tables.snapshots, self.once, self.state_writer)
        install_snapshot_agent(app, self.announcements.topic, publisher, self.backup_worker)
        app.on_rebalance_complete.connect(self.sync.rebalanced)
        install_runtime(app, self.runtime)
        install_pages(app, self.view)

    def _topic(self, role: str, values: str) -> faust.types.TopicT:
        name = internal_topic_name(self.app.conf.id, role)
        return self.app.topic(name, partitions=1, internal=True, key_serializer="json", value_serializer=values)

    def _table(self, name: str, about: str) -> Any:
        return self.app.Table(name, partitions=1, store="rocksdb://", schema=faust.Schema(**JSON_SCHEMA), help=about)


#: The Faust tables of :class:`StateTables`, in its order, and what each holds.
STATE_TABLES = (
    ("sidecar-offsets", "per-file tail state"),
    ("sidecar-seals", "sealed hour files"),
    ("sidecar-backups", "backup results"),
    ("sidecar-snapshots", "published node snapshot events"),
)


def chosen_engine(settings: Settings, metrics: SidecarMetrics, log: EventLog) -> Engine:
    """The line engine ``SIDECAR_ENGINE`` asks for, chosen once, when the sidecar is installed. Logs
    ``engine_fallback`` when ``auto`` found the native engine installed and broken, and sets
    ``hyperdata_sidecar_engine_info``. Raises :class:`ConfigError` naming ``SIDECAR_ENGINE`` when
    ``native`` is asked for and cannot be used."""
    try:
        engine = select(settings.engine)
    except EngineUnavailable as exc:
        raise ConfigError("SIDECAR_ENGINE", f"is native and {exc}") from None
    if engine.fallback_reason is not None:
        log.warning("engine_fallback", engine=engine.label(), reason=engine.fallback_reason)
    metrics.engine_chosen(engine.name, engine.version)
    return engine


def install(app: faust.App, settings: Settings | None = None) -> Sidecar:
    """Install the sidecar on ``app`` and return it.

    Called once per app, before the worker starts. Also installs, once per process, pauses after a
    failed aiokafka metadata refresh or connection (:mod:`hyperdata_sidecar.aiokafka_backoff`).
    Registers: the internal progress, rotation, backup-attempt and snapshot-event topics, the
    ``sidecar-offsets``/``sidecar-seals``/``sidecar-backups``/``sidecar-snapshots`` RocksDB tables,
    the ``progress``/``seal``/``backup``/``backup_attempts``/``snapshot`` agents and the timer that
    sends backup retries when they are due, one polling loop per node table and one for the node's
    snapshots, the readiness timer, the runtime service and the web pages. ``settings`` defaults to
    :func:`load_settings` (``faust.ini`` + environment). Chooses the line engine
    (:func:`chosen_engine`). Raises ``RuntimeError`` if the app already has a sidecar,
    :class:`ConfigError` on bad settings or a native engine asked for and missing.
    """
    aiokafka_backoff.install()
    if getattr(app, INSTALLED_ATTR, None) is not None:
        raise RuntimeError(f"hyperdata-sidecar is already installed on app {app.conf.id!r}")
    sidecar = Sidecar(app, settings or load_settings())
    if sidecar.settings.exactly_once:
        read_committed.install(app)
    setattr(app, INSTALLED_ATTR, sidecar)
    sidecar.install()
    return sidecar
