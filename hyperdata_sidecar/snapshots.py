"""Watching the node's full-state snapshots and announcing each one once, with its resume offsets.

:class:`SnapshotWatcher` polls ``WATCH_DIR/periodic_abci_states/<YYYYMMDD>/<height>.rmp``. A snapshot
is complete once its size has not changed for ``SNAPSHOT_GRACE_MS``; it is then hashed (sha256 in a
thread of its own at a lower CPU priority, 8 MiB at a time, so a 1.3 GB snapshot takes only CPU the
data plane leaves). Its event waits until every table has published a line above its
height, so that the resume offsets are known (:mod:`hyperdata_sidecar.snapshot_offsets` reads them
off the data topics), or at most ``SNAPSHOT_OFFSETS_WAIT_S``; a table still quiet by then is named in
the event's ``partial``. The event goes to the internal snapshot-events topic
(:class:`SnapshotAnnouncements`), whose ``snapshot`` agent publishes it once and backs the file up.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import faust

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backup_status import status_of
from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR, SnapshotFile, is_complete
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.internal_topics import InternalTopic
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.scanner import DatedTree

HASH_SLICE = 8 * 1024 * 1024
HASH_NICE = 10  # the hashing thread's nice value, above the worker's (Linux: a per-thread attribute)


class PublishedTables(Protocol):
    """The node's tables, as the watcher asks how far they have published
    (:class:`~hyperdata_sidecar.node_tables.NodeTables`)."""

    def published_past(self, height: int) -> dict[str, bool]:
        """Per table: has it published (delivered) a line with a block above ``height``?"""


class ResumeOffsets(Protocol):
    """Where a snapshot's resume offsets come from (:class:`~hyperdata_sidecar.snapshot_offsets.SnapshotOffsets`)."""

    async def resume_offsets(self, height: int) -> dict[str, dict[int, int]] | None:
        """The snapshot's resume offsets per data topic and partition; None when they cannot be read now."""


class Announcer(Protocol):
    """Where a complete snapshot's event goes (:class:`SnapshotAnnouncements`)."""

    async def announce(self, event: dict[str, Any]) -> None:
        """Publish the snapshot event once and back the file up."""


class Forgetting(Protocol):
    """Where a pruned snapshot's state is dropped (:class:`~hyperdata_sidecar.progress_topic.ProgressTopic`)."""

    async def forget(self, path: str) -> None: ...


class SnapshotAnnouncements:
    """Snapshot events on their way to the ``snapshot`` agent: the internal snapshot-events topic,
    checked against the ``sidecar-snapshots`` and ``sidecar-backups`` tables."""

    def __init__(
        self,
        topic: faust.types.TopicT,
        snapshots: Mapping[str, Any],
        backups: Mapping[str, Any],
        *,
        out: InternalTopic | None = None,
    ) -> None:
        self.topic = topic
        self.out: InternalTopic | faust.types.TopicT = out if out is not None else topic
        self.snapshots = snapshots
        self.backups = backups

    async def announce(self, event: dict[str, Any]) -> None:
        await self.out.send(key=event["path"], value=event)

    async def resend_unbacked(self) -> None:
        """Hand published snapshots whose backup is not done to the snapshot agent again (it skips
        publishing them and backs them up)."""
        for path, event in list(self.snapshots.items()):
            if not status_of(self.backups.get(path)).is_done:
                await self.announce({k: v for k, v in event.items() if k != "published_at"})


@dataclass
class TrackedSnapshot:
    file: SnapshotFile
    path: Path
    size: int = -1
    stable_since: float = field(default_factory=time.monotonic)
    sha256: str | None = None
    hashed_size: int = -1
    finalized_at: str | None = None
    complete_at: float | None = None


class SnapshotWatcher:
    """Finds complete snapshots and hands their events to ``announcer``, each once per process; the
    ``sidecar-snapshots`` table remembers what was announced across restarts, and :meth:`start` takes
    that (``announced``) once the tables are recovered."""

    def __init__(
        self,
        settings: Settings,
        tables: PublishedTables,
        offsets: ResumeOffsets,
        announcer: Announcer,
        progress: Forgetting,
        metrics: SidecarMetrics,
        log: EventLog,
    ) -> None:
        self.settings = settings
        self.tables = tables
        self.offsets = offsets
        self.announcer = announcer
        self.progress = progress
        self.metrics = metrics
        self.log = log
        self.tree = DatedTree(settings.watch_dir / SNAPSHOT_DIR, SNAPSHOT_DIR, on_ignored=self._ignored)
        self.announced: set[str] = set()
        self.pending: dict[str, TrackedSnapshot] = {}
        self._hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-sha256", initializer=_lower_priority)

    def start(self, announced: set[str]) -> None:
        """The snapshots already announced (the ``sidecar-snapshots`` table's keys), at start."""
        self.announced = set(announced)

    def waiting(self) -> list[dict[str, Any]]:
        """The snapshots seen and not announced yet, highest height first, with what they wait for."""
        now = time.monotonic()
        return [
            {
                "path": t.file.relpath,
                "height": t.file.height,
                "size": t.size,
                "waiting_for": "offsets" if t.complete_at is not None else "size to stand still",
                "waited_s": round(now - (t.complete_at if t.complete_at is not None else t.stable_since), 1),
            }
            for t in sorted(self.pending.values(), key=lambda t: t.file.height, reverse=True)
        ]

    async def tick(self) -> None:
        found = self._scan()
        for relpath in [p for p in self.announced | set(self.pending) if p not in found]:
            if self.pending.pop(relpath, None) is not None:
                self.log.warning("snapshot_vanished", path=relpath, note="deleted before it was complete and announced")
            if relpath in self.announced:
                self.announced.discard(relpath)
                self.log.info("snapshot_pruned", path=relpath)
                await self.progress.forget(relpath)
        for relpath, snapshot in found.items():
            if relpath not in self.announced:
                tracked = self.pending.setdefault(relpath, TrackedSnapshot(snapshot, self.settings.watch_dir / relpath))
                await self._advance(tracked)

    def _scan(self) -> dict[str, SnapshotFile]:
        found: dict[str, SnapshotFile] = {}
        for relpath, entry in self.tree.entries():
            snapshot = SnapshotFile.parse(relpath)
            if snapshot is None:
                self.tree.ignore(relpath, "not named <YYYYMMDD>/<height>.rmp")
            elif not entry.is_file(follow_symlinks=False):
                self.tree.ignore(relpath, "not a regular file")
            else:
                found[relpath] = snapshot
        return found

    def _ignored(self, relpath: str, reason: str) -> None:
        self.log.warning("snapshot_file_ignored", path=relpath, reason=reason)

    async def _advance(self, tracked: TrackedSnapshot) -> None:
        try:
            stat = os.stat(tracked.path)
        except FileNotFoundError:
            return
        size = stat.st_size
        self.metrics.set_newest_snapshot(stat.st_mtime)
        now = time.monotonic()
        if size != tracked.size:
            tracked.size, tracked.stable_since, tracked.complete_at = size, now, None
        if not is_complete(size=size, stable_since=tracked.stable_since, now=now, grace_s=self.settings.snapshot_grace_s):
            return
        if tracked.hashed_size != size:
            try:
                tracked.sha256 = await asyncio.get_running_loop().run_in_executor(self._hasher, _sha256, tracked.path, size)
            except (OSError, EOFError) as exc:  # shrank or vanished while hashed: the next poll decides
                self.log.warning("snapshot_unreadable", path=tracked.file.relpath, error=str(exc))
                return
            tracked.hashed_size, tracked.finalized_at, tracked.complete_at = size, iso_utc(time.time()), time.monotonic()
            self.log.info("snapshot_complete", path=tracked.file.relpath, height=tracked.file.height, size=size)
        await self._announce_when_offsets_are_known(tracked)

    async def _announce_when_offsets_are_known(self, tracked: TrackedSnapshot) -> None:
        assert tracked.complete_at is not None and tracked.sha256 is not None
        height = tracked.file.height
        past = self.tables.published_past(height)
        waited = time.monotonic() - tracked.complete_at
        if not all(past.values()) and waited < self.settings.snapshot_offsets_wait_s:
            return
        offsets = await self.offsets.resume_offsets(height)
        if offsets is None:
            return  # the data topics cannot be read now: the next poll tries again
        event: dict[str, Any] = {
            "height": height,
            "path": tracked.file.relpath,
            "date": tracked.file.date,
            "size": tracked.size,
            "sha256": tracked.sha256,
            "finalized_at": tracked.finalized_at,
            "node": self.settings.node_id,
            "offsets": {topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in offsets.items()},
        }
        quiet = sorted(table for table, done in past.items() if not done)
        if quiet:
            event["partial"] = quiet
        await self.announcer.announce(event)
        self.pending.pop(tracked.file.relpath, None)
        self.announced.add(tracked.file.relpath)


def _lower_priority() -> None:
    """Run the calling (hashing) thread at HASH_NICE, so that it takes the CPU the tailers, librdkafka
    and the broker leave; where the platform does not allow it, at the worker's priority."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HASH_NICE)


def _sha256(path: Path, size: int) -> str:
    """Blocking: the sha256 of the first ``size`` bytes of ``path``, read in slices (bounded memory)."""
    digest = hashlib.sha256()
    left = size
    with open(path, "rb") as f:
        while left > 0:
            block = f.read(min(HASH_SLICE, left))
            if not block:
                raise EOFError(f"{path} ended {left} bytes before {size}")
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()
