"""A sidecar taking its stream over: where each table continues, from the stream's committed position.

Called by :meth:`~hyperdata_sidecar.table_sync.TableSync.at_start` once this sidecar was elected and
its producer's ``init_transactions`` fenced the former active, before the tailers are built. For each
table the stream has published, the last committed :class:`~hyperdata_sidecar.core.stream_position.StreamPosition`
(never the former active's word) is found in this node's files (:mod:`~hyperdata_sidecar.position_search`),
and the table's cursors continue right after it (:func:`~hyperdata_sidecar.core.stream_position.resume_cursors`).
A table whose line this node has not written yet, or where its files hold another event, is held:
it publishes nothing (its tailer is not built) while the other tables go on; readiness names each
held table and why, and :meth:`StreamHandover.release` looks again every second until it agrees or
the worker stops. While the stream's positions cannot be read at all, nothing starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.stream_position import Disagreement, Found, resume_cursors
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.position_search import locate
from hyperdata_sidecar.publishing import Abandoned
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.scanner import table_hour_files
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.stream_positions import PositionsUnavailable, StreamPositions

LOOK_AGAIN_S = 1.0  # a table that waits (its line not written here yet, or a disagreement) is looked at again


class Resumed(NamedTuple):
    """A handover's outcome: the cursors of the tables that go on now (right after the stream's
    line, or their own where the stream never published them), and this node's own cursors of
    those ``held`` (their line not written here yet, or another event there)."""

    cursors: dict[str, dict[str, FileCursor]]
    held: dict[str, dict[str, FileCursor]]


class StreamHandover:
    """The stream's position per table, found in this node's files: the cursors the tailers start from."""

    def __init__(
        self,
        settings: Settings,
        positions: StreamPositions,
        readiness: Readiness,
        shutdown: Shutdown,
        metrics: SidecarMetrics,
        log: EventLog,
    ) -> None:
        self.settings = settings
        self.positions = positions
        self.readiness = readiness
        self.shutdown = shutdown
        self.metrics = metrics
        self.log = log

    async def resume(self, stored: Mapping[str, dict[str, FileCursor]]) -> Resumed:
        """``stored`` (this node's cursors per table) with every table the stream has published
        continuing right after the stream's line, but those held. Waits while the stream's positions
        cannot be read; raises :class:`~hyperdata_sidecar.publishing.Abandoned` when the worker
        stops first."""
        resumed, waiting = await self._until(stored, [spec.dir_name for spec in TABLES], lambda _resumed: True)
        return Resumed(resumed, {table: dict(stored.get(table, {})) for table in waiting})

    async def release(self, held: Mapping[str, dict[str, FileCursor]]) -> dict[str, dict[str, FileCursor]]:
        """The cursors of the ``held`` tables that agree now, once at least one does (looked at
        every :data:`LOOK_AGAIN_S`); raises :class:`~hyperdata_sidecar.publishing.Abandoned` when
        the worker stops first."""
        resumed, _waiting = await self._until(held, list(held), bool)
        return resumed

    async def _until(
        self, stored: Mapping[str, dict[str, FileCursor]], tables: Collection[str], enough: Callable[[dict[str, Any]], bool]
    ) -> tuple[dict[str, dict[str, FileCursor]], dict[str, str]]:
        """Look at ``tables`` until the stream's positions are read and ``enough`` of them go on:
        their cursors, and why each other one waits (as readiness names it)."""
        while True:
            waiting: dict[str, str] = {}
            found: list[dict[str, object]] = []
            try:
                resumed = await self._look(stored, tables, waiting, found)
            except PositionsUnavailable as exc:
                waiting["stream"] = f"cannot read the stream's positions: {exc}"
                self.log.limited(logging.WARNING, "stream_positions_unavailable", "stream", 60.0, error=str(exc))
                resumed = None
            self.readiness.handover = waiting
            if resumed is not None and enough(resumed):
                for where in found:
                    self.log.info("stream_handover", **where)
                return resumed, waiting
            if not await self.shutdown.pause(LOOK_AGAIN_S):
                raise Abandoned("stopping during the stream's handover")

    async def _look(
        self,
        stored: Mapping[str, dict[str, FileCursor]],
        tables: Collection[str],
        waiting: dict[str, str],
        found_at: list[dict[str, object]],
    ) -> dict[str, dict[str, FileCursor]]:
        """One look at ``tables``: the cursors of those that agree; ``waiting`` gets why each other
        one cannot continue yet, ``found_at`` where each agreeing one continues."""
        last = await self.positions.last()
        resumed: dict[str, dict[str, FileCursor]] = {}
        for spec in TABLES:
            table = spec.dir_name
            if table not in tables:
                continue
            own = stored.get(table, {})
            position = last.get(table)
            if position is None:
                resumed[table] = dict(own)  # the stream has not published this table: this node's own cursors
                continue
            try:
                files = table_hour_files(Path(self.settings.watch_dir), table)
                found = await asyncio.to_thread(locate, self.settings.watch_dir, spec, files, position)
            except OSError as exc:  # a file pruned or made unreadable under the search: look again
                waiting[table] = f"cannot read this node's files for the stream's line {position.line_id}: {exc}"
                continue
            if isinstance(found, Found):
                resumed[table] = resume_cursors(own, files, found, position)
                found_at.append(
                    {
                        "table": table,
                        "line_id": position.line_id,
                        "published_by": position.node,
                        "path": found.path,
                        "offset": found.offset,
                    }
                )
            elif isinstance(found, Disagreement):
                self.metrics.stream_disagreement(table)
                where = f"{found.path} at offset {found.offset}"
                waiting[table] = (
                    f"the nodes disagree at the stream's line {position.line_id}: {where}: {found.reason}; publishing nothing of this table past it"
                )
                self.log.limited(
                    logging.ERROR,
                    "stream_disagreement",
                    table,
                    60.0,
                    table=table,
                    line_id=position.line_id,
                    published_by=position.node,
                    path=found.path,
                    offset=found.offset,
                    reason=found.reason,
                )
            else:
                waiting[table] = f"this node has not written the stream's line {position.line_id} yet"
        return resumed
