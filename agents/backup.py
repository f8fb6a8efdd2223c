"""The ``backup`` agent: copies each finalized file through the configured BackupSink, verified, with retries.

Results live in the ``sidecar-backups`` table (status ``ok`` / ``failed`` / ``disabled``, attempts,
last error). A failure is retried with backoff until it succeeds; only a source that no longer
exists is given up on. The source is only ever read.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, AsyncIterable

from hyperdata_sidecar.agents.rotations import manifests
from hyperdata_sidecar.backup import BackupError, NoBackupSink
from hyperdata_sidecar.core.seal import SealManifest, iso_utc

if TYPE_CHECKING:
    from hyperdata_sidecar.plugin import Sidecar

MAX_BACKOFF_S = 60.0


async def back_up(sidecar: Sidecar, manifest: SealManifest) -> None:
    """Back ``manifest``'s file up until it succeeds (or its source is gone). Runs in the agent."""
    path = manifest.path
    if isinstance(sidecar.sink, NoBackupSink):
        sidecar.backups[path] = {"status": "disabled", "sink": sidecar.sink.name}
        return
    known = sidecar.backups.get(path)
    if known is not None and known.get("status") == "ok":
        return
    attempts = 0
    delay = 1.0
    while True:
        attempts += 1
        started = time.monotonic()
        try:
            existing = await sidecar.sink.find_existing(path, manifest.sha256)
            ref = existing or await sidecar.sink.backup(
                sidecar.settings.watch_dir / path, relpath=path, sha256=manifest.sha256
            )
        except BackupError as exc:
            sidecar.metrics.backup_result("failed")
            sidecar.backups[path] = {
                "status": "failed", "sink": sidecar.sink.name, "attempts": attempts,
                "reason": exc.reason, "error": str(exc), "at": iso_utc(time.time()),
            }
            sidecar.log.warning("backup_failed", path=path, attempt=attempts, reason=exc.reason, error=str(exc), retry_in_s=delay)
            if exc.reason == "source_missing":
                return
            if not await sidecar.pause(delay):
                return  # stopping: the rotation is handed over again on the next start
            delay = min(delay * 2, MAX_BACKOFF_S)
            continue
        sidecar.metrics.backup_result("noop" if existing else "ok")
        sidecar.backups[path] = {
            "status": "ok", "sink": sidecar.sink.name, "attempts": attempts, "ref": ref,
            "sha256": manifest.sha256, "at": iso_utc(time.time()),
        }
        sidecar.log.info(
            "backup", path=path, ref=ref, size=manifest.size, sha256=manifest.sha256,
            attempts=attempts, already_present=existing is not None, seconds=round(time.monotonic() - started, 3),
        )
        return


def install_backup_agent(sidecar: Sidecar) -> None:
    @sidecar.app.agent(sidecar.rotations_topic, name="hyperdata_sidecar.backup")
    async def back_up_files(rotations: AsyncIterable[bytes]) -> None:
        async for manifest in manifests(sidecar, rotations):
            await back_up(sidecar, manifest)
