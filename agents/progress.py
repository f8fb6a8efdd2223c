"""The ``progress`` agent: applies the tailer's checkpoints, forgets and barriers to the offsets table."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

import faust

from hyperdata_sidecar.progress_topic import ProgressTopic


def install_progress_agent(app: faust.App, progress: ProgressTopic) -> None:
    @app.agent(progress.topic, name="hyperdata_sidecar.progress")
    async def apply_progress(records: AsyncIterable[dict[str, Any]]) -> None:
        async for record in records:
            await progress.apply(record)
