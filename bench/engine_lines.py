"""Micro-benchmark of the line engines alone (no broker): lines/s and CPU µs per line of the native
and the Python engine, each through its own line engine (:mod:`hyperdata_sidecar.engines`), on a
corpus in the production mix (bench/corpus.py). Records are built and kept, not sent: the Python
engine's ``RecordWriter`` produces into a ``Collector``, the native one keeps them in its batches
(collect mode, as it rebuilds a cycle; no producer, no delivery accounting).

    .venv/bin/python -m bench.engine_lines [--megabytes 40] [--chunk-kib 1024]

Needs the native engine (``make engine``). Not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import hyperdata_sidecar_engine as native

from bench.corpus import write_backlog
from hyperdata_sidecar.core.records import SEQ_START, Collector, Topics
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TableSpec
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.engines import FileLines, LineEngine
from hyperdata_sidecar.engines.python import PythonLines
from hyperdata_sidecar.engines.testing import CollectingNativeLines

TOPICS = Topics("data", 16, "dlq", 3)
MAX_LINE_BYTES = 8 * 1024 * 1024

EngineOfFile = Callable[[FileLines], LineEngine]


def python_lines(file: FileLines) -> LineEngine:
    """The Python engine of one file, producing into a ``Collector``."""
    return PythonLines(file, Collector())


async def hand_over(engine: LineEngine, chunks: list[bytes]) -> int:
    """Every chunk handed over as the tailer does, one cycle per read; the records produced."""
    produced = 0
    for chunk in chunks:
        cycle = Cycle(engine.state(), None, engine.deliveries())
        if not await engine.handover(chunk, cycle).step():
            raise RuntimeError("a collecting engine refused a record")
        produced += cycle.tally.produced
    return produced


def file_of(spec: TableSpec, source: str) -> FileLines:
    return FileLines(spec, TOPICS, source, WriterState(0, SEQ_START, None, None), b"", MAX_LINE_BYTES)


def measure(name: str, engine_of: EngineOfFile, files: list[tuple[TableSpec, str, list[bytes]]]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    lines = sum(asyncio.run(hand_over(engine_of(file_of(spec, source)), chunks)) for spec, source, chunks in files)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{name:>7}: {lines:,} lines in {wall:.2f} s: {lines / wall:,.0f} lines/s, {cpu / lines * 1e6:.2f} CPU µs/line")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=40.0, help="corpus size (default 40)")
    parser.add_argument("--chunk-kib", type=int, default=1024, help="bytes per read, in KiB (default 1024)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        corpus = write_backlog(Path(tmp), megabytes=args.megabytes, hours=1, seed=1)
        files = []
        for summary in corpus.files:
            data = (Path(tmp) / summary.relpath).read_bytes()
            step = args.chunk_kib * 1024
            files.append((TABLE_BY_DIR[summary.table], summary.relpath, [data[i : i + step] for i in range(0, len(data), step)]))
    print(f"corpus: {corpus.lines:,} lines, {corpus.bytes / 1e6:.1f} MB, {len(files)} files; reads of {args.chunk_kib} KiB")
    measure("python", python_lines, files)
    measure("native", lambda file: CollectingNativeLines(native, file), files)


if __name__ == "__main__":
    main()
