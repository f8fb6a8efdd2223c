"""A stream's standby sealing its own node's finished files (issue 28): the CPU its
``StandbyFiles`` room spends on a finished hour file of ``--seal-large-mb`` MB (its sha256 and
edge lines, in slices, as the standby's loop does), run in this process on a file just
written (in the page cache, as the node's are), and what that is at the node's output rate.
Copying the file to the backup sink is the backup scenario's figure.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import logging
import os
import time

from bench import targets
from bench.context import RunContext, ScenarioResult
from bench.corpus import START, write_table_hour
from bench.worker import BenchError
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.standby_files import StandbyFiles
from hyperdata_sidecar.tools.shapes import ORDER_STATUSES

NEXT_HOUR_MB = 0.05


class _Handed:
    """The rotation topic, as the room hands a standby seal to it."""

    def __init__(self) -> None:
        self.seals: list[SealManifest] = []

    async def rotate_standby(self, manifest: SealManifest) -> None:
        self.seals.append(manifest)


def run(ctx: RunContext) -> ScenarioResult:
    result = ScenarioResult("standby-seal")
    root = ctx.scenario_dir("standby-seal")
    watch = root / "watch"
    size_mb = ctx.options.seal_large_mb
    print(f"  writing a {size_mb:,.0f} MB hour file and the next hour's ...", flush=True)
    finished = write_table_hour(watch, ORDER_STATUSES, megabytes=size_mb, seed=ctx.options.seed).files[0]
    start = START + datetime.timedelta(hours=1)
    write_table_hour(watch, ORDER_STATUSES, megabytes=NEXT_HOUR_MB, seed=ctx.options.seed, start=start)
    settings = load_settings({"WATCH_DIR": str(watch), "NODE_ID": "bench-standby", "SEAL_GRACE_MS": "0"})
    handed = _Handed()
    files = StandbyFiles(settings, {}, {}, handed, EventLog(logging.getLogger("bench.standby_seal")))  # type: ignore[arg-type]

    async def seal() -> int:
        looks = 0
        while not handed.seals:
            await files.tick()
            looks += 1
        return looks

    cpu_before, wall_before = time.process_time(), time.monotonic()
    looks = asyncio.run(seal())
    cpu, wall = time.process_time() - cpu_before, time.monotonic() - wall_before
    [manifest] = handed.seals
    with open(watch / finished.relpath, "rb") as f:
        expected = hashlib.file_digest(f, "sha256").hexdigest()
    if (manifest.path, manifest.size, manifest.sha256) != (finished.relpath, os.path.getsize(watch / finished.relpath), expected):
        raise BenchError(f"the standby's seal of {finished.relpath} does not describe the file: {manifest}")
    gib = manifest.size / 2**30
    share = 100 * cpu / manifest.size * targets.NODE_BYTES_PER_S
    result.details = {"size": manifest.size, "looks": looks, "cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    result.row(
        f"standby: CPU to seal a finished {manifest.size / 1e6:,.0f} MB hour file",
        f"{cpu / gib:.2f} s per GiB ({looks} looks, {wall:.1f} s)",
    )
    result.row(
        f"standby: sealing its node's files at {targets.NODE_BYTES_PER_S / 1e6:g} MB/s of output, on average",
        f"{share:.2f}% of one core",
    )
    return result
