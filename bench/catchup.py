"""Catch-up throughput: a pre-written backlog, the worker started from empty state, timed until done,
once per line engine and delivery mode (the worker gets ``SIDECAR_ENGINE=<engine>`` and
``DELIVERY=<mode>``; every run reads the same backlog).

The clock starts at the worker's ``startup`` event (its state is synced, its tailers exist) and stops
when ``/sidecar/files/`` shows every backlog file with its acked offset at its size. The newest file
of each table is never finalized, so offsets, not seals, say "done". ``lines_published_total`` and
the records on the topics (with exactly_once, those a ``read_committed`` reader gets: commit markers
take offsets) are checked against the corpus afterwards.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bench import kafka, targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import link_corpus, write_backlog
from bench.deliveries import directory_word
from bench.procstat import CpuWindow, memory_kib
from bench.worker import BenchError, SidecarWorker, epoch_of, settings_summary
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import CorpusSummary, FileSummary

POLL_S = 0.25
PROGRESS_EVERY_S = 10.0
SLOWEST_CREDIBLE_LINES_PER_S = 5_000  # below this the run is broken, not slow: give up


def run(ctx: RunContext, engine: str, delivery: str) -> ScenarioResult:
    result = ScenarioResult(f"catch-up ({engine}, {delivery})")
    options = ctx.options
    name = f"catchup-{engine}-{directory_word(delivery)}"
    worker = SidecarWorker(
        ctx.scenario_dir(name),
        ctx.broker.bootstrap,
        ctx.topic_prefix(name),
        **{**ctx.worker_settings(delivery), "SIDECAR_ENGINE": engine},
    )
    backlog = backlog_in(ctx, worker)
    # A profiled worker runs slower: its figures are marked, and only its profile is worth reading.
    profile = (
        options.profile.with_name(f"{options.profile.stem}-{engine}-{delivery}{options.profile.suffix}")
        if options.profile
        else None
    )
    worker.start(wrapper=(sys.executable, "-m", "cProfile", "-o", str(profile)) if profile else ())
    try:
        measured = measure(worker, backlog.files, ctx)
        published = worker.lines_published()
    finally:
        worker.stop()
    topics = {spec.dir_name: worker.topic(spec.topic_env) for spec in TABLES}
    topic_messages = kafka.records_on(ctx.broker.bootstrap, topics, delivery)
    per_table = lines_by_table(backlog.files)
    result.details = {
        "backlog": {
            "bytes": backlog.bytes,
            "lines": backlog.lines,
            "files": len(backlog.files),
            "by_table": per_table,
        },
        "settings": settings_summary(worker.settings),
        "profiled": str(profile) if profile else None,
        "lines_published_total": published,
        "topic_messages": topic_messages,
        "complete": published == {t: float(n) for t, n in per_table.items()} and topic_messages == per_table,
        "lines_per_s": round(backlog.lines / measured["seconds"]),
        "mb_per_s": round(backlog.bytes / 1e6 / measured["seconds"], 1),
        "cpu_s_per_million_lines": round(measured["cpu"]["cpu_s"]["sidecar"] / backlog.lines * 1e6, 2),
        **measured,
    }
    if profile:
        result.row("profiled", f"yes, under cProfile ({profile}): these figures are inflated by it")
    _report(result, backlog, result.details, targets.ENGINE_TARGETS[engine])
    return result


def backlog_in(ctx: RunContext, worker: SidecarWorker) -> CorpusSummary:
    """The run's backlog in ``worker``'s WATCH_DIR: written there the first time, hard links after."""
    options = ctx.options
    if ctx.backlog is not None:
        link_corpus(ctx.backlog, worker.watch)
        return ctx.backlog
    print(f"  writing a {options.backlog_mb:,.0f} MB backlog ({options.backlog_hours} hour(s) per table) ...", flush=True)
    backlog = write_backlog(worker.watch, megabytes=options.backlog_mb, hours=options.backlog_hours, seed=options.seed)
    print(f"  {backlog.lines:,} lines, {backlog.bytes / 1e6:,.0f} MB in {backlog.seconds:.1f}s", flush=True)
    ctx.backlog = backlog
    return backlog


def _report(result: ScenarioResult, backlog: CorpusSummary, details: dict[str, Any], goals: targets.EngineTargets) -> None:
    seconds, lines_per_s, cpu = details["seconds"], details["lines_per_s"], details["cpu"]
    result.row("backlog", f"{backlog.bytes / 1e6:,.0f} MB, {backlog.lines:,} lines, {len(backlog.files)} files")
    result.row("wall time", f"{seconds:.1f} s")
    result.row(
        "lines/s",
        f"{lines_per_s:,.0f}",
        f"≥ {targets.CATCHUP_LINES_PER_S:,.0f}",
        lines_per_s >= targets.CATCHUP_LINES_PER_S,
    )
    result.row("MB/s", f"{details['mb_per_s']:,.1f}")
    result.row(
        "vs production rate",
        f"{lines_per_s / targets.PRODUCTION_RATE:.2f}x",
        "≥ 5x",
        lines_per_s >= 5 * targets.PRODUCTION_RATE,
    )
    per_million = details["cpu_s_per_million_lines"]
    result.row(
        "worker CPU µs per line (all its threads)",
        f"{per_million:.2f}",
        str(goals.cpu_us_per_line),
        goals.cpu_us_per_line.met(per_million),
    )
    result.row("lines/s with a core of its own (10⁶ / CPU µs per line)", f"{1e6 / per_million:,.0f}")
    result.row("sidecar CPU share", f"{cpu['cpu_pct_of_one_core']['sidecar']:.0f}% of one core")
    if "broker" in cpu["cpu_s"]:
        result.row("broker CPU share", f"{cpu['cpu_pct_of_one_core']['broker']:.0f}% of one core")
        result.row("broker CPU s per million lines", f"{cpu['cpu_s']['broker'] / backlog.lines * 1e6:.1f}")
    machine, others = cpu["machine_cpu_pct_of_one_core"], cpu["others_cpu_pct_of_one_core"]
    result.row(
        "machine CPU (all processes)",
        f"{machine:.0f}% of 200%, of which other processes {others:.0f}%, stolen by the hypervisor {cpu['steal_pct_of_one_core']:.0f}%",
    )
    peak_mb = details["peak_rss_kib"] / 1024
    result.row("peak RSS (VmHWM)", f"{peak_mb:.0f} MB", str(goals.peak_rss_mb), goals.peak_rss_mb.met(peak_mb))
    result.row(
        "RSS at half way / at the end",
        f"{details['rss_half_kib'] / 1024:.0f} MB / {details['rss_end_kib'] / 1024:.0f} MB",
    )
    complete = "yes" if details["complete"] else f"NO: {details['lines_published_total']}, {details['topic_messages']}"
    result.row("every line acked, counted and on the topics", complete)


def measure(worker: SidecarWorker, files: list[FileSummary], ctx: RunContext) -> dict[str, Any]:
    """Wait for ``startup``, then poll until every file is acked to its end; the figures of that window."""
    expected = {f.relpath: f.size for f in files}
    total_bytes = sum(expected.values())
    total_lines = sum(f.lines for f in files)
    startup = worker.wait_for_startup()
    pids = {"sidecar": worker.pid}
    if ctx.broker.pid is not None:
        pids["broker"] = ctx.broker.pid
    cpu = CpuWindow(pids).start()
    began = epoch_of(startup["time"])
    deadline = time.monotonic() + 60 + total_lines / SLOWEST_CREDIBLE_LINES_PER_S
    rss_samples: list[tuple[float, int, int]] = []  # (seconds since startup, VmRSS KiB, bytes acked)
    next_progress = time.monotonic() + PROGRESS_EVERY_S
    while True:
        rows = worker.files() or {}
        now = time.time()
        acked = sum(min(rows[path]["offset"], size) for path, size in expected.items() if path in rows)
        rss_samples.append((round(now - began, 2), memory_kib(worker.pid)["VmRSS"], acked))
        if acked == total_bytes and all(rows[path]["offset"] == size for path, size in expected.items()):
            break
        if worker.process.poll() is not None:
            raise BenchError(f"the worker exited ({worker.process.returncode}) during the catch-up; see {worker.log_path}")
        if time.monotonic() > deadline:
            raise BenchError(f"catch-up not done after {time.monotonic() - cpu.began:.0f}s ({acked:,} of {total_bytes:,} bytes)")
        if time.monotonic() >= next_progress:
            print(f"    {now - began:5.0f}s  {acked / 1e6:8,.0f} of {total_bytes / 1e6:,.0f} MB acked", flush=True)
            next_progress += PROGRESS_EVERY_S
        time.sleep(POLL_S)
    finished = time.time()
    cpu.stop()
    memory = memory_kib(worker.pid)
    half = next(s for s in rss_samples if s[2] >= total_bytes / 2)
    return {
        "seconds": round(finished - began, 3),
        "startup_event_at": startup["time"],
        "cpu": cpu.to_dict(),
        "peak_rss_kib": memory["VmHWM"],
        "rss_half_kib": half[1],
        "rss_end_kib": memory["VmRSS"],
        "rss_samples": rss_samples[:: max(1, len(rss_samples) // 200)],
        "seal_lag_s": [e.get("seal_lag_s") for e in worker.events("seal")],
        "poll_interval_s": POLL_S,
    }


def lines_by_table(files: list[FileSummary]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in files:
        out[f.table] = out.get(f.table, 0) + f.lines
    return out
