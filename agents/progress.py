"""The ``progress`` agent: applies the tailer's checkpoints, forgets and barriers to the offsets table."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import ProgressAgentHost


def install_progress_agent(sidecar: ProgressAgentHost) -> None:
    @sidecar.app.agent(sidecar.progress_topic, name="hyperdata_sidecar.progress")
    async def progress(records: AsyncIterable[dict[str, Any]]) -> None:
        async for record in records:
            await sidecar.apply_progress(record)
