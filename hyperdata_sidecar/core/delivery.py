"""Delivery reports of one cycle, and what a failed delivery means.

Every record the tailer hands to the producer carries a delivery callback: one :class:`GroupAcks`
per (topic, partition) of the cycle. librdkafka reports a partition's records in the order they
were produced, each exactly once, as delivered or failed for good (``message.timeout.ms=0``: no
record ever expires while the broker is away). So a cycle is settled when the reports it received
equal the records it produced, and the i-th report of a group is the group's i-th record.

Nothing here imports Kafka: the error objects only need ``name()`` and ``fatal()``, as
confluent-kafka's ``KafkaError`` has.
"""

from __future__ import annotations

import builtins
import enum
from typing import Any, NamedTuple

from hyperdata_sidecar.core.records import CycleAcks, DeliveryCallback, Topics


class Verdict(enum.Enum):
    """What to do about a record the producer reported as failed."""

    REJECTED = "rejected"
    """The broker refuses this record for good: its reference goes to the DLQ (reason ``rejected``)."""
    HOLD = "hold"
    """Affects the whole topic and may be fixed by an operator (missing topic, no authorization):
    keep the file's position, report not ready, send the record again later."""
    FATAL = "fatal"
    """The producer cannot go on (idempotence state lost): stop the worker; a restart resumes
    from the last checkpoint."""


#: Broker errors that refuse one record (or its batch) and would refuse it again, by librdkafka's
#: names (Kafka's CORRUPT_MESSAGE is INVALID_MSG there).
RECORD_ERRORS = frozenset(
    {"MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "INVALID_MSG", "INVALID_MSG_SIZE", "INVALID_TIMESTAMP"}
)


def verdict(error: Any) -> Verdict:
    """The :class:`Verdict` for a delivery error (a confluent-kafka ``KafkaError``).

    Every permanent error that is not known to be about the record itself is treated as one that
    can heal (``HOLD``): slower, but it never drops a line that a fixed configuration would take.
    """
    if error.fatal():
        return Verdict.FATAL
    if error.name() in RECORD_ERRORS:
        return Verdict.REJECTED
    return Verdict.HOLD


class Refusal(NamedTuple):
    """The client refused to queue a record (``produce()`` raised), as a delivery error: the same
    ``name()``, ``str()`` and ``fatal()`` as confluent-kafka's ``KafkaError``."""

    error_name: builtins.str
    detail: builtins.str

    @classmethod
    def of(cls, exc: BaseException) -> Any:
        """The error behind ``exc``: the ``KafkaError`` a ``KafkaException`` carries, else a :class:`Refusal`."""
        first = exc.args[0] if exc.args else None
        if callable(getattr(first, "name", None)) and callable(getattr(first, "fatal", None)):
            return first
        return cls(type(exc).__name__, str(exc))

    def name(self) -> builtins.str:
        return self.error_name

    def str(self) -> builtins.str:
        return self.detail

    def fatal(self) -> bool:
        return False


class Failure(NamedTuple):
    """One failed record: the ``position``-th record of its group (topic, partition), and the error."""

    topic: str
    partition: int
    position: int
    error: Any


class GroupAcks:
    """Counts the delivery reports of one (topic, partition), keeps its failures and its first and
    last delivered record (whose offsets say where the group landed)."""

    __slots__ = ("topic", "partition", "reported", "failures", "first", "last")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.reported = 0
        self.failures: list[Failure] = []
        self.first: Any = None
        self.last: Any = None

    def report(self, error: Any, message: Any) -> None:
        """confluent-kafka's ``on_delivery(err, msg)``; runs on the thread that polls the producer."""
        if error is None:
            self.last = message
            if self.first is None:
                self.first = message
        else:
            self.failures.append(Failure(self.topic, self.partition, self.reported, error))
        self.reported += 1

    def offset_range(self) -> tuple[int, int] | None:
        """The offsets of the first and last delivered record, or None if none was delivered.
        (A partition's records are delivered in the order they were produced, at rising offsets.)"""
        if self.first is None:
            return None
        return self.first.offset(), self.last.offset()


class Deliveries:
    """The delivery reports of a set of records, one :class:`GroupAcks` per (topic, partition).

    It also keeps, per topic, the epochs of the topic (``core/topic_check.py``) its records were
    handed over in (:meth:`handed`); the topics whose records were found where they could not have
    landed in the incarnation they were handed to (:meth:`suspect`: the topic is to be checked before
    the cycle is committed); and the topics whose records are to be sent again although they were
    reported delivered (:meth:`distrust`: they landed in another incarnation of the topic, one with
    another partition count or gone); those no longer count where the records landed first (:meth:`first_sends`)."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, int], GroupAcks] = {}
        self._widened: dict[tuple[str, int], tuple[int, int]] = {}
        self._epochs: dict[str, tuple[int, int]] = {}
        self._distrusted_ever: set[str] = set()
        #: Topics whose records are to be sent again, with the error they are sent again for (taken by redelivery).
        self.distrusted: dict[str, Any] = {}
        #: Topics to check before the cycle is committed, with what was found (see :meth:`suspect`).
        self.suspected: dict[str, Any] = {}

    def callback(self, topic: str, partition: int) -> DeliveryCallback:
        """The ``on_delivery`` for a record of ``topic``/``partition``."""
        group = self._groups.get((topic, partition))
        if group is None:
            group = self._groups[(topic, partition)] = GroupAcks(topic, partition)
        return group.report

    def cycle_acks(self, topics: Topics, dlq_partition: int) -> CycleAcks:
        """The callbacks :meth:`RecordWriter.write` takes for a table's data and DLQ topics."""
        return CycleAcks(
            [self.callback(topics.data, p) for p in range(topics.data_partitions)], self.callback(topics.dlq, dlq_partition)
        )

    def reported(self) -> int:
        """How many records have been reported (delivered or failed)."""
        return sum(group.reported for group in self._groups.values())

    def failures(self) -> list[Failure]:
        """Every failed record reported so far, by group, in each group's order."""
        return [failure for group in self._groups.values() for failure in group.failures]

    def handed(self, topic: str, epoch: int) -> None:
        """Records of ``topic`` are being handed over in the topic's ``epoch``."""
        first, _ = self._epochs.get(topic, (epoch, epoch))
        self._epochs[topic] = (first, epoch)

    def epochs(self, topic: str) -> tuple[int, int] | None:
        """The epochs of ``topic`` of the first and the last hand-over of its records; None if none was."""
        return self._epochs.get(topic)

    def suspect(self, topic: str, error: Any) -> None:
        """Records of ``topic`` landed where they could not have in the incarnation they were handed to
        (``error`` says where): the topic is to be checked; then :meth:`trust` or :meth:`distrust`."""
        self.suspected[topic] = error

    def trust(self, topic: str) -> None:
        """The topic checked has the contract's count: its records are where they landed."""
        self.suspected.pop(topic, None)

    def distrust(self, topic: str, error: Any) -> None:
        """Every record of ``topic`` is to be sent again (with ``error`` as the reason), delivered or not;
        where they landed so far no longer counts."""
        self.suspected.pop(topic, None)
        self.distrusted[topic] = error
        self._distrusted_ever.add(topic)
        for key in [key for key in self._widened if key[0] == topic]:
            del self._widened[key]

    def take_distrusted(self) -> dict[str, Any]:
        """The topics to send again (see :meth:`distrust`), now being dealt with."""
        taken, self.distrusted = self.distrusted, {}
        return taken

    def first_sends(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: the first and last offset its records landed at when first sent
        (nothing once the topic was distrusted)."""
        return {} if topic in self._distrusted_ever else self._delivered_ranges(topic)

    def widen(self, topic: str, partition: int, offset: int) -> None:
        """A record of this set that failed was delivered later (sent again) at ``offset``."""
        low, high = self._widened.get((topic, partition), (offset, offset))
        self._widened[(topic, partition)] = (min(low, offset), max(high, offset))

    def offset_ranges(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: the lowest and highest offset of the records delivered there."""
        ranges = self.first_sends(topic)
        for (group_topic, partition), (low, high) in self._widened.items():
            if group_topic == topic:
                known = ranges.get(partition, (low, high))
                ranges[partition] = (min(known[0], low), max(known[1], high))
        return ranges

    def _delivered_ranges(self, topic: str) -> dict[int, tuple[int, int]]:
        ranges: dict[int, tuple[int, int]] = {}
        for (group_topic, partition), group in self._groups.items():
            found = group.offset_range() if group_topic == topic else None
            if found is not None:
                ranges[partition] = found
        return ranges
