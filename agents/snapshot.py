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
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, Any

import orjson
from hyperdata_sidecar.agents.backup import BackupWorker
from hyperdata_sidecar.agents.publish_once import Published, publish_once
from hyperdata_sidecar.agents.topic import topic_values

from hyperdata_sidecar.core.snapshots import SnapshotBackup
from hyperdata_sidecar.core.times import iso_utc

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import SnapshotAgentHost


class PublishedSnapshots:
    """The heights this node already announced, as the snapshot topic itself records them (read once)."""

    def __init__(self, sidecar: SnapshotAgentHost) -> None:
        self._sidecar = sidecar
        self._heights: set[int] | None = None

    async def contains(self, height: int) -> bool:
        if self._heights is None:
            self._heights = await self._read_topic()
        return height in self._heights

    def add(self, height: int) -> None:
        if self._heights is not None:
            self._heights.add(height)

    async def _read_topic(self) -> set[int]:
        node = self._sidecar.settings.node_id
        heights: set[int] = set()
        for value in await topic_values(self._sidecar, self._sidecar.settings.topic_snapshots):
            try:
                event = orjson.loads(value)
                if event.get("node") == node:
                    heights.add(int(event["height"]))
            except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                continue
        return heights


async def publish(sidecar: SnapshotAgentHost, published: PublishedSnapshots, event: dict[str, Any]) -> bool:
    """Publish ``event`` unless it is published already; record it in the snapshots table. False
    when the worker stopped first (the watcher announces it again on the next start)."""
    path, height = event["path"], int(event["height"])
    if sidecar.snapshots.get(path) is not None:
        sidecar.log.info("snapshot_already_recorded", path=path, height=height)
        return True

    async def send() -> None:
        await sidecar.dataplane.send(sidecar.settings.topic_snapshots, str(height).encode(), orjson.dumps(event))

    outcome = await publish_once(sidecar, "snapshot", path, lambda: published.contains(height), send)
    if outcome is Published.STOPPED:
        return False
    if outcome is Published.ON_TOPIC:
        sidecar.log.info("snapshot_found_on_topic", path=path, height=height)
    else:
        sidecar.metrics.snapshot_emitted()
        sidecar.log.info(
            "snapshot", path=path, height=height, size=event["size"], sha256=event["sha256"], partial=event.get("partial", [])
        )
    published.add(height)
    return await sidecar.state_writer.put(sidecar.snapshots, path, {**event, "published_at": iso_utc(time.time())})


def install_snapshot_agent(sidecar: SnapshotAgentHost, backups: BackupWorker) -> None:
    published = PublishedSnapshots(sidecar)

    @sidecar.app.agent(sidecar.snapshot_events_topic, name="hyperdata_sidecar.snapshot")
    async def announce_snapshots(events: AsyncIterable[dict[str, Any]]) -> None:
        async for event in events:
            if await publish(sidecar, published, event):
                await backups.attempt(SnapshotBackup.of_event(event))
