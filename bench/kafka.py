"""The few broker operations the scenarios need besides the sidecar itself: topic creation,
message counts, and a watcher that timestamps each record of a topic as it arrives."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from hyperdata_sidecar.topics import apply_contract, load_contract


def create_topics(bootstrap: str, names: Mapping[str, str]) -> None:
    """Create the contract's topics (partitions and configs) under the names ``names`` gives each setting."""
    asyncio.run(apply_contract(bootstrap, load_contract(env=names)))


def message_counts(bootstrap: str, topics: Mapping[str, str]) -> dict[str, int]:
    """Messages on each topic (the sum of its partitions' end offsets; the topics are never trimmed here).
    A transactional producer's topics also hold its commit markers, which take offsets: count those
    with :func:`committed_records`."""

    async def count() -> dict[str, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            out = {}
            for name, topic in topics.items():
                ends = await consumer.end_offsets(await partitions_of(bootstrap, topic))
                out[name] = sum(ends.values())
            return out
        finally:
            await consumer.stop()

    return asyncio.run(count())


def committed_records(bootstrap: str, topics: Mapping[str, str]) -> dict[str, int]:
    """Records a ``read_committed`` reader gets from each topic, read to its end with ``kcat``
    (librdkafka reads ``read_committed`` by default): no markers, no aborted records."""
    counts = {}
    for name, topic in topics.items():
        out = subprocess.run(
            ["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", ".\n"],
            capture_output=True,
            check=True,
            timeout=600,
        ).stdout
        counts[name] = out.count(b"\n")
    return counts


def records_on(bootstrap: str, topics: Mapping[str, str], delivery: str) -> dict[str, int]:
    """The records on each topic as its readers get them: :func:`message_counts`, or with
    ``DELIVERY=exactly_once`` :func:`committed_records`."""
    if delivery == "exactly_once":
        return committed_records(bootstrap, topics)
    return message_counts(bootstrap, topics)


@dataclass(frozen=True)
class Arrival:
    """One record of a watched topic and the wall-clock time (``time.time()``) it was received."""

    key: bytes | None
    value: bytes
    received_at: float


class TopicWatcher:
    """Reads every partition of ``topic`` from the beginning in a thread of its own, noting when each
    record arrives. For low-rate topics (seals): a record is timestamped as soon as its fetch returns."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self._arrivals: list[Arrival] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name=f"watch-{topic}", daemon=True)

    def start(self, timeout_s: float = 60.0) -> TopicWatcher:
        """Start reading; returns once the partitions are assigned (records sent from now on are seen)."""
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"could not start reading {self.topic} within {timeout_s:.0f}s: {self._error!r}")
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def wait_for_key(self, key: bytes, timeout_s: float) -> Arrival | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for arrival in self.arrivals():
                if arrival.key == key:
                    return arrival
            time.sleep(0.01)
        return None

    async def _run(self) -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
        try:
            await consumer.start()
            partitions = await partitions_of(self.bootstrap, self.topic)
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            for tp in partitions:
                await consumer.position(tp)
            self._ready.set()
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                received = time.time()
                with self._lock:
                    for records in batches.values():
                        self._arrivals.extend(Arrival(r.key, r.value, received) for r in records)
        except BaseException as exc:  # noqa: BLE001 - reported by start() or seen as missing arrivals
            self._error = exc
        finally:
            await consumer.stop()


async def partitions_of(bootstrap: str, topic: str, patience_s: float = 30.0) -> list[TopicPartition]:
    """The partitions of ``topic``, waiting for a topic created a moment ago to show in the metadata."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + patience_s
        while True:
            (described,) = await admin.describe_topics([topic])
            if not described["error_code"] and described["partitions"]:
                return [
                    TopicPartition(topic, p["partition"]) for p in sorted(described["partitions"], key=lambda p: p["partition"])
                ]
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic} has no partitions in the metadata after {patience_s:.0f}s")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
