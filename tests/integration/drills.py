"""The fault drills of issue 8, each against a real broker and real worker processes.

Every drill takes a :class:`DrillContext` plus its scale as keyword arguments (the defaults are the
small CI scale) and returns a :class:`DrillResult`. ``tests/integration/test_drills.py`` runs the
fast ones; ``scripts/drills.py`` runs all of them at the scale in :data:`DRILLS` and prints the table
that ``docs/reliability.md`` records.

Duplicate bounds: a cycle's checkpoint is sent once the broker acked it, and up to 4 cycles per
table (the documented window, written out here so that a wider one in the code fails the drills)
are published ahead of their acks, so a crash re-publishes at most the cycles whose
checkpoints were not yet on the progress topic: the in-flight ones, the one being read and one whose
checkpoint was on its way. :func:`unpersisted_lines` counts those read budgets per table per crash
in the shortest generated line (250 bytes).

With ``DELIVERY=exactly_once`` (``DrillContext.delivery``) a line and the progress record that
covers it commit together and the verifier reads ``read_committed``, so a crash repeats nothing:
:func:`crash_bound` is 0 there, and each result notes what a ``read_uncommitted`` reader sees (the
records of the transactions a crash left open, published again). Drills 16 to 18 are about
transactions themselves and run in that mode only.

With ``BACKUP_SINK=object_store`` (``DrillContext.bucket``) every sidecar backs up to a bucket on an
S3-compatible server and the drills check the objects instead of the copies under ``BACKUP_DIR``
(:func:`~drill_kit.verify_with_backups`). Drills 9 and 9b, whose faults are in ``BACKUP_DIR``, are
skipped there; drill 9c starts a server of its own in either case.
"""

from __future__ import annotations

import asyncio
import datetime
import errno
import json
import math
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devkafka import LocalKafka, ProxiedListener, free_low_port, resolve_jars
from hyperdata_sidecar.devs3 import MotoS3
from hyperdata_sidecar.tools.expected import hour_files, read_tree
from hyperdata_sidecar.tools.generate import FIRST_BLOCK, CorpusSummary, generate_corpus
from hyperdata_sidecar.tools.reconcile import reconcile
from hyperdata_sidecar.tools.replay import replay
from hyperdata_sidecar.tools.verify import default_topics
from hyperdata_sidecar.topics import TopicSpec, apply_contract, load_contract

from drill_kit import (
    LOCAL,
    WAIT_S,
    BackupBucket,
    DrillContext,
    DrillError,
    DrillResult,
    backup_target,
    busiest,
    caught_up,
    cpu_s,
    end_offsets,
    exit_code,
    is_ready,
    kill,
    log_lines,
    marks,
    metric,
    metric_value,
    pid,
    reached,
    records_since,
    rss_kib,
    stopped_by_itself,
    terminate,
    thread_cpu_s,
    verify_with_backups,
    wait_for,
)
from hostile import collect_hostile_lines
from hostile_tree import HostileTree, collect_programs
from sidecar_run import DAY_BOUNDARY, Sidecar
from stream_kit import LiveNode, StreamLag, data_topics, role, second_node_tree, split_last_hour, stream_report
from tcp_proxy import TcpProxy
from worker_process import WorkerProcess

BOOK, ORDERS, FILLS = (spec.dir_name for spec in TABLES)
SHORTEST_LINE_BYTES = 250
WINDOW_CYCLES = 4
BUDGETS_PER_CRASH = WINDOW_CYCLES + 2
DEFAULT_BUDGET = 4 * 1024 * 1024  # READ_BUDGET_BYTES default
MiB = 1024 * 1024
METADATA_PROPAGATION_S = 30.0  # librdkafka's topic.metadata.propagation.max.ms default


def unpersisted_lines(budget: int, crashes: int = 1) -> int:
    """Most lines a crash may publish again: the unpersisted read budgets of every table (module docstring)."""
    return crashes * len(TABLES) * BUDGETS_PER_CRASH * budget // SHORTEST_LINE_BYTES


def crash_bound(ctx: DrillContext, budget: int, crashes: int = 1) -> int:
    """The duplicates ``crashes`` crashes may leave: :func:`unpersisted_lines`, or none in
    ``exactly_once`` (a ``read_committed`` reader never sees an uncommitted line)."""
    return 0 if ctx.exactly_once else unpersisted_lines(budget, crashes)


def exactly_once_only(ctx: DrillContext, result: DrillResult) -> bool:
    """Skip ``result`` unless the drill runs in ``exactly_once`` (its fault exists only there); True when skipped."""
    if not ctx.exactly_once:
        result.skipped = "exactly_once only (scripts/drills.py --delivery exactly_once)"
    return result.skipped is not None


def local_sink_only(ctx: DrillContext, result: DrillResult) -> bool:
    """Skip ``result`` unless the drill's sidecars back up with the local sink (its fault is in
    ``BACKUP_DIR``, which the object store does not use); True when skipped."""
    if ctx.backup_sink != LOCAL:
        result.skipped = "local sink only: its fault is in BACKUP_DIR"
    return result.skipped is not None


def corpus(target: Path, *, hours: int, lines_per_hour: int | Mapping[str, int], seed: int = 7, **kwargs: Any) -> CorpusSummary:
    return generate_corpus(
        target, hours=hours, lines_per_hour=lines_per_hour, seed=seed, start=kwargs.pop("start", DAY_BOUNDARY), **kwargs
    )


def pace(summary: CorpusSummary, seconds: float) -> dict[str, float]:
    """Line rates per table that append ``summary``'s corpus in about ``seconds``."""
    lines: dict[str, int] = {}
    for f in summary.files:
        lines[f.table] = lines.get(f.table, 0) + f.lines + f.bad_lines
    return {table: max(1.0, n / seconds) for table, n in lines.items()}


def tap(summary: CorpusSummary, watch: Path, seconds: float, seed: int) -> asyncio.Future:
    """The node writing: ``summary``'s corpus appended into ``watch`` in ragged chunks over about ``seconds``."""
    return _replay(Path(summary.root), watch, pace(summary, seconds), seed)


async def stop(worker, result: DrillResult, what: str = "worker") -> None:
    """Stop a worker that should still be running: one that had already exited fails the check."""
    code = exit_code(worker)
    if code is not None:
        result.check(f"{what} is still running at the end", False, f"it had already exited ({code})\n{worker.log_tail()}")
        return
    code = await asyncio.to_thread(worker.stop)
    result.check(f"{what} stops cleanly on SIGTERM (exit 0)", code == 0, worker.log_tail())


async def ensure_broker(ctx: DrillContext) -> None:
    if ctx.broker is not None and not ctx.broker.is_running():
        await asyncio.to_thread(ctx.broker.start)


# ---------------------------------------------------------------------------- 1. SIGKILL mid-tail


async def sigkill_mid_tail(
    ctx: DrillContext,
    *,
    kills: int = 3,
    hours: int = 3,
    lines_per_hour: int = 12_000,
    replay_s: float = 30.0,
    max_gap_s: float = 4.0,
    budget: int = 64 * 1024,
    seed: int | None = None,
) -> DrillResult:
    """SIGKILL the worker ``kills`` times at random moments while the node writes across rotations."""
    seed = random.randrange(10**6) if seed is None else seed
    rng = random.Random(seed)
    result = DrillResult(1, f"SIGKILL mid-tail x{kills}")
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour, bad_every=997)
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    worker = sidecar.start()
    writing = None
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "the first startup")
        writing = tap(summary, sidecar.watch, replay_s, seed)
        moments = []
        began = time.monotonic()
        for k in range(kills):
            await asyncio.sleep(rng.uniform(0.5, max_gap_s))
            kill(worker)
            moments.append(f"{time.monotonic() - began:.1f}s{'' if not writing.done() else ' (after the replay)'}")
            worker = sidecar.start()
            restarted, written = time.monotonic(), marks(sidecar.watch)
            await wait_for(worker, lambda k=k: len(sidecar.events("startup")) >= k + 2, f"startup after kill {k + 1}")
        await wait_for(worker, lambda: reached(worker, written), "what was written before the last kill")
        result.recovery_s = time.monotonic() - restarted
        result.note(f"seed {seed}; kills at {', '.join(moments)}")
        await writing
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up with the whole replay")
        bound = crash_bound(ctx, budget, kills)
        result.verified(await verify_with_backups(sidecar, allowed_duplicates=bound), allowed_duplicates=bound)
        await stop(worker, result)
    finally:
        if writing is not None:
            writing.cancel()
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 2. broker down


async def broker_down(
    ctx: DrillContext,
    *,
    outage_s: float = 90.0,
    during: str = "live",
    hours: int = 2,
    lines_per_hour: int = 40_000,
    budget: int = 256 * 1024,
    seed: int = 5,
    cpu_bound: float = 0.05,
) -> DrillResult:
    """Stop the broker for ``outage_s`` while the sidecar publishes: ``during="live"`` while the node
    writes, ``"catch-up"`` in the middle of a backlog. The data plane waits (message.timeout.ms=0)
    and nothing is re-sent: 0 lost, 0 duplicates, every partition in file order, same process.
    ``cpu_bound``: the share of a core the worker may use meanwhile (the requirement's 5 %)."""
    if ctx.broker is None:
        raise DrillError("broker_down needs a broker it may stop")
    live = during == "live"
    result = DrillResult(
        2, f"broker down {outage_s:.0f}s, {'node writing' if live else 'during catch-up'}", variant="" if live else "b"
    )
    summary = corpus(
        ctx.root / "corpus" if during == "live" else ctx.root / "backlog", hours=hours, lines_per_hour=lines_per_hour
    )
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    if during != "live":
        shutil.copytree(summary.root, sidecar.watch, dirs_exist_ok=True)
    worker = sidecar.start()
    writing = None
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "startup")
        if during == "live":
            writing = tap(summary, sidecar.watch, outage_s + 30.0, seed)
            await asyncio.sleep(5.0)
        else:

            def published() -> float:
                return sum(metric_value(worker, "hyperdata_sidecar_lines_published_total", table=t) for t in (BOOK, ORDERS))

            await wait_for(worker, lambda: published() > summary.lines / 10, "a tenth of the backlog to be published")
        process = pid(worker)
        await asyncio.to_thread(ctx.broker.stop)
        down_at = time.monotonic()
        rss_before, cpu_before, log_before = rss_kib(process), cpu_s(process), log_lines(sidecar)
        threads_before = thread_cpu_s(process)
        rss_max, rss_half, not_ready_after = rss_before, None, None
        while time.monotonic() - down_at < outage_s:
            await asyncio.sleep(1.0)
            if exit_code(worker) is not None:
                break
            rss_max = max(rss_max, rss_kib(process))
            if rss_half is None and time.monotonic() - down_at >= outage_s / 2:
                rss_half = rss_max
            if not_ready_after is None and not await asyncio.to_thread(is_ready, worker):
                not_ready_after = time.monotonic() - down_at
        alive = exit_code(worker) is None
        result.check("the worker stays up while the broker is down", alive, worker.log_tail())
        if alive:
            spent, lines = cpu_s(process) - cpu_before, log_lines(sidecar) - log_before
            share = spent / outage_s
            by_thread = busiest(threads_before, thread_cpu_s(process), outage_s)
            result.note(f"during the outage: CPU {100 * share:.1f}% of a core ({by_thread}), {lines} worker log lines")
            result.check(f"CPU during the outage <= {100 * cpu_bound:.0f}% of a core", share <= cpu_bound, f"{100 * share:.1f}%")
            # Each kind of line passes once as the outage begins, then once a minute: at most 10 a started minute.
            bound = 10 * math.ceil(outage_s / 60)
            result.check(
                f"a few log lines a minute during the outage (<= {bound} in {outage_s:.0f}s)", lines <= bound, f"{lines} lines"
            )
        result.check(
            "/readyz turns 503 within 10 s of the outage",
            not_ready_after is not None and not_ready_after <= 10.0,
            f"after {not_ready_after}",
        )
        result.note(
            f"RSS {rss_before / 1024:.0f} MiB before, {(rss_half or 0) / 1024:.0f} MiB half-way, at most {rss_max / 1024:.0f} MiB"
        )
        late = rss_max - (rss_half or rss_before)
        result.check("memory plateaus (RSS grows < 16 MiB in the outage's second half)", late < 16 * 1024, f"grew {late} KiB")
        await asyncio.to_thread(ctx.broker.start)
        back_at, written = time.monotonic(), marks(sidecar.watch)
        readiness: list[float] = []

        async def back(w: WorkerProcess) -> None:
            readiness.append(await wait_for(w, lambda: is_ready(w), "readiness after the broker returned"))
            await wait_for(w, lambda: reached(w, written), "what was written during the outage")
            result.recovery_s = time.monotonic() - back_at
            if writing is not None:
                await writing
            await wait_for(w, lambda: caught_up(w, sidecar.watch), "catch-up with everything written")

        worker, restarts = await _restarted_if_stuck(sidecar, result, worker, back)
        if restarts:
            result.note(f"/readyz 200 {readiness[-1]:.1f}s after the restart")
        else:
            ready = readiness[-1]
            result.check("/readyz is 200 again within 10 s of the broker's return", ready <= 10.0, f"after {ready:.1f}s")
        await _one_process_verified(ctx, sidecar, result, worker, process, restarts, budget)
    finally:
        if writing is not None:
            writing.cancel()
        await ensure_broker(ctx)
        await asyncio.to_thread(worker.stop)
    return result


async def sigkill_during_outage(
    ctx: DrillContext,
    *,
    outage_s: float = 15.0,
    kills: int = 1,
    hours: int = 2,
    lines_per_hour: int = 40_000,
    budget: int = 256 * 1024,
) -> DrillResult:
    """SIGKILL the worker while the broker is down (records are queued in librdkafka, unpersisted);
    then the broker and a new worker come back. ``kills`` times, spread over the catch-up: each
    worker publishes a share of the backlog before its outage begins. At most the unpersisted
    window is published again per kill (none for a ``read_committed`` reader in ``exactly_once``),
    and the first copies stay in file order in every partition."""
    if ctx.broker is None:
        raise DrillError("sigkill_during_outage needs a broker it may stop")
    summary = corpus(ctx.root / "backlog", hours=hours, lines_per_hour=lines_per_hour)
    if kills == 1:
        result = DrillResult(2, f"SIGKILL during a {outage_s:.0f}s broker outage", variant="c")
    else:
        title = f"{kills} SIGKILLs, each {outage_s:.0f}s into a broker outage, in a {summary.lines:,}-line catch-up"
        result = DrillResult(2, title, variant="d")
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    shutil.copytree(summary.root, sidecar.watch, dirs_exist_ok=True)
    worker = sidecar.start()
    try:
        for number in range(1, kills + 1):
            await wait_for(worker, lambda n=number: len(sidecar.events("startup")) >= n, f"startup {number}")
            share = summary.lines / (10 if kills == 1 else kills + 2)
            # A worker goes on publishing while the broker stops, so the earlier ones may leave less
            # than a share: at most half of what this one found left (its startup's backlog, in lines).
            left = sum(t["bytes"] for t in sidecar.events("startup")[-1]["backlog"].values()) * summary.lines / summary.bytes
            share = min(share, left / 2)
            await wait_for(
                worker,
                lambda w=worker, s=share: _data_lines_published(w) > s,
                f"{share:,.0f} lines to be published before outage {number}",
            )
            await asyncio.to_thread(ctx.broker.stop)
            await asyncio.sleep(outage_s)
            kill(worker)
            await asyncio.to_thread(ctx.broker.start)
            back_at = time.monotonic()
            worker = sidecar.start()
        await wait_for(worker, lambda: len(sidecar.events("startup")) > kills, "the last restarted worker's startup")
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up with the whole backlog")
        result.recovery_s = time.monotonic() - back_at
        bound = crash_bound(ctx, budget, kills)
        result.verified(await verify_with_backups(sidecar, allowed_duplicates=bound), allowed_duplicates=bound)
        await stop(worker, result)
    finally:
        await ensure_broker(ctx)
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 14. broker frozen


async def broker_frozen(
    ctx: DrillContext, *, frozen_s: float = 20.0, hours: int = 2, lines_per_hour: int = 20_000, budget: int = 256 * 1024
) -> DrillResult:
    """Freeze the broker (SIGSTOP: its connections hang instead of being refused) for ``frozen_s`` in
    the middle of a catch-up, then let it go on (SIGCONT). The data plane waits without spinning
    (<= 5% of a core while frozen) and nothing is re-sent: 0 lost, 0 duplicates, every partition
    in file order, same process."""
    if ctx.broker is None:
        raise DrillError("broker_frozen needs a broker it may freeze")
    result = DrillResult(14, f"broker frozen {frozen_s:.0f}s (SIGSTOP) during catch-up")
    summary = corpus(ctx.root / "backlog", hours=hours, lines_per_hour=lines_per_hour)
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    shutil.copytree(summary.root, sidecar.watch, dirs_exist_ok=True)
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "startup")
        await wait_for(
            worker, lambda: _data_lines_published(worker) > summary.lines / 10, "a tenth of the backlog to be published"
        )
        process = pid(worker)
        alive, share = await _freeze_broker(ctx, worker, frozen_s)
        resumed_at = time.monotonic()
        result.check("the worker stays up while the broker is frozen", alive, worker.log_tail())
        if share is not None:
            result.note(f"while frozen: CPU {100 * share:.1f}% of a core")
            result.check("CPU while the broker is frozen <= 5% of a core", share <= 0.05, f"{100 * share:.1f}%")

        async def goes_on(w: WorkerProcess) -> None:
            await wait_for(w, lambda: caught_up(w, sidecar.watch), "catch-up once the broker goes on")

        worker, restarts = await _restarted_if_stuck(sidecar, result, worker, goes_on)
        result.recovery_s = time.monotonic() - resumed_at
        await _one_process_verified(ctx, sidecar, result, worker, process, restarts, budget)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


async def _one_process_verified(
    ctx: DrillContext, sidecar: Sidecar, result: DrillResult, worker: WorkerProcess, process: int, restarts: int, budget: int
) -> None:
    """How drills 2, 2b and 14 end: the worker never restarted (``process`` still runs it) unless
    :func:`_restarted_if_stuck` started it again; nothing lost, nothing twice (one crash's window
    after such a restart); the worker stops cleanly."""
    result.check(
        "the worker never restarted (one startup), but after producer_stuck",
        len(sidecar.events("startup")) == 1 + restarts and (restarts or pid(worker) == process),
    )
    bound = crash_bound(ctx, budget, restarts) if restarts else 0
    result.verified(await verify_with_backups(sidecar, allowed_duplicates=bound), allowed_duplicates=bound)
    await stop(worker, result)


async def _restarted_if_stuck(
    sidecar: Sidecar, result: DrillResult, worker: WorkerProcess, step: Callable[[WorkerProcess], Awaitable[None]]
) -> tuple[WorkerProcess, int]:
    """Run ``step`` on ``worker``; the worker it ended on, and how often it was started again.

    confluentinc/librdkafka#5430: a broker that comes back (restarted, or fenced by its own
    controller after a freeze) can leave a partition without a leader for a moment, and librdkafka
    never sends to it again. In at_least_once the worker then ends itself (``producer_stuck``, exit
    1) and its supervisor starts it again: so does this, once, and runs ``step`` on the new worker.
    The result names it. Any other failure of ``step`` is raised (a worker started here is stopped
    first: the caller's ``finally`` knows only the one it passed)."""
    restarts = 0
    try:
        while True:
            try:
                await step(worker)
                return worker, restarts
            except DrillError:
                if restarts or exit_code(worker) is None or not sidecar.events("producer_stuck"):
                    raise
                stuck = sidecar.events("producer_stuck")[0]
                result.note(
                    f"librdkafka#5430 bit: {stuck.get('topic')} [{stuck.get('partition')}] stuck, the worker stopped "
                    f"(exit {exit_code(worker)}, producer_stuck) and was started again, as its supervisor would"
                )
                restarts += 1
                worker = sidecar.start()
    except BaseException:
        if restarts:
            worker.stop()
        raise


async def _freeze_broker(ctx: DrillContext, worker: WorkerProcess, frozen_s: float) -> tuple[bool, float | None]:
    """SIGSTOP the broker for ``frozen_s`` (less if the worker exits meanwhile), then SIGCONT it,
    whatever happens meanwhile. Whether the worker stayed up, and the share of a core it used while
    the broker was frozen (None if it exited)."""
    broker_pid = ctx.broker.pid() if ctx.broker is not None else None
    if broker_pid is None:
        raise DrillError("the broker is not running")
    process = pid(worker)
    os.kill(broker_pid, signal.SIGSTOP)
    try:
        frozen_at, cpu_before = time.monotonic(), cpu_s(process)
        while time.monotonic() - frozen_at < frozen_s and exit_code(worker) is None:
            await asyncio.sleep(0.5)
        alive = exit_code(worker) is None
        share = (cpu_s(process) - cpu_before) / (time.monotonic() - frozen_at) if alive else None
    finally:
        os.kill(broker_pid, signal.SIGCONT)
    return alive, share


def _data_lines_published(worker) -> float:
    """Lines the worker has published to the two large tables' topics so far."""
    return sum(metric_value(worker, "hyperdata_sidecar_lines_published_total", table=t) for t in (BOOK, ORDERS))


# ---------------------------------------------------------------------------- 15. data topic deleted


async def topic_deleted(
    ctx: DrillContext,
    *,
    auto_create: bool = True,
    at_once: bool = False,
    hours: int = 2,
    lines_per_hour: int = 6000,
    replay_s: float = 60.0,
    bound_s: float = 10.0,
) -> DrillResult:
    """Delete the order-statuses topic while the sidecar publishes, then create it again with the
    contract's partitions. With the broker's auto-create on (15) it comes back first with the
    broker's one partition (:func:`topic_copied`); with it off (15b) it stays away until then. In
    15c a copy with one partition replaces it at once, faster than the producer can notice."""
    if auto_create or at_once:
        return await topic_copied(
            ctx, at_once=at_once, hours=hours, lines_per_hour=lines_per_hour, replay_s=replay_s, bound_s=bound_s
        )
    return await topic_deleted_in_flight(ctx, hours=hours, lines_per_hour=lines_per_hour, replay_s=replay_s, bound_s=bound_s)


async def topic_copied(
    ctx: DrillContext,
    *,
    at_once: bool = False,
    hours: int = 2,
    lines_per_hour: int = 6000,
    replay_s: float = 60.0,
    bound_s: float = 10.0,
) -> DrillResult:
    """Auto-create on (Kafka's default). The first hour is replayed and published; the order-statuses
    topic is deleted; the next hour is appended, so the worker hands its lines to a producer whose
    metadata still shows the deleted topic. Once ``/readyz`` names the topic, a new user's client
    asks for it (a metadata request with auto-create allowed, as librdkafka's producers do by
    default) and the broker gives it back with its default of one partition; after ``bound_s / 2``
    that copy is deleted and the topic created with the contract's partitions.

    The worker never exits and never creates the topic itself; ``/readyz`` names the topic within
    ``bound_s`` of the hour's first lines, and the copy with both counts within ``bound_s`` of its
    creation; nothing is written into the copy; every line of the hour written before the re-creation
    is in the new topic within ``bound_s`` of it; at the end every line of the hour, acknowledged or
    not at any time, is in the topic as it stands, once, in file order per partition, and nothing else is.

    ``at_once`` (15c): the topic is deleted and a copy with one partition created in its place between
    the hours, so the producer's metadata still shows the deleted topic when the hour begins and its
    records for partition 0 go into the copy by name before anything can be seen (what the check
    cannot prevent). The table must find them (``topic_offsets_went_back``: their offsets are below
    where the topic stood) and send them again into the topic created with the contract's partitions.
    """
    if at_once:
        result = DrillResult(15, "data topic replaced at once by a copy with one partition", variant="c")
    else:
        result = DrillResult(15, "data topic deleted in flight, auto-create on")
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour)
    first_hours, the_hour = split_last_hour(Path(summary.root), ctx.root / "corpus-before", ctx.root / "corpus-hour")
    rates = pace(summary, replay_s)
    sidecar = ctx.sidecar()
    topic = default_topics(sidecar.env)[ORDERS]
    worker = sidecar.start()
    writing = None
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "startup")
        started = time.monotonic()
        await replay(first_hours, sidecar.watch, chunk_bytes=16 * 1024, cadence_s=0.1, lines_per_s=rates, progress=False, seed=15)
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the hours before published", WAIT_S)
        # librdkafka takes a topic it has known for less than topic.metadata.propagation.max.ms (30 s)
        # for one still being created and keeps its records (rdkafka_topic.c, rd_kafka_topic_set_notexists).
        await asyncio.sleep(max(0.0, METADATA_PROPAGATION_S + 2.0 - (time.monotonic() - started)))
        named: float | None = None
        if at_once:
            partitions = await asyncio.to_thread(_replace_by_copy, ctx.bootstrap, topic, 1)
            copy_at = time.monotonic()
            result.note(f"the topic was deleted and created again with {partitions} partition(s) at once")
        else:
            await _delete_topic(ctx.bootstrap, topic)
        writing = asyncio.ensure_future(
            replay(the_hour, sidecar.watch, chunk_bytes=16 * 1024, cadence_s=0.1, lines_per_s=rates, progress=False, seed=16)
        )
        if not at_once:
            named = await _seconds_until(worker, lambda: _readyz_names(worker, topic), 3 * bound_s)
            result.check(
                f"/readyz names {topic} within {bound_s:.0f}s of the hour's first lines",
                named is not None and named <= bound_s,
                f"after {named}",
            )
            still_gone = await asyncio.to_thread(_topic_id, ctx.bootstrap, topic) is None
            result.check("the worker did not create the deleted topic again (its clients never auto-create)", still_gone)
            partitions = await _auto_create(ctx.bootstrap, topic)
            copy_at = time.monotonic()
            result.note(f"a new user's client had the broker's auto-create give the topic back with {partitions} partition(s)")
        both = f"PARTITION_COUNT ({partitions} partition(s), the contract says 6"
        counted = await _seconds_until(worker, lambda: _readyz_names(worker, topic, both), 3 * bound_s)
        if at_once:
            named = counted  # the hour began right after the copy was made
        result.check(
            f"/readyz names the copy with both counts within {bound_s:.0f}s",
            counted is not None and counted <= bound_s,
            f"after {counted}; reasons {_readyz_reasons(worker)}",
        )
        logged = [e for e in sidecar.events("topic_partitions_mismatch") if e.get("topic") == topic]
        result.check(
            "topic_partitions_mismatch names the topic and both counts",
            any(e.get("partitions") == partitions and e.get("contract") == 6 for e in logged),
            str(logged[:2]),
        )
        await asyncio.sleep(max(0.0, bound_s / 2 - (time.monotonic() - copy_at)))
        in_copy = await asyncio.to_thread(_read_topic, ctx.bootstrap, topic)
        if not at_once:
            result.check("nothing was written into the copy", not in_copy, f"{len(in_copy)} records, e.g. {in_copy[:2]}")
        else:
            found = [e for e in sidecar.events("topic_offsets_went_back") if e.get("topic") == topic]
            result.check(
                "the records written into the copy were found from their offsets (topic_offsets_went_back)",
                not in_copy or bool(found),
                f"{len(in_copy)} in the copy, {len(found)} found",
            )
            copied = {(r.source, r.offset) for r in in_copy}
        await _delete_topic(ctx.bootstrap, topic)
        [spec] = [spec for spec in load_contract(sidecar.env) if spec.name == topic]
        created_ms = await _create_timed(ctx.bootstrap, spec)
        hour = _hour_relpaths(the_hour, ORDERS)
        owed = {line for line in _complete_lines(sidecar.watch, ORDERS) if line[0] in hour}
        await writing
        settled = await _seconds_until(worker, lambda: caught_up(worker, sidecar.watch), WAIT_S)
        crashed = sidecar.events("poll_crashed")
        result.check(
            "the worker never exits (one startup, no poll crashed) and catches up",
            settled is not None and len(sidecar.events("startup")) == 1 and not crashed,
            f"exit {exit_code(worker)}; poll_crashed: {str(crashed[:1])[:600]}",
        )
        new = await asyncio.to_thread(_read_topic, ctx.bootstrap, topic)
        late, owed_after = _landed_late(new, owed, created_ms, bound_s)
        result.check(
            f"every line of the hour written before the re-creation is in the new topic within {bound_s:.0f}s "
            "(the broker's append times)",
            not late,
            f"{len(late)} of {len(owed)} later or never, e.g. {late[:3]}",
        )
        lines = {line for line in _complete_lines(sidecar.watch, ORDERS) if line[0] in hour}
        present = {(r.source, r.offset) for r in new}
        lost = lines - present
        result.lost = len(lost)
        result.check(
            f"every line of the hour ({len(lines)}), acknowledged or not, is in the topic as it stands",
            not lost,
            str(sorted(lost)[:5]),
        )
        ids = [r.line_id for r in new]
        result.duplicates = len(ids) - len(set(ids))
        result.check("no line id twice in the topic", result.duplicates == 0, f"{result.duplicates} repeated")
        others = present - lines
        result.check("the topic holds nothing but the hour's lines", not others, f"{len(others)}, e.g. {sorted(others)[:3]}")
        disorder = _out_of_file_order(new)
        result.check("the topic holds each partition's lines in file order", not disorder, str(disorder[:3]))
        if at_once:
            result.note(
                f"{len(in_copy)} record(s) were written into the copy (partitions {sorted({r.partition for r in in_copy})}) "
                f"before the producer's metadata showed it; {len(copied & present)} of them are in the topic at the end"
            )
        result.note(
            f"{len(lines)} lines of the hour; /readyz named the topic {named or 0:.1f}s into the hour and the copy's counts "
            f"{counted or 0:.1f}s after its creation; every owed line was in the new topic {owed_after:.1f}s after its creation "
            "(the broker's append times)"
        )
        if exit_code(worker) is None:
            await stop(worker, result)
    finally:
        if writing is not None:
            writing.cancel()
        await asyncio.to_thread(worker.stop)
    return result


async def topic_deleted_in_flight(
    ctx: DrillContext, *, hours: int = 2, lines_per_hour: int = 6000, replay_s: float = 60.0, bound_s: float = 10.0
) -> DrillResult:
    """Auto-create off (a broker of the drill's own). Delete the order-statuses topic while its next
    hour file is being appended and lines are in flight, then create it again with the contract's
    partitions. The worker never exits; /readyz names the topic within ``bound_s``; every line not
    acknowledged before the deletion is in the new topic within ``bound_s`` of its creation, in file
    order per partition, and no line id twice.

    What was acknowledged before the deletion is known from the deleted partitions' logs, which the
    drill's broker keeps (:func:`_deleted_lines`, and in ``exactly_once`` :func:`_acknowledged`); a
    line neither they nor the new topic hold is lost.
    """
    result = DrillResult(15, "data topic deleted in flight, auto-create off", variant="b")
    broker = await asyncio.to_thread(_broker_without_auto_create, ctx.root / "kafka")
    ctx = ctx.on(broker)
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour)
    sidecar = ctx.sidecar()
    topic = default_topics(sidecar.env)[ORDERS]
    [spec] = [spec for spec in load_contract(sidecar.env) if spec.name == topic]
    worker = sidecar.start()
    writing = None
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "startup")
        writing = tap(summary, sidecar.watch, replay_s, seed=15)
        await wait_for(
            worker,
            lambda: metric_value(worker, "hyperdata_sidecar_lines_published_total", table=ORDERS) > 0,
            "lines on the topic",
        )
        seen = time.monotonic()  # the producer has known the topic since before its first line landed
        await wait_for(worker, lambda: len(hour_files(sidecar.watch, ORDERS)) >= 2, "the next order-statuses hour file", replay_s)
        # As in 15: librdkafka keeps the records of a topic it has known for less than
        # topic.metadata.propagation.max.ms (30 s) and fails them only once that has passed (the table
        # is held up to 30 s after the deletion); the drill deletes after it.
        await asyncio.sleep(max(0.0, METADATA_PROPAGATION_S + 2.0 - (time.monotonic() - seen)))
        await _delete_topic(ctx.bootstrap, topic)
        named = await _seconds_until(worker, lambda: _readyz_names(worker, topic), 3 * bound_s)
        result.check(
            f"/readyz names {topic} within {bound_s:.0f}s of the deletion",
            named is not None and named <= bound_s,
            f"after {named}",
        )
        # Read while the topic is away: nothing can be committed into the deleted incarnation since.
        held = await asyncio.to_thread(_deleted_lines, broker, topic, sidecar.watch, ORDERS, spec.partitions)
        taken = await asyncio.to_thread(_acknowledged, ctx, sidecar, held)
        result.note(f"the deleted topic held {len(held)} lines of the hour files, {len(taken)} of them for good")
        created_ms = await _create_timed(ctx.bootstrap, spec)
        owed = _complete_lines(sidecar.watch, ORDERS) - taken
        await writing
        settled = await _seconds_until(worker, lambda: caught_up(worker, sidecar.watch), WAIT_S)
        crashed = sidecar.events("poll_crashed")
        result.check(
            "the worker never exits (one startup, no poll crashed) and catches up",
            settled is not None and len(sidecar.events("startup")) == 1 and not crashed,
            f"exit {exit_code(worker)}; poll_crashed: {str(crashed[:1])[:600]}",
        )
        new = await asyncio.to_thread(_read_topic, ctx.bootstrap, topic)
        late, owed_after = _landed_late(new, owed, created_ms, bound_s)
        result.check(
            f"every line written before the re-creation and not acknowledged before is in the new topic within {bound_s:.0f}s "
            "(the broker's append times)",
            not late,
            f"{len(late)} of {len(owed)} later or never, e.g. {late[:3]}",
        )
        result.note(f"every owed line ({len(owed)}) was in the new topic {owed_after:.1f}s after its creation")
        lost = _complete_lines(sidecar.watch, ORDERS) - taken - {(r.source, r.offset) for r in new}
        result.lost = len(lost)
        result.check("no line lost (each is on the topic before the deletion or in the new one)", not lost, str(sorted(lost)[:5]))
        ids = [r.line_id for r in new]
        result.duplicates = len(ids) - len(set(ids))
        result.check("no line id twice in the new topic", result.duplicates == 0, f"{result.duplicates} repeated")
        disorder = _out_of_file_order(new)
        result.check("the new topic holds each partition's lines in file order", not disorder, str(disorder[:3]))
        if exit_code(worker) is None:
            await stop(worker, result)
    finally:
        if writing is not None:
            writing.cancel()
        await asyncio.to_thread(worker.stop)
        await asyncio.to_thread(broker.stop)
    return result


def _replace_by_copy(bootstrap: str, topic: str, partitions: int) -> int:
    """Blocking: delete ``topic`` and create it again with ``partitions`` at once (as fast as the
    broker allows), without asking for its metadata in between. The partition count it has."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return partitions
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def _hour_relpaths(corpus_root: Path, table: str) -> set[str]:
    return {hour.relpath for hour in hour_files(corpus_root, table)}


async def _auto_create(bootstrap: str, topic: str) -> int:
    """What a new user's client does to a missing topic on a broker with auto-create on: ask for its
    metadata with auto-create allowed (librdkafka's producers do by default; ``kcat -L -t`` does).
    The partition count the broker gave it."""

    def ask() -> None:
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.list_topics(topic, timeout=10.0)
        producer.flush(1.0)

    await asyncio.to_thread(ask)
    return await _wait_for_topic(bootstrap, topic)


@dataclass(frozen=True)
class TopicRecord:
    partition: int
    source: str
    offset: int
    line_id: bytes
    appended_ms: int | None  # when the broker appended it, on a topic made by :func:`_create_timed`


async def _create_timed(bootstrap: str, spec: TopicSpec) -> int:
    """Create ``spec``'s topic as the contract says, except that each record's timestamp is the
    broker's append time (``message.timestamp.type=LogAppendTime``; the sidecar neither checks nor
    reads it): when a record landed is then read from the record itself, however long the drill's
    reader takes. The wall-clock time (ms) at which the topic was created."""
    await apply_contract(bootstrap, [replace(spec, config={**spec.config, "message.timestamp.type": "LogAppendTime"})])
    return time.time_ns() // 1_000_000


def _landed_late(
    records: list[TopicRecord], owed: set[tuple[str, int]], created_ms: int, bound_s: float
) -> tuple[list[tuple[str, int, float | None]], float]:
    """The ``owed`` lines that the broker appended more than ``bound_s`` after ``created_ms`` or never
    (each with its seconds after the creation, None for never), in file order; and the seconds after
    the creation at which the last owed line landed. ``records`` are read from a topic made by
    :func:`_create_timed` (the first copy of a line counts)."""
    landed: dict[tuple[str, int], int] = {}
    for record in records:
        if record.appended_ms is None:
            raise DrillError(f"{record.source}:{record.offset} has no append time: its topic was not made by _create_timed")
        line = (record.source, record.offset)
        landed[line] = min(landed.get(line, record.appended_ms), record.appended_ms)
    after = {line: (landed[line] - created_ms) / 1000 if line in landed else None for line in owed}
    late = sorted((*line, seconds) for line, seconds in after.items() if seconds is None or seconds > bound_s)
    return late, max((seconds for seconds in after.values() if seconds is not None), default=0.0)


def _deleted_lines(broker: LocalKafka, topic: str, watch: Path, table: str, partitions: int) -> set[tuple[str, int]]:
    """Blocking: (source, offset) of every line of ``table`` in ``watch`` that the deleted ``topic``
    held: what the broker took before the deletion, read from the partitions' logs it keeps after
    it (``<topic>-<p>.<id>-delete``, kept past the drill: ``log.segment.delete.delay.ms``) with
    Kafka's own ``DumpLogSegments``, matched to the files by the record's value (the line). A
    consumer following the topic is no witness: the lines acknowledged in the last moment before
    the deletion may never be fetched (seen in CI, 18 lines at offsets 0.. of the new hour)."""
    logs = broker.data_dir / "logs"
    deadline = time.monotonic() + 30.0
    while len(dirs := sorted(logs.glob(f"{topic}-*-delete"))) < partitions:
        if time.monotonic() > deadline:
            raise DrillError(f"{logs}: {len(dirs)} of {partitions} partitions of the deleted {topic} kept")
        time.sleep(0.2)
    segments = ",".join(str(segment) for directory in dirs for segment in sorted(directory.glob("*.log")))
    java = shutil.which("java") or "java"
    dump = subprocess.run(
        [
            java,
            "-Dstdout.encoding=UTF-8",
            "-cp",
            f"{resolve_jars(broker.cache_dir)}/*",
            "kafka.tools.DumpLogSegments",
            "--deep-iteration",
            "--print-data-log",
            "--files",
            segments,
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )
    values = {line.split(b" payload: ", 1)[1] for line in dump.stdout.splitlines() if b" payload: " in line}
    taken = set()
    for hour in hour_files(watch, table):
        data = (watch / hour.relpath).read_bytes()
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if data[start:end] in values:
                taken.add((hour.relpath, start))
            start = end + 1
    return taken


def _acknowledged(ctx: DrillContext, sidecar: Sidecar, held: set[tuple[str, int]]) -> set[tuple[str, int]]:
    """Blocking: of the lines the deleted topic ``held`` (:func:`_deleted_lines`), those the broker
    took for good. In ``at_least_once`` all of them; in ``exactly_once`` those below the byte offset
    the sidecar's committed checkpoints reached in their file (its progress topic, read
    ``read_committed``): a line of an aborted transaction is still owed; one of a transaction
    committed as the topic was deleted, whose commit markers never reached the deleted partitions,
    is not (its progress moved past it; reliability.md, finding 7)."""
    if not ctx.exactly_once:
        return held
    topic = f"hyperdata-sidecar-{sidecar.env['NODE_ID']}-sidecar-progress"
    consumer = Consumer(
        {
            "bootstrap.servers": ctx.bootstrap,
            "group.id": f"drill-progress-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    upto: dict[str, int] = {}
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        while True:
            message = consumer.poll(5.0)
            if message is None:
                raise DrillError(f"{topic}: no end of partition")
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                break
            if error is None:
                record = json.loads(message.value())
                if record.get("kind") == "checkpoint":
                    cursor = record["cursor"]
                    upto[cursor["path"]] = max(upto.get(cursor["path"], 0), int(cursor["byte_offset"]))
    finally:
        consumer.close()
    return {(source, offset) for source, offset in held if offset < upto.get(source, 0)}


#: What the broker answers for a few seconds about a topic just created (again): its leaders are not
#: known everywhere yet. The drill's reader asks again; anything else is an error.
_LEADERS_SETTLING = frozenset({"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"})


def _watermarks(consumer: Consumer, topic: str, partition: int, tries: int = 20) -> tuple[int, int]:
    """Blocking: the low and high watermarks of a partition, asked again while its leader settles."""
    attempt = 1
    while True:
        try:
            low, high = consumer.get_watermark_offsets(ConfluentPartition(topic, partition), timeout=10.0)
            return low, high
        except KafkaException as exc:
            if exc.args[0].name() not in _LEADERS_SETTLING or attempt == tries:
                raise
        attempt += 1
        time.sleep(0.5)


def _read_topic(bootstrap: str, topic: str) -> list[TopicRecord]:
    """Blocking: every committed record of ``topic`` now, partition by partition in offset order
    (read as a ``read_committed`` reader reads, to each partition's end: with ``exactly_once`` the
    last offset may be a commit marker, which is no record)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"drill-read-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10.0).topics[topic].partitions
        records = []
        for partition in sorted(partitions):
            low, high = _watermarks(consumer, topic, partition)
            if high <= low:
                continue
            consumer.assign([ConfluentPartition(topic, partition, low)])
            while True:
                message = consumer.poll(5.0)
                if message is None:
                    raise DrillError(f"{topic}[{partition}]: no end of partition before offset {high}")
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    break
                if error is None:
                    headers = dict(message.headers() or ())
                    kind, stamp = message.timestamp()
                    appended = stamp if kind == TIMESTAMP_LOG_APPEND_TIME else None
                    records.append(
                        TopicRecord(partition, headers["source"].decode(), int(headers["offset"]), headers["line_id"], appended)
                    )
        return records
    finally:
        consumer.close()


def _out_of_file_order(records: list[TopicRecord]) -> list[tuple[int, str, int]]:
    """Records that come after a later line of the files in their partition."""
    disorder, last = [], {}
    for record in records:
        position = (record.source, record.offset)
        if record.partition in last and position < last[record.partition]:
            disorder.append((record.partition, *position))
        last[record.partition] = max(position, last.get(record.partition, position))
    return disorder


def _complete_lines(watch: Path, table: str) -> set[tuple[str, int]]:
    """(source, offset) of every complete line of ``table``'s hour files now."""
    found = set()
    for hour in hour_files(watch, table):
        data = (watch / hour.relpath).read_bytes()
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            found.add((hour.relpath, start))
            start = end + 1
    return found


def _readyz_names(worker, topic: str, also: str = "") -> bool:
    """/readyz is not ready, and one of its reasons names ``topic`` (and holds ``also``)."""
    status, _type, body = worker.get("/readyz")
    return status == 503 and any(topic in reason and also in reason for reason in json.loads(body).get("reasons", []))


def _readyz_reasons(worker) -> list[str]:
    return json.loads(worker.get("/readyz")[2]).get("reasons", [])


async def _seconds_until(worker, condition: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until ``condition`` holds, or None if it does not within ``timeout_s``."""
    try:
        return await wait_for(worker, condition, "the condition", timeout_s)
    except DrillError:
        return None


async def _delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` and wait until that incarnation is gone: the name no longer listed, or listed
    with another topic id (with auto-create on, the worker's own metadata requests can create the
    topic again between two looks, so "not listed" may never be seen)."""
    deleted = await asyncio.to_thread(_topic_id, bootstrap, topic)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.delete_topics([topic])
        for _ in range(120):
            if await asyncio.to_thread(_topic_id, bootstrap, topic) != deleted:
                return
            await asyncio.sleep(0.25)
        raise DrillError(f"{topic} (id {deleted}) still there 30 s after its deletion")
    finally:
        await admin.close()


def _topic_id(bootstrap: str, topic: str) -> str | None:
    """Blocking: the id of ``topic``'s current incarnation, or None when there is none."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        return str(admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10).topic_id)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


async def _wait_for_topic(bootstrap: str, topic: str, timeout_s: float = 60.0) -> int:
    """The partition count of ``topic`` once it exists again."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if topic in await admin.list_topics():
                [described] = await admin.describe_topics([topic])
                return len(described["partitions"])
            await asyncio.sleep(0.5)
        raise DrillError(f"{topic} was not created again by the broker's auto-create within {timeout_s:.0f}s")
    finally:
        await admin.close()


def _broker_without_auto_create(data_dir: Path) -> LocalKafka:
    """A broker of the drill's own whose ``auto.create.topics.enable`` is false (a static setting:
    its first start writes server.properties, which is edited before the second)."""
    port = free_low_port()
    broker = LocalKafka(data_dir, port=port, controller_port=free_low_port(exclude={port}))
    broker.start()
    broker.stop()
    properties = data_dir / "server.properties"
    text = properties.read_text()
    if "auto.create.topics.enable=true" not in text:
        raise DrillError(f"{properties} does not turn auto-create on as expected")
    # A deleted topic's partitions stay on disk (renamed *-delete) for the drill's oracle (_deleted_lines).
    text = text.replace("auto.create.topics.enable=true", "auto.create.topics.enable=false")
    properties.write_text(f"{text.rstrip()}\nlog.segment.delete.delay.ms=3600000\n")
    broker.start()
    return broker


# ---------------------------------------------------------------------------- 3. broker absent at startup


async def broker_absent_at_start(
    ctx: DrillContext, *, absent_s: float = 8.0, hours: int = 2, lines_per_hour: int = 3000
) -> DrillResult:
    """Start the worker with the broker down; bring the broker up ``absent_s`` later."""
    if ctx.broker is None:
        raise DrillError("broker_absent_at_start needs a broker it may stop")
    result = DrillResult(3, "broker absent at startup")
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)
    await asyncio.to_thread(ctx.broker.stop)
    worker = sidecar.start()
    try:
        started = time.monotonic()
        while time.monotonic() - started < absent_s and exit_code(worker) is None:
            await asyncio.sleep(0.5)
        alive = exit_code(worker) is None
        exited = (
            "" if alive else f"exited ({exit_code(worker)}) {time.monotonic() - started:.0f}s after start: {_last_error(sidecar)}"
        )
        result.check("the worker waits for the broker instead of exiting", alive, exited)
        retries = sidecar.events("broker_connect_failed")
        delays = [event.get("retry_in_s") for event in retries]
        result.check(
            "each retry is logged with its backoff (broker_connect_failed, growing retry_in_s)",
            len(delays) >= 2 and delays == sorted(delays) and delays[0] < delays[-1],
            f"retry delays logged: {delays}",
        )
        if alive:
            health, ready = worker.get("/healthz")[0], worker.get("/readyz")
            reasons = json.loads(ready[2]).get("reasons", []) if ready[0] == 503 else []
            result.check(
                "while it waits, /healthz is 200 and /readyz 503 naming the broker it waits for",
                health == 200 and any(r.startswith(f"waiting for Kafka at {ctx.bootstrap}") for r in reasons),
                f"/healthz {health}, /readyz {ready[0]} {reasons}",
            )
            page = worker.get("/")
            result.check(
                "the status page says what it waits for",
                page[0] == 200 and b"waiting for Kafka at" in page[2],
                f"status {page[0]}",
            )
        await asyncio.to_thread(ctx.broker.start)
        back_at = time.monotonic()
        if not alive:
            worker = sidecar.start()  # what a supervisor would do: the rest of the drill checks the data path
            result.note("restarted the worker after the broker came back (as a supervisor would)")
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up once the broker is up")
        result.recovery_s = time.monotonic() - back_at
        result.verified(await verify_with_backups(sidecar))
        await stop(worker, result)
    finally:
        await ensure_broker(ctx)
        await asyncio.to_thread(worker.stop)
    return result


def _last_error(sidecar: Sidecar) -> str:
    errors = [
        line for line in (sidecar.root / "run" / "worker.log").read_text(errors="replace").splitlines() if "[ERROR]" in line
    ]
    return errors[0].split("[ERROR]", 1)[1].strip() if errors else "(no error logged)"


# ---------------------------------------------------------------------------- 4. local state lost


async def local_state_lost(
    ctx: DrillContext,
    *,
    hours: int = 3,
    lines_per_hour: int = 20_000,
    budget: int = 64 * 1024,
    kill_at: float = 0.4,
) -> DrillResult:
    """SIGKILL mid catch-up, delete the RocksDB state dir, restart: offsets come back from the changelog."""
    result = DrillResult(4, "local state lost (SIGKILL + state dir deleted)")
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    summary = corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)
    worker = sidecar.start()
    try:
        target = kill_at * summary.bytes
        await wait_for(
            worker, lambda: metric_value(worker, "hyperdata_sidecar_bytes_read_total") >= target, "the catch-up to get going"
        )
        kill(worker)
        shutil.rmtree(sidecar.state)
        worker = sidecar.start()
        restarted = time.monotonic()
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up after the restart")
        result.recovery_s = time.monotonic() - restarted
        resumed = sidecar.events("startup")[-1].get("resume_points") or {}
        result.check(
            "the offsets come back from the changelog (startup lists resume points)", bool(resumed), f"resume points {resumed}"
        )
        result.note(
            f"killed after {kill_at:.0%} of {summary.bytes / MiB:.0f} MiB; {len(resumed)} files resumed from the changelog"
        )
        bound = crash_bound(ctx, budget)
        result.verified(await verify_with_backups(sidecar, allowed_duplicates=bound), allowed_duplicates=bound)
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 5. changelog lost, local state present


async def changelog_lost(ctx: DrillContext, *, hours: int = 2, lines_per_hour: int = 6000, watch_s: float = 60.0) -> DrillResult:
    """Delete the app's changelog topics while its RocksDB state stays; restart and record what happens.

    Then do what Faust's error message suggests (remove the local state) and count what is published again.
    """
    result = DrillResult(5, "changelog lost, local state kept", observed=True)
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)
    worker = sidecar.start()
    try:
        result.verified(await verify_with_backups(sidecar), label="before")
        await stop(worker, result, "first worker")
        deleted = await _delete_changelogs(ctx.bootstrap, f"hyperdata-sidecar-{sidecar.env['NODE_ID']}-")
        result.note(f"deleted {len(deleted)} changelog topics; the RocksDB dir stays")
        worker = sidecar.start()
        started = time.monotonic()
        while (
            time.monotonic() - started < watch_s and exit_code(worker) is None and not await asyncio.to_thread(is_ready, worker)
        ):
            await asyncio.sleep(0.5)
        code = exit_code(worker)
        if code is not None:
            result.note(f"the worker refuses: exit {code} after {time.monotonic() - started:.0f}s: {_crash_reason(sidecar)}")
        else:
            result.note(
                f"the worker {'became ready' if is_ready(worker) else 'is not ready'} after {time.monotonic() - started:.0f}s"
            )
        await asyncio.to_thread(worker.stop)
        after_restart = await sidecar.verify(allowed_duplicates=10**9, timeout_s=30.0)
        # A worker that refuses to start publishes nothing: the count holds whether it refused or ran.
        result.check("no silent re-publication with the state kept", after_restart.duplicates == 0, after_restart.summary())
        result.note(f"with the state kept: {after_restart.duplicates} lines published again")
        shutil.rmtree(sidecar.state)
        worker = sidecar.start()
        restarted = time.monotonic()
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up after the state was removed")
        result.recovery_s = time.monotonic() - restarted
        report = await verify_with_backups(sidecar, allowed_duplicates=10**9)
        lines = sum(t.lines + t.dlq_lines for t in report.tables.values())
        result.note(
            f"after removing the state as the message suggests: {report.duplicates} of {lines} lines published again, "
            f"{report.count('seal_duplicate')} duplicate seals"
        )
        if report.uncommitted_duplicates is not None:
            result.note(
                f"{ctx.delivery}, read {report.isolation}: a read_uncommitted reader sees {report.uncommitted_duplicates} "
                "lines again (the committed copies above, and any aborted transaction's)"
            )
        result.lost, result.duplicates = report.count("lost") + report.count("dlq_missing"), report.duplicates
        result.check("after the state is removed nothing is lost", report.failures == 0, report.summary())
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


async def _delete_changelogs(bootstrap: str, app_prefix: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        doomed = [t for t in await admin.list_topics() if t.startswith(app_prefix) and t.endswith("-changelog")]
        await admin.delete_topics(doomed)
        for _ in range(60):
            if not set(doomed) & set(await admin.list_topics()):
                break
            await asyncio.sleep(0.5)
        return doomed
    finally:
        await admin.close()


def _crash_reason(sidecar: Sidecar) -> str:
    for line in (sidecar.root / "run" / "worker.log").read_text(errors="replace").splitlines():
        if "Crashed reason=" in line:
            return line.split("Crashed reason=", 1)[1][:160].replace("\\n", " ")
    return _last_error(sidecar)


# ---------------------------------------------------------------------------- 6. truncated or replaced file


async def truncated_or_replaced(ctx: DrillContext, *, lines_per_hour: int = 6000) -> DrillResult:
    """Rewrite the files being tailed: book diffs cut to half its lines, order statuses replaced by other
    (longer) content, fills untouched. Each rewritten file must be published again from byte 0, whole,
    once, with the line ids of a first reading; nothing else is published again."""
    result = DrillResult(6, "truncated / replaced file")
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=1, lines_per_hour=lines_per_hour, seed=1)
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the first reading")
        topics = default_topics(sidecar.env)
        before = await end_offsets(ctx.bootstrap, topics)
        truncated, replaced = (hour_files(sidecar.watch, table)[0].relpath for table in (BOOK, ORDERS))
        _truncate_to_half(sidecar.watch / truncated)
        _replace_with_longer(sidecar.watch / replaced, ctx.root / "other")
        rewritten_at = time.monotonic()
        await wait_for(worker, lambda: len(sidecar.events("file_restarted")) >= 2, "both rewrites to be detected")
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the second reading")
        result.recovery_s = time.monotonic() - rewritten_at
        reasons = {event["path"]: event["reason"] for event in sidecar.events("file_restarted")}
        result.check("the shorter file is detected as truncated", reasons.get(truncated) == "truncated", str(reasons))
        result.check("the other content is detected as replaced", reasons.get(replaced) == "replaced", str(reasons))
        counted = {t: metric_value(worker, "hyperdata_sidecar_truncated_files_total", table=t) for t in (BOOK, ORDERS, FILLS)}
        result.check(
            "each rewrite is counted once, the untouched file not", counted == {BOOK: 1, ORDERS: 1, FILLS: 0}, str(counted)
        )
        observed = await records_since(ctx.bootstrap, topics, before, isolation=ctx.isolation)
        expected = [f for f in read_tree(sidecar.watch) if f.relpath in (truncated, replaced)]
        report = reconcile(expected, observed)
        result.verified(report, label="re-read from byte 0")
        untouched = [r for r in observed.data if r.source not in (truncated, replaced)]
        result.check("the untouched file is not published again", not untouched, f"{len(untouched)} records")
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


def _truncate_to_half(path: Path) -> None:
    data = path.read_bytes()
    cut = data.index(b"\n", len(data) // 2) + 1
    os.truncate(path, cut)


def _replace_with_longer(path: Path, scratch: Path) -> None:
    """Put other content (another seed, more lines, a new inode) at ``path``, as a rewriting writer would."""
    table = path.relative_to(path.parents[3]).parts[0]
    old = path.read_bytes()
    lines = old.count(b"\n") * 2
    corpus(scratch, hours=1, lines_per_hour={table: lines}, seed=99)
    other = scratch / path.relative_to(path.parents[3])
    # The generator starts every hour at :00:00.000000000; a real node's first local_time differs per write.
    data = other.read_bytes()
    other.write_bytes(data.replace(b":00.000000000", b":00.000000417", 1))
    if other.read_bytes()[:64] == old[:64] or other.stat().st_size < len(old):
        raise DrillError("the replacement content must differ in its first bytes and not be shorter")
    os.replace(other, path)


# ---------------------------------------------------------------------------- 7. deleted file


async def deleted_before_published(ctx: DrillContext, *, lines_per_hour: int = 3000) -> DrillResult:
    """Delete the fills file while its last line is still being written (not fully published); the
    node then starts the next hour. The deletion is an error log and a metric; the tailer carries on."""
    result = DrillResult(7, "file deleted before fully published")
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=1, lines_per_hour=lines_per_hour, seed=3)
    doomed = hour_files(sidecar.watch, FILLS)[0]
    partial = b'{"local_time":"2026-06-10T22:59:59.999999999","block_time":"2026-06-10T22:59:59.6'
    with open(sidecar.watch / doomed.relpath, "ab") as f:
        f.write(partial)
    worker = sidecar.start()
    try:
        held = lambda: metric_value(worker, "hyperdata_sidecar_partial_line_held_bytes", table=FILLS) == len(partial)  # noqa: E731
        await wait_for(worker, held, "the fills file to be published up to its partial last line")
        (sidecar.watch / doomed.relpath).unlink()
        await wait_for(worker, lambda: sidecar.events("file_lost"), "the deletion to be noticed")
        event = sidecar.events("file_lost")[0]
        result.check(
            "the loss is an error event naming the file, why and how far it was published",
            event["level"] == "error"
            and event["path"] == doomed.relpath
            and event["published_to"] < event["size_seen"]
            and "fully published" in event["reason"],
            str(event),
        )
        counted = metric_value(worker, "hyperdata_sidecar_deleted_files_total", table=FILLS, reason="unsealed")
        result.check("the deletion is counted as unsealed", counted == 1, f"deleted_files_total {counted}")
        lost = metric_value(worker, "hyperdata_sidecar_files_lost_total", table=FILLS)
        result.check("the file is counted as lost", lost == 1, f"files_lost_total {lost}")
        status = worker.get_json("/sidecar/status/")
        result.check(
            "the status page shows the loss as a problem",
            any(doomed.relpath in p["text"] and p["level"] == "error" for p in status["problems"]),
            str(status["problems"]),
        )
        next_hour = ctx.root / "next"
        corpus(
            next_hour,
            hours=1,
            lines_per_hour={FILLS: lines_per_hour // 10},
            seed=4,
            start=DAY_BOUNDARY + datetime.timedelta(hours=1),
            first_block=FIRST_BLOCK + 10**6,
        )
        arrived = time.monotonic()
        shutil.copytree(next_hour, sidecar.watch, dirs_exist_ok=True)
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the next hour to be published")
        result.recovery_s = time.monotonic() - arrived
        result.check("the worker is still up", exit_code(worker) is None)
        result.verified(await verify_with_backups(sidecar))
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 8. hostile lines


async def hostile_lines(
    ctx: DrillContext,
    *,
    examples: int = 150,
    max_line_bytes: int = 64 * 1024,
    lines_per_hour: int = 2000,
    seed: int | None = None,
) -> DrillResult:
    """Hypothesis-made hostile lines (arbitrary bytes, invalid UTF-8, NULs, huge, deeply nested, right
    keys with wrong types) spliced among good lines of two hours per table: the worker stays up and
    every line lands on its topic or in the DLQ, byte for byte."""
    seed = random.randrange(10**6) if seed is None else seed
    result = DrillResult(8, f"hostile lines ({examples} hypothesis examples)")
    sidecar = ctx.sidecar(MAX_LINE_BYTES=str(max_line_bytes))
    good = ctx.root / "good"
    corpus(good, hours=2, lines_per_hour=lines_per_hour, seed=8)
    batches = collect_hostile_lines(examples, max_line_bytes)
    spliced = _splice(good, sidecar.watch, batches, random.Random(seed))
    result.note(f"seed {seed}; {spliced} hostile lines among {sum(1 for _ in good.rglob('*') if _.is_file())} hour files")
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "the hostile tree to be published")
        result.check("the worker is still up", exit_code(worker) is None)
        report = await verify_with_backups(sidecar, max_line_bytes=max_line_bytes)
        result.verified(report)
        result.note(f"{sum(t.dlq_lines for t in report.tables.values())} lines went to the DLQ")
        log = (sidecar.root / "run" / "worker.log").read_text(errors="replace")
        errors = [e for e in sidecar.events() if e["level"] == "error"]
        result.check("no error event and no traceback in the worker log", not errors and "Traceback" not in log, str(errors[:3]))
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


def _splice(good: Path, watch: Path, batches: list[tuple[str, list[bytes]]], rng: random.Random) -> int:
    """Write ``good``'s hour files into ``watch`` with the hostile lines inserted at random line
    boundaries of their table's files. The oldest fills file ends in an unterminated hostile line."""
    files = {spec.dir_name: hour_files(good, spec.dir_name) for spec in TABLES}
    inserts: dict[str, list[tuple[int, bytes]]] = {}
    count = 0
    for table, lines in batches:
        target = rng.choice(files[table]).relpath
        for line in lines:
            inserts.setdefault(target, []).append((rng.random(), line))
            count += 1
    for table_files in files.values():
        for hour in table_files:
            body = (good / hour.relpath).read_bytes().splitlines(keepends=True)
            for where, line in inserts.get(hour.relpath, []):
                body.insert(int(where * len(body)), line + b"\n")
            if hour == files[FILLS][0]:
                body.append(b'{"local_time":"2026-06-10T22:59:59","block_number":\x00\xff')
            out = watch / hour.relpath
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(b"".join(body))
    return count + 1


# ---------------------------------------------------------------------------- 9. backup target full or read-only


async def backup_target_unwritable(
    ctx: DrillContext, *, hours: int = 3, lines_per_hour: int = 6000, phase_s: float = 20.0
) -> DrillResult:
    """BACKUP_DIR on a 64 KiB tmpfs (full), then remounted read-only, then writable: backups fail with
    the right reason and are retried; data and seals flow all along; every backup lands once it clears.

    Local sink only: skipped when the drills back up to the object store (9c is its twin there)."""
    result = DrillResult(9, "backup target full, then read-only")
    if local_sink_only(ctx, result):
        return result
    if os.geteuid() != 0:
        result.skipped = "needs root"  # to mount a small tmpfs as the backup target
        return result
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)
    _mount(["-t", "tmpfs", "-o", "size=64k", "tmpfs", str(sidecar.backups)])
    worker = sidecar.start()
    try:
        failed = lambda reason: lambda: any(e["reason"] == reason for e in sidecar.events("backup_failed"))  # noqa: E731
        await wait_for(worker, failed("no_space"), "a backup to fail for want of space")
        result.verified(await sidecar.verify(), label="data and seals while backups fail")
        _mount(["-o", "remount,size=64m,ro", str(sidecar.backups)])
        await wait_for(worker, failed("permission"), "a backup to fail on the read-only target")
        await asyncio.sleep(phase_s)
        failures = metric_value(worker, "hyperdata_sidecar_backups_total", result="failed")
        result.note(f"{failures:.0f} failed attempts counted while the target was unusable")
        result.check("failures are counted (backups_total{result=failed})", failures >= 2)
        _mount(["-o", "remount,rw", str(sidecar.backups)])
        cleared_at = time.monotonic()
        report = await sidecar.verify(backup_dir=sidecar.backups, timeout_s=180.0)
        result.recovery_s = time.monotonic() - cleared_at
        result.verified(report, label="with backups")
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
        subprocess.run(["umount", str(sidecar.backups)], check=False)
    return result


def _mount(args: list[str]) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


async def sigterm_while_backup_fails(ctx: DrillContext, *, lines_per_hour: int = 1500, stop_bound_s: float = 20.0) -> DrillResult:
    """SIGTERM while the backup agent is retrying a backup that cannot succeed (a symlink below
    BACKUP_DIR: refused as unsafe): the worker exits 0 within the bound, and the restarted worker
    hands the file to the backup agent again.

    Local sink only: skipped when the drills back up to the object store (9c has its store refuse
    every write)."""
    result = DrillResult(9, "SIGTERM while a backup keeps failing", variant="b")
    if local_sink_only(ctx, result):
        return result
    sidecar = ctx.sidecar()
    corpus(sidecar.watch, hours=2, lines_per_hour=lines_per_hour)
    (ctx.root / "outside").mkdir()
    (sidecar.backups / FILLS).symlink_to(ctx.root / "outside", target_is_directory=True)
    worker = sidecar.start()
    try:
        unsafe = lambda: any(e["reason"] == "unsafe_path" for e in sidecar.events("backup_failed"))  # noqa: E731
        await wait_for(worker, unsafe, "the fills backup to be refused")
        code, took = await terminate(worker, stop_bound_s)
        result.note(f"exit {code} {took:.1f}s after SIGTERM")
        result.check(f"exits 0 within {stop_bound_s:.0f}s", code == 0, worker.log_tail())
        if code is None:
            kill(worker)
        (sidecar.backups / FILLS).unlink()
        worker = sidecar.start()
        restarted = time.monotonic()
        result.verified(await sidecar.verify(backup_dir=sidecar.backups))
        result.recovery_s = time.monotonic() - restarted
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


async def object_store_refusing(
    ctx: DrillContext, *, hours: int = 3, lines_per_hour: int = 6000, phase_s: float = 20.0
) -> DrillResult:
    """Drill 9's twin for BACKUP_SINK=object_store, against a real S3 server (moto): the bucket
    missing, then made but every write refused (the server starts checking credentials and knows
    none), then writable: backups fail as ``permission`` and are retried; data and seals flow all
    along; once it clears, every sealed file is an object with the file's bytes and sha256.

    It starts a server of its own whatever the drills' sink (it makes the server refuse every
    request), and its sidecar backs up there."""
    result = DrillResult(9, "object store: bucket missing, then writes refused", variant="c")
    server = MotoS3(ctx.root)
    server.start()
    try:
        bucket = BackupBucket(server.endpoint, "drill-backups")
        sidecar = ctx.sidecar(**bucket.settings("node"))
        corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)

        def refused(text: str) -> Callable[[], bool]:
            """A backup failed as ``permission`` with ``text`` in its error."""
            return lambda: any(e["reason"] == "permission" and text in e["error"] for e in sidecar.events("backup_failed"))

        worker = sidecar.start()
        try:
            await wait_for(worker, refused("the bucket does not exist"), "a backup to fail for want of the bucket")
            result.verified(await sidecar.verify(), label="data and seals while the bucket is missing")
            server.client().create_bucket(Bucket=bucket.name)
            server.require_authentication()
            await wait_for(worker, refused("refused the credentials"), "a backup to fail on refused credentials")
            await asyncio.sleep(phase_s)
            failures = metric_value(worker, "hyperdata_sidecar_backups_total", result="failed")
            result.note(f"{failures:.0f} failed attempts counted while the store refused")
            result.check("failures are counted (backups_total{result=failed})", failures >= 2)
            server.accept_any_credentials()
            cleared_at = time.monotonic()
            await wait_for(worker, lambda: _all_sealed_backed_up(worker), "every sealed file backed up", timeout_s=180.0)
            result.recovery_s = time.monotonic() - cleared_at
            result.verified(await verify_with_backups(sidecar), label="with backups")
            await stop(worker, result)
        finally:
            await asyncio.to_thread(worker.stop)
    finally:
        server.stop()
    return result


def _all_sealed_backed_up(worker: WorkerProcess) -> bool:
    """Every file the worker sealed is backed up (and there are some: each table's finished hours)."""
    states = [f["state"] for f in worker.get_json("/sidecar/files/")["files"]]
    return "sealed" not in states and states.count("backed_up") > 0


# ---------------------------------------------------------------------------- 10. SIGTERM during heavy catch-up


async def sigterm_during_catch_up(
    ctx: DrillContext,
    *,
    hours: int = 2,
    lines_per_hour: int = 150_000,
    stop_bound_s: float = 30.0,
    term_at: float = 0.3,
) -> DrillResult:
    """SIGTERM while a large backlog is being caught up (default read budget): exit 0 within the bound,
    and on restart nothing beyond the cycles in flight is published again."""
    result = DrillResult(10, "SIGTERM during heavy catch-up")
    sidecar = ctx.sidecar()
    summary = corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour)
    worker = sidecar.start()
    try:
        target = term_at * summary.bytes
        await wait_for(
            worker, lambda: metric_value(worker, "hyperdata_sidecar_bytes_read_total") >= target, "the catch-up to get going"
        )
        code, took = await terminate(worker, stop_bound_s)
        result.note(f"SIGTERM after {term_at:.0%} of {summary.bytes / MiB:.0f} MiB; exit {code} after {took:.1f}s")
        result.check(f"exits 0 within {stop_bound_s:.0f}s", code == 0, worker.log_tail())
        if code is None:
            kill(worker)
        worker = sidecar.start()
        restarted = time.monotonic()
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up after the restart", 300.0)
        result.recovery_s = time.monotonic() - restarted
        bound = crash_bound(ctx, DEFAULT_BUDGET)
        result.verified(await verify_with_backups(sidecar, allowed_duplicates=bound, timeout_s=300.0), allowed_duplicates=bound)
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 11. two node hosts


async def two_nodes(ctx: DrillContext, *, hours: int = 2, lines_per_hour: int = 12_000, replay_s: float = 40.0) -> DrillResult:
    """Two sidecars (their own NODE_ID, watch tree and state) on one broker, sharing the seal and DLQ
    topics; SIGKILL one mid-replay.

    Each node has its own data topics: the verifier's per-partition order check would compare the
    two nodes' lines with each other. The trees hold different hours, so even the shared topics
    tell the nodes' records apart by their source.
    """
    result = DrillResult(11, "two NODE_IDs, one killed")
    a, b = (
        ctx.sidecar(f"node-{n}", **{spec.topic_env: f"{ctx.prefix}{n}.{spec.default_topic}" for spec in TABLES}) for n in "ab"
    )
    summaries = [
        corpus(ctx.root / "corpus-a", hours=hours, lines_per_hour=lines_per_hour, seed=21),
        corpus(
            ctx.root / "corpus-b",
            hours=hours,
            lines_per_hour=lines_per_hour,
            seed=22,
            start=DAY_BOUNDARY + datetime.timedelta(hours=6),
        ),
    ]
    workers = {"a": a.start(), "b": b.start()}
    writing: list[asyncio.Future] = []
    try:
        for name, sidecar in (("a", a), ("b", b)):
            await wait_for(workers[name], lambda s=sidecar: s.events("startup"), f"node {name} to start")
        writing = [tap(summaries[0], a.watch, replay_s, 1), tap(summaries[1], b.watch, replay_s, 2)]
        await asyncio.sleep(replay_s / 3)
        kill(workers["a"])
        b_ready = []
        down_for = replay_s / 3
        while down_for > 0:
            b_ready.append(await asyncio.to_thread(is_ready, workers["b"]))
            await asyncio.sleep(1.0)
            down_for -= 1.0
        result.check(
            "node b stays ready while node a is down", all(b_ready), f"{b_ready.count(False)} of {len(b_ready)} probes not ready"
        )
        workers["a"] = a.start()
        restarted, written = time.monotonic(), marks(a.watch)
        await wait_for(
            workers["a"], lambda: reached(workers["a"], written), "node a to publish what was written while it was down"
        )
        result.recovery_s = time.monotonic() - restarted
        await asyncio.gather(*writing)
        await wait_for(workers["a"], lambda: caught_up(workers["a"], a.watch), "node a to catch up")
        await wait_for(workers["b"], lambda: caught_up(workers["b"], b.watch), "node b to catch up")
        bound = crash_bound(ctx, DEFAULT_BUDGET)
        result.verified(await verify_with_backups(a, allowed_duplicates=bound), allowed_duplicates=bound, label="node a (killed)")
        result.verified(await verify_with_backups(b), label="node b")
        apps = {p.name for s in (a, b) for p in s.state.iterdir()}
        result.check("each node keeps its own state (app dirs)", len(apps) == 2, str(apps))
        for name in ("a", "b"):
            await stop(workers[name], result, f"node {name}")
    finally:
        for future in writing:
            future.cancel()
        for worker in workers.values():
            await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 12. hostile tree


async def hostile_tree(
    ctx: DrillContext, *, programs: int = 2, steps: int = 40, quiet_s: float = 3.0, seed: int | None = None
) -> DrillResult:
    """Hypothesis-drawn programs of events under WATCH_DIR (``hostile_tree.py``: appends, unterminated
    and late lines, new hours, truncations, replacements, deletions, renames, symlinks, pipes,
    unreadable files), thrown one after the other at one running worker. After each: the worker is
    up, idle again (its CPU over ``quiet_s`` within three times its idle share before the first
    program, or a quarter of a core) and every table's poll loop still goes round, and every line
    of every file that stayed intact is in Kafka exactly per the contract, with its seals and backups."""
    seed = random.randrange(10**6) if seed is None else seed
    result = DrillResult(12, f"hostile tree ({programs} programs of {steps} events)")
    drawn = collect_programs(programs, steps, seed)
    sidecar = ctx.sidecar()
    tree = HostileTree(sidecar.watch)
    tree.start()
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: _tree_published(worker, tree), "the first hour files")
        idle = await _cpu_share(worker, quiet_s)
        result.note(f"seed {seed}; idle CPU before the first program: {100 * idle:.1f}% of a core")
        for number, program in enumerate(drawn, start=1):
            for event in program:
                tree.apply(event)
                await asyncio.sleep(event.pause)
            tree.finish()
            await wait_for(worker, lambda: _tree_published(worker, tree), f"what program {number} left intact to be published")
            report = await verify_with_backups(sidecar, ignore=tree.ignored())
            result.verified(report, label=f"program {number}")
            ticks = _poll_ticks(worker)
            busy = await _cpu_share(worker, quiet_s)
            went_round = {table: _poll_ticks(worker).get(table, 0) - ticks.get(table, 0) for table in (BOOK, ORDERS, FILLS)}
            result.check(f"program {number}: idle again (CPU {100 * busy:.1f}% of a core)", busy <= max(3 * idle, 0.25))
            result.check(f"program {number}: every table's poll loop goes round", all(went_round.values()), str(went_round))
            if not report.ok:
                result.note(f"program {number}: " + "; ".join(event.describe() for event in program))
        log = (sidecar.root / "run" / "worker.log").read_text(errors="replace")
        result.check(
            "no poll crashed and no traceback in the worker log", not sidecar.events("poll_crashed") and "Traceback" not in log
        )
        result.note(
            f"events: {dict(sorted(tree.done.items()))}; {len(tree.ignored())} hour names left out (damaged, symlinks, pipes)"
        )
        await stop(worker, result)
    finally:
        tree.finish()
        await asyncio.to_thread(worker.stop)
    return result


def _tree_published(worker, tree: HostileTree) -> bool:
    """Ready; each table's newest file published up to its last complete line; every older file
    that stayed intact sealed at its size now."""
    if not is_ready(worker) or not reached(worker, marks(tree.watch)):
        return False
    rows = {f["path"]: f for f in worker.get_json("/sidecar/files/")["files"]}
    for table in tree.tables:
        for relpath in tree.present(table)[:-1]:
            row = rows.get(relpath)
            if relpath in tree.damaged:
                continue
            if row is None or row["state"] not in ("sealed", "backed_up") or row["size"] != (tree.watch / relpath).stat().st_size:
                return False
    return True


async def _cpu_share(worker, seconds: float) -> float:
    """The worker's CPU over the next ``seconds``, as a share of one core."""
    before = cpu_s(pid(worker))
    await asyncio.sleep(seconds)
    return (cpu_s(pid(worker)) - before) / seconds


def _poll_ticks(worker) -> dict[str, float]:
    """Poll cycles each table's loop has completed so far."""
    return {labels["table"]: value for labels, value in metric(worker, "hyperdata_sidecar_poll_cycle_seconds_count")}


# ---------------------------------------------------------------------------- drill 13: the state disk fills


async def state_disk_full(
    ctx: DrillContext,
    *,
    hours: int = 2,
    lines_per_hour: int = 6000,
    replay_s: float = 60.0,
    full_s: float = 20.0,
    budget: int = 64 * 1024,
) -> DrillResult:
    """STATE_PATH on a small tmpfs that a filler file fills while the node writes, then freed: every
    refused state write is counted and logged, readiness names the state dir within 10 s, the tailers
    stop (at most two read budgets per table published meanwhile), and the same process carries on
    once there is room: nothing lost, nothing published twice, every finished file sealed."""
    result = DrillResult(13, "the state disk fills")
    if os.geteuid() != 0:
        result.check("runs as root (mounts a tmpfs)", False, "needs root to mount a small tmpfs")
        return result
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget))
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour)
    sidecar.state.mkdir(parents=True, exist_ok=True)
    _mount(["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(sidecar.state)])
    filler = sidecar.state / "filler"
    worker = sidecar.start()
    writing = tap(summary, sidecar.watch, replay_s, seed=5)
    try:
        await wait_for(worker, lambda: is_ready(worker), "the worker to be ready")
        await asyncio.sleep(replay_s / 6)
        filled_at = time.monotonic()
        await asyncio.to_thread(_fill, filler)
        named = lambda: any(r.startswith(f"STATE_PATH {sidecar.state}") for r in _not_ready_reasons(worker))  # noqa: E731
        named_s = await wait_for(worker, named, "readiness to name the state dir")
        result.check("readiness names the state dir within 10 s", named_s <= 10.0, f"{named_s:.1f} s")
        at_stop = metric_value(worker, "hyperdata_sidecar_lines_published_total")
        await asyncio.sleep(full_s)
        grown = metric_value(worker, "hyperdata_sidecar_lines_published_total") - at_stop
        bound = len(TABLES) * 2 * budget // SHORTEST_LINE_BYTES
        result.check(
            "the tailers stop while the state disk is full", grown <= bound, f"{grown:.0f} lines in {full_s:g} s (bound {bound})"
        )
        result.check("refused writes are logged", bool(sidecar.events("state_write_failed")))
        filler.unlink()
        freed_at = time.monotonic()
        await writing
        report = await verify_with_backups(sidecar, allowed_duplicates=0, timeout_s=180.0)
        result.recovery_s = time.monotonic() - freed_at
        result.verified(report, allowed_duplicates=0)
        await wait_for(worker, lambda: bool(sidecar.events("state_writable_again")), "state_writable_again")
        failures = metric_value(worker, "hyperdata_sidecar_state_persist_failures_total")
        refused = sum(event["refused_writes"] for event in sidecar.events("state_writable_again"))
        result.note(f"{failures:.0f} refused state writes over {time.monotonic() - filled_at:.0f} s")
        result.check(
            "every refused write is counted (state_persist_failures_total)",
            failures > 0 and failures == refused,
            f"metric {failures:.0f}, refused_writes logged {refused}",
        )
        result.check("the same process carried on (no restart)", exit_code(worker) is None and is_ready(worker))
        await stop(worker, result)
    finally:
        writing.cancel()
        await asyncio.to_thread(worker.stop)
        subprocess.run(["umount", str(sidecar.state)], check=False)
    return result


def _fill(path: Path) -> None:
    """Write ``path`` until its filesystem has no room left."""
    chunk = b"\0" * (64 * 1024)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    return
                raise


def _not_ready_reasons(worker) -> list[str]:
    status, _, body = worker.get("/readyz")
    return [] if status == 200 else list(json.loads(body).get("reasons", []))


# ---------------------------------------------------------------------------- 16-18. exactly_once: transactions under fault


def _committed(worker) -> float:
    return metric_value(worker, "hyperdata_sidecar_transactions_committed_total")


async def sigkill_during_commit(
    ctx: DrillContext,
    *,
    kills: int = 3,
    hours: int = 3,
    lines_per_hour: int = 20_000,
    budget: int = 64 * 1024,
    txn_max_ms: int = 100,
    seed: int | None = None,
) -> DrillResult:
    """``exactly_once``: SIGKILL the worker as a transaction closes, ``kills`` times during a catch-up
    (``TXN_MAX_MS`` short, so commits come often). After each start the drill waits for a commit
    (``transactions_committed_total`` moves) and kills ``txn_max_ms`` plus a random part of the mean
    close time (``transaction_close_seconds``) later: as the next transaction closes or commits, as
    near as it can be aimed from outside (each kill's aim is in the notes). Nothing lost, nothing
    twice for a ``read_committed`` reader, every finalized file sealed once."""
    seed = random.randrange(10**6) if seed is None else seed
    rng = random.Random(seed)
    result = DrillResult(16, f"SIGKILL during a commit x{kills}")
    if exactly_once_only(ctx, result):
        return result
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget), TXN_MAX_MS=str(txn_max_ms))
    summary = corpus(sidecar.watch, hours=hours, lines_per_hour=lines_per_hour, bad_every=997)
    worker = sidecar.start()
    restarted = time.monotonic()
    try:
        aims = []
        for k in range(kills):
            await wait_for(worker, lambda k=k: len(sidecar.events("startup")) >= k + 1, f"startup {k + 1}")
            await wait_for(worker, lambda w=worker: _committed(w) >= 2, "the first commits of this start")
            aims.append(await asyncio.to_thread(_kill_as_a_commit_closes, worker, txn_max_ms / 1000, rng))
            worker = sidecar.start()
            restarted = time.monotonic()
        await wait_for(worker, lambda: len(sidecar.events("startup")) >= kills + 1, "the last startup")
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up with the whole backlog")
        result.recovery_s = time.monotonic() - restarted
        before_next = sum(1 for aim in aims if not aim.endswith("(after the next commit)"))
        result.note(f"seed {seed}; {summary.bytes / MiB:.0f} MiB backlog; kills {', '.join(aims)}")
        result.note(f"{before_next} of {kills} kills came before the next commit was counted")
        result.verified(await verify_with_backups(sidecar), allowed_duplicates=0)
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


def _kill_as_a_commit_closes(worker, txn_max_s: float, rng: random.Random) -> str:
    """Blocking: wait for the next commit, then SIGKILL when the transaction after it is due to
    close (``txn_max_s``, plus a random part of the mean close time). What the kill aimed at."""
    count, close_s = _close_seconds(worker)
    committed = _committed(worker)
    deadline = time.monotonic() + WAIT_S
    while (now := _committed(worker)) <= committed:
        if time.monotonic() > deadline or exit_code(worker) is not None:
            raise DrillError(f"no commit within {WAIT_S:.0f}s (exit {exit_code(worker)})\n{worker.log_tail()}")
    seen = time.monotonic()
    mean_close = close_s / count if count else 0.05
    delay = txn_max_s + rng.uniform(0.0, max(mean_close, 0.01))
    time.sleep(max(0.0, delay - (time.monotonic() - seen)))
    after = _committed(worker) > now
    kill(worker)
    return f"{1000 * delay:.0f} ms after a commit{' (after the next commit)' if after else ''}"


def _close_seconds(worker) -> tuple[float, float]:
    """(count, sum) of the worker's ``transaction_close_seconds`` so far."""
    samples = {
        "count": metric_value(worker, "hyperdata_sidecar_transaction_close_seconds_count"),
        "sum": metric_value(worker, "hyperdata_sidecar_transaction_close_seconds_sum"),
    }
    return samples["count"], samples["sum"]


async def second_worker_same_node_id(ctx: DrillContext, *, hours: int = 3, lines_per_hour: int = 6000) -> DrillResult:
    """``exactly_once``: a second worker starts with the first one's ``NODE_ID`` (a copied
    configuration, a container started twice) on the same watch tree and backup target, with a
    state dir of its own; the last hour is written once it has started. The first is fenced (its
    ``transactional.id`` taken): it stops non-zero with one ``producer_fenced`` line; the second
    resumes from the last committed progress and catches up. A ``read_committed`` reader sees every
    line once: anything the first committed after the fence would be there twice."""
    result = DrillResult(17, "a second worker with the same NODE_ID")
    if exactly_once_only(ctx, result):
        return result
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour, bad_every=997)
    earlier, last_hour = split_last_hour(Path(summary.root), ctx.root / "corpus-before", ctx.root / "corpus-hour")
    first = ctx.sidecar("first")
    second = ctx.sidecar("second", NODE_ID=first.env["NODE_ID"], WATCH_DIR=first.env["WATCH_DIR"], **backup_target(first))
    shutil.copytree(earlier, first.watch, dirs_exist_ok=True)
    a = first.start()
    b = None
    try:
        await wait_for(a, lambda: _committed(a) >= 2, "the first worker's first commits")
        b = second.start()
        await wait_for(b, lambda: second.events("transactions_started"), "the second worker to take the transactional.id")
        fenced_at = time.monotonic()
        shutil.copytree(last_hour, first.watch, dirs_exist_ok=True)
        code = await stopped_by_itself(a, WAIT_S)
        result.check("the first worker stops by itself with a non-zero exit", code not in (None, 0), f"exit {code}")
        fenced = first.events("producer_fenced")
        result.check(
            "the first worker logs one producer_fenced line naming the same NODE_ID",
            len(fenced) == 1 and "same NODE_ID" in fenced[0].get("meaning", ""),
            str(fenced[:2]),
        )
        if code is not None:
            result.note(f"the first worker exited {code} {time.monotonic() - fenced_at:.1f}s after the second took over")
        await wait_for(b, lambda: second.events("startup"), "the second worker's startup", 300.0)
        result.note(f"the second worker started its tables {time.monotonic() - fenced_at:.1f}s after it took over")
        await wait_for(b, lambda: caught_up(b, second.watch), "the second worker's catch-up")
        result.recovery_s = time.monotonic() - fenced_at
        result.verified(await verify_with_backups(second), allowed_duplicates=0)
        await stop(b, result, "second worker")
    finally:
        if exit_code(a) is None:
            await asyncio.to_thread(a.stop)
        if b is not None:
            await asyncio.to_thread(b.stop)
    return result


async def broker_frozen_past_txn_timeout(
    ctx: DrillContext,
    *,
    txn_timeout_ms: int = 5000,
    frozen_s: float = 12.0,
    hours: int = 2,
    lines_per_hour: int = 20_000,
    budget: int = 256 * 1024,
    recovery_bound_s: float | None = None,
) -> DrillResult:
    """``exactly_once``: freeze the broker (SIGSTOP) for ``frozen_s``, longer than ``TXN_TIMEOUT_MS``,
    in the middle of a catch-up, then let it go on. The open transaction cannot end in time (its
    records time out, or the broker aborts it): it is aborted and its reads redone from the last
    committed progress, in the same process. Nothing lost, nothing twice for a ``read_committed``
    reader. The recovery is from the thaw to the first commit after the reads were redone;
    ``recovery_bound_s`` (the issue's 10 s) is checked when given, else only reported."""
    result = DrillResult(18, f"broker frozen {frozen_s:.0f}s, past TXN_TIMEOUT_MS={txn_timeout_ms}, during catch-up")
    if exactly_once_only(ctx, result):
        return result
    if ctx.broker is None:
        raise DrillError("broker_frozen_past_txn_timeout needs a broker it may freeze")
    summary = corpus(ctx.root / "backlog", hours=hours, lines_per_hour=lines_per_hour)
    sidecar = ctx.sidecar(READ_BUDGET_BYTES=str(budget), TXN_TIMEOUT_MS=str(txn_timeout_ms))
    shutil.copytree(summary.root, sidecar.watch, dirs_exist_ok=True)
    worker = sidecar.start()
    try:
        await wait_for(worker, lambda: sidecar.events("startup"), "startup")
        await wait_for(
            worker, lambda: _data_lines_published(worker) > summary.lines / 10, "a tenth of the backlog to be published"
        )
        process = pid(worker)
        await _freeze_broker(ctx, worker, frozen_s)
        thawed_at = time.monotonic()
        result.check("the worker stays up while the broker is frozen", exit_code(worker) is None, worker.log_tail())
        await wait_for(worker, lambda: sidecar.events("reads_redone"), "the reads redone after the abort")
        redone = time.monotonic() - thawed_at
        since = _committed(worker)
        await wait_for(worker, lambda: _committed(worker) > since, "a commit after the reads were redone")
        result.recovery_s = time.monotonic() - thawed_at
        await wait_for(worker, lambda: caught_up(worker, sidecar.watch), "catch-up after the thaw")
        caught = time.monotonic() - thawed_at
        aborted, renewed = sidecar.events("transaction_aborted"), sidecar.events("producer_renewed")
        result.check("the open transaction was aborted (transaction_aborted)", bool(aborted), str(aborted[:2]))
        result.note(
            f"after the thaw: reads redone {redone:.1f}s, first commit after them {result.recovery_s:.1f}s, caught up "
            f"{caught:.1f}s; {len(aborted)} transaction_aborted ({'; '.join(str(e.get('reason'))[:120] for e in aborted[:2])}), "
            f"{len(renewed)} producer_renewed"
        )
        if recovery_bound_s is not None:
            result.check(
                f"commits again within {recovery_bound_s:.0f}s of the thaw",
                result.recovery_s <= recovery_bound_s,
                f"{result.recovery_s:.1f}s",
            )
        result.check("the worker never restarted (one startup)", len(sidecar.events("startup")) == 1 and pid(worker) == process)
        result.verified(await verify_with_backups(sidecar), allowed_duplicates=0)
        await stop(worker, result)
    finally:
        await asyncio.to_thread(worker.stop)
    return result


# ---------------------------------------------------------------------------- 19. one stream, two nodes


async def stream_failover(
    ctx: DrillContext, *, hours: int = 2, lines_per_hour: int = 8000, replay_s: float = 45.0, frozen_s: float = 15.0
) -> DrillResult:
    """``exactly_once``, ``STREAM_ID``: two nodes' trees (the same events, other ``local_time``s), a
    sidecar on each, one stream on one set of topics; the last hour is written live on both.

    (a) SIGKILL the active during the catch-up, then the new active while both nodes append: the
    standby publishes within 15 s each time. (g) A killed sidecar restarted stands by and publishes
    nothing. (c) The active frozen for ``frozen_s`` (past the group's 6 s session): the standby takes
    over; the frozen one, thawed, stops by itself (the group demoted it, or its producer was fenced)
    and its restart stands by. A ``read_committed`` reader sees every line id of the trees once, as the
    same event, in file order per partition."""
    result = DrillResult(19, "one stream from two nodes: the active killed, killed while live, frozen")
    if exactly_once_only(ctx, result):
        return result
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour)
    earlier, last_hour = split_last_hour(Path(summary.root), ctx.root / "corpus-before", ctx.root / "corpus-hour")
    # Small reads and transactions: the catch-up commits often, so the first kill lands inside it.
    stream = {"STREAM_ID": f"{ctx.prefix.rstrip('.')}-stream", "READ_BUDGET_BYTES": "65536", "TXN_MAX_MS": "100"}
    a, b = (ctx.sidecar(name, NODE_ID=f"{stream['STREAM_ID']}-{name}", **stream) for name in ("a", "b"))
    second_node_tree(earlier, b.watch)
    second_node_tree(last_hour, ctx.root / "corpus-hour-b")
    shutil.copytree(earlier, a.watch, dirs_exist_ok=True)
    workers = {"a": a.start()}
    writing: list[asyncio.Future] = []
    try:
        await wait_for(workers["a"], lambda: a.events("stream_elected"), "node a elected")
        workers["b"] = b.start()
        await wait_for(workers["b"], lambda: b.events("stream_standby"), "node b standing by")
        cpu_before, watched_from = cpu_s(pid(workers["b"])), time.monotonic()
        await wait_for(workers["a"], lambda: _committed(workers["a"]) >= 3, "node a's first commits")
        await asyncio.sleep(max(0.0, 5.0 - (time.monotonic() - watched_from)))  # a window the CPU clock can measure
        result.note(
            f"node b stood by at {100 * (cpu_s(pid(workers['b'])) - cpu_before) / (time.monotonic() - watched_from):.1f} % of a core "
            "while node a caught up"
        )
        await _take_over(result, "during the catch-up", workers, b, kill_name="a")
        await _restart_as_standby(workers, "a", a)
        rates = pace(summary, replay_s * hours)
        writing = [_replay(last_hour, a.watch, rates, 1), _replay(ctx.root / "corpus-hour-b", b.watch, rates, 2)]
        cpu_before, watched_from = cpu_s(pid(workers["a"])), time.monotonic()
        await asyncio.sleep(replay_s / 3)
        result.note(
            f"node a stood by at {100 * (cpu_s(pid(workers['a'])) - cpu_before) / (time.monotonic() - watched_from):.1f} % of a core "
            f"while both nodes appended {sum(rates.values()):.0f} lines/s"
        )
        result.check(
            "a restarted standby publishes nothing", _committed(workers["a"]) == 0, f"{_committed(workers['a'])} commits"
        )
        await _take_over(result, "while both nodes append", workers, a, kill_name="b")
        await _restart_as_standby(workers, "b", b)
        os.killpg(pid(workers["a"]), signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            await wait_for(workers["b"], lambda: _committed(workers["b"]) >= 1, "node b's first commit while node a is frozen")
            result.note(f"node b published {time.monotonic() - frozen_at:.1f}s after node a was frozen")
            await asyncio.sleep(max(0.0, frozen_s - (time.monotonic() - frozen_at)))
        finally:
            os.killpg(pid(workers["a"]), signal.SIGCONT)
        code = await stopped_by_itself(workers["a"], WAIT_S)
        result.check("the thawed former active stops by itself, non-zero", code not in (None, 0), f"exit {code}")
        reasons = [e.get("reason", "") for e in a.events("stream_demoted")] + [
            e.get("error", "") for e in a.events("producer_fenced")
        ]
        result.note(f"node a, thawed, stopped with exit {code}: {reasons[-1] if reasons else 'no demotion or fencing line'}")
        await _restart_as_standby(workers, "a", a)
        await asyncio.gather(*writing)
        await wait_for(workers["b"], lambda: caught_up(workers["b"], b.watch), "node b to catch up")
        shutil.copytree(last_hour, ctx.root / "corpus-all", dirs_exist_ok=True)
        shutil.copytree(earlier, ctx.root / "corpus-all", dirs_exist_ok=True)
        await _stream_verdict(result, ctx.bootstrap, data_topics(a.env), ctx.root / "corpus-all", workers)
    finally:
        for future in writing:
            future.cancel()
        for worker in workers.values():
            await asyncio.to_thread(worker.stop)
    return result


async def stream_cut_off(ctx: DrillContext, *, hours: int = 2, lines_per_hour: int = 8000, cut_s: float = 20.0) -> DrillResult:
    """``exactly_once``, ``STREAM_ID``: the active cut off from the broker alone. On a broker of the
    drill's own, node a reaches the broker only through a TCP proxy (a listener that advertises the
    proxy's port), node b directly. The proxy is closed for ``cut_s`` while both nodes write the next
    hour: the standby takes the stream over; when the proxy opens again the former active stops by
    itself (its producer fenced, or the group's verdict) and its restart stands by. A
    ``read_committed`` reader sees every line id once, as the same event, in file order."""
    result = DrillResult(19, "one stream from two nodes: the active cut off from the broker", variant="b")
    if exactly_once_only(ctx, result):
        return result
    port = free_low_port()
    proxied = ProxiedListener(free_low_port(exclude={port}), free_low_port(exclude={port, port + 1}))
    broker = LocalKafka(
        ctx.root / "kafka", port=port, controller_port=free_low_port(exclude={port, *vars(proxied).values()}), proxied=proxied
    )
    await asyncio.to_thread(broker.start)
    proxy = TcpProxy(proxied.advertised_port, proxied.port)
    await proxy.restore()
    own = ctx.on(broker)
    summary = corpus(ctx.root / "corpus", hours=hours, lines_per_hour=lines_per_hour)
    earlier, last_hour = split_last_hour(Path(summary.root), ctx.root / "corpus-before", ctx.root / "corpus-hour")
    stream = {"STREAM_ID": f"{ctx.prefix.rstrip('.')}-stream", "READ_BUDGET_BYTES": "65536", "TXN_MAX_MS": "100"}
    a = own.sidecar("a", NODE_ID=f"{stream['STREAM_ID']}-a", KAFKA_BOOTSTRAP=proxy.address, **stream)
    b = own.sidecar("b", NODE_ID=f"{stream['STREAM_ID']}-b", **stream)
    shutil.copytree(earlier, a.watch, dirs_exist_ok=True)
    second_node_tree(earlier, b.watch)
    workers = {"a": a.start()}
    try:
        await wait_for(workers["a"], lambda: a.events("stream_elected"), "node a elected")
        workers["b"] = b.start()
        await wait_for(workers["b"], lambda: b.events("stream_standby"), "node b standing by")
        await wait_for(workers["a"], lambda: caught_up(workers["a"], a.watch), "node a's catch-up")
        await proxy.cut()
        cut_at = time.monotonic()
        shutil.copytree(last_hour, a.watch, dirs_exist_ok=True)
        second_node_tree(last_hour, b.watch)
        await wait_for(workers["b"], lambda: b.events("startup"), "node b taking the stream over")
        took = time.monotonic() - cut_at
        result.check("node b takes the stream over within 15 s of the cut", took < 15.0, f"{took:.1f}s")
        result.note(f"node b took the stream over {took:.1f}s after node a was cut off")
        await asyncio.sleep(max(0.0, cut_s - (time.monotonic() - cut_at)))
        await proxy.restore()
        code = await stopped_by_itself(workers["a"], WAIT_S)
        result.check(
            "the cut-off former active stops by itself once it reaches the broker, non-zero",
            code not in (None, 0),
            f"exit {code}",
        )
        why = [e.get("reason", "") for e in a.events("stream_demoted")] + [
            e.get("error", "") for e in a.events("producer_fenced")
        ]
        result.note(f"node a, reconnected, stopped with exit {code}: {why[-1] if why else 'no demotion or fencing line'}")
        if code is not None:
            await _restart_as_standby(workers, "a", a)
        await wait_for(workers["b"], lambda: caught_up(workers["b"], b.watch), "node b to catch up")
        await _stream_verdict(result, broker.bootstrap, data_topics(a.env), a.watch, workers)
    finally:
        for worker in workers.values():
            await asyncio.to_thread(worker.stop)
        await proxy.cut()
        await asyncio.to_thread(broker.stop)
    return result


async def stream_stalls(
    ctx: DrillContext,
    *,
    lines_per_hour: int = 36_000,
    lag_s: float = 10.0,
    settle_s: float = 10.0,
    stall_s: float = 40.0,
    both_s: float = 25.0,
) -> DrillResult:
    """``exactly_once``, ``STREAM_ID``: nodes that stall. Both nodes write one hour live, blocks 5
    lines apart at ``lines_per_hour`` a table, so ``block_time`` advances a second a second, every
    line's ``local_time`` the moment it is appended; a ``read_committed`` reader notes each record's
    publish lag.

    (b) Node a (the active's) stops appending for ``stall_s`` while b goes on: the stream is handed
    to b within ``lag_s`` (``STREAM_YIELD_LAG_S``) + 10 s and its publish lag comes back under 2 s;
    node a stops by itself, its restart (as systemd's) stands by, and once its node resumes (writing
    at once what it missed) it gets no stream back while both append. (e) Both nodes stall for
    ``both_s`` (longer than the lag setting): no election; then node a's resumes alone: b yields to
    it within ``lag_s`` + 10 s, once, and the stream goes on from a. Every line id once, the same
    event, in file order per partition; each sidecar elected once."""
    result = DrillResult(19, "one stream from two nodes: the active's node stalls, then both", variant="c")
    if exactly_once_only(ctx, result):
        return result
    per_table = {spec.dir_name: lines_per_hour for spec in TABLES}
    summary = corpus(ctx.root / "corpus", hours=1, lines_per_hour=per_table, lines_per_block=dict.fromkeys(per_table, 5))
    stream = {
        "STREAM_ID": f"{ctx.prefix.rstrip('.')}-stream",
        "STREAM_YIELD_LAG_S": f"{lag_s:g}",
        "READ_BUDGET_BYTES": "65536",
        "TXN_MAX_MS": "100",
    }
    a, b = (ctx.sidecar(name, NODE_ID=f"{stream['STREAM_ID']}-{name}", **stream) for name in ("a", "b"))
    rate = lines_per_hour / 3600.0
    nodes = {"a": LiveNode(Path(summary.root), a.watch, rate), "b": LiveNode(Path(summary.root), b.watch, rate)}
    sidecars = {"a": a, "b": b}
    workers: dict[str, WorkerProcess] = {}
    lag = StreamLag(ctx.bootstrap, data_topics(a.env))
    for node in nodes.values():
        node.start()
    try:
        await asyncio.sleep(1.0)  # the nodes' first lines
        workers["a"] = a.start()
        await wait_for(workers["a"], lambda: a.events("startup"), "node a elected and publishing")
        workers["b"] = b.start()
        await wait_for(workers["b"], lambda: b.events("stream_standby"), "node b standing by")
        lag.start()
        cpu_before, watched_from = cpu_s(pid(workers["b"])), time.monotonic()
        await asyncio.sleep(settle_s)
        result.note(
            f"node b stood by at {100 * (cpu_s(pid(workers['b'])) - cpu_before) / (time.monotonic() - watched_from):.1f} % "
            f"of a core while both nodes appended {3 * rate:.0f} lines/s"
        )
        result.check("two healthy nodes: node b is not elected", not b.events("stream_elected"), str(b.events("stream_elected")))

        nodes["a"].stall()
        stalled_at = time.time()
        await _yields_to(result, f"node a's node stalled {stall_s:.0f}s", sidecars, workers, lag, "a", stalled_at, lag_s)
        await asyncio.sleep(max(0.0, stall_s - (time.time() - stalled_at)))
        nodes["a"].resume(catching_up_with=nodes["b"])
        await asyncio.sleep(lag_s + settle_s)  # past the lag setting and the yield's 5 s
        result.check(
            "node a's node resumed and level with b's: no switch back",
            (role(a), role(b)) == ("standby", "active") and len(a.events("stream_elected")) == 1,
            f"roles a {role(a)}, b {role(b)}; node a elected {len(a.events('stream_elected'))} times",
        )

        for node in nodes.values():
            node.stall()
        elected = {name: len(sidecar.events("stream_elected")) for name, sidecar in sidecars.items()}
        await asyncio.sleep(both_s)
        result.check(
            f"both nodes stalled for {both_s:.0f}s: nobody elected, nobody yields",
            {name: len(sidecar.events("stream_elected")) for name, sidecar in sidecars.items()} == elected
            and not b.events("stream_yielding")
            and role(b) == "active",
            f"elections {elected}, node b {role(b)}",
        )
        nodes["a"].resume()
        await _yields_to(result, "both nodes stalled, node a's resumed", sidecars, workers, lag, "b", time.time(), lag_s)
        nodes["b"].resume(catching_up_with=nodes["a"])
        await asyncio.sleep(settle_s)
        counts = {name: len(sidecar.events("stream_elected")) for name, sidecar in sidecars.items()}
        result.check("no leadership storm: node a elected twice, node b once", counts == {"a": 2, "b": 1}, str(counts))

        for node in nodes.values():
            await node.stop()
        nodes["a"].write_up_to(nodes["b"])
        nodes["b"].write_up_to(nodes["a"])
        await wait_for(workers["a"], lambda: caught_up(workers["a"], a.watch), "node a to catch up")
        await _stream_verdict(result, ctx.bootstrap, data_topics(a.env), a.watch, workers)
    finally:
        for node in nodes.values():
            await node.stop()
        if lag.is_alive():
            await asyncio.to_thread(lag.stop)
        for worker in workers.values():
            await asyncio.to_thread(worker.stop)
    return result


async def _stream_verdict(
    result: DrillResult, bootstrap: str, topics: Mapping[str, str], tree: Path, workers: dict[str, WorkerProcess]
) -> None:
    """How drills 19-19c end: a ``read_committed`` reader sees every line id of ``tree`` once, as
    the same event, in file order per partition, and no more records than lines; then both nodes'
    workers stop cleanly."""
    report = await asyncio.to_thread(stream_report, bootstrap, topics, tree)
    result.lost, result.duplicates = len(report.missing), len(report.duplicates)
    result.check("every line id once, the same event, in file order per partition", report.ok, report.summary())
    result.check("as many records as lines", report.records == report.expected, report.summary())
    for name in ("a", "b"):
        await stop(workers[name], result, f"node {name}")


async def _yields_to(
    result: DrillResult,
    when: str,
    sidecars: dict[str, Sidecar],
    workers: dict[str, WorkerProcess],
    lag: StreamLag,
    active: str,
    stalled_at: float,
    lag_s: float,
) -> None:
    """The ``active`` sidecar's node stalled at ``stalled_at`` while the other's appends: the other
    publishes within ``lag_s`` + 10 s, the stream's publish lag comes back under 2 s, the yielded
    one stops by itself and its restart stands by."""
    other = "b" if active == "a" else "a"
    started_before = len(sidecars[other].events("startup"))
    await wait_for(
        workers[other], lambda: len(sidecars[other].events("startup")) > started_before, f"node {other} taking over", lag_s + 60
    )
    handed_over = time.time()
    took = handed_over - stalled_at
    result.check(f"{when}: node {other} publishes within {lag_s:.0f}s + 10s", took <= lag_s + 10.0, f"{took:.1f}s")
    yielded = sidecars[active].events("stream_yielding")
    result.note(
        f"{when}: node {other} took the stream over {took:.1f}s after the stall "
        f"({yielded[-1]['reason'] if yielded else 'no stream_yielding line'})"
    )
    code = await stopped_by_itself(workers[active], WAIT_S)
    result.check(f"{when}: node {active} stops by itself after yielding, non-zero", code not in (None, 0), f"exit {code}")
    if code is not None:
        await _restart_as_standby(workers, active, sidecars[active])
    await asyncio.sleep(max(0.0, handed_over + 20.0 - time.time()))
    back = lag.back_under(handed_over, time.time(), 2.0)
    result.check(
        f"{when}: the stream's publish lag back under 2 s within 20 s of the handover",
        back is not None,
        f"worst lag since the handover {lag.worst(handed_over, time.time()):.1f}s",
    )
    if back is not None:
        result.note(
            f"{when}: publish lag back under 2 s {back:.1f}s after the handover "
            f"(worst {lag.worst(stalled_at, time.time()):.1f}s, over the stall)"
        )


async def _take_over(result: DrillResult, when: str, workers: dict, standby: Sidecar, *, kill_name: str) -> None:
    """SIGKILL the active; check that the standby runs from the stream's position within 15 s (its
    tailers built after the handover: it publishes whatever its node has beyond that position)."""
    other = "b" if kill_name == "a" else "a"
    started_before = len(standby.events("startup"))
    kill(workers[kill_name])
    killed = time.monotonic()
    await wait_for(workers[other], lambda: len(standby.events("startup")) > started_before, f"node {other} taking over {when}")
    took = time.monotonic() - killed
    result.check(
        f"node {kill_name} killed {when}: node {other} publishes from the stream's position within 15 s",
        took < 15.0,
        f"{took:.1f}s",
    )
    result.note(f"node {kill_name} killed {when}: node {other} took the stream over {took:.1f}s later")


async def _restart_as_standby(workers: dict, name: str, sidecar: Sidecar) -> None:
    """Start a stopped sidecar of the stream again, as systemd would, and wait until it stands by."""
    before = len(sidecar.events("stream_standby"))
    workers[name] = sidecar.start()
    await wait_for(workers[name], lambda: len(sidecar.events("stream_standby")) > before, f"node {name}, restarted, standing by")


def _replay(root: Path, watch: Path, rates: dict[str, float], seed: int) -> asyncio.Future:
    """A node writing ``root``'s files into ``watch`` at ``rates`` lines a second per table."""
    return asyncio.ensure_future(
        replay(root, watch, chunk_bytes=16 * 1024, cadence_s=0.1, lines_per_s=rates, progress=False, seed=seed)
    )


# ---------------------------------------------------------------------------- the catalogue


@dataclass(frozen=True)
class Drill:
    """One drill as ``scripts/drills.py`` runs it: its function, its full-scale arguments and the
    arguments that make it this drill at the CI scale too (the function's defaults otherwise)."""

    number: int
    run: Callable[..., Awaitable[DrillResult]]
    full: dict[str, Any] = field(default_factory=dict)
    stops_broker: bool = False
    small: dict[str, Any] = field(default_factory=dict)


DRILLS: tuple[Drill, ...] = (
    Drill(1, sigkill_mid_tail, dict(kills=5, hours=3, lines_per_hour=60_000, replay_s=300.0, max_gap_s=20.0)),
    Drill(2, broker_down, dict(outage_s=90.0), stops_broker=True),
    Drill(2, broker_down, dict(outage_s=90.0, during="catch-up", lines_per_hour=150_000), stops_broker=True),
    Drill(2, sigkill_during_outage, dict(outage_s=30.0, lines_per_hour=150_000), stops_broker=True),
    Drill(
        2,
        sigkill_during_outage,
        dict(outage_s=10.0, kills=3, lines_per_hour=225_000),
        stops_broker=True,
        small=dict(outage_s=5.0, kills=3, lines_per_hour=20_000),
    ),
    Drill(3, broker_absent_at_start, dict(absent_s=30.0), stops_broker=True),
    Drill(4, local_state_lost, dict(hours=3, lines_per_hour=100_000)),
    Drill(5, changelog_lost, dict(hours=2, lines_per_hour=20_000)),
    Drill(6, truncated_or_replaced, dict(lines_per_hour=60_000)),
    Drill(7, deleted_before_published, dict(lines_per_hour=20_000)),
    Drill(8, hostile_lines, dict(examples=1000, max_line_bytes=8 * MiB, lines_per_hour=20_000)),
    Drill(9, backup_target_unwritable, dict(hours=3, lines_per_hour=20_000)),
    Drill(9, sigterm_while_backup_fails),
    Drill(9, object_store_refusing, dict(hours=3, lines_per_hour=20_000)),
    Drill(10, sigterm_during_catch_up, dict(hours=2, lines_per_hour=300_000)),
    Drill(11, two_nodes, dict(hours=2, lines_per_hour=40_000, replay_s=120.0)),
    Drill(12, hostile_tree, dict(programs=8, steps=80)),
    Drill(13, state_disk_full, dict(hours=3, lines_per_hour=60_000, replay_s=180.0, full_s=60.0)),
    Drill(14, broker_frozen, dict(frozen_s=90.0, lines_per_hour=150_000), stops_broker=True),
    Drill(15, topic_deleted, dict(auto_create=True, lines_per_hour=20_000, replay_s=120.0)),
    Drill(15, topic_deleted, dict(auto_create=False, lines_per_hour=20_000, replay_s=120.0), small=dict(auto_create=False)),
    Drill(15, topic_deleted, dict(at_once=True, lines_per_hour=20_000, replay_s=120.0), small=dict(at_once=True)),
    Drill(16, sigkill_during_commit, dict(kills=10, hours=3, lines_per_hour=100_000)),
    Drill(17, second_worker_same_node_id, dict(hours=3, lines_per_hour=40_000)),
    Drill(
        18,
        broker_frozen_past_txn_timeout,
        dict(txn_timeout_ms=60_000, frozen_s=90.0, lines_per_hour=150_000, recovery_bound_s=10.0),
        stops_broker=True,
    ),
    Drill(19, stream_failover, dict(hours=3, lines_per_hour=60_000, replay_s=180.0, frozen_s=60.0)),
    Drill(19, stream_cut_off, dict(hours=3, lines_per_hour=60_000, cut_s=60.0)),
    Drill(19, stream_stalls, dict(lines_per_hour=120_000, lag_s=30.0, settle_s=20.0, stall_s=180.0, both_s=60.0)),
)
