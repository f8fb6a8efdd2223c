"""STREAM_ID: a standby follows the stream's position per table in its own node's files.

The active writes a :class:`~hyperdata_sidecar.core.stream_position.StreamPosition` per table into
each of its transactions (:mod:`~hyperdata_sidecar.stream_positions`). :class:`~hyperdata_sidecar.stream_heads.StreamHeads`
reads the stream's topic anyway (the nodes' heads) and keeps the newest position per table it met
there; the first look reads the committed ones (a standby started on a quiet stream knows where it
stands). While this sidecar stands by, each look (:meth:`StandbyFollow.tick`,
every :data:`FOLLOW_EVERY_S`) finds the newest position of each table in this node's files (a
binary search: :func:`~hyperdata_sidecar.position_search.locate`) and says what it found
(:class:`~hyperdata_sidecar.core.stream_position.Following`): the same event (a takeover would go on
right after it), a line not written yet, or another event, which is named at once (metric
``stream_disagreements_total``, event ``stream_disagreement``, the status page) instead of at the
handover; the stream's status (:meth:`StandbyFollow.status`, the pages') is the heads' with these
looks under ``follow`` while standing by. The handover itself reads the committed position again after it fenced the former
active; a position seen here may belong to a transaction that is aborted later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.stream_position import Following, StreamPosition, following
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.position_search import locate
from hyperdata_sidecar.scanner import table_hour_files
from hyperdata_sidecar.stream_heads import StreamHeads
from hyperdata_sidecar.stream_positions import PositionsUnavailable, StreamPositions

FOLLOW_EVERY_S = 2.0  # a look: per table a binary search of ~log2(file size) single-line reads


class StandbyFollow:
    """The stream's newest position per table and where it is in this node's files (see the module)."""

    def __init__(
        self, settings: Settings, positions: StreamPositions, heads: StreamHeads, metrics: SidecarMetrics, log: EventLog
    ) -> None:
        self.settings = settings
        self.positions = positions
        self.heads = heads
        self.metrics = metrics
        self.log = log
        self.newest: dict[str, StreamPosition] = {}
        self.looks: dict[str, Following] = {}
        self._read_committed = False
        self._next_look = 0.0
        self._elected = False

    def saw(self, position: StreamPosition) -> None:
        """A position the active wrote (kept when it is the table's newest)."""
        known = self.newest.get(position.table)
        if position.table in TABLE_BY_DIR and (known is None or position.order > known.order):
            self.newest[position.table] = position

    async def tick(self) -> None:
        """One look, at most every :data:`FOLLOW_EVERY_S` (called once a second while standing by)."""
        now = time.monotonic()
        if now < self._next_look or self._elected:
            return
        self._next_look = now + FOLLOW_EVERY_S
        if not self._read_committed:
            try:
                for committed in (await self.positions.last()).values():
                    self.saw(committed)
                self._read_committed = True
            except PositionsUnavailable as exc:
                self.log.limited(logging.WARNING, "stream_positions_unavailable", "follow", 60.0, error=str(exc))
        for seen in list(self.heads.positions.values()):
            self.saw(seen)
        for spec in TABLES:
            position = self.newest.get(spec.dir_name)
            before = self.looks.get(spec.dir_name)
            if position is None or (before is not None and before.ready and before.line_id == position.line_id):
                continue  # nothing published yet, or that line was found already (a written line stays)
            look = await asyncio.to_thread(self._look, spec.dir_name, position)
            self._record(spec.dir_name, look, before)

    def elected(self) -> None:
        """This sidecar leaves standing by (for good: a demoted active's restart stands by): its
        looks and their series go, and a look still under way is dropped."""
        self._elected = True
        for table in self.looks:
            self.metrics.standby_ready(table, None)
        self.looks.clear()

    def status(self) -> dict[str, Any]:
        """The stream as this sidecar sees it (:meth:`StreamHeads.status`); while it stands by, under
        ``follow`` per table its last look (``state``, the stream's ``line_id``, who ``published_by``,
        where it is here, ``reason`` of a disagreement, ``age_s`` of the look)."""
        stream = self.heads.status()
        if stream["role"] == "standby":
            now = time.time()
            stream["follow"] = {
                table: {**{k: v for k, v in look._asdict().items() if k != "at"}, "age_s": round(now - look.at, 1)}
                for table, look in sorted(self.looks.items())
            }
        return stream

    def _look(self, table: str, position: StreamPosition) -> Following:
        """Blocking: where ``position`` is in this node's files of ``table``."""
        try:
            files = table_hour_files(Path(self.settings.watch_dir), table)
            found = locate(self.settings.watch_dir, TABLE_BY_DIR[table], files, position)
        except OSError as exc:  # a file pruned or made unreadable under the search: the next look tries again
            return Following("unreadable", position.line_id, position.node, time.time(), reason=str(exc))
        return following(position, found, time.time())

    def _record(self, table: str, look: Following, before: Following | None) -> None:
        if self._elected:
            return
        self.looks[table] = look
        self.metrics.standby_ready(table, look.ready)
        if look.state == "disagree":
            self.metrics.stream_disagreement(table)
            self.log.limited(
                logging.ERROR,
                "stream_disagreement",
                f"standby {table}",  # a handover's own line is not held back by these
                60.0,
                table=table,
                role="standby",
                line_id=look.line_id,
                published_by=look.published_by,
                path=look.path,
                offset=look.offset,
                reason=look.reason,
            )
        if before is None or before.state != look.state:
            where = {"table": table, "state": look.state, "line_id": look.line_id, "path": look.path, "offset": look.offset}
            if look.state in ("ready", "not_written"):
                self.log.info("standby_following", **where)
            else:
                self.log.warning("standby_following", **where)
