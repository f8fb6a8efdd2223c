"""A file's line engine behind the door: nothing is handed over while its topics may not be written.

:class:`CheckedLines` wraps the engine's line engine of a file (either engine's: nothing of it
changes); each step of a hand-over first asks the topic guard about the file's data topic and the
DLQ, and refuses with :class:`TopicNotWritable` (the table holds, naming the topic and both counts)
while either may not be written, and notes the topics' epochs in the cycle's deliveries, which
:class:`~hyperdata_sidecar.core.topic_check.Landings` compares with where the records landed.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaException

from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import Record, Topics
from hyperdata_sidecar.core.splitter import Line, OversizeLine
from hyperdata_sidecar.core.topic_check import TopicGuard, TopicRefused
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.digest import ReadChunk
from hyperdata_sidecar.engines import Handover, LineEngine
from hyperdata_sidecar.transactions import Transactions


class TopicNotWritable(TopicRefused, KafkaException):
    """The door refuses a record of a topic that may not be written now (its partition count is not
    the contract's, it is missing, or records were found in another incarnation of it): ``args[0]``
    is the refusal (``name()``, ``str()``), judged as a hold; a ``KafkaException`` for the agents."""


class CheckedLines:
    """A file's line engine behind the door: its hand-overs hand nothing while the file's data
    topic or the DLQ may not be written (the refusal is :class:`TopicNotWritable`: the table holds),
    and note the topics' epochs in the cycle's deliveries (what :class:`~hyperdata_sidecar.core.topic_check.Landings`
    compares). Everything else is the engine's."""

    def __init__(self, engine: LineEngine, guard: TopicGuard, topics: Topics, txn: Transactions) -> None:
        self.engine = engine
        self.guard = guard
        self.topics = (topics.data, topics.dlq)
        self.txn = txn

    @property
    def held_bytes(self) -> int:
        return self.engine.held_bytes

    def state(self) -> WriterState:
        return self.engine.state()

    def deliveries(self) -> Deliveries:
        return self.engine.deliveries()

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        return CheckedHandover(
            self.engine.handover(chunk, cycle), self.guard, self.topics, cycle.deliveries, self.txn, len(chunk)
        )

    def flush_partial(self) -> Line | OversizeLine | None:
        return self.engine.flush_partial()

    def unterminated(self, item: Line | OversizeLine, cycle: Cycle) -> Handover:
        return CheckedHandover(self.engine.unterminated(item, cycle), self.guard, self.topics, cycle.deliveries, self.txn, 0)

    def rebuild(self, cycle: Cycle, data: bytes) -> Mapping[tuple[str, int], list[Record]]:
        return self.engine.rebuild(cycle, data)

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        return self.engine.rejection(record, error, detail)


class CheckedHandover:
    """One hand-over behind the door: each step first checks the topics, and counts as a
    write of the open transaction (exactly_once: the table waited for it before opening the cycle)."""

    def __init__(
        self,
        handover: Handover,
        guard: TopicGuard,
        topics: tuple[str, ...],
        deliveries: Deliveries,
        txn: Transactions,
        nbytes: int,
    ) -> None:
        self.handover = handover
        self.guard = guard
        self.topics = topics
        self.deliveries = deliveries
        self.txn = txn
        self.nbytes = nbytes  # counted against the transaction's budget on the first step
        self.refusal: BaseException | None = None

    async def step(self) -> bool:
        for topic in self.topics:
            refusal = self.guard.refusal(topic)
            if refusal is not None:
                self.refusal = TopicNotWritable(topic, refusal)
                return False
        for topic in self.topics:
            self.deliveries.handed(topic, self.guard.epoch(topic))
        self.txn.enter_read(self.nbytes)
        self.nbytes = 0
        try:
            done = await self.handover.step()
        finally:
            self.txn.leave_read()
        self.refusal = self.handover.refusal
        if self.refusal is not None and not isinstance(self.refusal, TopicNotWritable):
            # exactly_once: a record the client refuses cannot be in the transaction; it is aborted
            # and the reads redone (at_least_once: nothing here, the table holds).
            self.txn.record_failed(f"the client refused a record: {self.refusal}")
        self.txn.check()
        return done
