"""What the web views and the agents may use of the running sidecar: two narrow interfaces.

``web/`` depends on :class:`SidecarView`, a read model: settings, metrics, the tracked files as
plain values, the tables' contents, the things the status page reports. Each agent module depends
on a protocol of just what it uses (:class:`ProgressAgentHost`, :class:`SealAgentHost`,
:class:`SnapshotAgentHost`, :class:`BackupAgentHost`, and :class:`TopicReaderHost` /
:class:`PublisherHost` for the shared topic read and publish-once loop); :class:`AgentHost` is all
of them, for installing the agents. ``plugin.Sidecar`` implements them; nothing outside
``plugin.py`` needs it for more than construction, and neither ``web/`` nor ``agents/`` import it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import faust

from hyperdata_sidecar.backup import BackupSink
from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backlog import Estimate
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.engines import Engine
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateWriter


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


class SidecarView(Protocol):
    """The read model the web views are built on. Reading it never changes anything."""

    @property
    def settings(self) -> Settings: ...

    @property
    def metrics(self) -> SidecarMetrics: ...

    @property
    def app_id(self) -> str: ...

    @property
    def started_at(self) -> float: ...

    @property
    def chosen_engine(self) -> Engine | None:
        """The line engine in use; None until the worker has chosen it."""

    @property
    def broker_connected(self) -> bool: ...

    @property
    def lost(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def late_appends(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def rewritten(self) -> Sequence[Mapping[str, Any]]: ...

    @property
    def regressions(self) -> Mapping[str, Mapping[str, Any]]: ...

    def not_ready_reasons(self) -> list[str]:
        """Why the sidecar is not ready; empty when it is."""
        ...

    def tracked(self) -> dict[str, dict[str, TrackedView]]:
        """Every tracked hour file, by table and path."""
        ...

    def records(self, table: str) -> dict[str, Mapping[str, Any]]:
        """The contents of the sidecar's table ``seals``, ``backups`` or ``snapshots``, by path."""
        ...

    def backlog(self) -> Mapping[str, Estimate]:
        """Each table's backlog, drain rate and time to live, as last sampled (none before the tables are synced)."""
        ...

    def snapshots_waiting(self) -> list[dict[str, Any]]:
        """The node snapshots seen and not announced yet."""
        ...


class Sender(Protocol):
    """The data plane as the agents use it."""

    @property
    def partitions(self) -> Mapping[str, int]: ...

    async def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None: ...


class TopicReaderHost(Protocol):
    """What the one read of a whole topic uses (``agents/topic.py``)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def dataplane(self) -> Sender: ...


class PublisherHost(Protocol):
    """What the publish-once loop uses (``agents/publish_once.py``), and the rotation reader its log."""

    @property
    def metrics(self) -> SidecarMetrics: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def connected(self) -> bool:
        """True while the data plane is connected (from syncing until the worker stops)."""
        ...

    async def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early when the worker stops; False if it is stopping."""
        ...


class TableWriterHost(Protocol):
    @property
    def app(self) -> faust.App: ...

    @property
    def state_writer(self) -> StateWriter:
        """Every table write goes through it (a refused write is retried, never dropped)."""
        ...


class ProgressAgentHost(Protocol):
    """The ``progress`` agent's host."""

    @property
    def app(self) -> faust.App: ...

    @property
    def progress_topic(self) -> faust.types.TopicT: ...

    async def apply_progress(self, record: dict[str, Any]) -> None:
        """Apply one progress record to the tables (returns once they took it)."""
        ...


class SealAgentHost(TopicReaderHost, PublisherHost, TableWriterHost, Protocol):
    """The ``seal`` agent's host."""

    @property
    def rotations_topic(self) -> faust.types.TopicT: ...

    @property
    def seals(self) -> MutableMapping[str, Any]: ...


class SnapshotAgentHost(TopicReaderHost, PublisherHost, TableWriterHost, Protocol):
    """The ``snapshot`` agent's host."""

    @property
    def snapshot_events_topic(self) -> faust.types.TopicT: ...

    @property
    def snapshots(self) -> MutableMapping[str, Any]: ...


class BackupAgentHost(TableWriterHost, Protocol):
    """The backup agents' host."""

    @property
    def settings(self) -> Settings: ...

    @property
    def metrics(self) -> SidecarMetrics: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def run_id(self) -> str: ...

    @property
    def sink(self) -> BackupSink: ...

    @property
    def offsets(self) -> MutableMapping[str, Any]: ...

    @property
    def backups(self) -> MutableMapping[str, Any]: ...

    @property
    def snapshots(self) -> MutableMapping[str, Any]: ...

    @property
    def rotations_topic(self) -> faust.types.TopicT: ...

    @property
    def backup_attempts_topic(self) -> faust.types.TopicT: ...


class AgentHost(ProgressAgentHost, SealAgentHost, SnapshotAgentHost, BackupAgentHost, Protocol):
    """Everything the agents use together: every table write of the sidecar happens in an agent."""
