"""Two nodes of one stream: a second node's tree, a sidecar on each, and the check of what the stream holds.

A second node writes the same events for a block in the same order; only ``local_time`` differs
(:func:`second_node_tree`). The stream is checked as a downstream reader sees it, ``read_committed``
(:func:`stream_report`): every line id of the first node's tree once, its record the same event as
that line (whichever node's bytes it carries), in file order within each partition (per coin).
"""

from __future__ import annotations

import asyncio
import calendar
import itertools
import re
import shutil
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from hyperdata_sidecar.core.stream_position import event_digest
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.expected import hour_files, read_tree
from hyperdata_sidecar.tools.replay import iso_now, rewrite_local_time

from drill_kit import metric_value
from sidecar_run import Sidecar

_LOCAL_TIME = re.compile(rb'("local_time":"[^".]*\.)(\d{9})')
_LOCAL_TIME_VALUE = re.compile(rb'"local_time":"([^".]*)\.(\d{9})"')


def second_node_tree(first: Path, second: Path, *, shift_ns: int = 123_457) -> None:
    """Copy ``first`` (a node's WATCH_DIR) to ``second`` with every ``local_time`` moved by ``shift_ns``
    within its second: the same events, other bytes."""
    for path in sorted(first.rglob("*")):
        target = second / path.relative_to(first)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(
            _LOCAL_TIME.sub(lambda m: m.group(1) + b"%09d" % ((int(m.group(2)) + shift_ns) % 10**9), path.read_bytes())
        )


@dataclass
class StreamReport:
    """What the stream holds against the first node's tree."""

    expected: int = 0
    records: int = 0
    missing: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    other_event: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.duplicates or self.unexpected or self.other_event or self.out_of_order)

    def summary(self) -> str:
        parts = [f"{self.records} records for {self.expected} lines"]
        for name in ("missing", "duplicates", "unexpected", "other_event", "out_of_order"):
            found = getattr(self, name)
            if found:
                parts.append(f"{name}: {len(found)} (first {found[:3]})")
        return "; ".join(parts)


def stream_report(bootstrap: str, topics: Mapping[str, str], tree: Path) -> StreamReport:
    """Read every data topic (``topics``: table -> topic) ``read_committed`` to its end and hold it
    against ``tree`` (blocking)."""
    report = StreamReport()
    expected: dict[str, tuple[str, int]] = {}  # line id -> (event digest, its index in the table's order)
    for expected_file in read_tree(tree):
        path = tree / expected_file.relpath
        data = path.read_bytes()
        for line in expected_file.lines:
            end = data.index(b"\n", line.offset)
            expected[line.line_id.decode()] = (event_digest(data[line.offset : end]), len(expected))
    report.expected = len(expected)
    seen: set[str] = set()
    for topic in topics.values():
        for partition_records in _read_topic(bootstrap, topic):
            last_index = -1
            for line_id, value in partition_records:
                report.records += 1
                if line_id in seen:
                    report.duplicates.append(line_id)
                    continue
                seen.add(line_id)
                if line_id not in expected:
                    report.unexpected.append(line_id)
                    continue
                digest, index = expected[line_id]
                if event_digest(value) != digest:
                    report.other_event.append(line_id)
                if index < last_index:
                    report.out_of_order.append(line_id)
                last_index = max(last_index, index)
    report.missing = sorted(set(expected) - seen)
    return report


def _read_topic(bootstrap: str, topic: str) -> list[list[tuple[str, bytes]]]:
    """Every partition's (line id, value), in offset order, as read_committed sees them."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "stream-kit",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        count = len(metadata.topics[topic].partitions)
        found: list[list[tuple[str, bytes]]] = []
        for partition in range(count):
            consumer.assign([TopicPartition(topic, partition, 0)])
            records: list[tuple[str, bytes]] = []
            while True:
                message = consumer.poll(10)
                assert message is not None, f"{topic}[{partition}]: no answer"
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    break
                headers = dict(message.headers() or [])
                records.append((headers["line_id"].decode(), message.value()))
            found.append(records)
        return found
    finally:
        consumer.close()


def data_topics(env: Mapping[str, str]) -> dict[str, str]:
    """The data topic of every table, from a sidecar's settings."""
    return {spec.dir_name: env[spec.topic_env] for spec in TABLES}


EXACTLY_ONCE = {"DELIVERY": "exactly_once", "TXN_MAX_MS": "100", "TXN_TIMEOUT_MS": "10000", "READ_BUDGET_BYTES": "65536"}


def two_nodes(tmp_path, kafka_bootstrap, unique_topic_prefix, **overrides: str) -> tuple[Sidecar, Sidecar]:
    """Sidecars ``a`` and ``b`` of one stream on the same topics, each on its node's tree (b's a copy of
    a's with other ``local_time``s)."""
    stream = {"STREAM_ID": f"{unique_topic_prefix.rstrip('.')}-stream", **EXACTLY_ONCE, **overrides}
    a = Sidecar(tmp_path / "a", kafka_bootstrap, unique_topic_prefix, NODE_ID=f"{stream['STREAM_ID']}-a", **stream)
    b = Sidecar(tmp_path / "b", kafka_bootstrap, unique_topic_prefix, NODE_ID=f"{stream['STREAM_ID']}-b", **stream)
    return a, b


def role(sidecar: Sidecar) -> str | None:
    assert sidecar.worker is not None
    try:
        return sidecar.worker.get_json("/sidecar/status/")["role"]
    except OSError:
        return None


def following(sidecar: Sidecar) -> dict[str, dict[str, Any]]:
    """A standby's last look per table at the stream's newest line in its files (``/sidecar/status/``)."""
    assert sidecar.worker is not None
    try:
        return sidecar.worker.get_json("/sidecar/status/")["stream"].get("follow") or {}
    except OSError:
        return {}


def committed(sidecar: Sidecar) -> float:
    assert sidecar.worker is not None
    return metric_value(sidecar.worker, "hyperdata_sidecar_transactions_committed_total")


def split_last_hour(root: Path, before: Path, last: Path) -> tuple[Path, Path]:
    """Move ``root``'s hour files into two corpora: every table's last hour under ``last``, the hours
    before it under ``before`` (same relative paths)."""
    for spec in TABLES:
        files = hour_files(root, spec.dir_name)
        for index, hour in enumerate(files):
            target = (last if index == len(files) - 1 else before) / hour.relpath
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(root / hour.relpath, target)
    return before, last


def finish(root: Path, watch: Path) -> None:
    """Append to every file of ``watch`` what ``root``'s copy has beyond it (the node resuming)."""
    for path in root.rglob("*"):
        if path.is_file():
            target = watch / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            have = target.stat().st_size if target.exists() else 0
            with open(target, "ab") as out:
                out.write(path.read_bytes()[have:])


class LiveNode:
    """A node writing ``root``'s hour files (per table in hour order, whole lines) into ``watch`` at
    ``lines_per_s`` per table, every line's ``local_time`` set to the moment it is appended (a reader
    of the stream then sees each record's publish lag: :class:`StreamLag`). It can stall (append
    nothing) and resume, at its pace or first writing at once what another node wrote meanwhile, as
    a node that reconnects does. With the same pace on every table, and blocks a few lines apart,
    its tables' ``block_time`` heads advance together, about a second a second."""

    def __init__(self, root: Path, watch: Path, lines_per_s: float, cadence_s: float = 0.1) -> None:
        self.lines_per_s, self.cadence_s = lines_per_s, cadence_s
        self._lines = {
            spec.dir_name: [
                (watch / hour.relpath, line)
                for hour in hour_files(root, spec.dir_name)
                for line in (root / hour.relpath).read_bytes().splitlines(keepends=True)
            ]
            for spec in TABLES
        }
        self.written = dict.fromkeys(self._lines, 0)  # lines appended so far, per table
        self._going = asyncio.Event()
        self._going.set()
        self._catch_up: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._append(table)) for table in self._lines]

    def stall(self) -> None:
        self._going.clear()

    def resume(self, catching_up_with: LiveNode | None = None) -> None:
        self._catch_up = dict(catching_up_with.written) if catching_up_with is not None else {}
        self._going.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def write_up_to(self, other: LiveNode) -> None:
        """A stopped node: append at once what ``other`` wrote beyond this one."""
        for table, count in other.written.items():
            self._write(table, count - self.written[table])

    async def _append(self, table: str) -> None:
        began, base = time.monotonic(), 0  # the pace's schedule: ``base`` lines at ``began``, then lines_per_s
        while self.written[table] < len(self._lines[table]):
            if not self._going.is_set():
                await self._going.wait()
                began, base = time.monotonic(), max(self.written[table], self._catch_up.get(table, 0))
            due = base + int(self.lines_per_s * (time.monotonic() - began))
            if due > self.written[table]:
                self._write(table, due - self.written[table])
            await asyncio.sleep(self.cadence_s)

    def _write(self, table: str, count: int) -> None:
        first = self.written[table]
        taken = self._lines[table][first : first + max(0, count)]
        for target, group in itertools.groupby(taken, key=lambda item: item[0]):
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "ab") as out:
                out.write(rewrite_local_time(b"".join(line for _, line in group), iso_now()))
        self.written[table] += len(taken)


class StreamLag(threading.Thread):
    """A ``read_committed`` reader of the stream's data topics from their start, noting for every
    record when it became visible and how long after its line's ``local_time`` (the stream's publish
    lag as downstream sees it, with lines written by :class:`LiveNode`)."""

    def __init__(self, bootstrap: str, topics: Mapping[str, str]) -> None:
        super().__init__(name="stream-lag", daemon=True)
        self.bootstrap, self.topics = bootstrap, sorted(topics.values())
        self.seen: list[tuple[float, float]] = []  # (visible at, lag in seconds), epoch seconds
        self._done = threading.Event()

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"stream-lag-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        try:
            consumer.subscribe(self.topics)
            while not self._done.is_set():
                for message in consumer.consume(1000, 0.2):
                    if message.error() is None:
                        now = time.time()
                        self.seen.append((now, now - _local_time(message.value())))
        finally:
            consumer.close()

    def stop(self) -> None:
        self._done.set()
        self.join(30)

    def back_under(self, since: float, until: float, bound_s: float) -> float | None:
        """Seconds from ``since`` to the first record after which every record visible until
        ``until`` came under ``bound_s`` of lag; None if the last record before ``until`` was over it."""
        window = [(at, lag) for at, lag in self.seen if since <= at <= until]
        over = [at for at, lag in window if lag >= bound_s]
        if not window or (over and over[-1] == window[-1][0]):
            return None
        return max(0.0, (over[-1] if over else since) - since)

    def worst(self, since: float, until: float) -> float:
        return max((lag for at, lag in self.seen if since <= at <= until), default=0.0)


def _local_time(value: bytes) -> float:
    found = _LOCAL_TIME_VALUE.search(value)
    assert found is not None, value[:80]
    whole = calendar.timegm(time.strptime(found.group(1).decode(), "%Y-%m-%dT%H:%M:%S"))
    return whole + int(found.group(2)) / 1e9
