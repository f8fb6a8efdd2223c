"""A pause after a failed metadata refresh in aiokafka, the client Faust uses for its own topics.

aiokafka 0.14's producer asks for a metadata refresh again as soon as the previous one ends while a
partition it holds records for has no known leader, and against a stopped broker a refresh fails at
once (connection refused). So while the broker is away, Faust's producer, holding the sidecar's
last checkpoints, refreshed about 2,500 times a second: a whole core and thousands of log lines
(docs/reliability.md, drill 2). :func:`install` makes a failed refresh wait
:data:`FAILED_REFRESH_PAUSE_S` before it reports the failure; waiters share the one refresh in
flight, so the loop runs at most a few times a second and a returning broker is seen within the pause.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.client import AIOKafkaClient

FAILED_REFRESH_PAUSE_S = 0.5
_INSTALLED = "_hyperdata_sidecar_backoff"


def install() -> None:
    """Wrap ``AIOKafkaClient._metadata_update`` for the whole process (idempotent).

    Only failed refreshes change: they return after the pause instead of at once.
    """
    original = AIOKafkaClient._metadata_update
    if getattr(original, _INSTALLED, False):
        return

    async def _metadata_update(self: AIOKafkaClient, cluster_metadata: Any, topics: Any) -> bool:
        updated = await original(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(FAILED_REFRESH_PAUSE_S)
        return updated

    setattr(_metadata_update, _INSTALLED, True)
    AIOKafkaClient._metadata_update = _metadata_update
