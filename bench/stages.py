"""Where a line's time goes on the calling thread: each stage of the sidecar's hot path timed alone
over the same lines, without a broker, in microseconds per line (production mix) and the lines/s
one core could do.

The stages are the core's own pieces, as the tailer composes them: split a read into lines
(``LineSplitter``), turn the lines into records (``RecordWriter`` into a ``Collector``: line
inspection, key, partition, ``line_id``/``source``/``offset`` headers), hand the same records to
librdkafka (``Producer.produce`` with a delivery callback, into a producer with no broker: the
queueing cost only), and the running sha256. What they do not cover (serving delivery reports,
librdkafka's own threads: batching, zstd, sending; the event loop and Faust) is the difference
between their sum and the measured catch-up CPU per line.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from bench.context import RunContext, ScenarioResult
from bench.corpus import START
from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import Collector, RecordWriter, Routes, Tally, Topics
from hyperdata_sidecar.core.splitter import LineSplitter
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.tools.generate import generate_corpus

READ_BYTES = 4 * 1024 * 1024  # READ_BUDGET_BYTES's default: the size of one tailer read
TOPICS = Topics("bench-data", 6, "bench-dlq", 3)


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("stages")
    lines = ctx.options.stage_lines
    with tempfile.TemporaryDirectory(prefix="bench-stages-", dir=ctx.scenario_dir("stages")) as tmp:
        corpus = generate_corpus(Path(tmp), hours=1, lines_per_hour=lines, seed=ctx.options.seed, start=START)
        timings = {f.table: time_stages(f.table, (Path(tmp) / f.relpath).read_bytes()) for f in corpus.files}
    total_lines = sum(t["lines"] for t in timings.values())
    stages = list(next(iter(timings.values()))["seconds"])
    per_line_us = {s: sum(t["seconds"][s] for t in timings.values()) / total_lines * 1e6 for s in stages}
    result.details = {
        "lines": total_lines,
        "per_line_us": {s: round(v, 3) for s, v in per_line_us.items()},
        "per_table": timings,
    }
    for stage, micros in per_line_us.items():
        result.row(f"{stage} (µs/line)", f"{micros:.2f}")
    summed = sum(per_line_us.values())
    result.row("sum of the stages (µs/line)", f"{summed:.2f} → at most {1e6 / summed:,.0f} lines/s on one core")
    return result


def time_stages(table: str, data: bytes) -> dict[str, object]:
    """Seconds each stage takes over every line of ``data`` (one table's hour file)."""
    spec = TABLE_BY_DIR[table]
    source = f"{table}/hourly/20260610/13"
    seconds: dict[str, float] = {}

    def timed(name: str, work: Callable[[], object]) -> object:
        began = time.perf_counter()
        out = work()
        seconds[name] = time.perf_counter() - began
        return out

    def split() -> list:
        splitter = LineSplitter(0, 8 * 1024 * 1024)
        return [splitter.feed(data[at : at + READ_BYTES]) for at in range(0, len(data), READ_BYTES)]

    reads = timed("split into lines", split)
    collector = Collector()
    writer = RecordWriter(spec, TOPICS, Routes(TOPICS.data_partitions), source, collector)
    acks = collector.acks(TOPICS.data_partitions)
    timed("records: inspect, key, partition, headers", lambda: [writer.write(items, acks, Tally()) for items in reads])
    timed("produce() into librdkafka's queue", lambda: _produce(collector))
    timed("sha256", lambda: hashlib.sha256(data).digest())
    return {
        "lines": sum(len(items) for items in reads),
        "bytes": len(data),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
    }


def _produce(collector: Collector) -> None:
    """The collected records handed to a librdkafka producer as the tailer hands them (positional
    arguments, a delivery callback per record); no broker, so nothing is sent."""
    producer = Producer(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "message.timeout.ms": 0,
            "queue.buffering.max.messages": 1 << 24,
            "queue.buffering.max.kbytes": 1 << 22,
            "log_level": 0,
        }
    )
    produce, deliveries = producer.produce, Deliveries()
    for (topic, partition), records in collector.groups.items():
        callback = deliveries.callback(topic, partition)
        for record in records:
            produce(topic, record.value, record.key, partition, callback, None, 0, record.headers)
    producer.purge()
