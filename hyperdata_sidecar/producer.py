"""The data-plane producer: one idempotent ``AIOKafkaProducer`` (acks=all, zstd) fed with whole batches.

Per-message ``send()`` tops out near the production rate, so the data plane builds record batches
itself (``create_batch``/``send_batch``) to partitions it computes with Kafka's murmur2 partitioner,
exactly as Java clients would for the same key.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from hyperdata_sidecar.topics import load_contract, producer_max_request_size

SEND_TIMEOUT_S = 30.0  # queueing one batch: metadata wait plus room in the accumulator
Header = tuple[str, bytes]
#: One record ready to send: key, value, headers.
Record = tuple[bytes, bytes, list[Header]]  # aiokafka's C batch builder wants a list



class PublishError(Exception):
    """The broker did not ack a batch; nothing after the last checkpoint may be persisted."""


@dataclass
class Outbox:
    """Records of one poll cycle grouped by (topic, partition), in the order they must land."""

    groups: dict[tuple[str, int], list[Record]] = field(default_factory=dict)
    count: int = 0

    def add(self, topic: str, partition: int, record: Record) -> None:
        self.extend(topic, partition, [record])

    def extend(self, topic: str, partition: int, records: list[Record]) -> None:
        if records:
            self.groups.setdefault((topic, partition), []).extend(records)
            self.count += len(records)


class DataPlaneProducer:
    """Owns the data-plane producer; publishes an :class:`Outbox` and waits for every ack."""

    def __init__(self, bootstrap: str, *, linger_ms: int, batch_bytes: int, client_kwargs: dict[str, object]) -> None:
        self._kwargs = dict(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            acks="all",
            compression_type="zstd",
            linger_ms=linger_ms,
            max_batch_size=batch_bytes,
            max_request_size=producer_max_request_size(load_contract({})),
            request_timeout_ms=30_000,
            retry_backoff_ms=200,
            **client_kwargs,
        )
        self._producer: AIOKafkaProducer | None = None
        self._partitions: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._generation = 0

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise PublishError("data-plane producer is not connected")
        return self._producer

    async def start(self) -> None:
        """Connect once; raises ``KafkaError`` (or ``OSError``) when the broker cannot be reached."""
        producer = AIOKafkaProducer(**self._kwargs)
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer

    async def stop(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            await producer.stop()

    async def recover(self) -> None:
        """Replace the producer after a failed publish: its idempotence sequence state is not trusted.

        Several tailers may fail on the same outage; only the first one that gets here replaces it.
        Raises nothing: if the broker is still unreachable the next publish fails and backs off again.
        """
        generation = self._generation
        async with self._lock:
            if generation != self._generation:
                return
            self._generation += 1
            old, self._producer = self._producer, None
            if old is not None:
                try:
                    await asyncio.wait_for(old.stop(), timeout=5)
                except (KafkaError, asyncio.TimeoutError, OSError):
                    pass  # the batches it still held are re-sent from the tailer's outbox
            try:
                await self.start()
            except (KafkaError, OSError):
                self._producer = None

    async def partition_count(self, topic: str) -> int:
        count = self._partitions.get(topic)
        if count is None:
            parts = await self.producer.partitions_for(topic)
            if not parts:
                raise PublishError(f"topic {topic} has no partitions in the broker metadata")
            count = self._partitions[topic] = len(parts)
        return count

    async def enqueue(self, outbox: Outbox) -> list[asyncio.Future]:
        """Hand every record of ``outbox`` to the producer, in order; returns the batches' ack futures.

        Returns once the batches are queued (not acked), so the caller can prepare the next cycle
        while the broker works. Calls for the same partition must not overlap: await each in turn.
        Raises :class:`PublishError` if a batch cannot be queued.
        """
        producer = self.producer
        futures: list[asyncio.Future] = []
        try:
            for (topic, partition), records in outbox.groups.items():
                batch = producer.create_batch()
                for key, value, headers in records:
                    if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                        futures.append(await self._send_batch(producer, batch, topic, partition))
                        batch = producer.create_batch()
                        batch.append(key=key, value=value, timestamp=None, headers=headers)
                futures.append(await self._send_batch(producer, batch, topic, partition))
        except (KafkaError, asyncio.TimeoutError, OSError) as exc:
            await asyncio.gather(*futures, return_exceptions=True)
            raise PublishError(f"{type(exc).__name__}: {exc}") from exc
        return futures

    @staticmethod
    async def _send_batch(producer: AIOKafkaProducer, batch: Any, topic: str, partition: int) -> asyncio.Future:
        # Bounded: after a broker restart aiokafka's metadata wait inside send_batch was seen to
        # hang for good (drill 2); a timeout turns that into a failed cycle, retried on a new producer.
        return await asyncio.wait_for(producer.send_batch(batch, topic, partition=partition), SEND_TIMEOUT_S)

    @staticmethod
    async def settle(futures: list[asyncio.Future]) -> None:
        """Wait for ``futures`` to finish; raises :class:`PublishError` (once) if any batch failed."""
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise PublishError(f"{type(result).__name__}: {result}") from result

    async def publish(self, outbox: Outbox) -> None:
        """Send every record of ``outbox`` and return once the broker acked all of them.

        Raises :class:`PublishError` if any batch fails; some batches may have landed (at-least-once).
        """
        await self.settle(await self.enqueue(outbox))

    async def send_one(self, topic: str, key: bytes, value: bytes, headers: Sequence[Header] = ()) -> None:
        """Send a single low-rate record (seals) and wait for its ack."""
        producer, generation = self.producer, self._generation
        try:
            await producer.send_and_wait(topic, value, key=key, headers=list(headers))
        except (KafkaError, asyncio.TimeoutError, OSError) as exc:
            raise PublishError(f"{type(exc).__name__}: {exc}") from exc
        except asyncio.CancelledError:
            if generation != self._generation:  # recover() replaced the producer under this send
                raise PublishError("the producer was replaced while sending") from None
            raise
