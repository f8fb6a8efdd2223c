"""Is a partition of the producer stuck by librdkafka's leaderless-update bug? Without I/O.

librdkafka (2.12 to 2.14 at least; confluentinc/librdkafka#5430, open) can leave a partition stuck
for good after a transient leader-less moment: a produce response that names leader -1 (a KRaft
broker fenced by its controller after a pause longer than ``broker.session.timeout.ms``, its
partitions without a leader for a moment) is skipped by ``rd_kafka_metadata_update_op``, which
logs ``METADATAUPDATE ... Partition <topic>(<id>)[<n>]: new leader-1 not found in cache``, and the
partition never leaves its no-leader state, whatever later metadata says. Its records are never
sent; the rest of the producer goes on. Only a new producer ends it.

:class:`StuckPartitions` is fed that log line (:meth:`StuckPartitions.line`) and the producer's
statistics (:meth:`StuckPartitions.stats`, every second): a partition named by the line that holds
records and has sent none since, for ``after_s``, is stuck. One that sends a record (the bug did not
bite) is forgotten. A broker outage alone never makes a partition stuck: the line is needed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The line librdkafka logs when it skips a leader-less update (facility METADATAUPDATE).
LEADERLESS = re.compile(
    r"METADATAUPDATE .*Partition (?P<topic>[^\s(]+)\([^)]*\)\[(?P<partition>\d+)\]: new leader-1 not found in cache"
)


@dataclass
class _Watched:
    since: float  # when the line named it
    sent: int | None = None  # txmsgs at the first statistics after the line


@dataclass(frozen=True)
class Stuck:
    topic: str
    partition: int
    queued: int
    quiet_s: float  # seconds since the line named it, without a record sent


class StuckPartitions:
    """The partitions librdkafka's leader-less line named, watched until they send again or are stuck."""

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._watched: dict[tuple[str, int], _Watched] = {}

    def line(self, text: str, now: float) -> tuple[str, int] | None:
        """A line of librdkafka's log: the (topic, partition) it names as left without a leader, or None."""
        found = LEADERLESS.search(text)
        if found is None:
            return None
        key = (found["topic"], int(found["partition"]))
        self._watched.setdefault(key, _Watched(since=now))
        return key

    def stats(self, stats: Mapping[str, Any], now: float) -> list[Stuck]:
        """The producer's statistics (STATISTICS.md: ``topics.<t>.partitions.<p>`` with ``txmsgs``,
        ``msgq_cnt``, ``xmit_msgq_cnt``): the watched partitions stuck now. A watched partition
        that sent a record since the first statistics after the line is forgotten; one that holds no
        record is not stuck yet (nothing waits), but stays watched: its next records would wait."""
        stuck = []
        for (topic, partition), watched in list(self._watched.items()):
            found = stats.get("topics", {}).get(topic, {}).get("partitions", {}).get(str(partition))
            if found is None:
                continue
            sent = int(found.get("txmsgs", 0))
            queued = int(found.get("msgq_cnt", 0)) + int(found.get("xmit_msgq_cnt", 0))
            if watched.sent is None:
                watched.sent = sent
            elif sent > watched.sent:
                del self._watched[(topic, partition)]
                continue
            if queued and now - watched.since >= self.after_s:
                stuck.append(Stuck(topic, partition, queued, now - watched.since))
        return stuck

    def watched(self) -> list[tuple[str, int]]:
        return sorted(self._watched)
