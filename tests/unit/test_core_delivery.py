"""Delivery reports of a cycle: counted per (topic, partition), failures kept with their index, and
what each kind of failure means."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from hyperdata_sidecar.core.delivery import Deliveries, Failure, Verdict, verdict
from hyperdata_sidecar.core.records import Topics

TOPICS = Topics("data", 3, "dlq", 2)


def error(code: int, *, fatal: bool = False) -> KafkaError:
    return KafkaError(code, fatal=fatal)


def test_reports_are_counted_across_every_group_of_the_cycle():
    deliveries = Deliveries()
    acks = deliveries.cycle_acks(TOPICS, dlq_partition=1)
    for partition in (0, 2, 2):
        acks.data[partition](None, object())
    acks.dlq(None, object())
    assert (deliveries.reported(), deliveries.failures()) == (4, [])


def test_a_failure_keeps_its_index_within_its_partition():
    deliveries = Deliveries()
    acks = deliveries.cycle_acks(TOPICS, dlq_partition=1)
    too_large = error(KafkaError.MSG_SIZE_TOO_LARGE)
    acks.data[2](None, object())
    acks.data[0](None, object())
    acks.data[2](too_large, object())
    acks.dlq(None, object())
    acks.dlq(too_large, object())
    assert deliveries.failures() == [Failure("data", 2, 1, too_large), Failure("dlq", 1, 1, too_large)]
    assert deliveries.reported() == 5


def test_callbacks_for_the_same_group_share_one_count():
    deliveries = Deliveries()
    first, again = deliveries.callback("data", 0), deliveries.callback("data", 0)
    first(None, None)
    again(error(KafkaError.INVALID_RECORD), None)
    assert [f.position for f in deliveries.failures()] == [1]


# librdkafka's error names (confluent-kafka's KafkaError codes) and what each must mean, written
# out rather than read from the code: a record the broker refuses for itself (too large, corrupt,
# a bad timestamp) is rejected; anything a fixed topic, ACL or broker can heal holds the table.
@pytest.mark.parametrize(
    ("code", "name"),
    [
        (KafkaError.MSG_SIZE_TOO_LARGE, "MSG_SIZE_TOO_LARGE"),
        (KafkaError.RECORD_LIST_TOO_LARGE, "RECORD_LIST_TOO_LARGE"),
        (KafkaError.INVALID_RECORD, "INVALID_RECORD"),
        (KafkaError.INVALID_MSG, "INVALID_MSG"),
        (KafkaError.INVALID_MSG_SIZE, "INVALID_MSG_SIZE"),
        (KafkaError.INVALID_TIMESTAMP, "INVALID_TIMESTAMP"),
    ],
)
def test_errors_about_the_record_itself_reject_it(code, name):
    assert KafkaError(code).name() == name
    assert verdict(error(code)) is Verdict.REJECTED


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_REQUIRED_ACKS,
    ],
)
def test_errors_that_a_fixed_configuration_can_heal_hold_the_record(code):
    assert verdict(error(code)) is Verdict.HOLD


def test_a_fatal_error_is_fatal_whatever_its_code():
    assert verdict(error(KafkaError.MSG_SIZE_TOO_LARGE, fatal=True)) is Verdict.FATAL
    assert verdict(error(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)) is Verdict.FATAL


class Delivered:
    """A delivered record as confluent-kafka reports it: its partition and offset."""

    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def offset(self) -> int:
        return self._offset


def test_offset_ranges_are_the_first_and_last_delivered_record_of_each_data_partition():
    deliveries = Deliveries()
    acks = deliveries.cycle_acks(TOPICS, dlq_partition=1)
    acks.data[0](error(KafkaError.MSG_SIZE_TOO_LARGE), None)  # failed: not among the offsets
    acks.data[0](None, Delivered(0, 40))
    acks.data[2](None, Delivered(2, 7))
    acks.data[0](None, Delivered(0, 41))
    acks.data[0](None, Delivered(0, 45))
    acks.dlq(None, Delivered(1, 3))
    assert deliveries.offset_ranges("data") == {0: (40, 45), 2: (7, 7)}
    assert deliveries.offset_ranges("dlq") == {1: (3, 3)}


def test_a_record_sent_again_widens_its_partition_range():
    deliveries = Deliveries()
    acks = deliveries.cycle_acks(TOPICS, dlq_partition=1)
    acks.data[1](None, Delivered(1, 10))
    acks.data[1](error(KafkaError.TOPIC_AUTHORIZATION_FAILED), None)
    deliveries.widen("data", 1, 12)
    deliveries.widen("data", 2, 30)  # a partition where nothing else of the set was delivered
    assert deliveries.offset_ranges("data") == {1: (10, 12), 2: (30, 30)}


def test_the_epochs_a_topics_records_were_handed_over_in_are_the_first_and_the_last():
    deliveries = Deliveries()
    assert deliveries.epochs("data") is None
    deliveries.handed("data", 3)
    deliveries.handed("data", 3)
    deliveries.handed("dlq", 1)
    deliveries.handed("data", 4)
    assert (deliveries.epochs("data"), deliveries.epochs("dlq")) == ((3, 4), (1, 1))


def test_a_distrusted_topic_is_to_be_sent_again_and_where_it_landed_no_longer_counts():
    deliveries = Deliveries()
    acks = deliveries.cycle_acks(TOPICS, dlq_partition=1)
    acks.data[0](None, Delivered(0, 40))
    acks.dlq(None, Delivered(1, 3))
    deliveries.widen("data", 0, 50)  # sent again before the topic was distrusted: it may be in the copy too
    deliveries.distrust("data", "moved")
    assert deliveries.first_sends("data") == {} and deliveries.offset_ranges("data") == {}
    assert deliveries.first_sends("dlq") == {1: (3, 3)}
    deliveries.widen("data", 0, 7)  # sent again after the topic was checked
    assert deliveries.offset_ranges("data") == {0: (7, 7)}
    assert deliveries.take_distrusted() == {"data": "moved"} and deliveries.distrusted == {}
    assert deliveries.first_sends("data") == {}  # still: its first landing was in another incarnation
