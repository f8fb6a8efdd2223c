"""The watch for librdkafka's leader-less update bug (confluentinc/librdkafka#5430): the line it logs,
then the partition's statistics."""

from __future__ import annotations

from typing import Any

from hyperdata_sidecar.core.stuck_partition import Stuck, StuckPartitions

#: As the worker's log showed it in a CI run (the broker frozen 20 s, fenced by its controller).
LINE = (
    "METADATAUPDATE [hyperdata-sidecar-t-a] [thrd:main]: Partition t-a.hyperliquid.order-statuses"
    "(bloiRfArRn2mN9a/G7Bczg)[0]: new leader-1 not found in cache"
)
TOPIC = "t-a.hyperliquid.order-statuses"


def stats(sent: int, queued: int, in_flight: int = 0, partition: int = 0, topic: str = TOPIC) -> dict[str, Any]:
    return {"topics": {topic: {"partitions": {str(partition): {"txmsgs": sent, "msgq_cnt": queued, "xmit_msgq_cnt": in_flight}}}}}


def test_the_line_names_the_topic_and_partition_and_other_lines_name_nothing():
    watch = StuckPartitions(after_s=30.0)
    assert watch.line(LINE, 0.0) == (TOPIC, 0)
    assert watch.line(LINE.replace("[0]", "[11]"), 0.0) == (TOPIC, 11)
    assert watch.line("METADATAUPDATE [x] [thrd:main]: Topic t not found in cache", 0.0) is None
    assert watch.line("METADATAUPDATE [x] [thrd:main]: Partition t(abc)[0]: new leader2 not found in cache", 0.0) is None
    assert watch.line("FAIL [x] [thrd:127.0.0.1:9092/1]: Connection refused", 0.0) is None
    assert watch.watched() == [(TOPIC, 0), (TOPIC, 11)]


def test_a_named_partition_holding_records_that_sends_none_for_the_bound_is_stuck():
    watch = StuckPartitions(after_s=30.0)
    watch.line(LINE, 100.0)
    assert watch.stats(stats(sent=500, queued=40), 101.0) == []
    assert watch.stats(stats(sent=500, queued=90, in_flight=3), 129.0) == []
    assert watch.stats(stats(sent=500, queued=90, in_flight=3), 130.0) == [Stuck(TOPIC, 0, 93, 30.0)]
    assert watch.stats(stats(sent=500, queued=90), 131.0) == [Stuck(TOPIC, 0, 90, 31.0)]  # until a new producer


def test_a_named_partition_that_sends_again_is_forgotten():
    watch = StuckPartitions(after_s=30.0)
    watch.line(LINE, 100.0)
    watch.stats(stats(sent=500, queued=40), 101.0)
    assert watch.stats(stats(sent=501, queued=40), 140.0) == []
    assert watch.watched() == []


def test_a_named_partition_with_nothing_waiting_is_not_stuck_but_stays_watched():
    """Records purged (an aborted transaction) leave it empty; the next ones would wait as well."""
    watch = StuckPartitions(after_s=30.0)
    watch.line(LINE, 100.0)
    assert watch.stats(stats(sent=500, queued=0), 140.0) == []
    assert watch.watched() == [(TOPIC, 0)]
    assert watch.stats(stats(sent=500, queued=7), 141.0) == [Stuck(TOPIC, 0, 7, 41.0)]


def test_an_outage_without_the_line_never_makes_a_partition_stuck_by_the_line():
    watch = StuckPartitions(after_s=30.0)
    assert watch.stats(stats(sent=500, queued=10_000), 1000.0) == []
    watch.line(LINE, 1000.0)
    other = stats(sent=0, queued=10_000, partition=1)
    assert watch.stats(other, 2000.0) == []  # the line named partition 0, the statistics another


def test_without_the_line_a_partition_connected_holding_records_and_sending_none_for_the_bound_is_stuck():
    """CI's drill 14 met a partition that sent nothing for two minutes after the broker's thaw, the
    leader-less line never seen: only the time the producer is connected counts."""
    watch = StuckPartitions(after_s=30.0)
    assert watch.stats(stats(sent=500, queued=40), 100.0, connected=False) == []
    assert watch.stats(stats(sent=500, queued=40), 200.0, connected=False) == []  # an outage: never
    assert watch.stats(stats(sent=500, queued=40), 201.0, connected=True) == []  # connected again: counts from here
    assert watch.stats(stats(sent=500, queued=45), 230.0, connected=True) == []
    assert watch.stats(stats(sent=500, queued=45, in_flight=2), 231.0, connected=True) == [Stuck(TOPIC, 0, 47, 30.0, line=False)]


def test_without_the_line_a_partition_that_sends_or_empties_or_loses_the_broker_starts_again():
    watch = StuckPartitions(after_s=30.0)
    watch.stats(stats(sent=500, queued=40), 100.0, connected=True)
    assert watch.stats(stats(sent=501, queued=40), 129.0, connected=True) == []  # sent one: from here
    assert watch.stats(stats(sent=501, queued=40), 158.0, connected=True) == []
    assert watch.stats(stats(sent=501, queued=0), 160.0, connected=True) == []  # nothing waits
    assert watch.stats(stats(sent=501, queued=3), 161.0, connected=True) == []
    assert watch.stats(stats(sent=501, queued=3), 190.0, connected=False) == []  # the broker gone: from its return
    assert watch.stats(stats(sent=501, queued=3), 219.0, connected=True) == []
    assert watch.stats(stats(sent=501, queued=3), 249.0, connected=True) == [Stuck(TOPIC, 0, 3, 30.0, line=False)]


def test_librdkafkas_unassigned_queue_is_never_a_stuck_partition():
    watch = StuckPartitions(after_s=30.0)
    unassigned = stats(sent=0, queued=10, partition=-1)
    watch.stats(unassigned, 100.0, connected=True)
    assert watch.stats(unassigned, 200.0, connected=True) == []
