"""Where a line's time goes: each stage of the sidecar's hot path timed alone over the same lines,
without a broker, in microseconds per line (production mix) and the lines/s one core could do.

The stages are the pieces the tailer composes for every line: split a read into lines, inspect
the line (coin, block, events), number it and build its record (key, ``line_id``/``source``/
``offset`` headers, partition), append it to an aiokafka record batch, and close the batch (the
zstd compression the producer does on its event loop when it sends), plus the running sha256.
What the stages do not cover (the event loop, Faust, the per-cycle work, the broker round trip)
is the difference between their sum and the measured catch-up CPU per line.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aiokafka import AIOKafkaProducer

from bench.context import RunContext, ScenarioResult
from bench.corpus import START
from hyperdata_sidecar.core.lineinfo import LineInfo, fast_inspector, inspect_line
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.sequencer import BlockSequencer
from hyperdata_sidecar.core.splitter import LineSplitter
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.tools.generate import generate_corpus

READ_BYTES = 4 * 1024 * 1024  # READ_BUDGET_BYTES's default: the size of one tailer read
BATCH_BYTES = 1024 * 1024  # PRODUCER_BATCH_BYTES's default
PARTITIONS = 6


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
    seconds: dict[str, float] = {}

    def timed(name: str, work: Callable[[], object]) -> object:
        began = time.perf_counter()
        out = work()
        seconds[name] = time.perf_counter() - began
        return out

    def split() -> list:
        splitter = LineSplitter(0, 8 * 1024 * 1024)
        return [line for at in range(0, len(data), READ_BYTES) for line in splitter.feed(data[at : at + READ_BYTES])]

    lines = timed("split into lines", split)
    fast = fast_inspector(spec)  # as the tailer does: the fast path, the full inspection where it defers
    infos = timed("inspect the line", lambda: [fast(line.data) or inspect_line(spec, line.data) for line in lines])
    good = [(line, info) for line, info in zip(lines, infos, strict=True) if type(info) is LineInfo]
    records = timed("record: seq, key, headers, partition", lambda: _records(table, good))
    batches = timed("batch append (aiokafka)", lambda: asyncio.run(_append(records)))
    timed("batch close: zstd (aiokafka)", lambda: [batch._build() for batch in batches])  # what send does
    timed("sha256", lambda: hashlib.sha256(data).digest())
    return {
        "lines": len(lines),
        "bytes": len(data),
        "batches": len(batches),
        "seconds": {k: round(v, 4) for k, v in seconds.items()},
    }


def _records(table: str, good: list) -> list[tuple[int, bytes, bytes, list]]:
    """(partition, key, value, headers) per line: the per-line work of ``TableTailer._prepare``, redone
    here so it can be timed alone (keep the two in step when the tailer's record changes)."""
    sequencer = BlockSequencer()
    table_bytes = table.encode()
    source = f"{table}/hourly/20260610/13".encode()
    routes: dict[str, tuple[bytes, int]] = {}
    out = []
    for line, info in good:
        block = info.block_number
        route = routes.get(info.coin)
        if route is None:
            key = info.coin.encode()
            route = routes[info.coin] = (key, partition_for(key, PARTITIONS))
        headers = [
            ("line_id", b"%s|%d|%d" % (table_bytes, block, sequencer.assign(block, info.n_events))),
            ("source", source),
            ("offset", b"%d" % line.offset),
        ]
        out.append((route[1], route[0], line.data, headers))
    return out


async def _append(records: list) -> list:
    """The records appended to zstd batches of BATCH_BYTES, one open batch per partition."""
    producer = AIOKafkaProducer(
        bootstrap_servers="127.0.0.1:9",
        enable_idempotence=True,
        acks="all",
        compression_type="zstd",
        max_batch_size=BATCH_BYTES,
    )
    open_batches: dict[int, object] = {}
    full = []
    for partition, key, value, headers in records:
        batch = open_batches.get(partition)
        if batch is None or batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
            if batch is not None:
                full.append(batch)
            batch = open_batches[partition] = producer.create_batch()
            batch.append(key=key, value=value, timestamp=None, headers=headers)
    await producer.stop()  # never started: nothing to close but its bookkeeping
    return full + list(open_batches.values())
