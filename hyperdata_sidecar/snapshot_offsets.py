"""Reading a snapshot's resume offsets off the data topics (blocking: run it in a worker thread).

For each partition a binary search (:func:`hyperdata_sidecar.core.snapshots.resume_offset`) reads
single records and takes the block from their ``line_id`` header (``<table>|<block>|<seq>...``):
about log2(records) reads per partition, each one fetch of the record's batch. The search works the
same whether or not this process published the records (after a restart, a snapshot completed
before the crash is resolved the same way), at a few snapshots an hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from confluent_kafka import Consumer, KafkaException, TopicPartition

from hyperdata_sidecar.core.snapshots import resume_offset

READ_TIMEOUT_S = 10.0


class OffsetsUnavailable(Exception):
    """A partition could not be read (broker away, record without a line id): try again later."""


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


def _resume_offset(consumer: Consumer, partition: TopicPartition, height: int) -> int:
    begin, end = consumer.get_watermark_offsets(partition, timeout=READ_TIMEOUT_S)

    def block_at(offset: int) -> int:
        consumer.assign([TopicPartition(partition.topic, partition.partition, offset)])
        message = consumer.poll(READ_TIMEOUT_S)
        if message is None or message.error() is not None:
            raise OffsetsUnavailable(f"{partition.topic}[{partition.partition}] @{offset}: {message.error() if message else 'no record'}")
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
