"""Finalized files on their way to the seal and backup agents (the internal rotation topic).

The tailers hand each finalized revision of an hour file here (:meth:`Rotations.rotate`); the
``seal`` and ``backup`` agents read the topic. :meth:`Rotations.hand_over` hands over again the
finalized files whose seal or backup of their latest revision is not recorded
(:func:`~hyperdata_sidecar.core.handover.needs_handover`): at start and after every rebalance
(:class:`~hyperdata_sidecar.table_sync.TableSync` decides when), because the topic alone does not
promise that both agents ran on every record (docs/architecture.md, "Why rotations are handed over
again"). The agents skip what turns out to be done.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import faust

from hyperdata_sidecar.core.cursor import FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.handover import Occasion, needs_handover
from hyperdata_sidecar.core.seal import SealManifest, published_revision_of
from hyperdata_sidecar.internal_topics import InternalTopic
from hyperdata_sidecar.logs import EventLog


class Rotations:
    """The rotation topic, and the ``sidecar-seals``/``sidecar-backups`` tables it is checked against."""

    def __init__(
        self,
        topic: faust.types.TopicT,
        seals: Mapping[str, Any],
        backups: Mapping[str, Any],
        node_id: str,
        log: EventLog,
        *,
        out: InternalTopic | None = None,
    ) -> None:
        self.topic = topic
        self.out: InternalTopic | faust.types.TopicT = out if out is not None else topic
        self.seals = seals
        self.backups = backups
        self.node_id = node_id
        self.log = log

    async def rotate(self, manifest: SealManifest) -> None:
        """Hand a finalized file's revision to the seal and backup agents."""
        await self.out.send(key=manifest.path, value=manifest.to_json())

    async def rotate_standby(self, manifest: SealManifest) -> None:
        """Hand a file a stream's standby finished reading (``manifest.standby``) to the seal and
        backup agents, through Faust's producer: a standby has no transaction open (its data plane
        connects once it is elected), and the agents read a record written outside one as any."""
        await self.topic.send(key=manifest.path, value=manifest.to_json())

    def sealed(self, path: str, revision: int) -> bool:
        """True once the seal of ``path`` at ``revision`` (or a later one) is recorded as published."""
        return published_revision_of(self.seals.get(path)) >= revision

    async def hand_over(self, cursors: Iterable[FileCursor], occasion: Occasion) -> None:
        """Hand the finalized files of ``cursors`` whose seal or backup is not recorded to the agents
        again. Raises what the topic's send raises (the caller retries)."""
        for cursor in list(cursors):
            if not needs_handover(cursor, self.seals.get(cursor.path), self.backups.get(cursor.path), occasion):
                continue
            manifest = manifest_from_cursor(cursor, self.node_id)
            if manifest is not None:
                self.log.info("rotation_resent", path=cursor.path, occasion=occasion.value)
                await self.rotate(manifest)
