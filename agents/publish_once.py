"""The one way the seal and snapshot agents publish: once.

:class:`PublishOnce` skips what the topic already holds (it reads the whole topic once after a start,
:meth:`PublishOnce.topic_values`), sends the rest through the data plane's one producer
(``DataPlane.send``: the agents never hold the producer), and retries a refusal with a back-off until
it is taken or the worker stops.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from confluent_kafka import KafkaException

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.transactions import TransactionAborted

FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 30.0
STOP_CHECK_S = 0.5
TOPIC_READ_TIMEOUT_S = 60.0  # reading the topic once; a broker outage must not hang the agent


class Published(enum.Enum):
    SENT = "sent"  # this call published it
    ON_TOPIC = "on_topic"  # the topic already held it (a crash after the ack, before the table write)
    STOPPED = "stopped"  # the worker stopped first


class Sender(Protocol):
    """The data plane, as the agents publish through it."""

    @property
    def partitions(self) -> Mapping[str, int]: ...

    async def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None: ...


class Connected(Protocol):
    """The runtime's lifecycle: connected from syncing until the worker stops."""

    @property
    def connected(self) -> bool: ...


class Stopping(Protocol):
    async def pause(self, seconds: float) -> bool: ...


class PublishOnce:
    """Publishes seal and snapshot records once each, through ``dataplane``."""

    def __init__(
        self,
        dataplane: Sender,
        settings: Settings,
        lifecycle: Connected,
        shutdown: Stopping,
        metrics: SidecarMetrics,
        log: EventLog,
    ) -> None:
        self.dataplane = dataplane
        self.settings = settings
        self.lifecycle = lifecycle
        self.shutdown = shutdown
        self.metrics = metrics
        self.log = log

    async def publish(
        self,
        kind: Literal["seal", "snapshot"],
        path: str,
        record: tuple[str, bytes, bytes],
        on_topic: Callable[[], Awaitable[bool]],
    ) -> Published:
        """Send ``record`` (topic, key, value) unless ``on_topic()`` finds it published; a refusal (or
        the one read of the topic failing) is counted as a ``kind`` producer error, logged
        (``seal_failed`` or ``snapshot_event_failed``) and tried again after a back-off."""
        while not self.lifecycle.connected:
            if not await self.shutdown.pause(STOP_CHECK_S):
                return Published.STOPPED
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while True:
            try:
                if await asyncio.wait_for(on_topic(), TOPIC_READ_TIMEOUT_S):
                    return Published.ON_TOPIC
                await self.dataplane.send(*record)
                return Published.SENT
            except (TimeoutError, KafkaException, KafkaError, OSError, TransactionAborted) as exc:
                # The data plane never gives a record up while the broker is away; what fails here is a
                # refusal (topic missing, not authorized) or the one read of the topic.
                self.metrics.producer_error(kind)
                self.log.limited(
                    logging.WARNING,
                    "seal_failed" if kind == "seal" else "snapshot_event_failed",
                    path,
                    10.0,
                    path=path,
                    error=str(exc),
                    retry_in_s=backoff.delay,
                )
                if not await backoff.wait(self.shutdown.pause):
                    return Published.STOPPED

    async def topic_values(self, topic: str) -> list[bytes]:
        """The values of every record of ``topic`` (one of the data plane's topics), from its
        beginning to its end offsets of the moment the read starts."""
        settings = self.settings
        consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            enable_auto_commit=False,
            isolation_level="read_committed" if settings.exactly_once else "read_uncommitted",
            **settings.security.client_kwargs(),
        )
        partitions = [TopicPartition(topic, p) for p in range(self.dataplane.partitions[topic])]
        await consumer.start()
        try:
            consumer.assign(partitions)
            for tp, offset in (await consumer.beginning_offsets(partitions)).items():
                consumer.seek(tp, offset)
            end = await consumer.end_offsets(partitions)
            values: list[bytes] = []
            while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
                for records in (await consumer.getmany(*partitions, timeout_ms=1000)).values():
                    values += [record.value for record in records if record.value is not None]
            return values
        finally:
            await consumer.stop()
