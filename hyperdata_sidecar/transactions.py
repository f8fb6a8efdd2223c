"""The data plane's transactions (``DELIVERY=exactly_once``): every record and the progress that covers it, in one.

Kafka Connect's exactly-once sources (KIP-618) write a batch of records and the source offsets that
cover it in one transaction of one producer; this is the same for the sidecar. The engine's producer
is transactional (``transactional.id`` = the app id, so a second worker with the same ``NODE_ID``
fences the first at its start). A transaction carries the records of one or more reads of any
tables, their dead letters, the progress records of those reads (the cursors the tailers'
windows commit), rotation records and snapshot events; seals and snapshot records published by the
agents wait for their transaction's commit before the agents record them.

The room is a gate in front of the producer, kept by :class:`Transactions`:

- a new read passes :meth:`Transactions.enter_read` (waits while the transaction closes or commits);
  every other record passes :meth:`Transactions.admit` (waits while it commits);
- :meth:`Transactions.run` closes the transaction once it is due (:class:`~hyperdata_sidecar.core.txn.TxnBudget`):
  *closing*, no read starts and the tables settle what they have in flight (every cycle reported,
  its progress record written); once all are quiet (``quiet()``), *committing*: librdkafka's
  ``commit_transaction`` (in a thread; it flushes), and a new transaction begins. Reading the files
  goes on meanwhile: only the hand-over to the producer waits.
- **Faults as librdkafka documents them**: a commit that times out (the coordinator unreachable) is
  tried again, the tables held and the reason named; an error that requires an abort (a record that
  failed, a transaction the broker aborted after ``TXN_TIMEOUT_MS``) aborts the transaction, every
  writer of it gets :class:`TransactionAborted`, and ``on_abort`` sends the tables back to *syncing*:
  they redo their reads from the last committed progress (the bytes are still on disk); a fatal error
  (``_FENCED``: another worker took the ``transactional.id``) stops the worker with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.txn import TxnBudget, TxnPhase
from hyperdata_sidecar.engines import Engine, Producer, TxnError
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

#: How long one commit or init waits before it is tried again (librdkafka lets a call that
#: timed out be called again); between tries the tables are held, the reason named.
CALL_TIMEOUT_S = 10.0
#: An abort's tries are shorter: each one purges the records still queued, but librdkafka puts back
#: for a retry the records of requests that fail after that purge (``OUT_OF_ORDER_SEQUENCE_NUMBER``
#: behind a record that timed out: the transaction after a broker outage), and the try then waits
#: for them until its timeout; the next try purges them and the abort ends at once.
ABORT_CALL_TIMEOUT_S = 1.0
#: How often :meth:`Transactions.run` looks whether the transaction is due when nothing wakes it.
LOOK_EVERY_S = 0.05
#: A close that waits this long for the tables to settle asks the broker for the topics (again every
#: such period): a topic replaced under the producer keeps its records unreported for a while
#: (librdkafka waits ``topic.metadata.propagation.max.ms``, 30 s, for partitions it does not know).
SETTLE_LOOK_S = 5.0


async def _nothing() -> None:
    return None


class TransactionAborted(Exception):
    """The transaction this work wrote into was aborted (or the data plane is redoing its reads after
    one): nothing it wrote will be read by a ``read_committed`` consumer. The table's tick ends; the
    tables redo their reads from the last committed progress."""


class ProducerFenced(TransactionAborted):
    """Another producer with this worker's ``transactional.id`` took over: the worker stops."""


class Transactions:
    """The gate in front of a transactional producer; with ``DELIVERY=at_least_once`` it lets
    everything through and never commits (:attr:`enabled` False)."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        metrics: SidecarMetrics,
        log: EventLog,
        *,
        transactional_id: str,
        on_abort: Callable[[str], None],
        on_fenced: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        shared: bool = False,
    ) -> None:
        self.enabled = settings.exactly_once
        self.settings = settings
        self.engine = engine
        self.metrics = metrics
        self.log = log
        self.transactional_id = transactional_id
        # STREAM_ID: the id is the stream's. A fatal error then never makes a new producer: its
        # init_transactions would fence the stream's newer active; the worker stops instead.
        self.shared = shared
        self._on_abort = on_abort
        self._on_fenced = on_fenced
        self._clock = clock
        self.phase = TxnPhase.OFF
        self.budget = TxnBudget(settings.txn_max_s, settings.txn_max_bytes)
        self.number = 0  # the open (or last) transaction's number in this process
        self.committed = 0  # the last committed one's
        self.aborted: set[int] = set()
        self.waiting_for: str | None = None  # what a commit or abort waits for (readiness)
        self._expired: TxnError | None = None  # the broker aborted the open transaction after its timeout
        self.abort_reason: str | None = None
        self.quiet: Callable[[], bool] = lambda: True  # the tables: nothing in flight (set by the node tables)
        self._producer: Producer | None = None
        self._drain: Callable[[], Awaitable[object]] = _nothing
        self._renew: Callable[[], Awaitable[Producer]] | None = None  # a new producer, after the broker aborted ours
        self._recheck: Callable[[], Awaitable[object]] = _nothing  # the topics asked again before a redo
        self._in_step = 0
        self._changed = asyncio.Event()
        self._closing = asyncio.Lock()  # one close at a time: the commit loop's, or the stop's

    # ------------------------------------------------------------------ the producer

    def config(self) -> dict[str, Any]:
        """The producer's transactional settings (nothing with at_least_once). librdkafka refuses a
        ``message.timeout.ms`` above ``transaction.timeout.ms``: a record not delivered by then fails,
        and its transaction is aborted and redone."""
        if not self.enabled:
            return {}
        timeout = self.settings.txn_timeout_ms
        return {"transactional.id": self.transactional_id, "transaction.timeout.ms": timeout, "message.timeout.ms": timeout}

    async def start(
        self,
        producer: Producer,
        drain: Callable[[], Awaitable[object]],
        renew: Callable[[], Awaitable[Producer]] | None = None,
        recheck: Callable[[], Awaitable[object]] = _nothing,
    ) -> None:
        """Register the producer with the broker (fencing any earlier one with the same id, and
        aborting what it left open), then begin the first transaction. ``drain()`` returns once every
        record was reported, served on the event loop: a commit is called only then, since
        confluent-kafka's ``commit_transaction`` would run the reports' callbacks on its own thread.
        ``renew()`` makes a new producer after a fatal error, ``recheck()`` asks the broker for the
        topics after an abort, before the reads are redone. Raises what ``init_transactions`` raises
        when it cannot reach the coordinator (the caller retries)."""
        if not self.enabled:
            return
        await asyncio.to_thread(producer.init_transactions, CALL_TIMEOUT_S)
        self._producer = producer
        self._drain = drain
        self._renew = renew
        self._recheck = recheck
        self.log.info("transactions_started", transactional_id=self.transactional_id, timeout_ms=self.settings.txn_timeout_ms)
        self._begin()

    def _begin(self) -> None:
        assert self._producer is not None
        self._producer.begin_transaction()
        self.number += 1
        self.budget.opened(self._clock())
        self.phase = TxnPhase.OPEN
        self._wake()

    # ------------------------------------------------------------------ the gate

    @property
    def closing(self) -> bool:
        """True while a commit waits for the tables to settle what they have in flight."""
        return self.phase is TxnPhase.CLOSING

    def check(self) -> None:
        """Raise :class:`TransactionAborted` while the tables must redo their reads."""
        if self.phase is TxnPhase.ABORTED:
            raise TransactionAborted(self.abort_reason or "the transaction was aborted")
        if self.phase is TxnPhase.FENCED:
            raise ProducerFenced(self.abort_reason or "fenced")

    async def admit(self, nbytes: int = 0) -> int:
        """Wait until a record may be written (not while a commit runs); the number of the
        transaction it goes into. Raises :class:`TransactionAborted` while the tables redo their reads."""
        if not self.enabled:
            return 0
        while self.phase in (TxnPhase.COMMITTING, TxnPhase.OFF):
            self.check()
            await self._wait()
        self.check()
        self.budget.took(nbytes)
        return self.number

    async def open_for_read(self) -> None:
        """Wait until a new read may start (not while the transaction closes or commits): called
        before a table opens the read's cycle, with nothing in flight while it waits. Raises
        :class:`TransactionAborted` while the tables redo their reads."""
        if not self.enabled:
            return
        while self.phase is not TxnPhase.OPEN:
            self.check()
            await self._wait()

    def enter_read(self, nbytes: int) -> None:
        """A step of a read's hand-over begins (the read was let in by :meth:`open_for_read`: the
        transaction cannot commit before its cycle settles); pair with :meth:`leave_read`. Raises
        :class:`TransactionAborted` while the tables redo their reads."""
        if not self.enabled:
            return
        self.check()
        self.budget.took(nbytes)
        self._in_step += 1

    def leave_read(self) -> None:
        if self.enabled:
            self._in_step -= 1
            self._wake()

    def settled(self) -> None:
        """A table has nothing in flight any more (its window emptied): a closing commit may go on."""
        if self.enabled:
            self._wake()

    def record_failed(self, reason: str, number: int | None = None) -> None:
        """A record of transaction ``number`` (None: the open one) was not delivered: it cannot
        commit; abort it and redo. The report of a record of an earlier transaction changes nothing:
        that one was aborted already (its records purged by the abort, their reports served later,
        possibly once the next transaction has begun)."""
        if not self.enabled or self.abort_reason is not None:
            return
        if number is not None and number != self.number:
            return
        self.abort_reason = reason
        self._wake()

    def replace_producer(self, reason: str) -> bool:
        """The producer cannot deliver some records, ever (a partition stuck by a librdkafka bug):
        abort the open transaction without asking that producer, and let a new one take over (its
        ``init_transactions`` ends the old one's transaction at the broker); the reads are redone.
        False while another abort is under way (ask again after it)."""
        if not self.enabled or self._renew is None or self.abort_reason is not None:
            return False
        self._expired = TxnError("_STUCK", reason, fatal=True, retriable=False, requires_abort=True)
        self.record_failed(reason)
        return True

    async def committed_through(self, number: int) -> None:
        """Return once transaction ``number`` committed; raise :class:`TransactionAborted` if it did not
        (also when a later one has committed since: :attr:`committed` is the last committed number,
        and the numbers of aborted transactions are kept, a few integers per fault)."""
        while self.enabled:
            if number in self.aborted:
                raise TransactionAborted(f"transaction {number} was aborted")
            if self.committed >= number:
                return
            self.check()
            await self._wait()

    async def _wait(self, timeout: float = LOOK_EVERY_S) -> None:
        """Until the next wake, or ``timeout`` at most: every waiter checks its condition again then
        too, so a wake that never came (a report served on another thread) costs a moment, not the
        worker."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _wake(self) -> None:
        self._changed.set()

    # ------------------------------------------------------------------ commits

    async def run(self, stopping: Callable[[], bool]) -> None:
        """Commit the transaction whenever it is due (or abort it after a failed record) until the worker stops."""
        if not self.enabled:
            return
        try:
            await self._commit_loop(stopping)
        except ProducerFenced:
            return  # the worker stops (on_fenced)

    async def _commit_loop(self, stopping: Callable[[], bool]) -> None:
        while not stopping():
            if self.phase is TxnPhase.OPEN and (self.abort_reason is not None or self.budget.due(self._clock())):
                await self.close()
                continue
            await self._wait(max(LOOK_EVERY_S, self.budget.wait_s(self._clock())) if self.budget.writes else LOOK_EVERY_S)

    async def finish(self) -> None:
        """At stop, once the ticks have ended: commit what the open transaction holds."""
        if self.enabled and self.phase is TxnPhase.OPEN and self.budget.writes:
            try:
                await self.close()
            except ProducerFenced:
                return

    async def close(self) -> None:
        """Close the open transaction: let the tables settle, then commit it (or abort it)."""
        async with self._closing:
            if self.phase is TxnPhase.OPEN:
                await self._close()

    async def _close(self) -> None:
        started = looked = self._clock()
        self.phase = TxnPhase.CLOSING
        self._wake()
        while self.abort_reason is None and not (self._in_step == 0 and self.quiet()):
            await self._wait()
            if self._clock() - looked >= SETTLE_LOOK_S:
                looked = self._clock()
                await self._recheck()  # a topic found refused aborts the transaction (the data plane's _note)
        if self.abort_reason is not None:
            await self.abort(self.abort_reason)
            return
        self.phase = TxnPhase.COMMITTING
        self._wake()
        await self._drain()
        if self.abort_reason is not None:  # a record that will never be reported (replace_producer)
            await self.abort(self.abort_reason)
            return
        error = await self._call("commit_transaction", CALL_TIMEOUT_S)
        if error is not None:
            await self.abort(f"{error.name}: {error.detail}")
            return
        self.committed = self.number
        self.metrics.txn_committed(self.budget.bytes, self._clock() - started)
        self._begin()

    async def abort(self, reason: str) -> None:
        """Abort the transaction: every writer of it gets :class:`TransactionAborted`, and the tables
        redo their reads (``on_abort``) once their ticks have ended."""
        self.abort_reason = reason
        self.phase = TxnPhase.ABORTED
        self._wake()
        while self._in_step:
            await self._wait()
        self.aborted.add(self.number)
        if self._expired is None:
            # Finds the broker's abort (sets _expired) if there was one.
            await self._call("abort_transaction", ABORT_CALL_TIMEOUT_S)
        if self._expired is not None:
            await self._renewed()
        await self._recheck()  # a topic deleted under the transaction holds its table at the redo
        self.metrics.txn_aborted()
        self.log.warning(
            "transaction_aborted",
            number=self.number,
            reason=reason,
            redo="the tables read again from the last committed progress",
        )
        self._on_abort(reason)

    def resume(self) -> None:
        """The tables were rebuilt from the committed progress: begin a new transaction."""
        if self.enabled and self.phase is TxnPhase.ABORTED:
            self.abort_reason = None
            self._begin()

    async def _call(self, name: str, timeout_s: float) -> TxnError | None:
        """Call the producer's ``name`` (commit or abort), each try up to ``timeout_s``, until it
        returns; retriable errors (the coordinator unreachable) are tried again, the tables held meanwhile. The error when the
        transaction must be aborted instead; a fatal one fences the worker."""
        assert self._producer is not None
        call = getattr(self._producer, name)
        while True:
            try:
                await asyncio.to_thread(call, timeout_s)
                self.waiting_for = None
                return None
            except Exception as exc:
                error = self.engine.txn_error(exc)
                if error is None:
                    raise
            old = self._clock() - self.budget.opened_at > self.settings.txn_timeout_ms / 1000
            if error.fatal and self._renew is not None and not self.shared and (old or error.name != "_FENCED"):
                # librdkafka: after a fatal error, make a new producer. A transaction open longer
                # than transaction.timeout.ms (the worker frozen, the commit unable to reach the
                # broker) was aborted by the broker, which bumped the producer's epoch: librdkafka
                # reports that as _FENCED or INVALID_TXN_STATE. Only a younger transaction fenced
                # (_FENCED) means a newer producer of the id: a zombie, which stops.
                self._expired = error
                self.waiting_for = None
                return error
            if error.fatal:
                self._fenced(error)
                raise ProducerFenced(error.detail)
            if error.requires_abort and name == "commit_transaction":
                self.waiting_for = None
                return error
            self.waiting_for = f"{name.replace('_', ' ')}: {error.name} ({error.detail})"
            self.metrics.txn_retried()
            self.log.limited(logging.WARNING, "transaction_waiting", name, 60.0, call=name, error=error.name, detail=error.detail)

    async def _renewed(self) -> None:
        """The producer failed for good (the broker aborted the transaction after ``TXN_TIMEOUT_MS``
        and fenced its epoch, or another fatal error): a new producer of the same id takes over
        (its ``init_transactions`` fences the old one)."""
        assert self._renew is not None
        while True:
            try:
                self._producer = await self._renew()
                break
            except Exception as exc:
                error = self.engine.txn_error(exc)
                if error is None:
                    raise
                self.metrics.txn_retried()
                self.log.limited(
                    logging.WARNING,
                    "transaction_waiting",
                    "init_transactions",
                    60.0,
                    call="init_transactions",
                    error=error.name,
                    detail=error.detail,
                )
                await asyncio.sleep(1.0)
        self.log.warning(
            "producer_renewed",
            error=self._expired.name if self._expired else "",
            detail=self._expired.detail if self._expired else "",
        )
        self._expired = None

    def not_ready_reason(self) -> str | None:
        """Why the transactions keep the worker from being ready, or None."""
        if self.phase is TxnPhase.ABORTED:
            return f"redoing the reads of an aborted transaction from the last committed progress ({self.abort_reason})"
        if self.phase is TxnPhase.FENCED:
            return f"fenced: another worker took transactional.id {self.transactional_id} ({self.abort_reason}); stopping"
        if self.waiting_for is not None:
            return f"the open transaction cannot end, the tables wait: {self.waiting_for}"
        return None

    def _fenced(self, error: TxnError) -> None:
        self.phase = TxnPhase.FENCED
        self.abort_reason = f"{error.name}: {error.detail}"
        self._wake()
        self.log.error(
            "producer_fenced",
            transactional_id=self.transactional_id,
            error=error.name,
            detail=error.detail,
            meaning=(
                "another sidecar of the stream took it over, or the broker aborted the transaction it held too long; "
                "this one stops and publishes nothing more"
                if self.shared
                else "another worker with this app id (the same NODE_ID) started; this one stops and publishes nothing more"
            ),
        )
        self._on_fenced(self.abort_reason)
