"""Two nodes of one stream: a second node's tree, a sidecar on each, and the check of what the stream holds.

A second node writes the same events for a block in the same order; only ``local_time`` differs
(:func:`second_node_tree`). The stream is checked as a downstream reader sees it, ``read_committed``
(:func:`stream_report`): every line id of the first node's tree once, its record the same event as
that line (whichever node's bytes it carries), in file order within each partition (per coin).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from hyperdata_sidecar.core.stream_position import event_digest
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.expected import hour_files, read_tree

from drill_kit import metric_value
from sidecar_run import Sidecar

_LOCAL_TIME = re.compile(rb'("local_time":"[^".]*\.)(\d{9})')


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
