"""Micro-benchmark of the line engines alone (no broker): lines/s and CPU µs per line of the native
``LineEngine.feed`` against the Python ``LineSplitter`` + ``RecordWriter`` + ``Collector``, on a
corpus in the production mix (bench/corpus.py). Records are built, not sent.

    .venv/bin/python -m bench.engine_lines [--megabytes 40] [--chunk-kib 1024]

Needs the native engine (``make engine``). Not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import hyperdata_sidecar_engine as native

from bench.corpus import write_backlog
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.records import Collector, RecordWriter, Routes, Tally, Topics, dead_letter_partition
from hyperdata_sidecar.core.splitter import LineSplitter
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TableSpec

TOPICS = Topics("data", 16, "dlq", 3)
MAX_LINE_BYTES = 8 * 1024 * 1024


def python_engine(spec: TableSpec, source: str, chunks: list[bytes]) -> int:
    collector = Collector()
    writer = RecordWriter(spec, TOPICS, Routes(TOPICS.data_partitions), source, collector)
    splitter = LineSplitter(0, MAX_LINE_BYTES)
    tally = Tally()
    acks = collector.acks(TOPICS.data_partitions)
    for chunk in chunks:
        writer.write(splitter.feed(chunk), acks, tally)
    return tally.produced


class NativeRun:
    """Runs the native engine over a file, ``inspect_line`` deciding what it leaves undecided (counted)."""

    def __init__(self) -> None:
        self.undecided = 0

    def __call__(self, spec: TableSpec, source: str, chunks: list[bytes]) -> int:
        engine = native.LineEngine(
            table=spec.dir_name,
            coin_location=spec.coin_location.value,
            data_topic=TOPICS.data,
            data_partitions=TOPICS.data_partitions,
            dlq_topic=TOPICS.dlq,
            dlq_partition=dead_letter_partition(spec, TOPICS),
            source=source,
            offset=0,
            seq=(None, 0, 0),
            first_block=None,
            last_block=None,
            late_tag=b"",
            max_line_bytes=MAX_LINE_BYTES,
        )
        produced = 0
        for chunk in chunks:
            batch = engine.feed(chunk)
            produced += batch.produced
            while batch.undecided is not None:
                self.undecided += 1
                info = inspect_line(spec, batch.undecided[1])
                if type(info) is LineInfo:
                    batch = engine.accept(info.coin, info.block_number, info.n_events)
                else:
                    batch = engine.reject(info.reason, info.detail)
                produced += batch.produced
        return produced


def measure(
    name: str, run: Callable[[TableSpec, str, list[bytes]], int], files: list[tuple[TableSpec, str, list[bytes]]]
) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    lines = sum(run(spec, source, chunks) for spec, source, chunks in files)
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
    measure("python", python_engine, files)
    native_run = NativeRun()
    measure("native", native_run, files)
    print(f"native: {native_run.undecided:,} lines left to Python (inspect_line)")


if __name__ == "__main__":
    main()
