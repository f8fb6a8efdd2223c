"""``python -m bench.sink_copy SOURCE RELPATH SHA256 --out FILE``: one backup of SOURCE through the
sink that ``BACKUP_SINK`` names, built from the environment's settings as the worker builds it, in a
process of its own so that its CPU, peak RSS and reads are the backup's alone. Writes what it
measured to FILE (JSON); exits 1 with the sink's one-line failure when the backup fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

from bench.procstat import io_counters, memory_kib
from hyperdata_sidecar.backup import BackupError, BackupProgress, make_sink
from hyperdata_sidecar.config import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sink_copy", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("relpath")
    parser.add_argument("sha256")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    settings = load_settings()
    sink = make_sink(settings.backup_sink, settings)
    pid = os.getpid()
    sink.progress = progress = BackupProgress(args.relpath, args.source.stat().st_size, time.monotonic())
    idle_rss_kib = memory_kib(pid)["VmRSS"]
    io_before, cpu_before, began = io_counters(pid), resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    try:
        ref = asyncio.run(sink.backup(args.source, relpath=args.relpath, sha256=args.sha256))
    except BackupError as failure:
        print(f"bench.sink_copy: the backup failed: {failure}", file=sys.stderr)
        return 1
    wall_s = time.monotonic() - began
    cpu, io_after = resource.getrusage(resource.RUSAGE_SELF), io_counters(pid)
    measured = {
        "sink": sink.name,
        "ref": ref,
        "via": progress.via,
        "bytes": progress.done_bytes,
        "wall_s": round(wall_s, 3),
        "cpu_user_s": round(cpu.ru_utime - cpu_before.ru_utime, 3),
        "cpu_system_s": round(cpu.ru_stime - cpu_before.ru_stime, 3),
        "idle_rss_kib": idle_rss_kib,
        "peak_rss_kib": memory_kib(pid)["VmHWM"],
        "io": {name: io_after[name] - io_before[name] for name in ("rchar", "read_bytes", "wchar", "write_bytes")},
    }
    args.out.write_text(json.dumps(measured, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
