"""The sidecar's Faust agents. Installed as ``hyperdata_sidecar.agents`` (see pyproject's package-dir).

Every table write of the sidecar happens here, inside a stream event, because faust-streaming's
RocksDB store accepts writes only there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyperdata_sidecar.agents.backup import install_backup_agent
from hyperdata_sidecar.agents.progress import install_progress_agent
from hyperdata_sidecar.agents.seal import install_seal_agent
from hyperdata_sidecar.agents.snapshot import install_snapshot_agent

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import AgentHost


def install_agents(sidecar: AgentHost) -> None:
    install_progress_agent(sidecar)
    install_seal_agent(sidecar)
    backups = install_backup_agent(sidecar)
    install_snapshot_agent(sidecar, backups)
