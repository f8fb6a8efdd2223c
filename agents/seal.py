"""The ``seal`` agent: one seal record per finalized revision of an hour file on the seal topic, never two.

The ``sidecar-seals`` table says which files are sealed, and at which revision (a stream's
standby keeps its own seals there too, marked ``"standby": true``, unpublished). It is written after
the broker acked the seal, so a crash between the two leaves a seal the table does not know; the
first seal after a start therefore also reads the seal topic once (:class:`PublishedSeals`) and
skips revisions already there. A file that grew after its seal comes back with a higher revision
and is sealed again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, MutableMapping
from typing import Any

import faust
import orjson
from hyperdata_sidecar.agents.publish_once import Published, PublishOnce
from hyperdata_sidecar.agents.rotations import manifests

from hyperdata_sidecar.core.seal import SealManifest, published_revision_of, revision_of
from hyperdata_sidecar.core.times import epoch_of, iso_utc
from hyperdata_sidecar.state_writer import StateWriter


class PublishedSeals:
    """The latest revision of each path this node already sealed, as the seal topic itself records
    them (read once)."""

    def __init__(self, once: PublishOnce) -> None:
        self._once = once
        self._revisions: dict[str, int] | None = None

    async def contains(self, manifest: SealManifest) -> bool:
        """True when the topic holds a seal of ``manifest``'s path at its revision or a later one."""
        if self._revisions is None:
            self._revisions = await self._read_topic()
        return self._revisions.get(manifest.path, 0) >= manifest.revision

    def add(self, manifest: SealManifest) -> None:
        if self._revisions is not None:
            self._revisions[manifest.path] = max(self._revisions.get(manifest.path, 0), manifest.revision)

    async def _read_topic(self) -> dict[str, int]:
        settings = self._once.settings
        revisions: dict[str, int] = {}
        for value in await self._once.topic_values(settings.topic_seals):
            try:
                seal = SealManifest.from_json(value)
            except ValueError:
                continue
            if seal.node == settings.node_id:
                revisions[seal.path] = max(revisions.get(seal.path, 0), seal.revision)
        return revisions


class Sealer:
    """Seals finalized files: ``seals`` is the ``sidecar-seals`` table, written through ``writer``."""

    def __init__(self, seals: MutableMapping[str, Any], once: PublishOnce, writer: StateWriter) -> None:
        self.seals = seals
        self.once = once
        self.writer = writer
        self.published = PublishedSeals(once)

    async def seal(self, manifest: SealManifest) -> None:
        """Publish the seal of ``manifest`` unless it (or a later revision) exists; record it in the
        seals table. A standby's seal is only recorded. Runs in the agent."""
        once, log = self.once, self.once.log
        if manifest.standby:
            await self._keep_standby_seal(manifest)
            return
        if published_revision_of(self.seals.get(manifest.path)) >= manifest.revision:
            log.info("seal_already_recorded", path=manifest.path, revision=manifest.revision)
            return
        record = (once.settings.topic_seals, manifest.key.encode(), manifest.to_json())
        outcome = await once.publish("seal", manifest.path, record, lambda: self.published.contains(manifest))
        if outcome is Published.STOPPED:
            return  # the rotation is handed over again on the next start
        if outcome is Published.ON_TOPIC:
            log.info("seal_found_on_topic", path=manifest.path, revision=manifest.revision)
        else:
            latency = time.time() - (epoch_of(manifest.finalized_at) or time.time())
            once.metrics.seal_emitted(manifest.table, latency)
            log.info(
                "seal",
                table=manifest.table,
                path=manifest.path,
                size=manifest.size,
                sha256=manifest.sha256,
                block_range=manifest.block_range,
                lines=manifest.lines,
                dlq_lines=manifest.dlq_lines,
                revision=manifest.revision,
                block_regressions=manifest.block_regressions,
                seal_lag_s=round(latency, 3),
            )
        self.published.add(manifest)
        await self.writer.put(self.seals, manifest.path, {**orjson.loads(manifest.to_json()), "sealed_at": iso_utc(time.time())})

    async def _keep_standby_seal(self, manifest: SealManifest) -> None:
        """STREAM_ID: the seal of a file this sidecar finished reading as its stream's standby, kept
        in the seals table (``"standby": true``), not published. A file with a published seal keeps
        it (it says more); a standby's seal gives way only to a later revision (the file grew)."""
        log = self.once.log
        recorded = self.seals.get(manifest.path)
        if recorded is not None and (recorded.get("standby") is not True or revision_of(recorded) >= manifest.revision):
            log.info("seal_already_recorded", path=manifest.path, revision=manifest.revision, standby=True)
            return
        record = {**orjson.loads(manifest.to_json()), "sealed_at": iso_utc(time.time())}
        if not await self.writer.put(self.seals, manifest.path, record):
            return
        self.once.metrics.standby_sealed(manifest.table)
        log.info(
            "standby_seal",
            table=manifest.table,
            path=manifest.path,
            size=manifest.size,
            sha256=manifest.sha256,
            block_range=manifest.block_range,
            revision=manifest.revision,
        )


def install_seal_agent(app: faust.App, rotations: faust.types.TopicT, sealer: Sealer) -> None:
    @app.agent(rotations, name="hyperdata_sidecar.seal")
    async def seal_files(records: AsyncIterable[bytes]) -> None:
        async for manifest in manifests(sealer.once.log, records):
            await sealer.seal(manifest)
