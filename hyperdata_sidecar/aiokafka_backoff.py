"""Pauses after failures in aiokafka, the client Faust uses for its own topics, while a broker is away.

aiokafka 0.14 retries at once, or after its 100 ms ``retry_backoff_ms``, which Faust does not let us
set. Against a stopped broker each attempt fails at once (connection refused), so:

- **A failed metadata refresh.** Faust's producer, holding the sidecar's last checkpoints, asks for
  a refresh again as soon as the previous one ends while a partition it holds records for has no
  known leader: about 2,500 refreshes a second, a whole core and thousands of log lines
  (docs/reliability.md, drill 2). A failed refresh now waits :data:`FAILED_REFRESH_PAUSE_S` before
  it reports the failure; waiters share the one refresh in flight.
- **A failed connection.** Faust's consumer thread (its fetcher, coordinator and metadata loops)
  opened about 14 connections a second to the stopped broker, each with an error record built for
  the log: a third of the worker's CPU during an outage. After a failed connection to a node, a
  client does not try that node again until :data:`FAILED_CONNECT_PAUSE_S` has passed: a request
  for it meanwhile waits out the pause, as a slow connection failure would, and gets "not ready"
  (which aiokafka's callers handle) without a log record. So each of aiokafka's retry loops turns
  about twice a second instead of ten times.

A returning broker is connected to within about a second. :func:`install` patches ``AIOKafkaClient`` for the
whole process, once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup

FAILED_REFRESH_PAUSE_S = 0.5
FAILED_CONNECT_PAUSE_S = 0.5
_INSTALLED = "_hyperdata_sidecar_backoff"
_FAILED_AT = "_hyperdata_sidecar_failed_connects"  # per client: (node id, group) -> monotonic time


def _now() -> float:
    return time.monotonic()


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def install() -> None:
    """Wrap ``AIOKafkaClient._metadata_update`` and ``AIOKafkaClient._get_conn`` (idempotent).

    Only failures change: a failed refresh returns after its pause instead of at once, and a node
    whose connection failed is not tried again within its pause.
    """
    if getattr(AIOKafkaClient._metadata_update, _INSTALLED, False):
        return
    metadata_update, get_conn = AIOKafkaClient._metadata_update, AIOKafkaClient._get_conn

    async def _metadata_update(self: AIOKafkaClient, cluster_metadata: Any, topics: Any) -> bool:
        updated = await metadata_update(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(FAILED_REFRESH_PAUSE_S)
        return updated

    async def _get_conn(
        self: AIOKafkaClient, node_id: Any, *, group: Any = ConnectionGroup.DEFAULT, no_hint: bool = False
    ) -> Any:
        failed_at: dict[tuple[Any, Any], float] = self.__dict__.setdefault(_FAILED_AT, {})
        key = (node_id, group)
        failed = failed_at.get(key)
        if failed is not None and (left := failed + FAILED_CONNECT_PAUSE_S - _now()) > 0:
            await _sleep(left)  # as a slow failure would: the caller's retry loop turns slowly too
            return None
        conn = await get_conn(self, node_id, group=group, no_hint=no_hint)
        if conn is None:
            failed_at[key] = _now()
        else:
            failed_at.pop(key, None)
        return conn

    for wrapper in (_metadata_update, _get_conn):
        setattr(wrapper, _INSTALLED, True)
    AIOKafkaClient._metadata_update = _metadata_update
    AIOKafkaClient._get_conn = _get_conn
