"""The node's three tables as the worker runs them: one :class:`~hyperdata_sidecar.tailer.TableTailer`
each, built at start from the stored cursors, one tick at a time per table.

:class:`NodeTables` is what the polling loops, the snapshot watcher, the read model and the stop ask
of the tailers: a tick of one table (a file it cannot read makes the table unreadable in readiness,
not the worker crash), whether the ticks under way have ended, how far each table has published,
every tracked file, each table's backlog.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Mapping
from typing import Any

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.ports import TrackedView
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.table_backlogs import TableBacklogs
from hyperdata_sidecar.tailer import Abandoned, TableTailer, TailerRooms
from hyperdata_sidecar.transactions import TransactionAborted

TICK_WAIT_S = 0.05  # how often the stop looks whether the ticks under way have ended


class NodeTables:
    """The tailers of the node's tables. ``offsets`` is the ``sidecar-offsets`` table (what the
    files are, as stored, before the tailers are built)."""

    def __init__(
        self,
        settings: Settings,
        offsets: Mapping[str, Any],
        readiness: Readiness,
        backlogs: TableBacklogs,
        metrics: SidecarMetrics,
        log: EventLog,
    ) -> None:
        self.settings = settings
        self.offsets = offsets
        self.readiness = readiness
        self.backlogs = backlogs
        self.metrics = metrics
        self.log = log
        self.tailers: dict[str, TableTailer] = {}
        self.ticking: set[str] = set()  # the tables whose tick is under way

    def start(self, rooms: TailerRooms, stored: Mapping[str, dict[str, FileCursor]], held: Collection[str] = ()) -> None:
        """Build each table's tailer from its stored cursors (once the offsets table is complete);
        a ``held`` table (STREAM_ID: it cannot continue the stream yet) gets none until
        :meth:`start_table`, and its polls do nothing."""
        self.tailers = {}
        for spec in TABLES:
            if spec.dir_name not in held:
                self.start_table(rooms, spec.dir_name, stored.get(spec.dir_name, {}))

    def start_table(self, rooms: TailerRooms, table: str, cursors: dict[str, FileCursor]) -> None:
        """Build one table's tailer (a held table once it can continue the stream)."""
        self.tailers[table] = TableTailer(TABLE_BY_DIR[table], self.settings, rooms, cursors)

    # ------------------------------------------------------------------ ticks

    async def tick(self, table: str) -> None:
        """One poll of ``table``: every file caught up as far as it has grown, what is finished finalized."""
        tailer = self.tailers.get(table)
        if tailer is None:
            return  # held (STREAM_ID): it cannot continue the stream yet
        self.ticking.add(table)
        try:
            await tailer.tick()
        except (Abandoned, TransactionAborted):
            return  # stopping, or the tables redo their reads after an aborted transaction (TableSync)
        except (OSError, EOFError) as exc:
            # A file the sidecar cannot read (permissions, a race with a rename, a file cut short
            # while it was being hashed): the table keeps its position, is not ready, and tries
            # again at the next poll, which sees what became of the file.
            error = f"{type(exc).__name__}: {exc}"
            self.metrics.read_failed(table)
            self.readiness.unreadable[table] = error
            self.log.limited(logging.ERROR, "tick_failed", table, 10.0, table=table, error=error)
            return
        finally:
            self.ticking.discard(table)
        self.readiness.unreadable.pop(table, None)

    def quiet(self) -> bool:
        """No table has a cycle in flight (exactly_once: the open transaction may commit)."""
        return all(tailer.quiet for tailer in self.tailers.values())

    async def ticks_finished(self, timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the ticks under way to end. A tick that sees the worker
        stopping settles and checkpoints the cycles it has in flight (for at most the stop grace):
        the data plane must serve their reports until then, and the poll loops must not be
        cancelled in the middle of a read (a native read runs in a worker thread, for most of a
        catch-up), or every cycle in flight would be published again after the restart."""
        deadline = time.monotonic() + timeout
        while self.ticking and time.monotonic() < deadline:  # noqa: ASYNC110 - a set the ticks keep, not an Event
            await asyncio.sleep(TICK_WAIT_S)

    # ------------------------------------------------------------------ what the others ask

    def cursors(self) -> list[FileCursor]:
        """Every tracked file's cursor, as the tailers hold it (fresher than the offsets table)."""
        return [tail.cursor for tailer in self.tailers.values() for tail in tailer.files.values()]

    def published_past(self, height: int) -> dict[str, bool]:
        """Per table: has it published (delivered and checkpointed) a line with a block above ``height``?"""
        published = {table: tailer.published_block for table, tailer in self.tailers.items()}
        return {spec.dir_name: (block := published.get(spec.dir_name)) is not None and block > height for spec in TABLES}

    def tracked(self) -> dict[str, dict[str, TrackedView]]:
        """Every tracked file by table: the tailers' views once built (with the size now of the
        files still growing), the offsets table's before (and for a held table)."""
        views: dict[str, dict[str, TrackedView]] = {spec.dir_name: {} for spec in TABLES}
        for path, record in self.offsets.items():
            hour = HourFile.parse(path)
            if hour is not None and hour.table not in self.tailers:
                views.setdefault(hour.table, {})[path] = TrackedView(hour, FileCursor.from_record(record), None)
        for table, tailer in self.tailers.items():
            views[table] = {path: tailer.view(path) for path in tailer.files}
        return views

    def sample_backlogs(self) -> None:
        """One sample of every table's backlog (the readiness timer takes one a second)."""
        self.backlogs.sample(time.monotonic(), {table: tailer.backlog for table, tailer in self.tailers.items()})

    def startup_summary(self) -> dict[str, Any]:
        """The files on disk and the backlog of each table, for the startup line (one scan each)."""
        return {
            "files_discovered": {table: len(tailer.discovered()) for table, tailer in self.tailers.items()},
            # After files_discovered: its scan is what the backlog is measured from.
            "backlog": {table: tailer.backlog._asdict() for table, tailer in self.tailers.items()},
        }
