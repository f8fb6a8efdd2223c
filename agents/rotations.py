"""The rotation topic as the seal and backup agents read it."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.logs import EventLog


async def manifests(log: EventLog, rotations: AsyncIterable[bytes]) -> AsyncIterator[SealManifest]:
    """The rotation records of ``rotations`` as manifests; a record that is not one is logged and skipped."""
    async for value in rotations:
        try:
            yield SealManifest.from_json(value)
        except ValueError as exc:
            log.error("bad_rotation_record", error=str(exc))
