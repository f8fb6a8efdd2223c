"""The ``snapshot`` agent: one event per node snapshot on the snapshot topic, never two, then its backup.

The watcher (:mod:`hyperdata_sidecar.snapshots`) hands each complete snapshot's event to the
internal snapshot-events topic. Here it is published unless the ``sidecar-snapshots`` table already
records it. The table is written after the broker acked the event, so a crash between the two
leaves an event the table does not know: the first event after a start therefore also reads the
snapshot topic once (:class:`PublishedSnapshots`) and skips heights already there. The snapshot is
then backed up through the same worker as the hour files (its result lands in ``sidecar-backups``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, MutableMapping
from typing import Any

import faust
import orjson
from hyperdata_sidecar.agents.backup import BackupWorker
from hyperdata_sidecar.agents.publish_once import Published, PublishOnce

from hyperdata_sidecar.core.snapshots import SnapshotBackup
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.state_writer import StateWriter


class PublishedSnapshots:
    """The heights this node already announced, as the snapshot topic itself records them (read once)."""

    def __init__(self, once: PublishOnce) -> None:
        self._once = once
        self._heights: set[int] | None = None

    async def contains(self, height: int) -> bool:
        if self._heights is None:
            self._heights = await self._read_topic()
        return height in self._heights

    def add(self, height: int) -> None:
        if self._heights is not None:
            self._heights.add(height)

    async def _read_topic(self) -> set[int]:
        settings = self._once.settings
        heights: set[int] = set()
        for value in await self._once.topic_values(settings.topic_snapshots):
            try:
                event = orjson.loads(value)
                if event.get("node") == settings.node_id:
                    heights.add(int(event["height"]))
            except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                continue
        return heights


class SnapshotPublisher:
    """Publishes snapshot events: ``snapshots`` is the ``sidecar-snapshots`` table, written through ``writer``."""

    def __init__(self, snapshots: MutableMapping[str, Any], once: PublishOnce, writer: StateWriter) -> None:
        self.snapshots = snapshots
        self.once = once
        self.writer = writer
        self.published = PublishedSnapshots(once)

    async def publish(self, event: dict[str, Any]) -> bool:
        """Publish ``event`` unless it is published already; record it in the snapshots table. False
        when the worker stopped first (the watcher announces it again on the next start)."""
        once, log = self.once, self.once.log
        path, height = event["path"], int(event["height"])
        if self.snapshots.get(path) is not None:
            log.info("snapshot_already_recorded", path=path, height=height)
            return True
        record = (once.settings.topic_snapshots, str(height).encode(), orjson.dumps(event))
        outcome = await once.publish("snapshot", path, record, lambda: self.published.contains(height))
        if outcome is Published.STOPPED:
            return False
        if outcome is Published.ON_TOPIC:
            log.info("snapshot_found_on_topic", path=path, height=height)
        else:
            once.metrics.snapshot_emitted()
            log.info(
                "snapshot", path=path, height=height, size=event["size"], sha256=event["sha256"], partial=event.get("partial", [])
            )
        self.published.add(height)
        return await self.writer.put(self.snapshots, path, {**event, "published_at": iso_utc(time.time())})


def install_snapshot_agent(
    app: faust.App, events: faust.types.TopicT, publisher: SnapshotPublisher, backups: BackupWorker
) -> None:
    @app.agent(events, name="hyperdata_sidecar.snapshot")
    async def announce_snapshots(stream: AsyncIterable[dict[str, Any]]) -> None:
        async for event in stream:
            if await publisher.publish(event):
                await backups.attempt(SnapshotBackup.of_event(event))
