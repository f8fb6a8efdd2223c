"""What a ``read_committed`` reader is given of topics written in transactions: pure, no I/O.

A sidecar with ``DELIVERY=exactly_once`` publishes in transactions, so its topics also hold the
records of aborted transactions, and a marker (one offset, never given to a reader) after each
transaction. A ``read_uncommitted`` reader is given the aborted records too: records published again
after an abort reach it twice. A ``read_committed`` reader is given the records of committed
transactions only, up to the last stable offset (the first offset of a transaction still open).

The verifier takes its verdict on the view of the isolation level it is asked for. For
``read_committed`` it reads the topics twice at once, and keeps the records once: a
``read_uncommitted`` consumer collects every record, and a ``read_committed`` consumer over the same
partitions only notes the offsets it is given (:class:`OffsetRuns`); the committed view is the full
one without the records that consumer was not given (:func:`committed_view`). The full view then
gives the duplicates a ``read_uncommitted`` reader sees, as a figure that does not fail the run.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # reconcile imports the report, which imports the level names from here
    from hyperdata_sidecar.tools.reconcile import Observed

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)
"""The consumer isolation levels the verifier reads with, its default (today's behaviour) first."""


class OffsetRuns:
    """The offsets a reader was given, per (topic, partition), as runs of consecutive offsets.

    A transaction's records are consecutive and a marker follows each, so a ``read_committed`` read
    is about one run per committed transaction: a few numbers where a set of offsets would hold one
    per record (millions). ``keep`` takes a consumed message, as the verifier's ``Collector`` does.
    """

    def __init__(self) -> None:
        # Per partition: the first offset of each run, and the offset after its last (ascending).
        self._starts: dict[tuple[str, int], list[int]] = {}
        self._stops: dict[tuple[str, int], list[int]] = {}

    def keep(self, message: Any) -> None:
        self.add(message.topic, message.partition, message.offset)

    def add(self, topic: str, partition: int, offset: int) -> None:
        """Note ``offset`` as given. Raises ValueError unless it is above the partition's last one:
        a consumer gives a partition's offsets in ascending order, once each."""
        starts = self._starts.setdefault((topic, partition), [])
        stops = self._stops.setdefault((topic, partition), [])
        if stops and offset < stops[-1]:
            raise ValueError(f"{topic}[{partition}]: offset {offset} after {stops[-1] - 1}; offsets must ascend")
        if stops and offset == stops[-1]:
            stops[-1] += 1
        else:
            starts.append(offset)
            stops.append(offset + 1)

    def holds(self, topic: str, partition: int, offset: int) -> bool:
        """True when the reader was given ``offset`` of ``topic``'s ``partition``."""
        starts = self._starts.get((topic, partition))
        if not starts:
            return False
        run = bisect.bisect_right(starts, offset) - 1
        return run >= 0 and offset < self._stops[topic, partition][run]

    def runs(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """The partition's runs as (first offset, offset after the last), ascending."""
        key = (topic, partition)
        return list(zip(self._starts.get(key, ()), self._stops.get(key, ()), strict=True))


def committed_view(
    observed: Observed,
    given: OffsetRuns,
    ends: Mapping[tuple[str, int], int],
    *,
    dlq_topic: str,
    seal_topic: str,
    snapshot_topic: str | None,
) -> Observed:
    """``observed`` (a ``read_uncommitted`` read) as a ``read_committed`` reader has it: without the
    records that reader was not ``given`` (those of aborted transactions, and of transactions still
    open at its end offsets), and with its ``ends`` (its last stable offsets, per data partition).

    The DLQ, seal and snapshot records carry no topic: their topics are named here. ``observed``
    is left as it is; the view shares its records.
    """

    def kept(topic: str | None, records: list[Any]) -> list[Any]:
        return [r for r in records if topic is not None and given.holds(topic, r.partition, r.offset)]

    return dataclasses.replace(
        observed,
        data=[r for r in observed.data if given.holds(r.topic, r.partition, r.offset)],
        dlq=kept(dlq_topic, observed.dlq),
        seals=kept(seal_topic, observed.seals),
        snapshots=kept(snapshot_topic, observed.snapshots),
        ends=dict(ends),
    )
