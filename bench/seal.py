"""Seal latency: from a file's finalization, and from the rotation that triggers it, to its seal
record arriving on the seal topic, for a small and a large hour file.

Both files are written before the worker starts, minus their last 64 KiB, and the worker catches
them up. Then, one file at a time, the harness does what the node does at the end of an hour: it
appends the held-back tail and creates the next hour's file (the rotation). The sidecar finalizes
a file once it has not grown for ``SEAL_GRACE_MS``, so rotation → seal includes that grace by
design; finalization → seal is the seal path alone (``finalized_at`` in the seal record is taken
once the file's sha256 is complete). The worker runs in the run's first delivery mode.
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench import targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import START, write_table_hour
from bench.kafka import TopicWatcher
from bench.worker import BenchError, SidecarWorker, epoch_of, settings_summary
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.tools.shapes import FILLS, ORDER_STATUSES

TAIL_BYTES = 64 * 1024
SEAL_TIMEOUT_S = 120.0
NEXT_HOUR_MB = 0.05


@dataclass
class SealCase:
    """One hour file to seal: the bytes held back until its rotation, and where it ends up."""

    label: str
    hour: HourFile
    path: Path
    size: int
    held_from: int
    tail: bytes


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("seal")
    options = ctx.options
    root = ctx.scenario_dir("seal")
    worker = SidecarWorker(root, ctx.broker.bootstrap, ctx.topic_prefix("seal"), **ctx.worker_settings())
    print(f"  writing a {options.seal_small_mb:g} MB and a {options.seal_large_mb:,.0f} MB hour file ...", flush=True)
    cases = [
        _write_case("small", worker.watch, FILLS, options.seal_small_mb, options.seed),
        _write_case("large", worker.watch, ORDER_STATUSES, options.seal_large_mb, options.seed),
    ]
    worker.start()
    watcher = None
    try:
        startup = worker.wait_for_event("startup", timeout_s=180)
        watcher = TopicWatcher(ctx.broker.bootstrap, worker.topic("TOPIC_SEALS")).start()
        caught_up = _wait_caught_up(worker, cases)
        measured = [_rotate_and_measure(worker, watcher, case, root, options.seed) for case in cases]
    finally:
        if watcher is not None:
            watcher.stop()
        worker.stop()
    result.details = {
        "settings": settings_summary(worker.settings),
        "catch_up_before_rotation_s": round(caught_up - epoch_of(startup["time"]), 3),
        "cases": measured,
    }
    grace = int(result.details["settings"]["SEAL_GRACE_MS"])
    for case in measured:
        size = f"{case['size'] / 1e6:,.0f} MB" if case["size"] >= 1e6 else f"{case['size'] / 1e3:,.0f} kB"
        large = case["label"] == "large"
        result.row(
            f"{case['label']} file ({size}): finalization→seal on topic",
            f"{case['finalized_to_received_s']:.3f} s",
            f"≤ {targets.SEAL_S:g} s" if large else "",
            case["finalized_to_received_s"] <= targets.SEAL_S if large and case["size"] >= 1e9 else None,
        )
        result.row(f"{case['label']} file: seal_lag_s (worker log)", f"{case['seal_lag_s']:.3f} s")
        result.row(
            f"{case['label']} file: rotation→seal on topic (includes the {grace / 1000:g} s grace)",
            f"{case['rotation_to_received_s']:.3f} s",
        )
    return result


def _write_case(label: str, watch: Path, table: str, megabytes: float, seed: int) -> SealCase:
    summary = write_table_hour(watch, table, megabytes=megabytes, seed=seed)
    written = summary.files[0]
    path = watch / written.relpath
    window_start = max(0, written.size - TAIL_BYTES)
    with open(path, "rb") as f:
        f.seek(window_start)
        window = f.read()
    # Hold back whole lines, so "caught up" is simply offset == the truncated size.
    held_from = window_start + window.index(b"\n") + 1
    if held_from >= written.size:
        raise BenchError(f"{written.relpath} is too small to hold back a tail ({written.size} bytes)")
    with open(path, "rb") as f:
        f.seek(held_from)
        tail = f.read()
    os.truncate(path, held_from)
    return SealCase(label, HourFile.parse(written.relpath), path, written.size, held_from, tail)


def _wait_caught_up(worker: SidecarWorker, cases: list[SealCase]) -> float:
    """Wait until every case's file is acked up to its held-back tail; the time that was seen."""

    def caught_up() -> bool:
        rows = worker.files() or {}
        return all(case.hour.relpath in rows and rows[case.hour.relpath]["offset"] == case.held_from for case in cases)

    total = sum(case.held_from for case in cases)
    worker.wait_for(caught_up, "the seal files to be caught up", timeout_s=120 + total / 1e6, every_s=0.25)
    return time.time()


def _rotate_and_measure(worker: SidecarWorker, watcher: TopicWatcher, case: SealCase, root: Path, seed: int) -> dict[str, Any]:
    """Append the tail, create the next hour's file, wait for the seal record; the timings."""
    following = _next_hour_file(case, root, seed)
    with open(case.path, "ab") as f:
        f.write(case.tail)
    appended_at = time.time()
    target = worker.watch / following[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(following[1], target)
    rotated_at = time.time()
    key = f"{case.hour.table}|{case.hour.date}|{case.hour.hour}".encode()
    arrival = watcher.wait_for_key(key, SEAL_TIMEOUT_S)
    if arrival is None:
        raise BenchError(f"no seal record for {case.hour.relpath} within {SEAL_TIMEOUT_S:.0f}s; see {worker.log_path}")
    seal = orjson.loads(arrival.value)
    if seal["size"] != case.size:
        raise BenchError(f"the seal of {case.hour.relpath} says {seal['size']} bytes, the file has {case.size}")
    logged = worker.wait_for(
        lambda: next((e for e in worker.events("seal") if e.get("path") == case.hour.relpath), None),
        "the seal log event",
        30,
    )
    finalized = epoch_of(seal["finalized_at"])
    return {
        "label": case.label,
        "path": case.hour.relpath,
        "size": case.size,
        "lines": seal["lines"],
        "tail_appended_at": appended_at,
        "rotated_at": rotated_at,
        "finalized_at": seal["finalized_at"],
        "received_at": arrival.received_at,
        "finalized_to_received_s": round(arrival.received_at - finalized, 3),
        "rotation_to_received_s": round(arrival.received_at - rotated_at, 3),
        "rotation_to_finalized_s": round(finalized - rotated_at, 3),
        "seal_lag_s": logged["seal_lag_s"],
    }


def _next_hour_file(case: SealCase, root: Path, seed: int) -> tuple[str, Path]:
    """A small file for the hour after ``case``'s, written aside: (its relpath, where it is now)."""
    start = START + datetime.timedelta(hours=1)
    aside = root / f"next-{case.label}"
    summary = write_table_hour(aside, case.hour.table, megabytes=NEXT_HOUR_MB, seed=seed, start=start)
    relpath = summary.files[0].relpath
    return relpath, aside / relpath
