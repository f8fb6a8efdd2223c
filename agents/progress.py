"""The ``progress`` agent: applies the tailer's checkpoints, forgets and barriers to the offsets table."""

from __future__ import annotations

from typing import Any

import faust

from hyperdata_sidecar.progress_topic import ProgressTopic


def install_progress_agent(app: faust.App, progress: ProgressTopic) -> None:
    @app.agent(progress.topic, name="hyperdata_sidecar.progress")
    async def apply_progress(records: faust.StreamT[dict[str, Any]]) -> None:
        async for event in records.events():
            await progress.apply(event.value, partition=event.message.partition, offset=event.message.offset)
