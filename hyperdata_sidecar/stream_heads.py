"""Each node's head, announced on the stream's topic, and the active's yield when its node falls behind.

Twice a second every sidecar of a stream looks how far its node has written (per table, the
``block_time`` of the newest complete line of the newest hour file: :func:`look`), announces it on
the stream's topic (key ``head|<node>``, not in a transaction) and reads the other sidecars'
announcements, and keeps the newest of the active's position records it meets there per table
(a standby's :class:`~hyperdata_sidecar.stream_follow.StandbyFollow` looks for them). The active asks :class:`~hyperdata_sidecar.core.node_heads.YieldWatch` whether a
standby's node is far enough ahead for long enough; if so it yields: its worker stops, it leaves the
group, the standby is elected at once, and its restart stands by.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.leadership import Role
from hyperdata_sidecar.core.lineinfo import block_time_of
from hyperdata_sidecar.core.node_heads import Heads, YieldWatch, node_head
from hyperdata_sidecar.core.stream_position import StreamPosition
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.leadership import Leadership
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.scanner import table_hour_files

ANNOUNCE_S = 0.5  # the yield comes within STREAM_YIELD_LAG_S + 5 s + about two rounds (drill 19c's bound is + 10 s)
TAIL_BYTES = 256 * 1024  # the end of a file read for its newest complete line (a streaming line is ~0.5-4 KiB)
KEY_PREFIX = b"head|"
FIRST_BACKOFF_S, MAX_BACKOFF_S = 1.0, 30.0


def look(watch_dir: Path) -> dict[str, float]:
    """Per table, the epoch seconds of the newest complete line's ``block_time`` on disk (blocking;
    a table without one is absent)."""
    heads = {}
    for spec in TABLES:
        for path in reversed(table_hour_files(watch_dir, spec.dir_name)[-2:]):
            newest = _newest_block_time(watch_dir / path)
            if newest is not None:
                heads[spec.dir_name] = newest
                break
    return heads


def _newest_block_time(path: Path) -> float | None:
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read(TAIL_BYTES)
    except OSError:
        return None
    for line in reversed(tail.split(b"\n")[1:-1] if size > TAIL_BYTES else tail.split(b"\n")[:-1]):
        newest = epoch_of(block_time_of(line))
        if newest is not None:
            return newest
    return None


def _position(value: bytes | None) -> StreamPosition | None:
    """The stream position in a record of the stream's topic, if it is one."""
    try:
        return StreamPosition.from_record(orjson.loads(value or b""))
    except orjson.JSONDecodeError:
        return None


class StreamHeads:
    """This node's head, announced; the peers' heads, followed; the active's yield."""

    def __init__(
        self,
        settings: Settings,
        leadership: Leadership,
        metrics: SidecarMetrics,
        log: EventLog,
        *,
        on_yield: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.leadership = leadership
        self.metrics = metrics
        self.log = log
        self.on_yield = on_yield
        self.positions: dict[str, StreamPosition] = {}  # the newest the active wrote per table, as read
        self.own: Heads | None = None
        self.peers: dict[str, Heads] = {}
        self.watch = YieldWatch(settings.stream_yield_lag_s)
        self._yielded = False
        self._stopping = False

    async def run(self, pause: Callable[[float], Any]) -> None:
        """Announce and follow until :meth:`stop`; a failed client is logged (``stream_heads_failed``)
        and made again after a back-off."""
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while not self._stopping:
            kwargs = {"bootstrap_servers": self.settings.kafka_bootstrap, **self.settings.security.client_kwargs()}
            producer, consumer = AIOKafkaProducer(**kwargs), AIOKafkaConsumer(enable_auto_commit=False, **kwargs)
            try:
                await producer.start()
                await consumer.start()
                partition = TopicPartition(self.leadership.topic, 0)
                consumer.assign([partition])
                await consumer.seek_to_end(partition)
                backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
                while not self._stopping:
                    await self._round(producer, consumer)
                    await pause(ANNOUNCE_S)
            except (KafkaError, OSError) as exc:
                self.log.limited(
                    logging.WARNING,
                    "stream_heads_failed",
                    "heads",
                    60.0,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in_s=backoff.delay,
                )
            finally:
                await producer.stop()
                await consumer.stop()
            if not self._stopping:
                await backoff.wait(pause)

    def stop(self) -> None:
        self._stopping = True

    async def _round(self, producer: AIOKafkaProducer, consumer: AIOKafkaConsumer) -> None:
        now = time.time()
        self.own = own = Heads(self.settings.node_id, await asyncio.to_thread(look, self.settings.watch_dir), now)
        await producer.send_and_wait(self.leadership.topic, own.encode(), key=KEY_PREFIX + own.node.encode(), partition=0)
        for records in (await consumer.getmany(timeout_ms=0)).values():
            for record in records:
                if record.key and record.key.startswith(KEY_PREFIX):
                    heads = Heads.decode(record.value)
                    if heads is not None and heads.node != own.node:
                        self.peers[heads.node] = heads
                elif (position := _position(record.value)) is not None:
                    known = self.positions.get(position.table)
                    if known is None or position.order > known.order:
                        self.positions[position.table] = position
        ahead = self.watch.furthest_ahead(own.head, self.peers, now)
        self.metrics.stream_behind(ahead[1] if ahead is not None and ahead[1] != float("inf") else 0.0)
        if self.leadership.role is Role.ACTIVE and not self._yielded:
            reason = self.watch.observe(own.head, self.peers, now)
            if reason is not None:
                self._yielded = True
                self.log.warning("stream_yielding", stream=self.leadership.stream, reason=reason)
                self.on_yield(reason)

    def status(self) -> dict[str, Any]:
        """The stream as this sidecar sees it (:meth:`Leadership.status`), with each node's head
        (epoch seconds, None before any line) and how far it is behind the newest, under ``nodes``."""
        return {**self.leadership.status(), "nodes": self._nodes()}

    def _nodes(self) -> dict[str, dict[str, float | None]]:
        now = time.time()
        nodes = dict(self.peers)
        if self.own is not None:
            nodes[self.own.node] = self.own
        heads = {node: node_head(h.tables) for node, h in nodes.items() if now - h.at <= 60.0}
        newest = max((h for h in heads.values() if h is not None), default=None)
        return {
            node: {"head": head, "behind_s": None if head is None or newest is None else round(newest - head, 3)}
            for node, head in sorted(heads.items())
        }
