"""Redelivery, the rare path after failed delivery reports, against a fake data plane and a fake
file (no broker): a record refused for good is replaced by its dead letter, one whose topic cannot
be written is sent again after a hold, a fatal error abandons the window, a refusal when sending
again keeps the record (and those after it in its partition) for the next round, and a topic whose
records landed in another incarnation has every record of its cycle sent again.

The last tests run a tailer against the fake broker (tests/unit/fake_broker.py), on both line
engines: a topic deleted and created again with one partition under the producer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from hyperdata_sidecar.checked_lines import TopicNotWritable
from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.delivery import Refusal
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.records import Record, Topics
from hyperdata_sidecar.core.topic_check import OFFSETS_WENT_BACK, TopicGuard
from hyperdata_sidecar.core.window import Cycle, Window, WriterState
from hyperdata_sidecar.publishing import Abandoned, PublishFlow
from hyperdata_sidecar.redelivery import Redelivery
from hyperdata_sidecar.tailer_events import TailerEvents

from fake_broker import FakeBroker, FakeHost, transactions
from test_core_window import Landed
from test_table_tailer import COINS, DLQ, PARTITIONS, SPEC, TOPIC, append, hour_path, line, new_tailer

TABLE = SPEC.dir_name
TOPICS = Topics(TOPIC, 6, DLQ, 3)


class FakePublisher:
    """The data plane: a record sent again is reported by the next ``until`` with ``outcome(record)``
    (None: delivered at the next offset of its partition); ``refusals`` are raised by ``resend``, in
    turn, and a record whose topic may not be written is refused as the door refuses it."""

    def __init__(self) -> None:
        self.partitions = {TOPIC: 6, DLQ: 3}
        self.guard = TopicGuard(self.partitions)
        self.txn = transactions()
        for topic, count in self.partitions.items():
            self.guard.checked(topic, count, dict.fromkeys(range(count), 0))
        self.queue: list[tuple[Record, Callable[[Any, Any], None]]] = []
        self.sent: list[Record] = []
        self.offsets: dict[tuple[str, int], int] = {}
        self.outcome: Callable[[Record], Any] = lambda record: None
        self.refusals: list[BaseException] = []
        self.refreshed: list[str] = []
        self.on_refresh: Callable[[str], None] = lambda topic: None

    def lines(self, file: Any) -> Any:
        raise AssertionError("not used here")

    def resend(self, record: Record, on_delivery: Callable[[Any, Any], None]) -> None:
        if self.refusals:
            raise self.refusals.pop(0)
        refusal = self.guard.refusal(record.topic)
        if refusal is not None:
            raise TopicNotWritable(record.topic, refusal)
        self.queue.append((record, on_delivery))

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        queue, self.queue = self.queue, []
        for record, on_delivery in queue:
            error = self.outcome(record)
            if error is None:
                key = (record.topic, record.partition)
                offset = self.offsets[key] = self.offsets.get(key, 100) + 1
                self.sent.append(record)
                on_delivery(None, Landed(record.topic, record.partition, offset))
            else:
                on_delivery(error, Landed(record.topic, record.partition, -1))
        return predicate()

    async def refresh_metadata(self, topic: str) -> str | None:
        self.refreshed.append(topic)
        self.on_refresh(topic)
        return None

    def suspect(self, topic: str, detail: str) -> None:
        self.guard.suspect(topic, detail)


@dataclass
class FakeEngine:
    """A file's line engine as redelivery uses it: each cycle's records made again, and dead letters."""

    records: dict[int, dict[tuple[str, int], list[Record]]] = field(default_factory=dict)
    rebuilt: list[Cycle] = field(default_factory=list)

    def rebuild(self, cycle: Cycle, data: bytes) -> dict[tuple[str, int], list[Record]]:
        self.rebuilt.append(cycle)
        return self.records[id(cycle)]

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        return Record(DLQ, 1, record.key, b"dead letter of " + record.value, [("reason", b"rejected")])


class FakeReader:
    async def read_range(self, start: int, end: int) -> bytes:
        return b""


@dataclass
class FakeTail:
    engine: FakeEngine = field(default_factory=FakeEngine)
    reader: FakeReader = field(default_factory=FakeReader)
    path: str = f"{TABLE}/hourly/20260610/13"


def record(topic: str, partition: int, n: int) -> Record:
    return Record(topic, partition, b"BTC", b"line %d" % n, [("offset", b"%d" % n)])


def cycle_of(window: Window, tail: FakeTail, reports: list[tuple[Record, Any]]) -> Cycle:
    """A closed cycle of ``reports`` (record, error or None: delivered), its records reported in order."""
    cycle = window.open(tail.path, WriterState(0, (1, 0, 0), None, None))
    groups: dict[tuple[str, int], list[Record]] = {}
    for n, (rec, error) in enumerate(reports):
        groups.setdefault((rec.topic, rec.partition), []).append(rec)
        cycle.deliveries.handed(rec.topic, 1)
        landed = Landed(rec.topic, rec.partition, n) if error is None else None
        cycle.deliveries.callback(rec.topic, rec.partition)(error, landed)
        if rec.topic == TOPIC:
            cycle.tally.lines += 1
    cycle.tally.produced = len(reports)
    tail.engine.records[id(cycle)] = groups
    window.close(
        cycle, FileCursor.adopted(tail.path, (None, 0, 0)), WriterState(100, (1, 0, 0), None, None), size=100, complete=True
    )
    return cycle


def make(host: FakeHost | None = None) -> tuple[Redelivery, FakePublisher, FakeHost]:
    host = host or FakeHost()
    publisher = FakePublisher()
    events = TailerEvents(TABLE, host.metrics, host.log, host, host, lag_warn_bytes=1 << 30, lag_warn_s=1e9)
    flow = PublishFlow(publisher, events, stopping=lambda: host.stopping, pause=host.pause, topics=(TOPIC, DLQ))
    return Redelivery(TOPICS, flow, events), publisher, host


def unknown_topic() -> KafkaError:
    return KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)


async def test_a_record_whose_topic_cannot_be_written_is_sent_again_after_a_hold():
    redelivery, publisher, host = make()
    window, tail = Window(), FakeTail()
    failed = record(TOPIC, 2, 1)
    cycle = cycle_of(window, tail, [(record(TOPIC, 0, 0), None), (failed, unknown_topic()), (record(TOPIC, 2, 2), None)])
    await redelivery.resolve(window, tail)
    assert publisher.sent == [failed] and publisher.refreshed == [TOPIC]
    assert host.pauses == [2.0] and any("UNKNOWN_TOPIC_OR_PART" in reason for reason in host.held_ever)
    assert host.holds == {} and not cycle.failed()
    assert cycle.deliveries.offset_ranges(TOPIC) == {0: (0, 0), 2: (2, 101)}  # widened by the resend
    assert host.metrics.registry.get_sample_value("hyperdata_sidecar_producer_retries_total") == 1


async def test_a_record_refused_for_good_is_replaced_by_its_dead_letter_without_a_hold(caplog):
    redelivery, publisher, host = make()
    caplog.set_level(logging.INFO, logger="tests.tailer")
    window, tail = Window(), FakeTail()
    big = record(TOPIC, 1, 0)
    cycle = cycle_of(window, tail, [(big, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))])
    await redelivery.resolve(window, tail)
    [sent] = publisher.sent
    assert (sent.topic, sent.value) == (DLQ, b"dead letter of line 0")
    assert (cycle.tally.lines, cycle.tally.dlq) == (0, 1) and host.pauses == []
    assert "record_rejected" in [r.getMessage() for r in caplog.records]


async def test_a_fatal_error_abandons_the_window():
    redelivery, publisher, _ = make()
    window, tail = Window(), FakeTail()
    cycle_of(window, tail, [(record(TOPIC, 0, 0), KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))])
    with pytest.raises(Abandoned):
        await redelivery.resolve(window, tail)
    assert publisher.sent == []


async def test_a_refusal_when_sending_again_keeps_the_record_and_the_rest_for_the_next_round_in_order():
    redelivery, publisher, host = make()
    window, tail = Window(), FakeTail()
    records = [record(TOPIC, 3, n) for n in range(3)]
    cycle_of(window, tail, [(r, unknown_topic()) for r in records])
    publisher.refusals = [ValueError("Local: Unknown partition")]  # the first resend is refused by the client
    await redelivery.resolve(window, tail)
    assert publisher.sent == records  # one partition's records, in file order, none twice
    assert host.pauses == [2.0, 4.0]


async def test_a_record_refused_by_the_door_holds_until_its_topic_has_the_contracts_count():
    redelivery, publisher, host = make()
    window, tail = Window(), FakeTail()
    failed = record(TOPIC, 0, 0)
    cycle_of(window, tail, [(failed, KafkaError(KafkaError._UNKNOWN_PARTITION))])
    publisher.guard.checked(TOPIC, 1, None)  # the topic came back with one partition

    def operator_fixes(topic: str) -> None:
        if len(publisher.refreshed) == 2:
            publisher.guard.checked(TOPIC, 6, dict.fromkeys(range(6), 0))

    publisher.on_refresh = operator_fixes
    await redelivery.resolve(window, tail)
    assert publisher.sent == [failed]
    assert any(f"{TOPIC}: PARTITION_COUNT (1 partition(s), the contract says 6" in reason for reason in host.held_ever)
    assert host.holds == {}


async def test_a_distrusted_topic_has_every_record_of_its_cycle_sent_again_delivered_or_not():
    redelivery, publisher, _ = make()
    window, tail = Window(), FakeTail()
    copy = [record(TOPIC, 0, 0), record(TOPIC, 0, 1)]  # delivered, into a copy of the topic
    lost = record(TOPIC, 4, 2)  # failed: the copy has no partition 4
    dead = record(DLQ, 1, 3)  # the DLQ was fine
    cycle = cycle_of(
        window, tail, [(copy[0], None), (copy[1], None), (lost, KafkaError(KafkaError._UNKNOWN_PARTITION)), (dead, None)]
    )
    cycle.deliveries.distrust(TOPIC, Refusal(OFFSETS_WENT_BACK, "partition 0: a record landed at offset 0, below 10"))
    await redelivery.resolve(window, tail)
    assert sorted(publisher.sent) == sorted([*copy, lost])
    assert [r for r in publisher.sent if r.partition == 0] == copy  # in file order
    assert not cycle.failed()
    assert cycle.deliveries.offset_ranges(TOPIC) == {0: (101, 102), 4: (101, 101)}  # only where they landed now
    assert cycle.deliveries.offset_ranges(DLQ) == {1: (3, 3)}


async def test_a_cycle_resolved_before_its_topic_was_distrusted_sends_its_records_again_but_not_a_replaced_one():
    redelivery, publisher, _ = make()
    window, tail = Window(), FakeTail()
    big, fine, held = record(TOPIC, 1, 0), record(TOPIC, 1, 1), record(TOPIC, 2, 2)
    cycle = cycle_of(window, tail, [(big, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)), (fine, None), (held, unknown_topic())])
    await redelivery.resolve(window, tail)  # the dead letter of `big`, and `held` sent again
    assert [r.value for r in publisher.sent] == [b"dead letter of line 0", b"line 2"]
    assert (cycle.tally.lines, cycle.tally.dlq) == (2, 1)
    cycle.deliveries.distrust(TOPIC, Refusal(OFFSETS_WENT_BACK, "moved"))
    publisher.sent.clear()
    await redelivery.resolve(window, tail)
    assert publisher.sent == [fine, held]  # `big` stays replaced by its dead letter, counted once
    assert (cycle.tally.lines, cycle.tally.dlq) == (2, 1)


# -- a tailer, a topic deleted and created again with one partition ------------------------------


@dataclass
class OperatorHost(FakeHost):
    """A host whose ``pause`` (a held table's back-off) runs ``on_pause`` with the number of pauses so far."""

    on_pause: Callable[[int], None] = lambda n: None

    async def pause(self, seconds: float) -> bool:
        self.on_pause(len(self.pauses) + 1)
        return await super().pause(seconds)


def lines_of(broker: FakeBroker, topic: str = TOPIC) -> list[bytes]:
    return [r.value for r in broker.records(topic)]


def in_order(broker: FakeBroker) -> bool:
    for (topic, _), records in broker.log.items():
        offsets = [int(r.header("offset")) for r in records]
        if topic == TOPIC and offsets != sorted(offsets):
            return False
    return True


@pytest.mark.usefixtures("line_engine")
async def test_records_written_into_a_copy_with_one_partition_are_sent_again_once_the_topic_is_created_right(tmp_path: Path):
    """The topic is deleted and created again with one partition faster than the producer notices:
    its next records for partition 0 land in the copy (at offsets from 0), the others fail. The
    table finds them below where the topic stood, holds (naming both counts once the check sees the
    copy), and once the operator created the topic with 6 partitions every line after the copy is
    in it once, in file order per partition."""
    assert 0 in {partition_for(coin.encode(), 6) for coin in COINS}, "some coin must go to partition 0"
    watch = tmp_path / "watch"
    before = b"".join(line(n) + b"\n" for n in range(40))
    after = b"".join(line(n) + b"\n" for n in range(40, 100))
    append(hour_path(watch, 13), before)
    host, broker = OperatorHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    assert len(lines_of(broker)) == 40
    broker.recreate(TOPIC, 1)
    in_the_copy: list[bytes] = []

    def operator(pauses: int) -> None:
        if pauses == 3:  # the operator deletes the copy and creates the topic with the contract's partitions
            in_the_copy.extend(lines_of(broker))
            broker.recreate(TOPIC, 6)

    host.on_pause = operator
    append(hour_path(watch, 13), after)
    await tailer.tick()
    await tailer.tick()
    assert in_the_copy, "the racy records went into the copy (what the check cannot prevent)"
    assert sorted(lines_of(broker)) == sorted(after.splitlines()), "every line after the copy, once"
    assert in_order(broker)
    reasons = " | ".join(host.held_ever)
    assert "OFFSETS_WENT_BACK" in reasons and "PARTITION_COUNT (1 partition(s), the contract says 6" in reasons
    assert host.holds == {}
    assert host.checkpoints[f"{TABLE}/hourly/20260610/13"].byte_offset == len(before) + len(after)
    assert broker.suspected and broker.suspected[0][0] == TOPIC


@pytest.mark.usefixtures("line_engine")
async def test_a_copy_the_producer_sees_first_gets_nothing_and_the_table_names_both_counts(tmp_path: Path):
    watch = tmp_path / "watch"
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(10)))
    host, broker = OperatorHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    broker.recreate(TOPIC, 1)
    broker.guard.producer_saw(TOPIC, 1)  # librdkafka's metadata shows the copy (its statistics)
    copy_when_fixed: list[bytes] = []

    def operator(pauses: int) -> None:
        if pauses == 2:
            copy_when_fixed.extend(lines_of(broker))
            broker.recreate(TOPIC, 6)

    host.on_pause = operator
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(10, 30)))
    await tailer.tick()
    await tailer.tick()
    assert copy_when_fixed == [] and host.pauses  # nothing was written into the copy
    assert (
        host.held_ever[0]
        == f"{TOPIC}: PARTITION_COUNT (1 partition(s), the contract says 6: nothing is written to it until it has 6)"
    )
    assert sorted(lines_of(broker)) == sorted(line(n) for n in range(10, 30)) and in_order(broker)
    assert host.holds == {}


@pytest.mark.usefixtures("line_engine")
async def test_a_dlq_with_another_count_holds_the_table_too(tmp_path: Path):
    watch = tmp_path / "watch"
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(10)) + b"not json\n")
    host, broker = OperatorHost(), FakeBroker(PARTITIONS)
    broker.recreate(DLQ, 1)
    broker.guard.checked(DLQ, 1, None)

    def operator(pauses: int) -> None:
        if pauses == 2:
            broker.recreate(DLQ, 3)

    host.on_pause = operator
    await new_tailer(watch, host, broker).tick()
    assert host.held_ever[0].startswith(f"{DLQ}: PARTITION_COUNT (1 partition(s), the contract says 3")
    assert len(lines_of(broker)) == 10 and len(lines_of(broker, DLQ)) == 1
    assert host.holds == {}


@pytest.mark.usefixtures("line_engine")
async def test_records_landing_in_a_topic_created_again_with_the_contracts_count_stay_and_are_not_sent_twice(tmp_path: Path):
    """The topic is deleted and created again with its 6 partitions under the producer: its next
    records land in it from offset 0, below where the topic stood. The table checks the topic at once,
    finds the contract's count, and leaves them there: every line once, nothing sent again."""
    watch = tmp_path / "watch"
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(40)))
    host, broker = OperatorHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    broker.recreate(TOPIC, 6)
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(40, 100)))
    await tailer.tick()
    await tailer.tick()
    assert broker.suspected and broker.suspected[0][0] == TOPIC  # found from the offsets
    assert sorted(lines_of(broker)) == sorted(line(n) for n in range(40, 100)) and in_order(broker)
    assert host.metrics.registry.get_sample_value("hyperdata_sidecar_producer_retries_total") in (None, 0.0)
    assert host.holds == {} and host.pauses == []
    assert broker.guard.refusal(TOPIC) is None and broker.guard.epoch(TOPIC) == 2
