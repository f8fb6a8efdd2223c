"""May a topic be written, and did a table's records land where the topic stood? Without I/O.

The topic contract fixes each topic's partition count, and the sidecar partitions every record over
that count (murmur2 of the coin). A topic with another count (a topic deleted and given back by a
broker's auto-create with its default of one partition, a copy made by hand) breaks that promise,
and what is written into a copy the operator then deletes is lost. So the data plane writes a topic
only while :class:`TopicGuard` says it may:

- *checked*: the broker was asked for the topic (at start, and before anything is sent again after
  a hold) and it had the contract's count; its end offsets then are the topic's *floors* for this
  *epoch* (a new epoch at every check that makes the topic writable again);
- nothing seen since says otherwise: the producer's own view (librdkafka's statistics, every
  second) showing another count or none, or a table finding a record delivered *below* a floor
  (:class:`Landings`) -- proof it landed in another incarnation of the topic.

librdkafka keeps the records of a partition that still exists when the topic comes back with
another count (and writes them there), and those a new incarnation lacks fail with
``_UNKNOWN_PARTITION``; it writes the records of a topic deleted and created again under its feet
by name, before its metadata shows any change. So a record can land in a copy before anything can
be seen; :class:`Landings` is what finds it afterwards, from the offsets its report carries (a new
incarnation counts its offsets from 0). The topic is then checked at once: with the contract's count
the records landed in the topic as it is now (deleted and created again right), and stay; otherwise
their cycle's records of that topic are sent again once the topic is checked.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hyperdata_sidecar.core.delivery import Refusal

#: The refusals' names (what ``name()`` of a refused record's error says, and the hold's reason).
PARTITION_COUNT = "PARTITION_COUNT"
TOPIC_MISSING = "TOPIC_MISSING"
TOPIC_UNCHECKED = "TOPIC_UNCHECKED"
OFFSETS_WENT_BACK = "OFFSETS_WENT_BACK"

#: Epochs whose floors are kept: a cycle handed over a few checks ago is still compared.
EPOCHS_KEPT = 8


class TopicRefused(Exception):
    """The data plane refused to write ``topic``; ``args[0]`` is the :class:`Refusal` (its
    ``name()`` and ``str()``), so the refusal is judged like a client's (a hold)."""

    def __init__(self, topic: str, refusal: Refusal) -> None:
        super().__init__(refusal)
        self.topic = topic
        self.refusal = refusal

    def __str__(self) -> str:
        return self.refusal.detail

    def reason(self) -> str:
        """The hold's reason: the topic, the refusal's name and its detail."""
        return f"{self.topic}: {self.refusal.error_name} ({self.refusal.detail})"


def mismatch(partitions: int, contract: int) -> Refusal:
    return Refusal(
        PARTITION_COUNT,
        f"{partitions} partition(s), the contract says {contract}: nothing is written to it until it has {contract}",
    )


def missing(contract: int) -> Refusal:
    return Refusal(TOPIC_MISSING, f"not in the broker's metadata (the contract says {contract} partitions)")


class Change(NamedTuple):
    """What a look at a topic changed: the count seen (0: missing), by whom (``broker``: the data
    plane asked; ``producer``: librdkafka's statistics; ``offsets``: a table's delivery reports),
    and whether the topic may be written now."""

    topic: str
    partitions: int
    contract: int
    seen_by: str
    writable: bool
    epoch: int
    was_writable: bool = False  # a refusal: the topic could be written until now


@dataclass
class _Topic:
    contract: int
    epoch: int = 0
    refusal: Refusal | None = None  # why it may not be written now; None: it may
    floors: dict[int, dict[int, int]] = field(default_factory=dict)  # epoch -> partition -> end offset when checked
    producer_saw: int | None = None  # the producer's count at its last statistics (0: missing)


class TopicGuard:
    """Which topics of the contract may be written now (one per worker, the data plane's)."""

    def __init__(self, contract: Mapping[str, int]) -> None:
        self._topics = {
            topic: _Topic(count, refusal=Refusal(TOPIC_UNCHECKED, "not checked against the broker yet"))
            for topic, count in contract.items()
        }

    def contract(self, topic: str) -> int:
        return self._topics[topic].contract

    def refusal(self, topic: str) -> Refusal | None:
        """Why ``topic`` may not be written now; None when it may (or it is not the contract's)."""
        found = self._topics.get(topic)
        return found.refusal if found is not None else None

    def refused(self) -> dict[str, Refusal]:
        """Every topic of the contract that was looked at and may not be written now, with why (a
        topic not checked against the broker yet is not among them: the connect names that)."""
        return {
            topic: found.refusal
            for topic, found in sorted(self._topics.items())
            if found.refusal is not None and found.refusal.error_name != TOPIC_UNCHECKED
        }

    def epoch(self, topic: str) -> int:
        """The topic's epoch: how many times it was found writable after not being so."""
        found = self._topics.get(topic)
        return found.epoch if found is not None else 0

    def floor(self, topic: str, partition: int, epoch: int) -> int | None:
        """Where ``partition`` of ``topic`` ended when the check that began ``epoch`` was made: a record
        handed over in that epoch and delivered lower landed elsewhere. None when unknown."""
        found = self._topics.get(topic)
        floors = found.floors.get(epoch) if found is not None else None
        return floors.get(partition) if floors is not None else None

    def checked(self, topic: str, partitions: int, floors: Mapping[int, int] | None) -> Change | None:
        """The broker's look at ``topic``: its count (0: missing) and, when that is the contract's,
        its partitions' end offsets. A topic that may not be written becomes writable, in a new
        epoch; a writable one with another count may no longer be. The change, if any."""
        found = self._topics[topic]
        if partitions != found.contract:
            return self._refuse(topic, found, partitions, "broker")
        if found.refusal is None or floors is None:
            return None
        found.epoch += 1
        found.floors[found.epoch] = dict(floors)
        for old in [e for e in found.floors if e <= found.epoch - EPOCHS_KEPT]:
            del found.floors[old]
        was, found.refusal = found.refusal, None
        first = was.error_name == TOPIC_UNCHECKED and found.epoch == 1
        return None if first else Change(topic, partitions, found.contract, "broker", True, found.epoch)

    def producer_saw(self, topic: str, partitions: int) -> Change | None:
        """The producer's own count of ``topic`` (its statistics; 0: it finds the topic missing).
        Only a change of it counts: another count than the contract's makes the topic unwritable
        (until the broker is asked again); the contract's count makes nothing writable by itself."""
        found = self._topics.get(topic)
        if found is None or partitions == found.producer_saw:
            return None
        found.producer_saw = partitions
        if partitions == found.contract:
            return None
        return self._refuse(topic, found, partitions, "producer")

    def suspect(self, topic: str, detail: str) -> Change | None:
        """A table found a record of ``topic`` delivered below the topic's floor: it may not be
        written until the broker is asked again."""
        found = self._topics[topic]
        refusal = Refusal(OFFSETS_WENT_BACK, detail)
        if found.refusal is not None and found.refusal.error_name != TOPIC_UNCHECKED:
            return None
        was_writable, found.refusal = found.refusal is None, refusal
        return Change(topic, found.contract, found.contract, "offsets", False, found.epoch, was_writable)

    def _refuse(self, topic: str, found: _Topic, partitions: int, seen_by: str) -> Change | None:
        refusal = missing(found.contract) if partitions <= 0 else mismatch(partitions, found.contract)
        if refusal == found.refusal:
            return None
        was_writable, found.refusal = found.refusal is None, refusal
        return Change(topic, max(partitions, 0), found.contract, seen_by, False, found.epoch, was_writable)


class Moved(NamedTuple):
    """A record of ``topic`` delivered at ``offset`` on ``partition``, below ``floor``, the lowest
    offset it could have had in the incarnation it was handed over to."""

    topic: str
    partition: int
    offset: int
    floor: int

    def detail(self) -> builtins.str:
        return (
            f"partition {self.partition}: a record landed at offset {self.offset}, below {self.floor} where the topic "
            "stood: another incarnation of the topic; its records are sent again once the topic is checked"
        )


class Landings:
    """Where one table's records landed, by (topic, partition): within one epoch of the topic each
    cycle's records must land at or above the epoch's floor and above the table's last committed
    offset there, and a partition's records of one cycle at rising offsets. Only records sent the
    first time are compared (a record sent again lands after records sent later for the first time)."""

    def __init__(self, guard: TopicGuard) -> None:
        self.guard = guard
        self._high: dict[tuple[str, int], tuple[int, int]] = {}  # (topic, partition) -> (epoch, last offset)
        self._recreated: dict[str, int] = {}  # topic -> the epoch of the check that found it created again

    def moved(self, topic: str, ranges: Mapping[int, tuple[int, int]], epochs: tuple[int, int]) -> Moved | None:
        """The first record of ``ranges`` (partition -> first and last offset delivered, of one cycle
        handed over from epoch ``epochs[0]`` to ``epochs[1]``) that landed where it could not have in
        the incarnation it was handed to; None when every one landed where it could."""
        first_epoch, last_epoch = epochs
        before_recreation = last_epoch < self._recreated.get(topic, 0)
        for partition, (first, last) in sorted(ranges.items()):
            floor = None if before_recreation else self.guard.floor(topic, partition, last_epoch)
            if first_epoch != last_epoch:
                # Handed over across a check that made the topic writable again: the first records may
                # have gone to the incarnation before it; the last ones went to this one.
                if floor is not None and last < floor:
                    return Moved(topic, partition, last, floor)
                continue
            high = self._high.get((topic, partition))
            bound = floor
            if high is not None and high[0] == last_epoch:
                bound = max(bound if bound is not None else 0, high[1] + 1)
            if bound is not None and first < bound:
                return Moved(topic, partition, first, bound)
            if last < first:
                return Moved(topic, partition, last, first)
        return None

    def landed(self, topic: str, ranges: Mapping[int, tuple[int, int]], epoch: int) -> None:
        """A cycle whose records of ``topic`` were handed over up to ``epoch`` was committed."""
        for partition, (_first, last) in ranges.items():
            self._high[(topic, partition)] = (epoch, last)

    def trusted(self, topic: str, epoch: int) -> None:
        """Records of ``topic`` found below where it stood were found, when the topic was checked in
        ``epoch``, to be in the topic as it is now (deleted and created again with the contract's count):
        what it stood at before no longer counts, for the cycles handed over before that check either."""
        for key in [key for key in self._high if key[0] == topic]:
            del self._high[key]
        self._recreated[topic] = epoch


def producer_partition_counts(stats: Mapping[str, Any]) -> dict[str, int]:
    """Each topic's partition count as the producer knows it, from librdkafka's statistics
    (STATISTICS.md: ``topics.<name>.partitions`` lists the known partitions, the desired ones it
    does not know with ``unknown``, and the unassigned ``-1``; 0 when it finds the topic missing).
    A topic it has no metadata for yet (``metadata_age`` 0) is left out."""
    counts = {}
    for name, topic in stats.get("topics", {}).items():
        if not topic.get("metadata_age"):
            continue
        partitions = topic.get("partitions", {}).values()
        counts[name] = sum(1 for p in partitions if p.get("partition", -1) >= 0 and not p.get("unknown"))
    return counts
