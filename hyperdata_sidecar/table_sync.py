"""Bringing the tailers and the agents up to date: once at start, and after every rebalance.

At start (the first poll after the runtime connected, :meth:`TableSync.at_start`) the offsets table
must hold every checkpoint sent before this process: the progress topic's barrier waits for that.
Then the tailers are built from the stored cursors (with ``STREAM_ID``, moved to the stream's
committed position first: :class:`~hyperdata_sidecar.stream_handover.StreamHandover`), the
finalized files whose seal or backup is not recorded are handed to the agents again, as are the
published snapshots whose backup is not done, the snapshot watcher takes what was announced, and
the worker runs.

After a rebalance (Faust's ``on_rebalance_complete``, :meth:`TableSync.rebalanced`) the rotation
records Faust committed for an agent that never ran on them are handed over again, from the
tailers' cursors (fresher than the offsets table, whose progress records cross the same rebalance).
One lock keeps the two apart: a rebalance during the start waits for it, then hands over.
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

from aiokafka.errors import KafkaError

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.handover import Occasion
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.txn import TxnPhase
from hyperdata_sidecar.engines import Engine
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.node_tables import NodeTables
from hyperdata_sidecar.progress_topic import ProgressTopic
from hyperdata_sidecar.publishing import Abandoned
from hyperdata_sidecar.readiness import Readiness
from hyperdata_sidecar.rotations import Rotations
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.snapshots import SnapshotAnnouncements, SnapshotWatcher
from hyperdata_sidecar.state_writer import StateTables
from hyperdata_sidecar.stream_handover import StreamHandover
from hyperdata_sidecar.tailer import TailerRooms
from hyperdata_sidecar.transactions import TransactionAborted, Transactions

FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 30.0
BARRIER_LOOK_S = 1.0  # how often a waiting barrier looks who holds the progress topic
BARRIER_SLOW_S = 30.0  # a barrier waiting this long logs what the consumer knows, then once per such period


class TableSync:
    """The start of the tables and the handover after each rebalance."""

    def __init__(
        self,
        settings: Settings,
        *,
        progress: ProgressTopic,
        tables: StateTables,
        node_tables: NodeTables,
        tailer_rooms: TailerRooms,
        rotations: Rotations,
        announcements: SnapshotAnnouncements,
        watcher: SnapshotWatcher,
        readiness: Readiness,
        engine: Engine,
        txn: Transactions,
        shutdown: Shutdown,
        metrics: SidecarMetrics,
        log: EventLog,
        handover: StreamHandover | None = None,
    ) -> None:
        self.settings = settings
        self.handover = handover  # STREAM_ID: where the stream's position puts each table
        self.progress = progress
        self.tables = tables
        self.node_tables = node_tables
        self.tailer_rooms = tailer_rooms
        self.rotations = rotations
        self.announcements = announcements
        self.watcher = watcher
        self.readiness = readiness
        self.engine = engine
        self.txn = txn
        self.shutdown = shutdown
        self.metrics = metrics
        self.log = log
        self._lock = asyncio.Lock()
        self._handovers: set[asyncio.Task[None]] = set()  # kept: the loop holds only weak references to tasks
        self._releasing: asyncio.Future[None] | None = None  # STREAM_ID: the held tables, looked at until they agree

    async def at_start(self) -> None:
        """Wait until every checkpoint sent before this process started is in the offsets table,
        build the tailers and hand over what the agents have not finished; then the worker runs.
        Called by every table's first poll; the first one does it, the others wait for it."""
        async with self._lock:
            if self.readiness.lifecycle.phase is not Phase.SYNCING:
                return
            redo = self.txn.phase is TxnPhase.ABORTED
            if redo:
                # The tables' ticks end at their next write (TransactionAborted); then nothing of the
                # old tailers runs, and a new transaction may begin.
                await self.node_tables.ticks_finished(math.inf)
                self.readiness.drop_holds()
                self.txn.resume()
            await self._barrier()
            stored: dict[str, dict[str, FileCursor]] = {spec.dir_name: {} for spec in TABLES}
            for path, record in self.tables.offsets.items():
                stored.setdefault(path.split("/", 1)[0], {})[path] = FileCursor.from_record(record)
            if self._releasing is not None:
                self._releasing.cancel()  # the held tables of the reads before, looked at again here
                self._releasing = None
            held: dict[str, dict[str, FileCursor]] = {}
            if self.handover is not None:
                stored, held = await self.handover.resume(stored)
            self.node_tables.start(self.tailer_rooms, stored, held=held.keys())
            await self.rotations.hand_over((c for files in stored.values() for c in files.values()), Occasion.START)
            await self.announcements.resend_unbacked()
            self.watcher.start(set(self.tables.snapshots.keys()))
            # A transaction aborted while the tables were being built (a record of it failed) found
            # them syncing, so nothing moved: raise, and the next poll builds them again.
            self.txn.check()
            self.readiness.move_to(Phase.RUNNING)
            if held and self.handover is not None:
                self._releasing = asyncio.ensure_future(self._release(self.handover, held))
            self.log.info(
                "reads_redone" if redo else "startup",
                config=self.settings.public_summary(),
                engine=self.engine.label(),
                **self.node_tables.startup_summary(),
                resume_points={path: c.byte_offset for files in stored.values() for path, c in files.items()},
            )

    async def _release(self, handover: StreamHandover, held: dict[str, dict[str, FileCursor]]) -> None:
        """STREAM_ID: each held table starts once it agrees with the stream (its finalized files
        handed to the agents as at start); ends when none is held, or when the worker stops or its
        reads are redone (:meth:`at_start` looks at the held tables again)."""
        while held:
            try:
                released = await handover.release(held)
            except Abandoned:
                return
            async with self._lock:
                if not self.readiness.lifecycle.running:
                    return
                for table, cursors in released.items():
                    self.node_tables.start_table(self.tailer_rooms, table, cursors)
                    del held[table]
                try:
                    await self.rotations.hand_over((c for cursors in released.values() for c in cursors.values()), Occasion.START)
                except TransactionAborted:
                    return  # exactly_once: the reads are redone, and at_start hands them over again
                except (TimeoutError, KafkaError, OSError) as exc:
                    # Handed over again at the next start or rebalance (from the tailers' cursors).
                    self.metrics.producer_error("seal")
                    self.log.warning("rotation_resend_failed", error=f"{type(exc).__name__}: {exc}")

    async def _barrier(self) -> None:
        """The progress barrier; while it waits, readiness names a worker holding the progress topic."""
        barrier = asyncio.ensure_future(self.progress.barrier())
        loop = asyncio.get_running_loop()
        began = report_at = loop.time()
        try:
            while not barrier.done():
                self.readiness.syncing_on = self.progress.held_elsewhere()
                await asyncio.wait({barrier}, timeout=BARRIER_LOOK_S)
                if not barrier.done() and loop.time() - report_at >= BARRIER_SLOW_S:
                    report_at = loop.time()
                    self.log.warning(
                        "progress_barrier_slow",
                        waited_s=round(report_at - began, 1),
                        held_elsewhere=self.readiness.syncing_on,
                        consumer=self.progress.consumer_view(),
                    )
                    rewound = await self.progress.rewind_if_skipped()
                    if rewound is not None:
                        self.log.warning("progress_rewound", **rewound)
        finally:
            self.readiness.syncing_on = None
        await barrier

    def rebalanced(self, *_: Any, **__: Any) -> None:
        """Receiver of Faust's ``on_rebalance_complete`` signal (the partitions are assigned, the
        tables recovered, the consumer sought to the committed offsets): start the handover of
        :meth:`after_rebalance`.

        Not awaited: Faust resumes the streams only after its receivers return, and the handover
        may wait for :meth:`at_start`, whose barrier needs the progress stream to run.
        """
        task = asyncio.ensure_future(self.after_rebalance())
        self._handovers.add(task)
        task.add_done_callback(self._handovers.discard)

    async def after_rebalance(self) -> None:
        """Hand the finalized files the agents have not finished to them again, from the tailers'
        cursors. Before the tables are synced there is nothing to do: :meth:`at_start` hands them
        over after this assignment. A rotation topic that refuses the records is counted (``seal``
        producer error), logged and tried again after a back-off until the worker stops."""
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while not self.shutdown.stopping:
            async with self._lock:
                if not self.readiness.lifecycle.running:
                    return
                try:
                    await self.rotations.hand_over(self.node_tables.cursors(), Occasion.REBALANCE)
                    return
                except TransactionAborted:
                    return  # exactly_once: the reads are redone, and at_start hands them over again
                except (TimeoutError, KafkaError, OSError) as exc:
                    self.metrics.producer_error("seal")
                    self.log.limited(
                        logging.WARNING,
                        "rotation_resend_failed",
                        "rebalance",
                        60.0,
                        error=f"{type(exc).__name__}: {exc}",
                        retry_in_s=backoff.delay,
                    )
            await backoff.wait(self.shutdown.pause)
