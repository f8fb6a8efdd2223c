"""The ``seal`` agent: one seal record per finalized revision of an hour file on the seal topic, never two.

The ``sidecar-seals`` table says which files are sealed, and at which revision. It is written after
the broker acked the seal, so a crash between the two leaves a seal the table does not know; the
first seal after a start therefore also reads the seal topic once (:class:`PublishedSeals`) and
skips revisions already there. A file that grew after its seal comes back with a higher revision
and is sealed again.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING

import orjson
from hyperdata_sidecar.agents.publish_once import Published, publish_once
from hyperdata_sidecar.agents.rotations import manifests
from hyperdata_sidecar.agents.topic import topic_values

from hyperdata_sidecar.core.seal import SealManifest, revision_of
from hyperdata_sidecar.core.times import epoch_of, iso_utc

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import SealAgentHost


class PublishedSeals:
    """The latest revision of each path this node already sealed, as the seal topic itself records
    them (read once)."""

    def __init__(self, sidecar: SealAgentHost) -> None:
        self._sidecar = sidecar
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
        node = self._sidecar.settings.node_id
        revisions: dict[str, int] = {}
        for value in await topic_values(self._sidecar, self._sidecar.settings.topic_seals):
            try:
                seal = SealManifest.from_json(value)
            except ValueError:
                continue
            if seal.node == node:
                revisions[seal.path] = max(revisions.get(seal.path, 0), seal.revision)
        return revisions


async def seal(sidecar: SealAgentHost, published: PublishedSeals, manifest: SealManifest) -> None:
    """Publish the seal of ``manifest`` unless it (or a later revision) exists; record it in the seals
    table. Runs in the agent."""
    if revision_of(sidecar.seals.get(manifest.path)) >= manifest.revision:
        sidecar.log.info("seal_already_recorded", path=manifest.path, revision=manifest.revision)
        return

    async def send() -> None:
        await sidecar.dataplane.send(sidecar.settings.topic_seals, manifest.key.encode(), manifest.to_json())

    outcome = await publish_once(sidecar, "seal", manifest.path, lambda: published.contains(manifest), send)
    if outcome is Published.STOPPED:
        return  # the rotation is handed over again on the next start
    if outcome is Published.ON_TOPIC:
        sidecar.log.info("seal_found_on_topic", path=manifest.path, revision=manifest.revision)
    else:
        latency = time.time() - (epoch_of(manifest.finalized_at) or time.time())
        sidecar.metrics.seal_emitted(manifest.table, latency)
        sidecar.log.info(
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
    published.add(manifest)
    await sidecar.state_writer.put(
        sidecar.seals, manifest.path, {**orjson.loads(manifest.to_json()), "sealed_at": iso_utc(time.time())}
    )


def install_seal_agent(sidecar: SealAgentHost) -> None:
    published = PublishedSeals(sidecar)

    @sidecar.app.agent(sidecar.rotations_topic, name="hyperdata_sidecar.seal")
    async def seal_files(rotations: AsyncIterable[bytes]) -> None:
        async for manifest in manifests(sidecar.log, rotations):
            await seal(sidecar, published, manifest)
