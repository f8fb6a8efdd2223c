"""The one "publish once" loop of the seal and snapshot agents: skip what the topic already holds,
send the rest, and retry a refusal with a back-off until it is taken or the worker stops."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from aiokafka.errors import KafkaError
from confluent_kafka import KafkaException

from hyperdata_sidecar.core.backoff import Backoff

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import PublisherHost

FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 30.0
STOP_CHECK_S = 0.5
TOPIC_READ_TIMEOUT_S = 60.0  # reading the topic once; a broker outage must not hang the agent


class Published(enum.Enum):
    SENT = "sent"  # this call published it
    ON_TOPIC = "on_topic"  # the topic already held it (a crash after the ack, before the table write)
    STOPPED = "stopped"  # the worker stopped first


async def publish_once(
    host: PublisherHost,
    kind: Literal["seal", "snapshot"],
    path: str,
    on_topic: Callable[[], Awaitable[bool]],
    send: Callable[[], Awaitable[None]],
) -> Published:
    """Send with ``send`` unless ``on_topic()`` finds it published; a refusal (or the one read of
    the topic failing) is counted as a ``kind`` producer error, logged (``seal_failed`` or
    ``snapshot_event_failed``) and tried again after a back-off."""
    while not host.connected:
        if not await host.pause(STOP_CHECK_S):
            return Published.STOPPED
    backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
    while True:
        try:
            if await asyncio.wait_for(on_topic(), TOPIC_READ_TIMEOUT_S):
                return Published.ON_TOPIC
            await send()
            return Published.SENT
        except (TimeoutError, KafkaException, KafkaError, OSError) as exc:
            # The data plane never gives a record up while the broker is away; what fails here is a
            # refusal (topic missing, not authorized) or the one read of the topic.
            host.metrics.producer_error(kind)
            host.log.limited(
                logging.WARNING,
                "seal_failed" if kind == "seal" else "snapshot_event_failed",
                path,
                10.0,
                path=path,
                error=str(exc),
                retry_in_s=backoff.delay,
            )
            if not await backoff.wait(host.pause):
                return Published.STOPPED
