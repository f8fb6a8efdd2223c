"""Live latency: the replay tap appends at the production rates while a consumer measures how long
each line takes from the append to its arrival on the data topic, once per line engine and delivery
mode (the worker gets ``SIDECAR_ENGINE=<engine>`` and ``DELIVERY=<mode>``; every run's tap replays
the same corpus). The consumer reads ``read_committed``: with exactly_once a line arrives once its
transaction is committed, as it would for any consumer that honours the transactions. Halfway
through, a node snapshot of ``--snapshot-mb`` lands (written as fast as the disk takes it), so the
latency includes the sidecar hashing it and publishing its event.

Three processes besides the broker share the machine: the worker, the tap (:mod:`bench.tap`) and
the consumer (:mod:`bench.latency`). Each one's CPU is measured over the tap's run, and the whole
machine's too, so a saturated machine shows as such next to the latency it produced. The worker's
peak RSS and the backups it made (none with the default ``BACKUP_SINK=none``) are kept with them:
the ``backup`` scenario runs this one twice, without and with the worker backing the snapshot up.

With ``STREAM_ID`` among the run's settings (``--set STREAM_ID=<stream>``) the worker is its
stream's active and a second worker of the stream, on the same ``WATCH_DIR`` (a node writing the
same files at the same rate), stands by beside it: its CPU is measured over the tap's run too.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import START
from bench.deliveries import directory_word
from bench.procstat import CpuWindow, memory_kib
from bench.worker import REPO, BenchError, SidecarWorker, epoch_of, settings_summary
from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S, CorpusSummary, generate_corpus

DRAIN_S = 60.0  # after the tap stops, how long the consumer may take to see the last lines
SNAPSHOT_EVENT_WAIT_S = 120.0  # after the tap stops, how long the snapshot's event may take
SNAPSHOT_CHUNK = 8 * 1024 * 1024
#: The tap's run longer by the wall clock than by its own by more than this: the machine paused. The
#: harness looks at the tap every 0.5 s and starts it, so ~1 s apart is normal.
MACHINE_PAUSE_S = 5.0


class SnapshotLanding(threading.Thread):
    """Writes a node snapshot into the worker's WATCH_DIR ``after_s`` seconds from its start."""

    def __init__(self, watch: Path, snapshot: SnapshotFile, size: int, after_s: float) -> None:
        super().__init__(name="snapshot-landing", daemon=True)
        self.path = watch / snapshot.relpath
        self.snapshot, self.size, self.after_s = snapshot, size, after_s
        self.written: tuple[float, float] | None = None  # wall clock at the first and the last byte

    def run(self) -> None:
        time.sleep(self.after_s)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        block = os.urandom(SNAPSHOT_CHUNK)
        started = time.time()
        with open(self.path, "wb") as f:
            for offset in range(0, self.size, SNAPSHOT_CHUNK):
                f.write(block[: min(SNAPSHOT_CHUNK, self.size - offset)])
        self.written = (started, time.time())


def snapshot_height(corpus: CorpusSummary) -> int:
    """A height every table passes in the middle of the run: the lowest of the tables' middle blocks."""
    return min(
        (f.first_block + f.last_block) // 2 for f in corpus.files if f.first_block is not None and f.last_block is not None
    )


def run(
    ctx: RunContext, engine: str, delivery: str, variant: str = "", settings: Mapping[str, str] | None = None
) -> ScenarioResult:
    """One live run of ``engine`` in ``delivery`` mode; a ``variant`` (a word that names its directory
    and topics too) runs its worker with ``settings`` on top of the run's."""
    result = ScenarioResult(f"live ({', '.join(filter(None, (engine, delivery, variant)))})")
    options = ctx.options
    name = "-".join(filter(None, ("live", engine, directory_word(delivery), variant)))
    root = ctx.scenario_dir(name)
    lines = {table: int(rate * options.live_s) for table, rate in PRODUCTION_LINES_PER_S.items()}
    corpus = _tap_corpus(ctx, lines)
    overrides = {**ctx.worker_settings(delivery), **(settings or {}), "SIDECAR_ENGINE": engine}
    worker = SidecarWorker(root, ctx.broker.bootstrap, ctx.topic_prefix(name), **overrides)
    landing = None
    if options.snapshot_mb > 0:
        snapshot = SnapshotFile(snapshot_height(corpus), START.strftime("%Y%m%d"))
        landing = SnapshotLanding(worker.watch, snapshot, int(options.snapshot_mb * 1024 * 1024), options.live_s / 2)
    standby = None
    if "STREAM_ID" in overrides:
        standby = SidecarWorker(root / "standby", ctx.broker.bootstrap, ctx.topic_prefix(name), **overrides)
        standby.settings["WATCH_DIR"] = str(worker.watch)
    worker.start()
    try:
        worker.wait_for_startup()
        if standby is not None:
            standby.start()
            standby.wait_for(lambda: standby.events("stream_standby"), "the standby standing by", 120.0)
        shares, machine, tap_window = _replay_and_measure(ctx, worker, root, Path(corpus.root), lines, landing, standby)
        snapshot_row = _snapshot_outcome(worker, landing) if landing is not None else None
        peak_rss_kib = memory_kib(worker.pid).get("VmHWM")
        backups = worker.events("backup")
        if standby is not None and standby.events("stream_elected"):
            raise BenchError(f"the stream's second worker was elected during the run; see {standby.log_path}")
    finally:
        worker.stop()
        if standby is not None:
            standby.stop()
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
        "tap_window": tap_window,
        "sidecar_peak_rss_kib": peak_rss_kib,
        "backups": backups,
    }
    _report(result, corpus.lines, latency, replayed, shares, machine, targets.ENGINE_TARGETS[engine])
    result.row("tap's run by the wall clock / by its own monotonic clock", tap_clocks(tap_window, replayed["seconds"]))
    if snapshot_row is not None:
        result.row(*snapshot_row)
    return result


def tap_clocks(tap_window: tuple[float, float], tap_seconds: float) -> str:
    """The tap's run by the wall clock (the harness's; the latencies are wall-clock differences) and
    by the tap's own monotonic clock. Far apart, the machine did not run for the difference (the VM
    paused: 2026-12-04, a 36.6 s maximum latency, the kernel logging a "virtual machine fork"), and
    the latencies of the lines in flight then include it; the row says so."""
    wall = tap_window[1] - tap_window[0]
    text = f"{wall:.1f} s / {tap_seconds:.1f} s"
    if wall - tap_seconds > MACHINE_PAUSE_S:
        text += f": the machine stood still ~{wall - tap_seconds:.0f} s, and the latencies above include it"
    return text


def _tap_corpus(ctx: RunContext, lines: dict[str, int]) -> CorpusSummary:
    """The lines the tap replays, written once per run (by its first live run)."""
    if ctx.live_corpus is None:
        print(f"  writing {ctx.options.live_s:.0f}s of production lines ({sum(lines.values()):,}) for the tap ...", flush=True)
        out = ctx.scenario_dir("live-corpus")
        ctx.live_corpus = generate_corpus(out, hours=1, lines_per_hour=lines, seed=ctx.options.seed + 1, start=START)
    return ctx.live_corpus


def _snapshot_outcome(worker: SidecarWorker, landing: SnapshotLanding) -> tuple[str, str, str, bool]:
    """The snapshot's row: when it was written, found complete and announced."""
    label = f"node snapshot ({landing.size / 2**20:,.0f} MiB) at {landing.after_s:.0f} s"
    landing.join(SNAPSHOT_EVENT_WAIT_S)
    if landing.written is None:
        return label, "not written", "an event", False
    try:
        event = worker.wait_for(
            lambda: next(iter(worker.events("snapshot")), None), "the snapshot's event", SNAPSHOT_EVENT_WAIT_S
        )
    except BenchError:
        return label, f"written in {landing.written[1] - landing.written[0]:.1f} s; no event", "an event", False
    complete = next(iter(worker.events("snapshot_complete")), None)
    written_end = landing.written[1]
    parts = [f"written in {written_end - landing.written[0]:.1f} s"]
    if complete is not None:
        parts.append(f"complete (hashed) +{epoch_of(complete['time']) - written_end:.1f} s")
    parts.append(f"event +{epoch_of(event['time']) - written_end:.1f} s")
    return label, ", ".join(parts), "an event; p99 above includes it", True


def _replay_and_measure(
    ctx: RunContext,
    worker: SidecarWorker,
    root: Path,
    corpus: Path,
    lines: dict[str, int],
    landing: SnapshotLanding | None,
    standby: SidecarWorker | None = None,
) -> tuple[dict[str, float], float, tuple[float, float]]:
    """Run the tap to its end with the consumer reading (and the snapshot landing halfway); (CPU % of
    one core per process, machine CPU %, the tap's first and last moment in epoch seconds)."""
    deadline = time.time() + ctx.options.live_s * 3 + 120
    consumer, readers = _start_consumer(ctx, worker, root, lines, deadline)
    tap = None
    try:
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        tap_command = [sys.executable, "-m", "bench.tap", str(corpus), str(worker.watch)]
        tap_command += ["--summary", str(root / "tap.json"), "--cadence-s", str(ctx.options.tap_cadence_s)]
        tap = subprocess.Popen(tap_command, cwd=REPO)
        tap_started = time.time()
        if landing is not None:
            landing.start()
        pids = {"sidecar": worker.pid, "tap": tap.pid, "consumer": consumer.pid}
        if standby is not None:
            pids["standby"] = standby.pid
        pids.update({f"consumer kcat {n}": pid for n, pid in enumerate(readers, 1)})
        if ctx.broker.pid is not None:
            pids["broker"] = ctx.broker.pid
        cpu = CpuWindow(pids).start()
        while tap.poll() is None:
            time.sleep(0.5)
            cpu.sample()
        cpu.stop()
        tap_window = (tap_started, time.time())
        tap_cpu = _children_cpu_since(children_before)
        if tap.returncode:
            raise BenchError(f"the replay tap failed (exit {tap.returncode})")
        try:
            consumer.wait(DRAIN_S)
        except subprocess.TimeoutExpired:
            raise BenchError(f"the consumer did not see every line within {DRAIN_S:.0f}s after the tap stopped") from None
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
    ours = sum(shares[name] for name in ("sidecar", "standby", "tap", "consumer", "broker") if name in shares)
    shares["stolen by the hypervisor"] = round(cpu.steal_share(), 1)
    shares["other processes"] = round(cpu.machine_share() - cpu.steal_share() - ours, 1)
    return shares, round(cpu.machine_share(), 1), tap_window


def _report(
    result: ScenarioResult,
    appended: int,
    latency: dict[str, Any],
    replayed: dict[str, Any],
    shares: dict[str, float],
    machine: float,
    goals: targets.EngineTargets,
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
        str(targets.LIVE_P50),
        targets.LIVE_P50.met(total["p50_s"]),
    )
    result.row(
        "append→receive p99",
        f"{total['p99_s']:.3f} s",
        str(goals.live_p99_s),
        goals.live_p99_s.met(total["p99_s"]),
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
        str(goals.live_cpu_pct),
        goals.live_cpu_pct.met(shares["sidecar"]),
    )
    if "standby" in shares:
        result.row(
            "standby CPU share (STREAM_ID)",
            f"{shares['standby']:.1f}% of one core",
            str(targets.STANDBY_CPU_PCT),
            targets.STANDBY_CPU_PCT.met(shares["standby"]),
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
