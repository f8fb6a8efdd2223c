"""The sidecar's Faust agents. Installed as ``hyperdata_sidecar.agents`` (see pyproject's package-dir).

Every table write of the sidecar happens here, inside a stream event, because faust-streaming's
RocksDB store accepts writes only there. Each agent module takes exactly the rooms it uses; the
plugin builds them and calls these installers.
"""

from __future__ import annotations

from hyperdata_sidecar.agents.backup import BackupWorker, install_backup_agent
from hyperdata_sidecar.agents.progress import install_progress_agent
from hyperdata_sidecar.agents.publish_once import PublishOnce
from hyperdata_sidecar.agents.seal import Sealer, install_seal_agent
from hyperdata_sidecar.agents.snapshot import SnapshotPublisher, install_snapshot_agent

__all__ = [
    "BackupWorker",
    "PublishOnce",
    "Sealer",
    "SnapshotPublisher",
    "install_backup_agent",
    "install_progress_agent",
    "install_seal_agent",
    "install_snapshot_agent",
]
