"""The one place every Faust-table write of the sidecar goes through: a refused write is retried, never dropped.

RocksDB refuses writes when its disk is full (``IO error: No space left on device``), and keeps
refusing them after room comes back: the database stays in its error state until it is closed and
opened again. :class:`StateWriter` counts each refusal (``state_persist_failures``), logs
``state_write_failed`` (rate-limited), names the state dir in readiness while writes fail, reopens
the table's store and tries the same write again with a back-off until it is taken; then it logs
``state_writable_again`` once. The agent that asked waits meanwhile, so it never acknowledges a
record whose write did not happen, and the tailers read nothing new while :attr:`problem` is set.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import rocksdict

from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 10.0  # the cap keeps "room again" to "writing again" within seconds
FAILED_LOG_EVERY_S = 10.0

Table = MutableMapping[str, Any]


@dataclass
class StateTables:
    """The sidecar's four Faust tables (RocksDB-backed; their changelogs are the durable copy):
    ``sidecar-offsets`` (each file's cursor), ``sidecar-seals``, ``sidecar-backups`` and
    ``sidecar-snapshots`` (each keyed by path). Written only in the agents, through the state writer."""

    offsets: Table
    seals: Table
    backups: Table
    snapshots: Table

    def records(self, name: str) -> dict[str, Any]:
        """The contents of ``seals``, ``backups`` or ``snapshots`` (one pass over its local store)."""
        table: Table = {"seals": self.seals, "backups": self.backups, "snapshots": self.snapshots}[name]
        return dict(table.items())


def is_refusal(exc: Exception) -> bool:
    """True for the errors a table's store raises when it cannot take a write.

    rocksdict raises a bare ``Exception`` whose text is RocksDB's status (``IO error: ...``); any
    other type is a bug in the caller and is not retried.
    """
    return isinstance(exc, OSError) or type(exc) is Exception


class StateWriter:
    """Writes to the sidecar's Faust tables, retrying each refused write until the store takes it.

    ``reopen(table)`` is called before each retry (it brings a store out of its error state once
    there is room); ``pause`` is the shell's sleep that returns False when the worker stops.
    """

    def __init__(
        self,
        metrics: SidecarMetrics,
        log: EventLog,
        state_dir: str,
        pause: Callable[[float], Awaitable[bool]],
        reopen: Callable[[Table], None],
    ) -> None:
        self._metrics = metrics
        self.log = log
        self._state_dir = state_dir
        self._pause = pause
        self._reopen = reopen
        self.problem: str | None = None  # why the last write was refused, until one is taken again
        self._refused_since_taken = 0

    async def put(self, table: Table, key: str, value: Any) -> bool:
        """Set ``table[key] = value``; False only when the worker stopped before the store took it."""
        return await self._write(table, key, lambda: table.__setitem__(key, value))

    async def pop(self, table: Table, key: str) -> bool:
        """Remove ``key`` from ``table`` (if there); False only when the worker stopped first."""
        return await self._write(table, key, lambda: table.pop(key, None))

    async def _write(self, table: Table, key: str, write: Callable[[], object]) -> bool:
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while True:
            try:
                write()
            except Exception as exc:
                if not is_refusal(exc):
                    raise
                self._refused(key, exc, backoff.delay)
                if not await self._reopened(table, key, backoff):
                    return False
                continue
            self._taken()
            return True

    async def _reopened(self, table: Table, key: str, backoff: Backoff) -> bool:
        """Back off and reopen ``table``'s store until it opens read-write; False if the worker stops first.

        While the disk is still full the store opens read-only: the write is not tried again then
        (it could only fail for that), and readiness shows the reopen's error, which names the disk.
        """
        while await backoff.wait(self._pause):
            try:
                self._reopen(table)
            except Exception as exc:
                if not is_refusal(exc):
                    raise
                self.problem = f"STATE_PATH {self._state_dir}: {exc}"
                self.log.limited(
                    logging.ERROR,
                    "state_reopen_failed",
                    self._state_dir,
                    FAILED_LOG_EVERY_S,
                    state_dir=self._state_dir,
                    error=str(exc),
                )
                continue
            return True
        self.log.warning("state_write_abandoned", state_dir=self._state_dir, path=key, note="the worker is stopping")
        return False

    def _refused(self, key: str, exc: Exception, retry_in_s: float) -> None:
        error = str(exc) or type(exc).__name__
        self.problem = f"STATE_PATH {self._state_dir}: {error}"
        self._refused_since_taken += 1
        self._metrics.state_persist_failed()
        self.log.limited(
            logging.ERROR,
            "state_write_failed",
            self._state_dir,
            FAILED_LOG_EVERY_S,
            state_dir=self._state_dir,
            path=key,
            error=error,
            retry_in_s=retry_in_s,
        )

    def _taken(self) -> None:
        if self.problem is not None:
            self.log.info("state_writable_again", state_dir=self._state_dir, refused_writes=self._refused_since_taken)
            self.problem = None
            self._refused_since_taken = 0


def reopen_rocksdb(table: Table) -> None:
    """Close and open again the RocksDB databases of a Faust table, out of the error state a refused
    write leaves them in. While the disk is still full the read-write open fails; the database is
    then opened read-only, so the table's reads go on, and the error is raised."""
    store = getattr(table, "data", None)
    # faust-streaming keeps a table's open databases by partition in its store (no public way to reopen one).
    databases: dict[int, Any] | None = getattr(store, "_dbs", None)
    if store is None or not databases:
        return
    for partition, database in list(databases.items()):
        try:
            database.close()
        except Exception as exc:
            if not is_refusal(exc):
                raise  # a store in its error state refuses its own close, yet lets go of its files
        del databases[partition]
        path = store.partition_path(partition)
        try:
            databases[partition] = store._open_for_partition(partition)
        except Exception:
            options = store.rocksdb_options.as_options()
            databases[partition] = rocksdict.Rdict(str(path), options=options, access_type=rocksdict.AccessType.read_only())
            raise
