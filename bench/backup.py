"""Backups: what backing up one large hour file costs, and what a backup running in the worker costs
the live tail.

1. **One file through the sink.** A file of ``--backup-mb`` is written (random bytes, hashed as they
   are written, flushed to disk and dropped from the page cache, all outside the timed section), then
   :mod:`bench.sink_copy` backs it up in a process of its own, through the sink the scenario's
   settings name (``BACKUP_SINK=local`` into the scenario's directory unless ``--backup-set`` says
   otherwise): wall time, CPU, peak RSS above the process's RSS before the backup, and the bytes it
   read (``/proc/<pid>/io``: ``read_bytes`` from the disk, ``rchar`` through its calls) and wrote.
   Without ``--backup-set``, the same file is then uploaded through ``BACKUP_SINK=object_store``
   to a moto S3 server on this machine, measured the same way.
2. **The live tail while a backup runs.** The ``live`` scenario (:mod:`bench.live`) twice, back to
   back on the same corpus, for the first engine and delivery mode of the run: without a backup
   (``BACKUP_SINK=none``), then with the worker's own sink set as in 1, so the node snapshot that
   lands halfway is backed up by the worker while the tap appends. Append→receive p99 and the worker's CPU of both runs, and
   how much of the snapshot's backup fell within the tap.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench import live, targets
from bench.context import RunContext, ScenarioResult
from bench.worker import REPO, BenchError, epoch_of
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.devs3 import MotoS3, credentials_env
from hyperdata_sidecar.tools.shapes import ORDER_STATUSES

RELPATH = HourFile(ORDER_STATUSES, "20260610", "13").relpath
BLOCK = 16 * 1024 * 1024
COPY_TIMEOUT_S = 3600.0
S3_BUCKET = "bench"


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("backup")
    root = ctx.scenario_dir("backup")
    size = int(ctx.options.backup_mb * 1024 * 1024)
    sink_settings = sink_settings_for(ctx, root)
    print(f"  writing a {size / 2**20:,.0f} MiB file to back up ...", flush=True)
    source, digest = write_source(root / "watch" / RELPATH, size)
    try:
        copied = back_up_in_a_process(root, source, digest, sink_settings)
        remove_local_copy(copied["ref"])  # the disk the live runs share need not hold it
        result.details["copy"] = copied
        report_copy(result, copied, size)
        if not ctx.options.backup_settings:
            uploaded = back_up_to_a_local_s3_server(root, source, digest)
            result.details["copy_object_store"] = uploaded
            report_copy(result, uploaded, size)
    finally:
        source.unlink()
    engine, delivery = ctx.engines[0], ctx.deliveries[0]
    without = live.run(ctx, engine, delivery, "no-backup", {"BACKUP_SINK": "none"})
    with_backup = live.run(ctx, engine, delivery, "backup", sink_settings)
    result.details["live"] = {"without": without.details, "with": with_backup.details}
    report_live(result, without.details, with_backup.details)
    return result


def sink_settings_for(ctx: RunContext, root: Path) -> dict[str, str]:
    """The sink's settings: the local sink into the scenario's directory, under ``--backup-set``'s."""
    return {"BACKUP_SINK": "local", "BACKUP_DIR": str(root / "backups"), **ctx.options.backup_settings}


def write_source(path: Path, size: int) -> tuple[Path, str]:
    """``size`` random bytes at ``path`` (one random block over and over), on disk and out of the page
    cache, so the backup reads them from the disk; (the path, their sha256)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    block = os.urandom(BLOCK)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for offset in range(0, size, BLOCK):
            chunk = block[: min(BLOCK, size - offset)]
            f.write(chunk)
            digest.update(chunk)
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path, digest.hexdigest()


def back_up_in_a_process(root: Path, source: Path, digest: str, settings: dict[str, str]) -> dict[str, Any]:
    """Run :mod:`bench.sink_copy` on ``source`` with ``settings``; what it measured."""
    out = root / "sink_copy.json"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(root)),
        "PYTHONPATH": str(REPO),
        "WATCH_DIR": str(root / "watch"),
        **settings,
    }
    command = [sys.executable, "-m", "bench.sink_copy", str(source), RELPATH, digest, "--out", str(out)]
    # cwd is the scenario's directory: no faust.ini of the repo or the shell is picked up.
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=COPY_TIMEOUT_S)
    if done.returncode != 0:
        raise BenchError(f"the backup process failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text())


def back_up_to_a_local_s3_server(root: Path, source: Path, digest: str) -> dict[str, Any]:
    """The same file through ``BACKUP_SINK=object_store`` into a moto S3 server on this machine
    (:mod:`hyperdata_sidecar.devs3`), the source dropped from the page cache again first. The server
    keeps the object in its memory and spends CPU of its own on these 2 cores: the figures are the
    sink's side of an upload, not a store's."""
    with open(source, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    server = MotoS3(root)
    server.start()
    try:
        server.client().create_bucket(Bucket=S3_BUCKET)
        settings = {
            "BACKUP_SINK": "object_store",
            "BACKUP_URL": f"s3://{S3_BUCKET}/backups",
            "BACKUP_ENDPOINT": server.endpoint,
            "BACKUP_PATH_STYLE": "true",
            **credentials_env(),
        }
        print("  uploading it to a local S3 server (moto) ...", flush=True)
        return back_up_in_a_process(root, source, digest, settings)
    finally:
        server.stop()


def remove_local_copy(ref: str) -> None:
    """Remove the copy a ``file://`` ref names (the local sink's); another sink's copy stays where it is."""
    if ref.startswith("file://"):
        Path(urllib.request.url2pathname(urllib.parse.urlparse(ref).path)).unlink(missing_ok=True)


def report_copy(result: ScenarioResult, copied: dict[str, Any], size: int) -> None:
    mib = size / 2**20
    wall, io = copied["wall_s"], copied["io"]
    cpu = copied["cpu_user_s"] + copied["cpu_system_s"]
    label = f"{mib:,.0f} MiB through the {copied['sink']} sink"
    result.row(f"{label}: wall time", f"{wall:.1f} s ({mib / wall:,.0f} MiB/s)" if wall > 0 else f"{wall:.1f} s")
    result.row(f"{label}: how", copied["via"] or "(the sink does not say)")
    result.row(f"{label}: CPU", f"{cpu:.1f} s (user {copied['cpu_user_s']:.1f}, system {copied['cpu_system_s']:.1f})")
    growth_mb = (copied["peak_rss_kib"] - copied["idle_rss_kib"]) / 1024
    result.row(
        f"{label}: peak RSS above the process before the backup",
        f"≤ {growth_mb:,.1f} MiB",
        f"< {targets.BACKUP_RSS_MB:g} MB",
        growth_mb * 2**20 < targets.BACKUP_RSS_MB * 1e6,
    )
    result.row(
        f"{label}: read from the disk / through its calls (read_bytes / rchar)",
        f"{io['read_bytes'] / size:.2f}× / {io['rchar'] / size:.2f}× the file",
    )
    result.row(f"{label}: written (write_bytes / wchar)", f"{io['write_bytes'] / size:.2f}× / {io['wchar'] / size:.2f}× the file")


def report_live(result: ScenarioResult, without: dict[str, Any], with_backup: dict[str, Any]) -> None:
    p99 = [run["latency"]["append_to_receive"]["p99_s"] for run in (without, with_backup)]
    cpu = [run["cpu_pct_of_one_core"]["sidecar"] for run in (without, with_backup)]
    rss = [(run["sidecar_peak_rss_kib"] or 0) / 1024 for run in (without, with_backup)]
    result.row(
        "live p99 append→receive, without / with a backup",
        f"{p99[0]:.3f} / {p99[1]:.3f} s",
        f"with ≤ {targets.BACKUP_LIVE_P99_RATIO:g}× without",
        p99[1] <= targets.BACKUP_LIVE_P99_RATIO * p99[0],
    )
    result.row("live sidecar CPU, without / with a backup", f"{cpu[0]:.0f}% / {cpu[1]:.0f}% of one core")
    result.row("live sidecar peak RSS, without / with a backup", f"{rss[0]:,.0f} / {rss[1]:,.0f} MiB")
    result.row("the snapshot's backup during the tap", overlap(with_backup))


def overlap(run: dict[str, Any]) -> str:
    """The worker's backup of the live run's snapshot: its size, its time, and how much of that time the tap ran."""
    backup = next((b for b in run["backups"] if not b.get("already_present")), None)
    if backup is None:
        return "none made: no backup ran during the live run (see the worker log)"
    ended = epoch_of(backup["time"])
    began = ended - backup["seconds"]
    tap_began, tap_ended = run["tap_window"]
    inside = max(0.0, min(ended, tap_ended) - max(began, tap_began))
    share = inside / backup["seconds"] if backup["seconds"] > 0 else 1.0
    return (
        f"{backup['size'] / 2**20:,.0f} MiB in {backup['seconds']:.1f} s via {backup.get('via') or '?'},"
        f" {100 * share:.0f}% of it while the tap ran"
    )
