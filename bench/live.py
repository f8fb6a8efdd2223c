"""Live latency: the replay tap appends at the production rates while a consumer measures how long
each line takes from the append to its arrival on the data topic.

Three processes besides the broker share the machine: the worker, the tap (:mod:`bench.tap`) and
the consumer (:mod:`bench.latency`). Each one's CPU is measured over the tap's run, and the whole
machine's too, so a saturated machine shows as such next to the latency it produced.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import START
from bench.procstat import CpuWindow
from bench.worker import REPO, BenchError, SidecarWorker, settings_summary
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S, generate_corpus

DRAIN_S = 60.0  # after the tap stops, how long the consumer may take to see the last lines


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("live")
    options = ctx.options
    root = ctx.scenario_dir("live")
    lines = {table: int(rate * options.live_s) for table, rate in PRODUCTION_LINES_PER_S.items()}
    print(f"  writing {options.live_s:.0f}s of production lines ({sum(lines.values()):,}) for the tap ...", flush=True)
    corpus = generate_corpus(root / "corpus", hours=1, lines_per_hour=lines, seed=options.seed + 1, start=START)
    worker = SidecarWorker(root, ctx.broker.bootstrap, ctx.topic_prefix("live"), **ctx.options.worker_settings)
    worker.start()
    try:
        worker.wait_for_event("startup", timeout_s=180)
        shares, machine = _replay_and_measure(ctx, worker, root, lines)
    finally:
        worker.stop()
    latency = json.loads((root / "latency.json").read_text())
    replayed = json.loads((root / "tap.json").read_text())
    result.details = {
        "seconds": options.live_s,
        "tap_cadence_s": options.tap_cadence_s,
        "settings": settings_summary(worker.settings),
        "replay": replayed,
        "latency": latency,
        "cpu_pct_of_one_core": shares,
        "machine_cpu_pct_of_one_core": machine,
    }
    _report(result, corpus.lines, latency, replayed, shares, machine)
    return result


def _replay_and_measure(
    ctx: RunContext, worker: SidecarWorker, root: Path, lines: dict[str, int]
) -> tuple[dict[str, float], float]:
    """Run the tap to its end with the consumer reading; (CPU % of one core per process, machine CPU %)."""
    deadline = time.time() + ctx.options.live_s * 3 + 120
    consumer, readers = _start_consumer(ctx, worker, root, lines, deadline)
    tap = None
    try:
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        tap_command = [sys.executable, "-m", "bench.tap", str(root / "corpus"), str(worker.watch)]
        tap_command += ["--summary", str(root / "tap.json"), "--cadence-s", str(ctx.options.tap_cadence_s)]
        tap = subprocess.Popen(tap_command, cwd=REPO)
        pids = {"sidecar": worker.pid, "tap": tap.pid, "consumer": consumer.pid}
        pids.update({f"consumer kcat {n}": pid for n, pid in enumerate(readers, 1)})
        if ctx.broker.pid is not None:
            pids["broker"] = ctx.broker.pid
        cpu = CpuWindow(pids).start()
        while tap.poll() is None:
            time.sleep(0.5)
            cpu.sample()
        cpu.stop()
        tap_cpu = _children_cpu_since(children_before)
        if tap.returncode:
            raise BenchError(f"the replay tap failed (exit {tap.returncode})")
        try:
            consumer.wait(DRAIN_S)
        except subprocess.TimeoutExpired:
            raise BenchError(
                f"the consumer did not see every line within {DRAIN_S:.0f}s after the tap stopped"
            ) from None
        if consumer.returncode:
            raise BenchError(f"the latency consumer failed (exit {consumer.returncode}); see {root}")
    finally:
        for process in (tap, consumer):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(30)
    shares = cpu.to_dict()["cpu_pct_of_one_core"]
    # The tap has exited by the end of the window: its own rusage is exact where the last /proc sample is not.
    shares["tap"] = round(100 * tap_cpu / cpu.wall_s, 1)
    shares["consumer"] = round(sum(share for name, share in shares.items() if name.startswith("consumer")), 1)
    ours = sum(shares[name] for name in ("sidecar", "tap", "consumer", "broker") if name in shares)
    shares["stolen by the hypervisor"] = round(cpu.steal_share(), 1)
    shares["other processes"] = round(cpu.machine_share() - cpu.steal_share() - ours, 1)
    return shares, round(cpu.machine_share(), 1)


def _report(
    result: ScenarioResult,
    appended: int,
    latency: dict[str, Any],
    replayed: dict[str, Any],
    shares: dict[str, float],
    machine: float,
) -> None:
    tap_rate = sum(t["lines"] for t in replayed["tables"].values()) / replayed["seconds"]
    production = f"≥ {targets.PRODUCTION_RATE:,.0f} (production)"
    result.row(
        "tap rate",
        f"{tap_rate:,.0f} lines/s for {replayed['seconds']:.0f} s",
        production,
        tap_rate >= 0.98 * targets.PRODUCTION_RATE,
    )
    result.row("lines received / appended", f"{latency['received']:,} / {appended:,}")
    total = latency["append_to_receive"]
    result.row(
        "append→receive p50",
        f"{total['p50_s']:.3f} s",
        f"≤ {targets.LIVE_P50_S} s",
        total["p50_s"] <= targets.LIVE_P50_S,
    )
    result.row(
        "append→receive p99",
        f"{total['p99_s']:.3f} s",
        f"≤ {targets.LIVE_P99_S} s",
        total["p99_s"] <= targets.LIVE_P99_S,
    )
    result.row("append→receive max", f"{total['max_s']:.3f} s")
    for figure, part in (
        ("append→CreateTime", "append_to_create_time"),
        ("CreateTime→receive", "create_time_to_receive"),
    ):
        split = latency[part]
        result.row(f"of which {figure} p50 / p99", f"{split['p50_s']:.3f} / {split['p99_s']:.3f} s")
    result.row(
        "sidecar CPU share",
        f"{shares['sidecar']:.0f}% of one core",
        f"≤ {targets.LIVE_CPU_PCT:.0f}%",
        shares["sidecar"] <= targets.LIVE_CPU_PCT,
    )
    names = ("tap", "consumer", "broker", "other processes", "stolen by the hypervisor")
    result.row("others' CPU share", ", ".join(f"{name} {shares[name]:.0f}%" for name in names if name in shares))
    result.row("machine CPU (all processes)", f"{machine:.0f}% of 200%")


def _start_consumer(
    ctx: RunContext, worker: SidecarWorker, root: Path, lines: dict[str, int], deadline: float
) -> tuple[subprocess.Popen, list[int]]:
    """The latency consumer, once it reads every data topic; (its process, its kcat pids)."""
    command = [
        sys.executable,
        "-m",
        "bench.latency",
        "--bootstrap",
        ctx.broker.bootstrap,
        "--deadline",
        str(deadline),
        "--out",
        str(root / "latency.json"),
        "--logs",
        str(root),
    ]
    for spec in TABLES:
        command += ["--topic", f"{worker.topic(spec.topic_env)}={lines[spec.dir_name]}"]
    consumer = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    ready = consumer.stdout.readline().split()
    if not ready or ready[0] != "ready":
        consumer.wait(30)
        raise BenchError(f"the latency consumer did not start (exit {consumer.returncode}); see {root}")
    return consumer, [int(pid) for pid in ready[1:]]


def _children_cpu_since(before: resource.struct_rusage) -> float:
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
