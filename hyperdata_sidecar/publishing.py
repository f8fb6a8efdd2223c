"""How a table's tailer waits on the producer: for delivery reports, for room in its queue, and
through a hold while a topic cannot be written.

Both ways records reach the producer (the first send, a line engine's handover, and redelivery,
:class:`~hyperdata_sidecar.redelivery.Redelivery`) wait through :class:`PublishFlow`, so there is one
answer to each of: the queue is full (``BufferError``: let reports come in, try again), the client
refuses a record (hold the table: not ready, slow retries, the topic's metadata asked for again
before each retry so a topic created again is written within one step), the worker stops (settle
for at most STOP_GRACE_S, then give up without a checkpoint).

The data plane refuses a topic whose partition count is not the contract's (``TopicNotWritable``, a
refusal like a client's: the table holds, and the check before each retry is what lets it go on).
And before a cycle is committed, :meth:`PublishFlow.vouch` asks where its records landed
(:class:`~hyperdata_sidecar.core.topic_check.Landings`): a record delivered below where its topic
stood landed in another incarnation of the topic (deleted and created again under the producer).
:meth:`PublishFlow.check_suspected` then checks the topic at once: with the contract's count the
records are in the topic as it is now and stay; otherwise every record of that topic in the cycle
is sent again, once the topic has the contract's count.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.delivery import Refusal
from hyperdata_sidecar.core.records import Record, refusal_name
from hyperdata_sidecar.core.topic_check import OFFSETS_WENT_BACK, Landings, TopicGuard, TopicRefused
from hyperdata_sidecar.core.window import Cycle, Window
from hyperdata_sidecar.engines import FileLines, LineEngine
from hyperdata_sidecar.tailer_events import TailerEvents
from hyperdata_sidecar.transactions import TransactionAborted, Transactions

HOLD_BACKOFF_S = (2.0, 5.0)  # first and longest wait before records of a held topic are sent again
ROOM_WAIT_S = 0.01  # the producer's queue is full: wait this long for reports, then try again
STOP_GRACE_S = 5.0  # on shutdown, how long cycles in flight may take to be reported


class Abandoned(Exception):
    """The worker is stopping (or the producer failed for good); cycles in flight were not checkpointed."""


class Publisher(Protocol):
    """What a tailer needs of the data plane (:class:`~hyperdata_sidecar.dataplane.DataPlane`), the
    one holder of the producer: it has no ``produce``. Records reach the producer through a file's
    line engine (:meth:`lines`) and, when a delivery failed, through :meth:`resend`."""

    partitions: Mapping[str, int]
    """The contract's partition counts, by topic: what records are partitioned over."""

    guard: TopicGuard
    """Which topics may be written now, their epochs and floors."""

    txn: Transactions
    """The transactions the records go into (exactly_once), a gate that lets everything through otherwise."""

    def lines(self, file: FileLines) -> LineEngine:
        """The engine's line engine of ``file``, handing its records to the producer."""

    def resend(self, record: Record, on_delivery: Callable[[Any, Any], None]) -> None:
        """Queue ``record`` again (a failed delivery's, or the dead letter replacing it); raises
        ``BufferError`` while the producer's queue is full, else the client's refusal."""

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until ``predicate()`` holds, checked after every served report; False on timeout."""

    async def refresh_metadata(self, topic: str) -> str | None:
        """Ask the broker for ``topic``'s metadata now (its partitions) and check it against the
        contract; the error, or None."""

    def suspect(self, topic: str, detail: str) -> None:
        """Records of ``topic`` were found in another incarnation of it: not written until checked again."""


class PublishFlow:
    """One table's waits on the producer. ``stopping`` and ``pause`` are the shell's: a flag set
    when the worker stops, and a sleep that wakes early then (False when it did). ``topics``: the
    table's data topic and the DLQ, whose landings :meth:`vouch` checks."""

    def __init__(
        self,
        publisher: Publisher,
        events: TailerEvents,
        *,
        stopping: Callable[[], bool],
        pause: Callable[[float], Awaitable[bool]],
        topics: tuple[str, ...] = (),
    ) -> None:
        self.publisher = publisher
        self.events = events
        self.stopping = stopping
        self.pause = pause
        self.topics = topics
        self.landings = Landings(publisher.guard)
        self._stop_deadline: float | None = None

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait for ``predicate`` (delivery reports); once the worker stops, for at most STOP_GRACE_S
        in all, then raise :class:`Abandoned`."""
        while not predicate():
            if self.stopping():
                if self._stop_deadline is None:
                    self._stop_deadline = time.monotonic() + STOP_GRACE_S
                left = self._stop_deadline - time.monotonic()
                if left <= 0:
                    raise Abandoned()
                await self.publisher.until(predicate, timeout=left)
            else:
                await self.publisher.until(predicate, timeout=1.0)

    async def wait_for_room(self) -> None:
        """The producer's queue is full: let delivery reports come in for a moment."""
        if self.stopping():
            raise Abandoned()
        await self.publisher.until(_never, timeout=ROOM_WAIT_S)

    async def resend(self, record: Record, on_delivery: Callable[[Any, Any], None]) -> BaseException | None:
        """Hand one record to the producer again, waiting while its queue is full; the exception if
        the client refuses it (nothing was queued then)."""
        while True:
            try:
                self.publisher.resend(record, on_delivery)
                return None
            except BufferError:
                await self.wait_for_room()
            except Exception as exc:  # noqa: BLE001 - any refusal of the client is the caller's to judge
                return exc

    @staticmethod
    def reason(topic: str, refusal: BaseException) -> str:
        """A hold's reason for a record of ``topic`` the client or the door refused: the door names the topic it refused."""
        if isinstance(refusal, TopicRefused):
            return refusal.reason()
        return f"{topic}: {refusal_name(refusal)} ({refusal})"

    def vouch(self, window: Window) -> None:
        """Check where the settled cycles' records landed: a record of a topic delivered below where
        the topic stood in its epoch landed in another incarnation of it. Then the topic is not written
        until it is checked again, and the cycle is not committed before (:meth:`check_suspected`)."""
        for cycle in window:
            if not cycle.settled():
                continue
            deliveries = cycle.deliveries
            for topic in self.topics:
                epochs = deliveries.epochs(topic)
                if epochs is None or topic in deliveries.distrusted or topic in deliveries.suspected:
                    continue
                moved = self.landings.moved(topic, deliveries.first_sends(topic), epochs)
                if moved is not None:
                    self.events.landed_elsewhere(moved)
                    self.publisher.suspect(topic, moved.detail())
                    deliveries.suspect(topic, Refusal(OFFSETS_WENT_BACK, moved.detail()))

    async def check_suspected(self, window: Window) -> None:
        """Check each topic whose records :meth:`vouch` found below where it stood, at once (and again
        after a hold while the broker cannot be asked): with the contract's count, the records landed in
        the topic as it is now (deleted and created again with it) and stay where they are; otherwise
        (another count, missing) every record of that topic in those cycles is to be sent again."""
        for topic in {topic: None for cycle in window for topic in cycle.deliveries.suspected}:
            await self.publisher.refresh_metadata(topic)
            backoff = self.backoff()
            while (refusal := self.publisher.guard.refusal(topic)) is not None and refusal.name() == OFFSETS_WENT_BACK:
                await self.hold(backoff, (topic,), f"{topic}: {refusal.name()} ({refusal.str()})")
            self.release(backoff)
            trusted = self.publisher.guard.refusal(topic) is None
            if trusted:
                self.landings.trusted(topic, self.publisher.guard.epoch(topic))
            for cycle in window:
                found = cycle.deliveries.suspected.get(topic)
                if found is not None:
                    if trusted:
                        cycle.deliveries.trust(topic)
                    else:
                        cycle.deliveries.distrust(topic, found)

    @property
    def txn(self) -> Transactions:
        """The data plane's transactions (exactly_once; a gate that lets everything through otherwise)."""
        return self.publisher.txn

    def not_in_transaction(self, cycle: Cycle) -> None:
        """exactly_once: a record of ``cycle`` was not delivered, so its transaction cannot commit:
        abort it and end the tick (raises :class:`TransactionAborted`); the tables redo their reads.
        Nothing with at_least_once (the records are sent again)."""
        if self.txn.enabled:
            failures = cycle.deliveries.failures()
            self.txn.record_failed(f"a record was not delivered: {failures[0] if failures else 'unknown'}")
            raise TransactionAborted(self.txn.abort_reason or "a record was not delivered")

    def landed(self, cycle: Cycle) -> None:
        """``cycle`` was committed: where its records landed is what the next cycles' must be above."""
        for topic in self.topics:
            epochs = cycle.deliveries.epochs(topic)
            if epochs is not None:
                self.landings.landed(topic, cycle.deliveries.first_sends(topic), epochs[1])

    @staticmethod
    def backoff() -> Backoff:
        """The back-off of one hold."""
        return Backoff(*HOLD_BACKOFF_S)

    async def hold(self, backoff: Backoff, topics: tuple[str, ...], reason: str, *, records: int | None = None) -> None:
        """``topics`` cannot all be written now: hold the table (not ready, ``reason``), wait the next
        step of ``backoff``, then ask for their metadata so the retry sees them as the broker has them now."""
        self.events.held(reason, retry_in_s=backoff.delay, records=records)
        if not await backoff.wait(self.pause):
            raise Abandoned()
        self.txn.check()
        for topic in topics:
            error = await self.publisher.refresh_metadata(topic)
            if error is not None:
                self.events.metadata_refresh_failed(topic, error)

    def release(self, backoff: Backoff) -> None:
        """The hold that ``backoff`` paced is over (nothing when it never waited)."""
        if backoff.tries:
            self.events.released()


def _never() -> bool:
    return False
