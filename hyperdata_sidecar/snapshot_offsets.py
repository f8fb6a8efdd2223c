"""Reading a snapshot's resume offsets off the data topics, and the snapshot events off their topic
(blocking: run these in a worker thread).

For each partition a binary search (:func:`hyperdata_sidecar.core.snapshots.resume_offset`) reads
single records and takes the block from their ``line_id`` header (``<table>|<block>|<seq>...``):
about log2(records) reads per partition, each one fetch of the record's batch. The search works the
same whether or not this process published the records (after a restart, a snapshot completed
before the crash is resolved the same way), at a few snapshots an hour.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol, cast

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.snapshots import resume_offset
from hyperdata_sidecar.logs import EventLog

READ_TIMEOUT_S = 10.0


class OffsetsUnavailable(Exception):
    """A partition could not be read (broker away, record without a line id): try again later."""


class Partitioned(Protocol):
    """The data plane, as the search asks it for the data topics' partition counts."""

    @property
    def partitions(self) -> Mapping[str, int]: ...


class SnapshotOffsets:
    """The resume offsets of a snapshot, read off the data topics in a worker thread."""

    def __init__(self, settings: Settings, dataplane: Partitioned, log: EventLog) -> None:
        self.settings = settings
        self.dataplane = dataplane
        self.log = log

    async def resume_offsets(self, height: int) -> dict[str, dict[int, int]] | None:
        """The snapshot's resume offsets per data topic and partition; None (logged, at most once a
        minute per height) when they cannot be read now."""
        partitions = {topic: self.dataplane.partitions[topic] for topic in self.settings.topics.values()}
        config = {"bootstrap.servers": self.settings.kafka_bootstrap, **self.settings.security.librdkafka_config()}
        try:
            return await asyncio.to_thread(resume_offsets, config, partitions, height)
        except OffsetsUnavailable as exc:
            self.log.limited(logging.WARNING, "snapshot_offsets_unavailable", str(height), 60.0, height=height, error=str(exc))
            return None


def resume_offsets(client_config: Mapping[str, Any], partitions: Mapping[str, int], height: int) -> dict[str, dict[int, int]]:
    """``offsets[topic][partition]`` of the snapshot at ``height`` for every partition of ``partitions``
    (topic -> partition count). Raises :class:`OffsetsUnavailable`."""
    consumer = Consumer(
        {
            **client_config,
            "group.id": "hyperdata-sidecar-snapshot-offsets",  # never joins: partitions are assigned
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 1 << 20,
            "max.partition.fetch.bytes": 1 << 16,  # a probe needs one record; the broker sends its batch
            # After each re-assign the first fetch would otherwise sit out the broker's 500 ms fetch
            # wait (measured: 0.5 s a probe, ~50 s a snapshot; 5-10 ms with this).
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        return {
            topic: {p: _resume_offset(consumer, TopicPartition(topic, p), height) for p in range(count)}
            for topic, count in partitions.items()
        }
    except KafkaException as exc:
        raise OffsetsUnavailable(str(exc)) from exc
    finally:
        consumer.close()


def snapshot_events(client_config: Mapping[str, Any], topic: str) -> list[dict[str, Any]]:
    """Every snapshot event on ``topic`` (values that are not JSON objects are passed over).
    Raises :class:`OffsetsUnavailable` when the topic cannot be read."""
    consumer = Consumer(
        {
            **client_config,
            "group.id": "hyperdata-sidecar-offsets-command",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    events: list[dict[str, Any]] = []
    try:
        metadata = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None:
            raise OffsetsUnavailable(f"topic {topic}: {metadata.error if metadata else 'not found'}")
        partitions = []
        for p in metadata.partitions:
            begin, end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=READ_TIMEOUT_S)
            if end > begin:
                partitions.append((TopicPartition(topic, p, begin), end))
        consumer.assign([tp for tp, _ in partitions])
        left = {tp.partition: end for tp, end in partitions}
        while left:
            message = consumer.poll(READ_TIMEOUT_S)
            if message is None:
                raise OffsetsUnavailable(f"topic {topic}: no record within {READ_TIMEOUT_S:g}s")
            error, partition, offset = message.error(), message.partition() or 0, message.offset() or 0
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    left.pop(partition, None)
                    continue
                raise OffsetsUnavailable(f"topic {topic}: {error}")
            try:
                value = orjson.loads(message.value() or b"")
            except orjson.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                events.append(value)
            if offset + 1 >= left.get(partition, 0):
                left.pop(partition, None)
        return events
    except KafkaException as exc:
        raise OffsetsUnavailable(str(exc)) from exc
    finally:
        consumer.close()


def _resume_offset(consumer: Consumer, partition: TopicPartition, height: int) -> int:
    begin, end = consumer.get_watermark_offsets(partition, timeout=READ_TIMEOUT_S)

    def block_at(offset: int) -> int:
        consumer.assign([TopicPartition(partition.topic, partition.partition, offset)])
        message = consumer.poll(READ_TIMEOUT_S)
        if message is None or message.error() is not None:
            raise OffsetsUnavailable(
                f"{partition.topic}[{partition.partition}] @{offset}: {message.error() if message else 'no record'}"
            )
        # A consumed record's headers are a list of (name, value); a null header's value is None.
        return block_of(cast("list[tuple[str, bytes | None]]", message.headers() or []), partition, offset)

    return resume_offset(height, begin, end, block_at)


def block_of(headers: list[tuple[str, bytes | None]], partition: TopicPartition, offset: int) -> int:
    """The block number in a record's ``line_id`` header."""
    for name, value in headers:
        if name == "line_id":
            try:
                return int((value or b"").split(b"|")[1])
            except (IndexError, ValueError):
                break
    raise OffsetsUnavailable(f"{partition.topic}[{partition.partition}] @{offset}: no line_id header with a block")
