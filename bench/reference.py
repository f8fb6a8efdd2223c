"""The reference: the catch-up backlog pushed to the same broker by kcat (librdkafka), the practical
ceiling for this machine; the catch-up figure is reported as a share of it.

kcat gets what the sidecar sends, as close as its command line allows: one message per line, keyed
by the same coin (the sidecar's own line inspection picks it, outside the timed section),
Kafka's murmur2 partitioner, zstd, acks=all, idempotence, the sidecar's linger and batch size (its
defaults, or what ``--set`` gave the run's workers), topics with
the contract's partitions. One kcat per table, the three at once, as the sidecar runs its three
tailers at once. kcat cannot vary headers per message, so each message carries three fixed headers
shaped like the sidecar's (``line_id``, ``source``, ``offset``): the same bytes, compressing better.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path

from bench import kafka, targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import write_backlog
from bench.engines import result_key
from bench.procstat import CpuWindow
from bench.worker import BenchError, topic_names
from hyperdata_sidecar.config import DEFAULTS
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.tools.generate import CorpusSummary, FileSummary
from hyperdata_sidecar.topics import load_contract, producer_max_request_size

KCAT_SETTINGS = (
    "compression.codec=zstd",
    "enable.idempotence=true",
    "acks=all",
    "partitioner=murmur2_random",  # Kafka's Java default for keyed records, as the sidecar computes it
    f"message.max.bytes={producer_max_request_size(load_contract())}",
)


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("reference (kcat)")
    kcat = shutil.which("kcat")
    if kcat is None:
        raise BenchError("kcat is not installed (scripts/bench.sh installs it: apt-get install -y kcat)")
    root = ctx.scenario_dir("reference")
    backlog = ctx.backlog
    if backlog is None:
        backlog = ctx.backlog = write_backlog(
            root / "backlog", megabytes=ctx.options.backlog_mb, hours=ctx.options.backlog_hours, seed=ctx.options.seed
        )
    print("  writing one keyed input file per table (coin<TAB>line), outside the timed section ...", flush=True)
    keyed = {
        table: _keyed_file(Path(backlog.root), [f for f in backlog.files if f.table == table], root / f"{table}.tsv")
        for table in sorted({f.table for f in backlog.files})
    }
    names = topic_names(ctx.topic_prefix("reference"))
    kafka.create_topics(ctx.broker.bootstrap, names)
    topics = {spec.dir_name: names[spec.topic_env] for spec in TABLES if spec.dir_name in keyed}
    cpu = CpuWindow({"broker": ctx.broker.pid} if ctx.broker.pid is not None else {})
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.start()
    began = time.monotonic()
    processes = {
        table: _start_kcat(kcat, ctx.broker.bootstrap, topics[table], path, root, table, backlog, kcat_settings(ctx))
        for table, (path, _lines) in keyed.items()
    }
    codes = {table: process.wait() for table, process in processes.items()}
    seconds = time.monotonic() - began
    cpu.stop()
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if any(codes.values()):
        raise BenchError(f"kcat failed: exit codes {codes}; see {root}/kcat-*.log")
    counts = kafka.message_counts(ctx.broker.bootstrap, topics)
    expected = {table: lines for table, (_path, lines) in keyed.items()}
    lines = sum(expected.values())
    kcat_cpu = (children_after.ru_utime + children_after.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
    lines_per_s = lines / seconds
    result.details = {
        "kcat_settings": list(kcat_settings(ctx)),
        "lines": lines,
        "bytes": backlog.bytes,
        "seconds": round(seconds, 3),
        "lines_per_s": round(lines_per_s),
        "mb_per_s": round(backlog.bytes / 1e6 / seconds, 1),
        "kcat_cpu_s": round(kcat_cpu, 2),
        "topic_messages": counts,
        "complete": counts == expected,
        "cpu": cpu.to_dict(),
        "kcat_version": kcat_version(),
    }
    result.row("wall time", f"{seconds:.1f} s")
    result.row("lines/s", f"{lines_per_s:,.0f}")
    result.row("MB/s", f"{backlog.bytes / 1e6 / seconds:,.1f}")
    result.row("kcat CPU s per million lines", f"{kcat_cpu / lines * 1e6:.1f}")
    if "broker" in cpu.pids:
        result.row("broker CPU share", f"{cpu.share('broker'):.0f}% of one core")
        result.row("broker CPU s per million lines", f"{cpu.cpu_s('broker') / lines * 1e6:.1f}")
    others = cpu.others_share(extra_cpu_s=kcat_cpu)
    result.row(
        "machine CPU (all processes)",
        f"{cpu.machine_share():.0f}% of 200%, of which other processes {others:.0f}%, stolen by the hypervisor {cpu.steal_share():.0f}%",
    )
    result.row("every line on the topics", "yes" if counts == expected else f"NO: {counts} of {expected}")
    result.details["catchup_ratio"] = {}  # by "<engine>/<delivery mode>"
    for engine in ctx.engines:
        for delivery in ctx.deliveries:
            catchup = ctx.results.get(result_key("catchup", engine, delivery))
            if catchup is None or catchup.error:
                continue
            ratio = catchup.details["lines_per_s"] / lines_per_s
            result.details["catchup_ratio"][f"{engine}/{delivery}"] = round(ratio, 3)
            goal = targets.ENGINE_TARGETS[engine].vs_kcat
            result.row(f"catch-up ({engine}, {delivery}) / kcat", f"{ratio:.2f}", str(goal), goal.met(ratio))
    return result


def kcat_version() -> str:
    """kcat's and librdkafka's versions, as ``kcat -V`` prints them."""
    try:
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    kcat = re.search(r"^Version (\S+)", out, re.MULTILINE)
    librdkafka = re.search(r"librdkafka (\S+)", out)
    if kcat is None:
        return "unknown"
    return f"kcat {kcat.group(1)}" + (f", librdkafka {librdkafka.group(1)}" if librdkafka else "")


def _keyed_file(corpus: Path, files: list[FileSummary], out: Path) -> tuple[Path, int]:
    """Write ``<coin>\\t<line>`` for every good line of ``files`` (hour order) to ``out``; (path, lines)."""
    inspect = partial(inspect_line, TABLE_BY_DIR[files[0].table])
    count = 0
    with open(out, "wb") as sink:
        for hour_file in files:
            with open(corpus / hour_file.relpath, "rb") as source:
                for line in source:
                    info = inspect(line.rstrip(b"\n"))
                    if type(info) is LineInfo:
                        sink.write(info.coin.encode() + b"\t" + line)
                        count += 1
    return out, count


def kcat_settings(ctx: RunContext) -> tuple[str, ...]:
    """kcat's producer settings: the fixed ones, and the sidecar's linger and batch size for this run."""
    worker = {**DEFAULTS, **ctx.options.worker_settings}
    return (*KCAT_SETTINGS, f"linger.ms={worker['PRODUCER_LINGER_MS']}", f"batch.size={worker['PRODUCER_BATCH_BYTES']}")


def _start_kcat(
    kcat: str,
    bootstrap: str,
    topic: str,
    keyed: Path,
    root: Path,
    table: str,
    backlog: CorpusSummary,
    settings: tuple[str, ...],
) -> subprocess.Popen:
    first = next(f for f in backlog.files if f.table == table)
    headers = (
        f"line_id={table}|{first.first_block}|0",
        f"source={first.relpath}",
        f"offset={first.size:010d}",
    )
    command = [kcat, "-P", "-q", "-b", bootstrap, "-t", topic, "-K", "\\t", "-l", str(keyed)]
    for setting in settings:
        command += ["-X", setting]
    for header in headers:
        command += ["-H", header]
    with open(root / f"kcat-{table}.log", "wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
