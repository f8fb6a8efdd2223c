"""What the web views read of the running sidecar: :class:`SidecarView`, the read model.

``web/`` depends on this module only: the view is a set of the rooms the pages read (readiness, the
broker link, the incident history, the node tables' tracked files, the state tables' records, the
backlogs, the snapshot watcher, the backup worker), each seen through a protocol of just what the
pages ask it. The plugin builds one from its rooms; neither ``web/`` nor ``agents/`` import ``plugin``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from hyperdata_sidecar.backup import BackupProgress
from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backlog import Estimate
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.engines import Engine
from hyperdata_sidecar.metrics import SidecarMetrics


@dataclass(frozen=True)
class LiveFile:
    """What only the running tailer knows about a file: its size as last seen and held partial bytes."""

    size: int
    held_bytes: int


class TrackedView(NamedTuple):
    """One tracked hour file as the views see it: its cursor (the tailer's, fresher than the table's,
    once running) and, for a file still growing under a running tailer, its size now."""

    hour: HourFile
    cursor: FileCursor
    live: LiveFile | None


class ReadinessView(Protocol):
    def not_ready_reasons(self) -> list[str]:
        """Why the sidecar is not ready; empty when it is."""


class BrokerView(Protocol):
    @property
    def connected(self) -> bool:
        """True while the data plane's producer is connected."""


class IncidentsView(Protocol):
    """The incidents since the start (lost files, late appends, rewritten sealed files, regressions)."""

    @property
    def lost(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def late_appends(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def rewritten(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def regressions(self) -> Mapping[str, Mapping[str, Any]]: ...


class FilesView(Protocol):
    def tracked(self) -> dict[str, dict[str, TrackedView]]:
        """Every tracked hour file, by table and path."""


class RecordsView(Protocol):
    def records(self, name: str) -> dict[str, Any]:
        """The contents of the sidecar's table ``seals``, ``backups`` or ``snapshots``, by path."""


class BacklogsView(Protocol):
    def estimates(self) -> dict[str, Estimate]:
        """Each table's backlog, drain rate and time to live, as last sampled (none before the tables are synced)."""


class SnapshotsView(Protocol):
    def waiting(self) -> list[dict[str, Any]]:
        """The node snapshots seen and not announced yet."""


class BackupsView(Protocol):
    def running(self) -> BackupProgress | None:
        """The progress of the backup attempt running now (attempts run one at a time), or None."""


class StreamView(Protocol):
    def status(self) -> dict[str, Any]:
        """STREAM_ID: the stream, this sidecar's role and term, the active's node, the members, and
        under ``nodes`` each node's head and how far it is behind the newest."""


@dataclass(frozen=True)
class SidecarView:
    """The read model the web views are built on. Reading it never changes anything."""

    settings: Settings
    metrics: SidecarMetrics
    app_id: str
    started_at: float
    engine: Engine
    readiness: ReadinessView
    broker: BrokerView
    incidents: IncidentsView
    files: FilesView
    tables: RecordsView
    backlogs: BacklogsView
    snapshots: SnapshotsView
    backups: BackupsView
    stream: StreamView | None = None  # STREAM_ID: the leadership room
