"""PublishFlow, the tailer's waits on the producer, against a fake data plane (no broker): waiting
for reports and giving up on a stop, room in the queue, a record sent again, a hold (not ready, the
back-off, the topics checked before the retry) and its end, the reason a hold gives, and the check
of where a cycle's records landed before it is committed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError

from hyperdata_sidecar import publishing
from hyperdata_sidecar.checked_lines import TopicNotWritable
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.delivery import Refusal
from hyperdata_sidecar.core.topic_check import OFFSETS_WENT_BACK, PARTITION_COUNT, TopicGuard, mismatch
from hyperdata_sidecar.core.window import Window, WriterState
from hyperdata_sidecar.publishing import Abandoned, PublishFlow
from hyperdata_sidecar.tailer_events import TailerEvents

from fake_broker import FakeHost, transactions

TABLE = "node_order_statuses_streaming"
T, DLQ = "hyperliquid.order-statuses", "hyperliquid.sidecar-dlq"


class FakePublisher:
    """The data plane as a flow sees it: ``until`` answers the predicate at once (after running
    ``on_until``), ``resend`` raises what ``refusals`` holds, in turn, then queues."""

    def __init__(self) -> None:
        self.partitions = {T: 6, DLQ: 3}
        self.guard = TopicGuard(self.partitions)
        self.txn = transactions()
        for topic, count in self.partitions.items():
            self.guard.checked(topic, count, dict.fromkeys(range(count), 0))
        self.until_calls: list[float | None] = []
        self.on_until: Callable[[], None] = lambda: None
        self.refusals: list[BaseException] = []
        self.sent: list[Any] = []
        self.refreshed: list[str] = []
        self.on_refresh: Callable[[str], Any] = lambda topic: None
        self.refresh_errors: dict[str, str] = {}
        self.suspected: list[tuple[str, str]] = []

    def lines(self, file: Any) -> Any:
        raise AssertionError("not used here")

    def resend(self, record: Any, on_delivery: Callable[[Any, Any], None]) -> None:
        if self.refusals:
            raise self.refusals.pop(0)
        self.sent.append(record)

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        self.until_calls.append(timeout)
        self.on_until()
        return predicate()

    async def refresh_metadata(self, topic: str) -> str | None:
        self.refreshed.append(topic)
        self.on_refresh(topic)
        return self.refresh_errors.get(topic)

    def suspect(self, topic: str, detail: str) -> None:
        self.suspected.append((topic, detail))
        self.guard.suspect(topic, detail)


def make(host: FakeHost | None = None) -> tuple[PublishFlow, FakePublisher, FakeHost]:
    host = host or FakeHost()
    publisher = FakePublisher()
    events = TailerEvents(TABLE, host.metrics, host.log, host, host, lag_warn_bytes=1 << 30, lag_warn_s=1e9)
    flow = PublishFlow(publisher, events, stopping=lambda: host.stopping, pause=host.pause, topics=(T, DLQ))
    return flow, publisher, host


def log_events(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records]


# -- waiting ------------------------------------------------------------------------------------


async def test_until_waits_for_reports_a_second_at_a_time():
    flow, publisher, _ = make()
    reports = []
    publisher.on_until = lambda: reports.append(1)
    await flow.until(lambda: len(reports) >= 3)
    assert publisher.until_calls == [1.0, 1.0, 1.0]


async def test_once_the_worker_stops_until_gives_up_after_the_grace_without_a_checkpoint(monkeypatch):
    monkeypatch.setattr(publishing, "STOP_GRACE_S", 0.05)
    flow, publisher, host = make()
    host.stopping = True
    with pytest.raises(Abandoned):
        await flow.until(lambda: False)
    assert all(timeout is not None and timeout <= 0.05 for timeout in publisher.until_calls)


async def test_a_full_queue_lets_reports_come_in_for_a_moment_unless_the_worker_stops():
    flow, publisher, host = make()
    await flow.wait_for_room()
    assert publisher.until_calls == [publishing.ROOM_WAIT_S]
    host.stopping = True
    with pytest.raises(Abandoned):
        await flow.wait_for_room()


async def test_a_record_sent_again_waits_for_room_and_a_refusal_is_returned_not_raised():
    flow, publisher, _ = make()
    publisher.refusals = [BufferError("full"), BufferError("full")]
    assert await flow.resend("r1", print) is None
    assert publisher.sent == ["r1"] and publisher.until_calls == [publishing.ROOM_WAIT_S] * 2
    refusal = TopicNotWritable(T, mismatch(1, 6))
    publisher.refusals = [refusal]
    assert await flow.resend("r2", print) is refusal and publisher.sent == ["r1"]


# -- holds --------------------------------------------------------------------------------------


async def test_a_hold_makes_the_table_not_ready_waits_and_checks_each_topic_before_the_retry(caplog):
    flow, publisher, host = make()
    caplog.set_level(logging.INFO, logger="tests.tailer")
    publisher.refresh_errors[DLQ] = "UNKNOWN_TOPIC_OR_PART"
    backoff = flow.backoff()
    await flow.hold(backoff, (T, DLQ), f"{T}: PARTITION_COUNT (1 partition(s), the contract says 6)", records=3)
    assert host.holds == {TABLE: f"{T}: PARTITION_COUNT (1 partition(s), the contract says 6)"}
    assert host.pauses == [publishing.HOLD_BACKOFF_S[0]] and publisher.refreshed == [T, DLQ]
    assert host.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": "hold"}) == 1
    assert log_events(caplog) == ["topic_not_writable", "topic_metadata_refresh_failed"]
    await flow.hold(backoff, (T,), "again")
    assert host.pauses == [2.0, 4.0]
    flow.release(backoff)
    assert host.holds == {} and log_events(caplog)[-1] == "topic_writable_again"


async def test_a_release_without_a_hold_says_nothing(caplog):
    flow, _, host = make()
    caplog.set_level(logging.INFO, logger="tests.tailer")
    flow.release(flow.backoff())
    assert host.holds == {} and not caplog.records


async def test_a_stop_during_a_holds_wait_abandons_the_cycles():
    flow, publisher, host = make()
    host.stopping = True
    with pytest.raises(Abandoned):
        await flow.hold(flow.backoff(), (T,), "reason")
    assert publisher.refreshed == []


def test_a_holds_reason_names_the_topic_the_door_refused_else_the_tables_with_the_clients_error():
    refused = TopicNotWritable(DLQ, mismatch(1, 3))
    assert (
        PublishFlow.reason(T, refused)
        == f"{DLQ}: PARTITION_COUNT (1 partition(s), the contract says 3: nothing is written to it until it has 3)"
    )
    client = KafkaError(KafkaError._UNKNOWN_TOPIC)
    from confluent_kafka import KafkaException

    assert PublishFlow.reason(T, KafkaException(client)).startswith(f"{T}: _UNKNOWN_TOPIC (")
    assert PublishFlow.reason(T, ValueError("bad")) == f"{T}: ValueError (bad)"


# -- where a cycle's records landed -------------------------------------------------------------


class Landed:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def offset(self) -> int:
        return self._o


def cycle_at(window: Window, publisher: FakePublisher, offsets: dict[int, list[int]], *, topic: str = T, settled: bool = True):
    """A cycle whose records of ``topic`` landed at ``offsets`` (partition -> offsets), handed over in the topic's epoch."""
    cycle = window.open("f", WriterState(0, (1, 0, 0), None, None))
    cycle.deliveries.handed(topic, publisher.guard.epoch(topic))
    count = 0
    for partition, landed in offsets.items():
        callback = cycle.deliveries.callback(topic, partition)
        for offset in landed:
            callback(None, Landed(partition, offset))
            count += 1
    cycle.tally.produced = count + (0 if settled else 1)
    window.close(cycle, FileCursor.adopted("f", (None, 0, 0)), WriterState(10, (1, 0, 0), None, None), size=10, complete=True)
    return cycle


async def test_a_cycle_whose_records_landed_above_the_last_commit_is_vouched_for(caplog):
    flow, publisher, host = make()
    window = Window()
    first = cycle_at(window, publisher, {0: [0, 1, 2], 3: [0]})
    flow.vouch(window)
    assert not first.failed()
    window.commit(FileCursor.adopted("f", (None, 0, 0)), head="", data_topic=T)
    flow.landed(first)
    second = cycle_at(window, publisher, {0: [3, 4]})
    flow.vouch(window)
    assert not second.failed() and publisher.suspected == [] and host.held_ever == []


async def test_a_cycle_whose_records_landed_below_where_the_topic_stood_holds_the_topic_until_it_is_checked(caplog):
    flow, publisher, host = make()
    caplog.set_level(logging.INFO, logger="tests.tailer")
    window = Window()
    flow.landed(cycle_at(Window(), publisher, {0: [40, 41]}))
    moved = cycle_at(window, publisher, {0: [0, 1]})  # a new incarnation counts from 0
    unsettled = cycle_at(window, publisher, {0: [2]}, settled=False)
    flow.vouch(window)
    assert moved.failed() and not unsettled.failed()  # not committed before the topic is checked
    error = moved.deliveries.suspected[T]
    assert isinstance(error, Refusal) and error.name() == OFFSETS_WENT_BACK
    assert [topic for topic, _ in publisher.suspected] == [T]
    assert publisher.guard.refusal(T).name() == OFFSETS_WENT_BACK
    [record] = [r for r in caplog.records if r.getMessage() == "topic_offsets_went_back"]
    assert record.fields == {"table": TABLE, "topic": T, "partition": 0, "offset": 0, "floor": 42}  # type: ignore[attr-defined]
    assert host.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": "offsets"}) == 1
    flow.vouch(window)  # asked again: the suspected cycle is not reported twice
    assert len(publisher.suspected) == 1


async def test_found_with_another_count_the_cycles_records_of_that_topic_are_to_be_sent_again():
    flow, publisher, host = make()
    window = Window()
    flow.landed(cycle_at(Window(), publisher, {0: [40, 41]}))
    moved = cycle_at(window, publisher, {0: [0, 1]})
    flow.vouch(window)
    publisher.on_refresh = lambda topic: publisher.guard.checked(topic, 1, None)  # a copy with one partition
    await flow.check_suspected(window)
    assert publisher.refreshed == [T] and host.pauses == []  # checked at once
    assert moved.deliveries.suspected == {} and moved.deliveries.distrusted[T].name() == OFFSETS_WENT_BACK
    assert moved.deliveries.offset_ranges(T) == {}  # the copy's offsets never reach a seal
    assert publisher.guard.refusal(T).name() == PARTITION_COUNT


async def test_found_with_the_contracts_count_the_records_stay_where_they_landed_and_are_not_sent_again():
    # The topic was deleted and created again right under the producer: what landed in it is in it.
    flow, publisher, host = make()
    window = Window()
    flow.landed(cycle_at(Window(), publisher, {0: [40, 41]}))
    moved = cycle_at(window, publisher, {0: [0, 1]})
    later = cycle_at(window, publisher, {0: [2, 3]})  # handed over before the check too
    flow.vouch(window)
    publisher.on_refresh = lambda topic: publisher.guard.checked(topic, 6, dict.fromkeys(range(6), 5))
    await flow.check_suspected(window)
    assert not moved.failed() and moved.deliveries.offset_ranges(T) == {0: (0, 1)}
    assert publisher.guard.refusal(T) is None and host.held_ever == []
    window.commit(FileCursor.adopted("f", (None, 0, 0)), head="", data_topic=T)
    flow.landed(moved)
    flow.vouch(window)  # the next cycle, handed over before the check, is compared with the table's own offsets only
    assert not later.failed()


async def test_a_suspected_topic_the_broker_cannot_be_asked_about_is_held_until_it_can():
    flow, publisher, host = make()
    window = Window()
    flow.landed(cycle_at(Window(), publisher, {0: [40]}))
    moved = cycle_at(window, publisher, {0: [0]})
    flow.vouch(window)

    def unreachable_twice(topic: str) -> None:
        if len(publisher.refreshed) == 3:
            publisher.guard.checked(topic, 0, None)  # then: the topic is missing

    publisher.on_refresh = unreachable_twice
    await flow.check_suspected(window)
    assert publisher.refreshed == [T, T, T] and host.pauses == [2.0, 4.0]
    assert any("OFFSETS_WENT_BACK" in reason for reason in host.held_ever) and host.holds == {}
    assert T in moved.deliveries.distrusted


async def test_the_dlq_of_a_cycle_is_vouched_for_too_and_a_topic_with_no_hand_over_is_skipped():
    flow, publisher, _ = make()
    window = Window()
    publisher.guard.checked(DLQ, 0, None)
    publisher.guard.checked(DLQ, 3, {1: 7})  # epoch 2 of the DLQ, partition 1 ended at 7
    cycle = cycle_at(window, publisher, {1: [3]}, topic=DLQ)
    flow.vouch(window)
    assert list(cycle.deliveries.suspected) == [DLQ]
    assert cycle.deliveries.epochs(T) is None


async def test_a_topic_held_for_its_count_is_not_overwritten_by_a_suspicion():
    flow, publisher, _ = make()
    window = Window()
    flow.landed(cycle_at(Window(), publisher, {0: [40]}))
    cycle = cycle_at(window, publisher, {0: [0]})
    publisher.guard.producer_saw(T, 1)
    flow.vouch(window)
    assert publisher.guard.refusal(T).name() == PARTITION_COUNT and cycle.failed()
