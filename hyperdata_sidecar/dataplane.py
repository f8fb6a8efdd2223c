"""The data plane: one librdkafka producer per worker, for data, DLQ, seal and snapshot records.

The line engine makes the producer (``Engine.producer``): confluent-kafka's with the Python engine,
the compiled engine's own (``hyperdata_sidecar_engine.Producer``: librdkafka through rust-rdkafka,
the same configuration and the same Python-facing calls) with the native one. So every record of the
worker (data, dead letters, redeliveries, seals, snapshot events) goes through one producer either
way: one idempotent sequence per partition.

:class:`DataPlane` is the one door to that producer: nothing else holds it, and it has no public
``produce``. Records reach it three ways, each a method here: a file's line engine
(:meth:`DataPlane.lines`, the engine's, handed the producer), a record sent again after a failed
delivery (:meth:`DataPlane.resend`), and one low-rate record that the seal and snapshot agents
publish once (:meth:`DataPlane.send`, through ``agents/publish_once.py``). ``tests/unit/test_architecture.py``
fails if ``produce`` is reached anywhere else.

The door writes a topic only while its partition count is the contract's
(:class:`~hyperdata_sidecar.core.topic_check.TopicGuard`): the records are partitioned over the
contract's count, and a topic with another count (a deleted topic given back by a broker's
auto-create with one partition) would break the per-coin partitioning and lose what the operator
deletes with the copy. It checks each topic against the broker at :meth:`DataPlane.connect` and
again (:meth:`DataPlane.refresh_metadata`) before a held table sends anything again; it follows
the producer's own view of the topics (librdkafka's statistics, every second); and every way in
refuses a topic that may not be written (:class:`TopicNotWritable`, a hold for the table): a line
engine's hand-over (:class:`CheckedLines`), a resend, a seal or snapshot record. Its clients never
create a topic (``allow.auto.create.topics=false``: librdkafka's producer would, by default, and a
topic deleted under it came back with the broker's default count).

librdkafka batches, compresses and sends in its own threads. With ``enable.idempotence`` and
``message.timeout.ms=0`` it keeps every record until the broker has it, retrying and reconnecting by
itself, in order and without duplicates; so the sidecar never re-sends or replaces anything because
the broker went away, it waits. Faust keeps its own aiokafka clients for tables, changelogs and the
internal topics.

Everything that touches the producer runs on the event loop, and nothing there blocks:
``produce()`` only queues (a full queue raises ``BufferError``: back-pressure), and the delivery
reports are served by ``poll(0)`` from a task on the loop (:meth:`DataPlane.serve`), so report
callbacks run on the loop thread and touch asyncio state directly. (A separate poll thread would
take the GIL once per reported record, while the loop thread holds it for most of a catch-up.)
Metadata and topic configuration come from blocking client calls, run in worker threads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException

from hyperdata_sidecar.broker_login import librdkafka_refusal
from hyperdata_sidecar.checked_lines import CheckedLines, TopicNotWritable
from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.records import Record
from hyperdata_sidecar.core.stuck_partition import Stuck, StuckPartitions
from hyperdata_sidecar.core.topic_check import Change, TopicGuard, producer_partition_counts
from hyperdata_sidecar.engines import Engine, FileLines, LineEngine, Producer
from hyperdata_sidecar.logs import EventLog, RepeatFilter
from hyperdata_sidecar.topic_admin import LIBRDKAFKA_LOGGER, METADATA_TIMEOUT_S, TopicAdmin, TopicLookFailed
from hyperdata_sidecar.topics import load_contract, producer_max_request_size
from hyperdata_sidecar.transactions import TransactionAborted, Transactions

POLL_BUSY_S = 0.005  # how often delivery reports are served while they keep coming
POLL_IDLE_S = 0.1  # ... slowing down to this when none came (idle, or the broker is away)
STATS_INTERVAL_MS = 1000  # broker states for readiness
BATCH_FRAMING_BYTES = 512  # a record batch's own bytes on top of its records, with margin
#: A line's record on top of the line: key, headers and batch framing (the contract's 64 KiB margin).
RECORD_FRAMING_BYTES = 65536
#: Connection errors that say the broker is unreachable (counted as kind "transport", logged at most
#: once per minute each). A refused login (``_AUTHENTICATION``) is not one: it is kind "login_refused".
TRANSPORT_ERRORS = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "_TIMED_OUT", "_SSL"})
#: How long a producer being replaced is polled for its purged records' reports (both engines queue
#: them at the purge; the native one's events thread hands them over within milliseconds).
PURGED_REPORTS_WAIT_S = 1.0
#: A partition librdkafka's leader-less update bug names (core/stuck_partition.py) that holds records
#: and sends none for this long is stuck: only a new producer sends them.
STUCK_AFTER_S = 30.0


class DataPlaneError(Exception):
    """The data plane cannot be set up (broker unreachable, topic missing): retry later."""


class DataPlane:
    """Owns the worker's producer, made by ``engine``.

    Lifecycle: :meth:`connect` (retried by the caller until it succeeds), then :meth:`serve` runs
    as a task until :meth:`close`. ``on_broker(connected)`` is called on every change of the
    broker's reachability, ``on_login_refused(why)`` when the broker refused the producer's login
    (it stays unreachable until a login succeeds), ``on_error(kind)`` for every error librdkafka
    reports (kind ``transport``, ``login_refused``, ``client`` or ``fatal``), ``on_fatal(error)``
    once if one is fatal.
    """

    def __init__(
        self,
        settings: Settings,
        log: EventLog,
        engine: Engine,
        txn: Transactions,
        *,
        on_broker: Callable[[bool], None],
        on_login_refused: Callable[[str], None],
        on_error: Callable[[str], None],
        on_fatal: Callable[[KafkaError], None],
    ) -> None:
        self.settings = settings
        self.engine = engine
        self.txn = txn
        self.log = log
        self._on_broker = on_broker
        self._on_login_refused = on_login_refused
        self._on_error = on_error
        self._on_fatal = on_fatal
        self._producer: Producer | None = None  # made by the engine at connect
        contract = {spec.name: spec.partitions for spec in load_contract(settings.topic_names())}
        #: The contract's partition counts: what every record is partitioned over.
        self.partitions: Mapping[str, int] = contract
        self.guard = TopicGuard(contract)
        self.admin = TopicAdmin(settings, contract)
        self.max_message_bytes: dict[str, int] = {}
        self.batch_bytes = settings.producer_batch_bytes
        self.connected = False
        self.fatal: KafkaError | None = None
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []
        self._closed = asyncio.Event()
        self._stuck = StuckPartitions(STUCK_AFTER_S)  # the producer's, new with every producer
        self.stuck: Stuck | None = None  # the current producer's stuck partition, once found
        self._confirming: asyncio.Task[None] | None = None  # asking the broker whether it has a leader
        logger = logging.getLogger(LIBRDKAFKA_LOGGER)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter(prefix=LIBRDKAFKA_LOGGER, every_s=60.0, key=_librdkafka_facility))
        self._librdkafka_log = LibrdkafkaLog(logger, self._log_line)

    # ------------------------------------------------------------------ setup

    async def connect(self, topics: list[str]) -> None:
        """Check ``topics`` against the contract (their partition counts; a topic with another count
        is logged and may not be written), learn their ``max.message.bytes``, then create the producer.

        Raises :class:`DataPlaneError` when the broker cannot be reached or a topic is missing.
        """
        try:
            partitions, limits, floors = await asyncio.to_thread(self.admin.describe, topics)
        except TopicLookFailed as exc:
            raise DataPlaneError(str(exc)) from exc
        for topic, count in partitions.items():
            self._note(self.guard.checked(topic, count, floors.get(topic)))
        self.max_message_bytes = limits
        if self.txn.enabled:
            self._check_line_limits(limits)
        # A batch larger than a topic's max.message.bytes is refused whole, innocent records and
        # all: keep batches below the smallest limit, so only a record too large by itself fails.
        self.batch_bytes = max(1, min(self.settings.producer_batch_bytes, *(v - BATCH_FRAMING_BYTES for v in limits.values())))
        if self.batch_bytes < self.settings.producer_batch_bytes:
            smallest = min(limits, key=limits.__getitem__)
            self.log.warning(
                "topic_limit_below_contract",
                topic=smallest,
                max_message_bytes=limits[smallest],
                batch_bytes=self.batch_bytes,
                contract=producer_max_request_size(load_contract({})),
            )
        producer = self.engine.producer(self._config())
        try:
            await self.txn.start(producer, self._drained, self._renew, self.check_topics)
        except Exception as exc:
            error = self.engine.txn_error(exc)
            if error is None:
                raise
            raise DataPlaneError(f"init_transactions: {error.name} ({error.detail})") from exc
        self._producer = producer
        self._set_connected(True)

    def _check_line_limits(self, limits: Mapping[str, int]) -> None:
        """exactly_once: every data topic and the DLQ must take a line of ``MAX_LINE_BYTES`` with its
        framing. A record the broker refuses for good fails its transaction, and the redone read
        would send it again: with at_least_once it becomes a dead letter instead (the redelivery).
        Raises :class:`DataPlaneError` (the connect is retried: the operator can raise the limit)."""
        needed = self.settings.max_line_bytes + RECORD_FRAMING_BYTES
        lines = [*self.settings.topics.values(), self.settings.topic_dlq]
        low = {topic: limit for topic, limit in limits.items() if topic in lines and limit < needed}
        if low:
            topic = min(low, key=low.__getitem__)
            raise DataPlaneError(
                f"DELIVERY=exactly_once needs max.message.bytes >= MAX_LINE_BYTES + {RECORD_FRAMING_BYTES} = {needed} "
                f"on every data topic and the DLQ; {topic} has {low[topic]} (raise it, or lower MAX_LINE_BYTES)"
            )

    def _config(self) -> dict[str, Any]:
        return {
            **self.admin.client_config(),
            "client.id": f"hyperdata-sidecar-{self.settings.node_id}",
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": self.settings.producer_compression,
            "compression.level": self.settings.producer_compression_level,
            "linger.ms": self.settings.producer_linger_ms,
            "batch.size": self.batch_bytes,
            "message.max.bytes": producer_max_request_size(load_contract({})),
            # Never give a record up: while the broker is away the sidecar waits (its window is full).
            "message.timeout.ms": 0,
            # The tailers' in-flight windows bound what is queued; this is only a backstop.
            "queue.buffering.max.messages": 1 << 20,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 2000,
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "error_cb": self._error,
            "stats_cb": self._stats,
            "logger": self._librdkafka_log,
            "log_level": 4,
            **self.txn.config(),
        }

    # ------------------------------------------------------------------ the ways to the producer

    def lines(self, file: FileLines) -> LineEngine:
        """The engine's line engine of ``file``, handing its records to the producer (the hot path)
        while its topics may be written. Raises :class:`DataPlaneError` before :meth:`connect`."""
        return CheckedLines(self.engine.lines(self._connected_producer(), file), self.guard, file.topics, self.txn)

    def resend(self, record: Record, on_delivery: Callable[[Any, Any], None]) -> None:
        """Queue ``record`` again (after a failed delivery); raises ``BufferError`` while the queue is
        full, :class:`TopicNotWritable` while its topic may not be written, else the client's refusal."""
        producer = self._connected_producer()
        refusal = self.guard.refusal(record.topic)
        if refusal is not None:
            raise TopicNotWritable(record.topic, refusal)
        self.txn.check()  # exactly_once aborts instead of sending again: never reached then
        producer.produce(record.topic, record.value, record.key, record.partition, on_delivery, None, 0, record.headers)

    def _connected_producer(self) -> Producer:
        if self._producer is None:
            raise DataPlaneError("the data plane is not connected")
        return self._producer

    async def refresh_metadata(self, topic: str) -> str | None:
        """Ask the broker for ``topic``'s metadata now, so the producer learns its partitions before
        the next retry instead of at librdkafka's periodic refresh (``topic.metadata.refresh.interval.ms``,
        5 minutes), then check it against the contract: a topic deleted and created again with the
        contract's count is written as soon as it exists, one with another count is not. The error, or None."""
        producer = self._producer
        if producer is None:
            return "the data plane is not connected"
        error = await asyncio.to_thread(producer.refresh_metadata, topic, METADATA_TIMEOUT_S)
        if topic not in self.partitions:
            return error
        try:
            count, floors = await asyncio.to_thread(self.admin.look, topic, self.guard.refusal(topic) is not None)
        except TopicLookFailed as exc:
            return error or str(exc)
        self._note(self.guard.checked(topic, count, floors))
        return error

    async def check_topics(self) -> None:
        """Ask the broker for every topic of the contract and refuse those it lacks or that have
        another count (before an aborted transaction's reads are redone: a transaction that failed
        because its topic was deleted would fail again at the redo's first record, and the table
        must hold on it instead). A topic with the contract's count is left as it is: a held table
        checks it again before it sends. A broker that cannot be asked changes nothing."""
        try:
            counts = await asyncio.to_thread(self.admin.counts, list(self.partitions))
        except TopicLookFailed as exc:
            self.log.limited(logging.WARNING, "topic_check_failed", "redo", 60.0, error=str(exc))
            return
        for topic, count in counts.items():
            if count != self.partitions[topic]:
                self._note(self.guard.checked(topic, count, None))

    def suspect(self, topic: str, detail: str) -> None:
        """A table found records of ``topic`` delivered below where the topic stood (another
        incarnation of it): it is not written until it is checked again."""
        self._note(self.guard.suspect(topic, detail))

    def _note(self, change: Change | None) -> None:
        """Log (and count) what a look at a topic changed. With exactly_once a topic that could be
        written until now and may not be any more aborts the open transaction at once (one already
        refused has no record in it): its records for that topic cannot be delivered where they
        belong (a deleted topic's would fail only after ``TXN_TIMEOUT_MS``, holding every table's
        commit meanwhile); the reads are redone, and the table of that topic holds, named, while
        the others go on."""
        if change is None:
            return
        if change.was_writable and self._producer is not None:  # at connect no transaction is open yet
            refusal = self.guard.refusal(change.topic)
            self.txn.record_failed(f"{change.topic} may not be written: {refusal.error_name if refusal else change.seen_by}")
        if change.writable:
            self.log.info("topic_checked", topic=change.topic, partitions=change.partitions, epoch=change.epoch)
        elif change.seen_by == "offsets":
            return  # the table that found it logs it (topic_offsets_went_back)
        elif change.partitions == 0:
            self.log.warning("topic_missing", topic=change.topic, contract=change.contract, seen_by=change.seen_by)
        else:
            self._on_error("partitions")
            self.log.error(
                "topic_partitions_mismatch",
                topic=change.topic,
                partitions=change.partitions,
                contract=change.contract,
                seen_by=change.seen_by,
            )

    def refused_topics(self) -> dict[str, str]:
        """The topics the door refuses now (missing, another partition count, records found in
        another incarnation), each with why: readiness names them even while no table holds on them
        yet (exactly_once: the tables redo their reads first)."""
        return {topic: f"{r.error_name} ({r.detail})" for topic, r in self.guard.refused().items()}

    def outstanding(self) -> int:
        """Records queued or in flight, plus reports not yet served."""
        return len(self._producer) if self._producer is not None else 0

    # ------------------------------------------------------------------ serving reports

    async def serve(self) -> None:
        """Serve delivery reports and client events until :meth:`close`; wake the waiters.

        Polls every POLL_BUSY_S while reports come in, and backs off to POLL_IDLE_S while none do
        (so a broker outage costs a few wake-ups a second, not hundreds).
        """
        interval = POLL_BUSY_S
        while not self._closed.is_set():
            if self._producer is not None and self._poll():
                self._wake()
                interval = POLL_BUSY_S
            else:
                interval = min(interval * 2, POLL_IDLE_S)
            await asyncio.sleep(interval)

    def _poll(self) -> int:
        """One ``poll(0)``. confluent-kafka raises a fatal error (a fenced transactional producer)
        from ``poll`` instead of calling ``error_cb`` (wrapped in a ``SystemError`` when a delivery
        callback ran in the same call): it is handled as ``error_cb`` would have been."""
        assert self._producer is not None
        try:
            return self._producer.poll(0)
        except (KafkaException, SystemError) as exc:
            raised = exc if isinstance(exc, KafkaException) else exc.__cause__
            error = raised.args[0] if isinstance(raised, KafkaException) and raised.args else None
            if not isinstance(error, KafkaError) or not error.fatal():
                raise
            if self.fatal is None:
                self._error(error)
            return 1

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` holds (checked after every poll); False on timeout or close."""
        if predicate():
            return True
        if self._closed.is_set():
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiter = (predicate, future)
        self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return predicate()
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
        return predicate()

    def _wake(self) -> None:
        for predicate, future in list(self._waiters):
            if not future.done() and (predicate() or self._closed.is_set()):
                future.set_result(None)

    async def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None:
        """Publish one low-rate record (a seal, a snapshot event) and return once the broker has it
        (with exactly_once: once its transaction committed).

        Waits through broker outages (the record is never given up). Raises ``KafkaException``
        if the broker refuses it for good, :class:`~hyperdata_sidecar.transactions.TransactionAborted`
        if its transaction was aborted (the caller sends it again).
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        # Explicit partitions only: librdkafka's idempotent producer must not mix them with its own
        # partitioner, and murmur2 is what Java clients would pick for the same key.
        partition = partition_for(key, self.partitions[topic])
        if self.guard.refusal(topic) is not None:
            await self.refresh_metadata(topic)  # the caller's back-off paces these
            refusal = self.guard.refusal(topic)
            if refusal is not None:
                raise TopicNotWritable(topic, refusal)

        def delivered(error: KafkaError | None, _message: Any) -> None:
            if done.done():
                return
            if error is None:
                done.set_result(None)
            else:
                done.set_exception(KafkaException(error))

        number = await self._produce(topic, key, value, partition, headers, lambda _number: delivered)
        await done
        await self.txn.committed_through(number)

    @property
    def exactly_once(self) -> bool:
        return self.txn.enabled

    async def send_internal(self, topic: str, key: bytes | None, value: bytes) -> None:
        """exactly_once: write one record of an internal topic (one partition: progress, rotations,
        snapshot events) into the open transaction, without waiting for it: its transaction commits
        it with the records it covers, or a failure aborts both."""

        def delivered_in(number: int) -> Callable[[KafkaError | None, Any], None]:
            def delivered(error: KafkaError | None, _message: Any) -> None:
                if error is not None:
                    self.txn.record_failed(f"{topic}: {error.name()} ({error.str()})", number)

            return delivered

        try:
            await self._produce(topic, key, value, 0, None, delivered_in)
        except Exception as exc:
            error = self.engine.txn_error(exc)
            if error is None:
                raise
            # Refused: the transaction cannot commit without it (a progress record covers the lines
            # before it), and a transaction in error refuses every record: abort and redo.
            self.txn.record_failed(f"{topic}: {error.name} ({error.detail})")
            raise TransactionAborted(self.txn.abort_reason or error.name) from exc

    async def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes,
        partition: int,
        headers: list[tuple[str, bytes]] | None,
        delivered_in: Callable[[int], Callable[[KafkaError | None, Any], None]],
    ) -> int:
        """Hand one record to the producer once the transactions admit it (exactly_once: into the
        open transaction, whose number is returned; 0 otherwise), waiting while the producer's queue
        is full; ``delivered_in(number)`` is its report's callback. The producer is taken after the
        admission, which an aborted transaction's renewed producer may have replaced. Raises what
        the producer raises for a record it refuses."""
        while True:
            number = await self.txn.admit(len(value))
            try:
                self._connected_producer().produce(topic, value, key, partition, delivered_in(number), None, 0, headers)
                return number
            except BufferError:
                await asyncio.sleep(POLL_BUSY_S)

    # ------------------------------------------------------------------ client events

    def _error(self, error: KafkaError) -> None:
        # Every error is counted, the log is rate-limited: an outage of the broker shows as a rising
        # count of "transport" errors, not as a quiet producer.
        if error.fatal():
            self.fatal = error
            self._on_error("fatal")
            self.log.error("producer_fatal", error=error.name(), detail=error.str())
            if self.txn.enabled:
                # The transactions decide at their next call: fenced by a newer worker (this one
                # stops), or anything else, such as the broker's abort of a transaction open longer
                # than TXN_TIMEOUT_MS (a new producer takes over and the reads are redone).
                return
            self._on_fatal(error)
            return
        name = error.name()
        if name == "_ALL_BROKERS_DOWN":
            self._set_connected(False)
        refused = librdkafka_refusal(name, error.str(), self.settings.security)
        if refused is not None:
            # librdkafka tries the login again at every reconnect (every 2 s at most): one line a minute.
            self._on_error("login_refused")
            self._set_connected(False)
            self._on_login_refused(str(refused))
            self.log.limited(
                logging.ERROR,
                "broker_login_refused",
                name,
                60.0,
                bootstrap=self.settings.kafka_bootstrap,
                mechanism=refused.mechanism,
                user=refused.user,
                error=str(refused),
            )
        elif name in TRANSPORT_ERRORS:
            self._on_error("transport")
            self.log.limited(logging.WARNING, "broker_unreachable", name, 60.0, error=name, detail=error.str())
        else:
            self._on_error("client")
            self.log.limited(logging.WARNING, "producer_error", name, 60.0, error=name, detail=error.str())

    def _stats(self, stats: str) -> None:
        parsed = orjson.loads(stats)
        brokers = parsed.get("brokers", {})
        self._set_connected(any(b.get("state") == "UP" for b in brokers.values()))
        for topic, count in producer_partition_counts(parsed).items():
            if topic in self.partitions:
                self._note(self.guard.producer_saw(topic, count))
        if self.stuck is None and (self._confirming is None or self._confirming.done()):
            for stuck in self._stuck.stats(parsed, time.monotonic(), connected=self.connected)[:1]:
                self._confirming = asyncio.ensure_future(self._confirm_stuck(stuck))

    async def _confirm_stuck(self, stuck: Stuck) -> None:
        """A candidate is stuck only if the broker names a leader for its partition now: without
        one (or unreachable) the broker is what keeps the records, and the producer waits for it."""
        try:
            leader = await asyncio.to_thread(self.admin.leader, stuck.topic, stuck.partition)
        except TopicLookFailed:
            leader = None
        if leader is None:
            await asyncio.sleep(STUCK_AFTER_S / 3)  # the next statistics after this ask again
            return
        self._producer_stuck(stuck, leader)

    def _log_line(self, text: str) -> None:
        """Every line librdkafka logs passes here: the leader-less update line starts a watch."""
        self._stuck.line(text, time.monotonic())

    def _producer_stuck(self, stuck: Stuck, leader: int) -> None:
        """A partition stuck by librdkafka's leader-less update bug (the broker names its ``leader``,
        the producer sends it nothing): its records are never sent, and only a new producer sends
        them. With exactly_once the open transaction is aborted and a new producer takes over (its
        reads are redone); with at_least_once the line engines hold this producer, so the worker
        stops (exit 1) and the restart resumes from the last checkpoint."""
        why = "after a leader-less update" if stuck.line else f"sending nothing for {stuck.quiet_s:.0f} s while connected"
        reason = f"{stuck.topic} [{stuck.partition}]: stuck {why} (librdkafka#5430)"
        if self.txn.enabled and not self.txn.replace_producer(reason):
            return  # an abort is under way: asked again at the next statistics
        self.stuck = stuck
        self._on_error("stuck")
        self.log.error(
            "producer_stuck",
            topic=stuck.topic,
            partition=stuck.partition,
            records=stuck.queued,
            quiet_s=round(stuck.quiet_s, 1),
            broker_leader=leader,
            cause="librdkafka skipped a leader-less metadata update and never sends to the partition again "
            "(confluentinc/librdkafka#5430)"
            if stuck.line
            else "librdkafka sent nothing to the partition for quiet_s while connected, though the broker names its "
            "leader (the leader-less line of confluentinc/librdkafka#5430 not seen)",
            action="a new producer: reads redone" if self.txn.enabled else "the worker stops; the restart resumes",
        )
        if not self.txn.enabled:
            self._on_fatal(KafkaError(KafkaError._FAIL, reason, fatal=True))

    def _set_connected(self, connected: bool) -> None:
        if connected != self.connected:
            self.connected = connected
            self._on_broker(connected)

    # ------------------------------------------------------------------ transactions (exactly_once)

    async def _renew(self) -> Producer:
        """A new producer for the old one the broker fenced (after it aborted a transaction open
        longer than ``TXN_TIMEOUT_MS``), registered with ``init_transactions``; the old one's
        records are dropped (their transaction was aborted)."""
        old = self._connected_producer()
        old.purge()
        # The purged records' reports are served here, on the loop: nothing polls the old producer
        # once the new one is in place, and a table's cycle waiting on them would keep its tick,
        # and the redo that waits for the ticks to end, waiting for good.
        deadline = time.monotonic() + PURGED_REPORTS_WAIT_S
        old.poll(0)
        while len(old) and time.monotonic() < deadline:
            await asyncio.sleep(POLL_BUSY_S)
            old.poll(0)
        producer = self.engine.producer(self._config())
        await asyncio.to_thread(producer.init_transactions, METADATA_TIMEOUT_S)
        self._producer = producer
        self.fatal = None
        self._stuck, self.stuck, self._confirming = StuckPartitions(STUCK_AFTER_S), None, None
        return producer

    async def _drained(self) -> None:
        """Every record reported, the reports served on the loop (before a commit); or the
        transaction is to be aborted (a stuck partition's records would never be reported)."""
        while self.outstanding() and not self._closed.is_set() and self.txn.abort_reason is None:
            await self.until(lambda: not self.outstanding() or self.txn.abort_reason is not None, timeout=1.0)

    async def commit_loop(self, stopping: Callable[[], bool]) -> None:
        """Commit the open transaction whenever it is due, until ``stopping()`` (nothing with at_least_once)."""
        await self.txn.run(stopping)

    async def finish(self) -> None:
        """At stop, after the ticks ended: commit what the open transaction holds."""
        await self.txn.finish()

    # ------------------------------------------------------------------ shutdown

    async def close(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for outstanding records, then stop serving. Returns how many were
        still outstanding (those were not checkpointed: a restart publishes them again)."""
        deadline = time.monotonic() + timeout
        while self.outstanding() and time.monotonic() < deadline and not self._closed.is_set():
            await self.until(lambda: not self.outstanding(), timeout=max(0.0, deadline - time.monotonic()))
        left = self.outstanding()
        self._closed.set()
        self._wake()
        if self._producer is not None:
            self._producer.purge()
            self._producer.poll(0)  # serves the purged records' reports, on this thread
        return left


class LibrdkafkaLog:
    """The producer's ``logger``: both engines call ``log(level, "%s [%s] %s", facility, client,
    message)`` on the loop thread (from ``poll``). Each line goes to the sidecar's librdkafka logger
    (rate-limited per facility) and, formatted, to ``on_line``."""

    def __init__(self, logger: logging.Logger, on_line: Callable[[str], None]) -> None:
        self.logger = logger
        self._on_line = on_line

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        self._on_line(msg % args if args else msg)
        self.logger.log(level, msg, *args, **kwargs)


def _librdkafka_facility(record: logging.LogRecord) -> str:
    """confluent-kafka logs ``"%s [%s] %s" % (facility, client, message)``: rate-limit per facility."""
    args = record.args if isinstance(record.args, tuple) else ()
    return f"{record.name}:{args[0] if args else record.msg}"
