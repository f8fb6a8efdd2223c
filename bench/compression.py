"""Compression codecs and levels on the native engine: the same backlog caught up once per setting.

One worker per setting (``SIDECAR_ENGINE=native``, ``PRODUCER_COMPRESSION`` and
``PRODUCER_COMPRESSION_LEVEL`` on top of the run's ``--set``, in the run's first delivery mode), each
on fresh topics, each reading the same ``--compression-mb`` backlog (hard links, written once). Per
setting: the worker's CPU per line
over the catch-up (all its threads: librdkafka compresses in its own), the bytes the broker stored
for the data topics (the ``.log`` segments of their partitions under the run's broker's
``log.dirs``: the topics keep what the producer sent, ``compression.type=producer``, so this is what
crossed the wire, batch and record overhead included), the ratio of the backlog's raw bytes to them,
and the broker's CPU seconds over the same window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import catchup, engines, kafka
from bench.context import RunContext, ScenarioResult
from bench.corpus import link_corpus, write_backlog
from bench.worker import BenchError, SidecarWorker, settings_summary
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import CorpusSummary


@dataclass(frozen=True)
class Codec:
    """One setting measured: ``level`` -1 is the codec's default."""

    name: str
    level: int = -1

    @property
    def label(self) -> str:
        """``zstd-6``, ``lz4``: names the setting in the table and in its topics' prefix."""
        return self.name if self.level == -1 else f"{self.name}-{self.level}"


CODECS = (Codec("zstd", 1), Codec("zstd", 3), Codec("zstd", 6), Codec("zstd", 9), Codec("lz4"), Codec("none"))
DEFAULT = Codec("zstd", 3)
"""The sidecar's default: zstd at the codec's default level (``-1``), which is 3."""


def run(ctx: RunContext) -> ScenarioResult:
    missing = engines.native_missing()
    if missing is not None:
        raise BenchError(f"the compression scenario measures the native engine: {missing}")
    log_dir = ctx.broker.log_dir
    if log_dir is None:
        raise BenchError("the compression scenario reads the broker's log.dirs: run it without --bootstrap")
    result = ScenarioResult("compression (native)")
    backlog = _backlog(ctx)
    settings: dict[str, dict[str, Any]] = {}
    for codec in CODECS:
        print(f"  {codec.label} ...", flush=True)
        settings[codec.label] = _catch_up(ctx, codec, backlog, log_dir)
    result.details = {"backlog": {"bytes": backlog.bytes, "lines": backlog.lines}, "settings": settings}
    result.row("backlog", f"{backlog.bytes / 1e6:,.0f} MB, {backlog.lines:,} lines, caught up once per setting")
    for label, figures in settings.items():
        result.row(f"{label} (the default)" if label == DEFAULT.label else label, setting_summary(figures))
    return result


def setting_summary(figures: dict[str, Any]) -> str:
    """One setting's figures in a table cell."""
    complete = "" if figures["complete"] else f"; INCOMPLETE: {figures['topic_messages']} on the topics"
    return (
        f"{figures['cpu_us_per_line']:.2f} CPU µs/line, {figures['log_bytes'] / 1e6:,.1f} MB on the broker "
        f"(ratio {figures['compression_ratio']:.2f}), broker {figures['broker_cpu_s']:.1f} CPU s, "
        f"{figures['lines_per_s']:,.0f} lines/s{complete}"
    )


def log_bytes(log_dir: Path, topics: Iterable[str]) -> int:
    """Bytes of the log segments (``*.log``) of every partition of ``topics`` under ``log_dir``.

    Kafka keeps partition ``n`` of topic ``t`` in ``<log_dir>/t-n/``; its index files are
    preallocated and say nothing of the data, so only the segments count.
    """
    total = 0
    for topic in topics:
        for partition in log_dir.glob(f"{topic}-*"):
            if partition.name.rpartition("-")[0] == topic and partition.name.rpartition("-")[2].isdigit():
                total += sum(segment.stat().st_size for segment in partition.glob("*.log"))
    return total


def _backlog(ctx: RunContext) -> CorpusSummary:
    megabytes = ctx.options.compression_mb
    print(f"  writing a {megabytes:,.0f} MB backlog ({ctx.options.backlog_hours} hour(s) per table) ...", flush=True)
    out = ctx.scenario_dir("compression-backlog")
    return write_backlog(out, megabytes=megabytes, hours=ctx.options.backlog_hours, seed=ctx.options.seed)


def _catch_up(ctx: RunContext, codec: Codec, backlog: CorpusSummary, log_dir: Path) -> dict[str, Any]:
    settings = {
        **ctx.worker_settings(),
        "SIDECAR_ENGINE": "native",
        "PRODUCER_COMPRESSION": codec.name,
        "PRODUCER_COMPRESSION_LEVEL": str(codec.level),
    }
    worker = SidecarWorker(
        ctx.scenario_dir(f"compression-{codec.label}"),
        ctx.broker.bootstrap,
        ctx.topic_prefix(f"compression-{codec.label}"),
        **settings,
    )
    link_corpus(backlog, worker.watch)
    worker.start()
    try:
        measured = catchup.measure(worker, backlog.files, ctx)
    finally:
        worker.stop()
    topics = {spec.dir_name: worker.topic(spec.topic_env) for spec in TABLES}
    counts = kafka.records_on(ctx.broker.bootstrap, topics, settings["DELIVERY"])
    stored = log_bytes(log_dir, topics.values())
    if stored == 0:
        raise BenchError(f"{codec.label}: no log segments of the data topics under {log_dir}")
    cpu_s = measured["cpu"]["cpu_s"]
    return {
        "settings": settings_summary(worker.settings),
        "seconds": measured["seconds"],
        "lines_per_s": round(backlog.lines / measured["seconds"]),
        "cpu_us_per_line": round(cpu_s["sidecar"] / backlog.lines * 1e6, 3),
        "log_bytes": stored,
        "compression_ratio": round(backlog.bytes / stored, 3),
        "broker_cpu_s": cpu_s.get("broker", 0.0),
        "peak_rss_kib": measured["peak_rss_kib"],
        "topic_messages": counts,
        "complete": counts == catchup.lines_by_table(backlog.files),
    }
