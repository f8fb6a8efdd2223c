"""The stream's committed position per table, written by the active and read by its successor.

With ``STREAM_ID`` the active writes, with every checkpoint of a cycle that published a good line,
a :class:`~hyperdata_sidecar.core.stream_position.StreamPosition` record (key: the table's dir name)
to the stream's topic, into the same transaction as the lines it covers (as Kafka Connect's KIP-618
writes source offsets): a ``read_committed`` reader sees a position exactly when it sees its lines.
A sidecar taking over reads the last one per table (:meth:`StreamPositions.last`) after its
``init_transactions`` fenced the former active, so no transaction of the former can still commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Protocol

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.stream_position import StreamPosition, position_after
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES

READ_TIMEOUT_S = 10.0
FIRST_LOOK_BACK = 256  # records read back from the end first; doubled until every table was seen


class PositionsUnavailable(Exception):
    """The stream's topic could not be read to its end now (broker away): try again later."""


class InternalSender(Protocol):
    """The data plane, as a position record is written into its open transaction."""

    async def send_internal(self, topic: str, key: bytes | None, value: bytes) -> None: ...


class StreamPositions:
    """The position records of one stream: written into the active's transactions, read at a handover."""

    def __init__(self, settings: Settings, topic: str, sender: InternalSender) -> None:
        self.settings = settings
        self.topic = topic
        self.sender = sender

    async def note(self, table: str, cursor: FileCursor, last_line: bytes | None) -> None:
        """After ``cursor``'s checkpoint: write the position after ``last_line``, the last good line
        of the committed cycle (nothing when the cycle had none: the position stays where it was)."""
        if last_line is None or cursor.seq_block is None:
            return
        info = inspect_line(TABLE_BY_DIR[table], last_line)
        if not isinstance(info, LineInfo):
            raise ValueError(f"{cursor.path}: the cycle's last good line is not good ({info.reason})")
        position = position_after(
            table,
            cursor.seq_state,
            last_line,
            info,
            node=self.settings.node_id,
            source=cursor.path,
            offset=cursor.byte_offset,
        )
        await self.sender.send_internal(self.topic, orjson.dumps(table), orjson.dumps(position.to_record()))

    async def last(self) -> dict[str, StreamPosition]:
        """The last committed position of every table the stream has published (read_committed, in
        a worker thread). Raises :class:`PositionsUnavailable`."""
        config = {"bootstrap.servers": self.settings.kafka_bootstrap, **self.settings.security.librdkafka_config()}
        return await asyncio.to_thread(read_last, config, self.topic)


def read_last(client_config: Mapping[str, Any], topic: str) -> dict[str, StreamPosition]:
    """The last readable position per table on ``topic``'s partition 0 (blocking): read from
    :data:`FIRST_LOOK_BACK` records before the end, further back (doubling) until every table was
    seen or the partition's start was read."""
    consumer = Consumer(
        {
            **client_config,
            "group.id": "hyperdata-sidecar-stream-positions",  # never joins: the partition is assigned
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=READ_TIMEOUT_S)
        look_back = FIRST_LOOK_BACK
        while True:
            start = max(low, high - look_back)
            found = _read_from(consumer, topic, start)
            if start == low or len(found) == len(TABLES):
                return found
            look_back *= 2
    except KafkaException as exc:
        raise PositionsUnavailable(f"{topic}: {exc}") from exc
    finally:
        consumer.close()


def _read_from(consumer: Consumer, topic: str, start: int) -> dict[str, StreamPosition]:
    """Every table's last position from ``start`` to the partition's end (as read_committed sees it)."""
    consumer.assign([TopicPartition(topic, 0, start)])
    found: dict[str, StreamPosition] = {}
    while True:
        message = consumer.poll(READ_TIMEOUT_S)
        if message is None:
            raise PositionsUnavailable(f"{topic}: no answer for {READ_TIMEOUT_S:.0f} s")
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return found
            raise PositionsUnavailable(f"{topic}: {error.name()} ({error.str()})")
        try:
            position = StreamPosition.from_record(orjson.loads(message.value() or b""))
        except orjson.JSONDecodeError:
            position = None
        if position is not None:
            found[position.table] = position
