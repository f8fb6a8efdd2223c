"""A stand-in for librdkafka and the broker behind it, for the tailer's unit tests, and a host.

:class:`FakeBroker` is what the tailer sees of :class:`~hyperdata_sidecar.dataplane.DataPlane`
(the ``Publisher`` protocol): ``produce`` with confluent-kafka's positional parameters, and
``until``, which serves delivery reports the way the data plane's poll task does. It keeps
librdkafka's promises: a partition's records land and are reported in the order they were
produced; while the broker is away nothing is reported and nothing is lost; a record refused for
good is reported failed and the records after it go on. The "topics" are its ``log``: a record's
offset is its index in its partition's list.

Its door is the data plane's: the same :class:`~hyperdata_sidecar.core.topic_check.TopicGuard`
(every topic checked at the start, the contract being ``partitions``), line engines behind
:class:`~hyperdata_sidecar.checked_lines.CheckedLines`, a resend refused while its topic may not be
written, and ``refresh_metadata`` checking the topic as the broker has it now (:attr:`FakeBroker.counts`).
:meth:`FakeBroker.recreate` deletes a topic and creates it again with a partition count of its
choice: its offsets start at 0 again, and records produced for a partition it lacks fail with
``_UNKNOWN_PARTITION``, as librdkafka reports them.

Its tailers run the line engine :attr:`FakeBroker.engine`: the Python one, or the compiled one
handed this ``produce`` (hyperdata_sidecar/engines/testing.py: the engine calls it per record as the
reference writer does). tests/unit/conftest.py's ``line_engine`` fixture runs a test on each.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError

from hyperdata_sidecar.checked_lines import CheckedLines, TopicNotWritable
from hyperdata_sidecar.config import Settings, load_settings
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.records import Record, Regression
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.topic_check import TopicGuard
from hyperdata_sidecar.engines import Engine, FileLines, LineEngine
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonEngine, PythonLines
from hyperdata_sidecar.engines.testing import NativeLinesOnPython
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.tailer import TailerRooms
from hyperdata_sidecar.transactions import Transactions


@dataclass(frozen=True)
class Delivered:
    """What a delivery report carries about a delivered record, as confluent-kafka's ``Message``."""

    _topic: str
    _partition: int
    _offset: int

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


@dataclass
class Queued:
    record: Record
    callback: Callable[[Any, Any], None]


class FakeBroker:
    engine: Engine = PythonEngine("test")
    """The line engine the tailers run, producing through :meth:`produce` (the ``line_engine`` fixture sets it)."""

    def __init__(self, partitions: dict[str, int], *, capacity: int = 1 << 30) -> None:
        self.partitions = partitions
        self.capacity = capacity  # records the producer queues before produce() raises BufferError
        self.queue: deque[Queued] = deque()
        self.log: dict[tuple[str, int], list[Record]] = defaultdict(list)
        self.down_for = 0  # serve() calls that deliver nothing (a broker outage)
        self.refuse_topic: dict[str, int] = {}  # topic -> serve() calls that fail its records (UNKNOWN_TOPIC)
        self.max_value: int | None = None  # values longer than this fail with MSG_SIZE_TOO_LARGE
        self.client_refusals = 0  # produce() calls that raise a client error before queueing
        self.metadata_refreshes: list[str] = []  # topics whose metadata the tailer asked for, in order
        self.counts: dict[str, int] = dict(partitions)  # each topic's partition count at the broker now (0: missing)
        self.incarnations: dict[str, int] = defaultdict(int)  # how often each topic was created again
        self.guard = TopicGuard(partitions)
        for topic in partitions:
            self.guard.checked(topic, self.counts[topic], self.end_offsets(topic))
        self.suspected: list[tuple[str, str]] = []
        self.txn = transactions()

    def lines(self, file: FileLines) -> LineEngine:
        """The data plane's ``lines`` (the ``Publisher`` protocol): the engine's line engine on this
        ``produce``, behind the door."""
        if isinstance(self.engine, NativeEngine):
            return CheckedLines(NativeLinesOnPython(self.engine.module, self.produce, file), self.guard, file.topics, self.txn)
        return CheckedLines(PythonLines(file, self.produce), self.guard, file.topics, self.txn)

    def resend(self, record: Record, callback: Callable[[Any, Any], None]) -> None:
        refusal = self.guard.refusal(record.topic)
        if refusal is not None:
            raise TopicNotWritable(record.topic, refusal)
        self.produce(record.topic, record.value, record.key, record.partition, callback, None, 0, record.headers)

    def produce(self, topic, value, key, partition, callback, _alias, _timestamp, headers) -> None:
        if self.client_refusals:
            self.client_refusals -= 1
            raise ValueError("Local: Unknown partition")
        if len(self.queue) >= self.capacity:
            raise BufferError("Local: Queue full")
        self.queue.append(Queued(Record(topic, partition, key, value, list(headers)), callback))

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        self.serve()
        if not predicate():
            await asyncio.sleep(0)
        return predicate()

    def serve(self) -> None:
        if self.down_for:
            self.down_for -= 1
            return
        failing = {topic for topic, calls in self.refuse_topic.items() if calls > 0}
        for topic in failing:
            self.refuse_topic[topic] -= 1
        while self.queue:
            queued = self.queue.popleft()
            record = queued.record
            if record.topic in failing:
                queued.callback(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), None)
            elif record.partition >= self.counts.get(record.topic, record.partition + 1):
                queued.callback(KafkaError(KafkaError._UNKNOWN_PARTITION), None)
            elif self.max_value is not None and len(record.value) > self.max_value:
                queued.callback(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), None)
            else:
                landed = self.log[(record.topic, record.partition)]
                landed.append(record)
                queued.callback(None, Delivered(record.topic, record.partition, len(landed) - 1))

    async def refresh_metadata(self, topic: str) -> str | None:
        self.metadata_refreshes.append(topic)
        count = self.counts.get(topic, 0)
        floors = self.end_offsets(topic) if count == self.guard.contract(topic) else None
        self.guard.checked(topic, count, floors)
        return None

    def suspect(self, topic: str, detail: str) -> None:
        self.suspected.append((topic, detail))
        self.guard.suspect(topic, detail)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(self.log[(topic, p)]) for p in range(self.counts.get(topic, 0))}

    def recreate(self, topic: str, partitions: int) -> None:
        """``topic`` is deleted (with its records) and created again with ``partitions``; the
        producer does not notice (its metadata is the old incarnation's)."""
        for key in [key for key in self.log if key[0] == topic]:
            del self.log[key]
        self.counts[topic] = partitions
        self.incarnations[topic] += 1

    def lost_queue(self) -> None:
        """The process died: what librdkafka still held is gone."""
        self.queue.clear()

    def records(self, topic: str) -> list[Record]:
        return [r for (t, _), records in sorted(self.log.items()) if t == topic for r in records]


@dataclass
class FakeHost:
    """The tailer's host: keeps what the Faust shell would send to its agents."""

    metrics: SidecarMetrics = field(default_factory=SidecarMetrics)
    log: EventLog = field(default_factory=lambda: EventLog(logging.getLogger("tests.tailer")))
    stopping: bool = False
    checkpoints: dict[str, FileCursor] = field(default_factory=dict)
    rotations: list[SealManifest] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    lost: list[tuple[str, str]] = field(default_factory=list)
    holds: dict[str, str] = field(default_factory=dict)
    node_outputs: dict[str, str] = field(default_factory=dict)  # table -> the other layout the node writes
    held_ever: list[str] = field(default_factory=list)
    pauses: list[float] = field(default_factory=list)
    regressions: list[tuple[str, Regression]] = field(default_factory=list)
    late_appends: list[tuple[str, int, int, int]] = field(default_factory=list)  # path, revision, sealed size, size
    rewritten: list[tuple[str, str]] = field(default_factory=list)  # path, reason
    problem: str | None = None  # the state store's (None: it takes writes)

    async def checkpoint(self, cursor: FileCursor) -> None:
        self.checkpoints[cursor.path] = cursor

    async def rotate(self, manifest: SealManifest) -> None:
        self.rotations.append(manifest)

    async def forget(self, path: str) -> None:
        self.forgotten.append(path)
        self.checkpoints.pop(path, None)

    def sealed(self, path: str, revision: int) -> bool:
        return any(m.path == path and m.revision >= revision for m in self.rotations)

    def file_lost(self, table: str, path: str, reason: str, published_to: int, size_seen: int) -> None:
        self.lost.append((path, reason))

    def block_regression(self, table: str, path: str, regression: Regression) -> None:
        self.regressions.append((path, regression))

    def late_append(self, table: str, path: str, revision: int, sealed_size: int, size: int) -> None:
        self.late_appends.append((path, revision, sealed_size, size))

    def sealed_file_rewritten(self, table: str, path: str, reason: str, sealed_size: int, size: int) -> None:
        self.rewritten.append((path, reason))

    def hold(self, table: str, reason: str | None) -> None:
        if reason is None:
            self.holds.pop(table, None)
        else:
            self.holds[table] = reason
            self.held_ever.append(reason)

    def node_output(self, table: str, reason: str | None) -> None:
        if reason is None:
            self.node_outputs.pop(table, None)
        else:
            self.node_outputs[table] = reason

    async def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        await asyncio.sleep(0)
        return not self.stopping


def rooms(host: FakeHost, broker: FakeBroker) -> TailerRooms:
    """A tailer's rooms: ``broker`` as the data plane, ``host`` as every other."""
    return TailerRooms(broker.engine, broker, host, host, host, host, host, host, host.metrics, host.log)


def tailer_settings(watch, **env: str) -> Settings:
    return load_settings(
        {
            "WATCH_DIR": str(watch),
            "STATE_PATH": str(watch.parent / "state"),
            "BACKUP_DIR": str(watch.parent / "backups"),
            "NODE_ID": "unit",
            "SEAL_GRACE_MS": "0",
            "READ_BUDGET_BYTES": "2048",
            **env,
        }
    )


def transactions(settings: Settings | None = None) -> Transactions:
    """The data plane's transactions, for ``settings`` (by default ``DELIVERY=at_least_once``: a gate
    that lets everything through)."""
    settings = settings or load_settings({"DELIVERY": "at_least_once"})
    return Transactions(
        settings,
        PythonEngine("test"),
        SidecarMetrics(),
        EventLog(logging.getLogger("tests.fake_broker")),
        transactional_id="app-sidecar",
        on_abort=lambda _reason: None,
        on_fenced=lambda _reason: None,
    )
