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
bite) is forgotten. Without the line (CI's drill 14 met a partition that sent nothing for two
minutes after the broker's thaw, no line seen), a partition that holds records and sends none for
``after_s`` *while the producer is connected* is stuck too: the time only counts while a broker is
up, so an outage alone never makes a partition stuck. Either way the caller confirms that the broker
names a leader for the partition before acting.
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
    quiet_s: float  # seconds without a record sent: since the line named it, or connected
    line: bool = True  # named by librdkafka's leader-less line (else: quiet while connected)


class StuckPartitions:
    """The partitions librdkafka's leader-less line named, watched until they send again or are stuck."""

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._watched: dict[tuple[str, int], _Watched] = {}
        self._quiet: dict[tuple[str, int], tuple[int, float]] = {}  # holding records: (sent, connected and quiet since)

    def line(self, text: str, now: float) -> tuple[str, int] | None:
        """A line of librdkafka's log: the (topic, partition) it names as left without a leader, or None."""
        found = LEADERLESS.search(text)
        if found is None:
            return None
        key = (found["topic"], int(found["partition"]))
        self._watched.setdefault(key, _Watched(since=now))
        return key

    def stats(self, stats: Mapping[str, Any], now: float, *, connected: bool = False) -> list[Stuck]:
        """The producer's statistics (STATISTICS.md: ``topics.<t>.partitions.<p>`` with ``txmsgs``,
        ``msgq_cnt``, ``xmit_msgq_cnt``): the partitions stuck now. A watched partition that sent a
        record since the first statistics after the line is forgotten; one that holds no record is
        not stuck yet (nothing waits), but stays watched: its next records would wait. Any other
        partition is stuck once it has held records and sent none for ``after_s`` of ``connected``
        statistics (a broker of the producer up)."""
        stuck = self._named(stats, now)
        for topic, about in stats.get("topics", {}).items():
            for number, found in about.get("partitions", {}).items():
                key = (topic, int(number))
                if number == "-1" or key in self._watched:
                    continue  # librdkafka's unassigned queue; or watched since the line
                sent = int(found.get("txmsgs", 0))
                queued = int(found.get("msgq_cnt", 0)) + int(found.get("xmit_msgq_cnt", 0))
                quiet = self._quiet.get(key)
                if not queued or not connected:
                    self._quiet.pop(key, None)  # nothing waits, or the wait is the broker's
                elif quiet is None or sent != quiet[0]:
                    self._quiet[key] = (sent, now)
                elif now - quiet[1] >= self.after_s:
                    stuck.append(Stuck(topic, key[1], queued, now - quiet[1], line=False))
        return stuck

    def _named(self, stats: Mapping[str, Any], now: float) -> list[Stuck]:
        """The partitions the leader-less line named that are stuck now."""
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
