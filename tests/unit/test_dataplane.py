"""The data plane's reactions to librdkafka's client events (no broker: the events are given to the
callbacks librdkafka would call), its producer configuration, and its door: a topic is written only
while its partition count is the contract's (the broker's answers are given to it as its blocking
look-ups would return them)."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, KafkaException

from hyperdata_sidecar.checked_lines import TopicNotWritable
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.delivery import Refusal, Verdict, verdict
from hyperdata_sidecar.core.records import SEQ_START, Record, Topics
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.core.topic_check import (
    OFFSETS_WENT_BACK,
    PARTITION_COUNT,
    TOPIC_MISSING,
    TOPIC_UNCHECKED,
    producer_partition_counts,
)
from hyperdata_sidecar.core.window import Window, WriterState
from hyperdata_sidecar.dataplane import DataPlane, DataPlaneError
from hyperdata_sidecar.engines import FileLines
from hyperdata_sidecar.engines.python import PythonEngine, PythonLines
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.topic_admin import TopicLookFailed
from hyperdata_sidecar.transactions import Transactions

from fake_broker import transactions


def make(tmp_path, txn: Transactions | None = None, **env: str) -> tuple[DataPlane, list, list]:
    plane, changes, _errors, fatal = make_counting(tmp_path, txn, **env)
    return plane, changes, fatal


def make_counting(tmp_path, txn: Transactions | None = None, **env: str) -> tuple[DataPlane, list, list, list]:
    """A data plane whose broker changes (a refused login as its words), error kinds and fatal
    errors land in lists."""
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit", **env})
    changes: list = []
    errors: list = []
    fatal: list = []
    plane = DataPlane(
        settings,
        EventLog(logging.getLogger("tests.dataplane")),
        PythonEngine("test"),
        txn or transactions(settings),
        on_broker=changes.append,
        on_login_refused=changes.append,
        on_error=errors.append,
        on_fatal=fatal.append,
    )
    return plane, changes, errors, fatal


def stats(*states: str) -> str:
    return orjson.dumps({"brokers": {f"b{i}": {"state": state} for i, state in enumerate(states)}}).decode()


def test_the_producer_is_idempotent_waits_forever_and_keeps_batches_below_the_limit(tmp_path):
    plane, _, _ = make(tmp_path, PRODUCER_LINGER_MS="50", PRODUCER_BATCH_BYTES="1048576")
    plane.batch_bytes = 65000
    config = plane._config()
    assert (config["enable.idempotence"], config["acks"], config["compression.type"]) == (True, "all", "zstd")
    assert (config["message.timeout.ms"], config["linger.ms"], config["batch.size"]) == (0, 50, 65000)
    assert "transactional.id" not in config


def test_exactly_once_makes_the_producer_transactional_and_bounds_a_record_by_the_transaction(tmp_path):
    settings = load_settings(
        {"WATCH_DIR": str(tmp_path), "NODE_ID": "unit", "DELIVERY": "exactly_once", "TXN_TIMEOUT_MS": "30000"}
    )
    plane, _, _ = make(tmp_path, txn=transactions(settings))
    config = plane._config()
    assert (config["transactional.id"], config["transaction.timeout.ms"], config["message.timeout.ms"]) == (
        "app-sidecar",
        30000,
        30000,
    )
    assert (config["enable.idempotence"], config["acks"]) == (True, "all")


def test_no_client_of_the_data_plane_creates_a_topic(tmp_path):
    # librdkafka's producer asks the broker to create a topic it does not find (its default, unlike a
    # consumer's): a topic deleted under the worker came back with the broker's num.partitions.
    plane, _, _ = make(tmp_path)
    assert plane._config()["allow.auto.create.topics"] is False
    assert plane.admin.client_config()["allow.auto.create.topics"] is False


def test_security_settings_reach_librdkafka_without_empty_values(tmp_path):
    plane, _, _ = make(
        tmp_path,
        KAFKA_SECURITY_PROTOCOL="SASL_SSL",
        KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
        KAFKA_SASL_USERNAME="u",
        KAFKA_SASL_PASSWORD="p",
        KAFKA_SSL_CAFILE="/ca.pem",
    )
    config = plane._config()
    assert config["security.protocol"] == "sasl_ssl" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl.username"], config["sasl.password"], config["ssl.ca.location"]) == ("u", "p", "/ca.pem")
    assert "ssl.certificate.location" not in config


def test_broker_state_follows_the_statistics_and_all_brokers_down(tmp_path):
    plane, changes, _ = make(tmp_path)
    on_stats, on_error = plane._config()["stats_cb"], plane._config()["error_cb"]
    on_stats(stats("UP", "DOWN"))
    on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    on_stats(stats("DOWN"))
    on_stats(stats("CONNECT", "UP"))
    assert changes == [True, False, True]


def test_a_fatal_error_is_reported_once_and_logged(tmp_path, caplog):
    plane, _, fatal = make(tmp_path)
    caplog.set_level(logging.ERROR, logger="tests.dataplane")
    error = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)
    plane._config()["error_cb"](error)
    assert fatal == [error] and plane.fatal is error
    assert [r.getMessage() for r in caplog.records] == ["producer_fatal"]


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE])
def test_a_broker_transport_error_is_counted_as_transport_every_time(tmp_path, code):
    plane, _, errors, _ = make_counting(tmp_path)
    for _ in range(3):  # the log line is rate-limited, the count is not
        plane._config()["error_cb"](KafkaError(code))
    assert errors == ["transport"] * 3


def test_a_refused_login_is_counted_as_login_refused_every_time_and_named_in_its_own_line(tmp_path, caplog):
    plane, changes, errors, _ = make_counting(
        tmp_path,
        KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        KAFKA_SASL_MECHANISM="PLAIN",
        KAFKA_SASL_USERNAME="sidecar",
        KAFKA_SASL_PASSWORD="pw-never-shown",
    )
    caplog.set_level(logging.WARNING, logger="tests.dataplane")
    detail = "sasl_plaintext://127.0.0.1:9094/bootstrap: SASL authentication error: Authentication failed"
    for _ in range(3):  # the log line is rate-limited, the count is not
        plane._config()["error_cb"](KafkaError(KafkaError._AUTHENTICATION, detail))
    assert errors == ["login_refused"] * 3
    [record] = caplog.records
    assert record.getMessage() == "broker_login_refused"
    fields = record.fields  # type: ignore[attr-defined]
    assert (fields["mechanism"], fields["user"]) == ("PLAIN", "sidecar")
    assert fields["error"] == f"the broker refused the login (SASL PLAIN, user sidecar): {detail}"
    assert "pw-never-shown" not in repr(fields)
    # Readiness hears it every time (the worker's not-ready reason), until a login succeeds.
    assert changes == [fields["error"]] * 3
    plane._config()["stats_cb"](stats("UP"))
    assert changes[-1] is True


def test_another_producer_error_is_counted_as_client(tmp_path, caplog):
    plane, _, errors, _ = make_counting(tmp_path)
    caplog.set_level(logging.WARNING, logger="tests.dataplane")
    plane._config()["error_cb"](KafkaError(KafkaError._MSG_TIMED_OUT))
    assert errors == ["client"]
    assert [r.getMessage() for r in caplog.records] == ["producer_error"]


def test_a_fatal_error_is_counted_as_fatal(tmp_path):
    plane, _, errors, fatal = make_counting(tmp_path)
    plane._config()["error_cb"](KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    assert errors == ["fatal"] and len(fatal) == 1


def test_the_ways_to_the_producer_before_connect_raise_a_clear_error(tmp_path):
    plane, _, _ = make(tmp_path)
    with pytest.raises(DataPlaneError, match="not connected"):
        plane.resend(Record("t", 0, b"k", b"v", []), print)
    with pytest.raises(DataPlaneError, match="not connected"):
        plane.lines(FileLines(TABLES[0], Topics("t", 1, "d", 1), "x", WriterState(0, SEQ_START, None, None), b"", 100))


# --- the door: partition counts against the contract -------------------------------------------

ORDERS = "hyperliquid.order-statuses"
BOOK = "hyperliquid.book-diffs"
DLQ = "hyperliquid.sidecar-dlq"
SEALS = "hyperliquid.node-files"
CONTRACT = {BOOK: 6, ORDERS: 6, "hyperliquid.fills": 3, SEALS: 3, DLQ: 3, "hyperliquid.node-snapshots": 3}


class FakeProducer:
    """What the engine would make: records ``produce`` calls; ``refresh_metadata`` answers None."""

    def __init__(self) -> None:
        self.produced: list[tuple[Any, ...]] = []
        self.refreshed: list[str] = []

    def produce(self, *args: Any) -> None:
        self.produced.append(args)

    def poll(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def purge(self) -> None:
        pass

    def refresh_metadata(self, topic: str, timeout: float) -> str | None:
        self.refreshed.append(topic)
        return None

    def init_transactions(self, timeout: float) -> None:  # exactly_once: registered, nothing to fence
        pass

    def begin_transaction(self) -> None:
        pass


class FakeEngine(PythonEngine):
    def producer(self, config: dict[str, Any]) -> Any:
        return FakeProducer()

    def lines(self, producer: Any, file: FileLines) -> Any:
        return PythonLines(file, producer.produce)


def door(tmp_path, env: dict[str, str] | None = None, limit: int = 8454144, **counts: int) -> tuple[DataPlane, list, list]:
    """A data plane connected to a broker whose topics have the contract's counts but ``counts``
    (by topic role: ``orders=1``), each with every end offset at 10 and ``max.message.bytes`` ``limit``."""
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit", **(env or {})})
    errors: list = []
    plane = DataPlane(
        settings,
        EventLog(logging.getLogger("tests.dataplane")),
        FakeEngine("test"),
        transactions(settings),
        on_broker=lambda _: None,
        on_login_refused=lambda _: None,
        on_error=errors.append,
        on_fatal=lambda _: None,
    )
    names = {"orders": ORDERS, "book": BOOK, "dlq": DLQ, "seals": SEALS}
    actual = {**CONTRACT, **{names[role]: n for role, n in counts.items()}}
    plane.broker_counts = actual  # type: ignore[attr-defined]

    def describe(topics: list[str]) -> tuple[dict, dict, dict]:
        floors = {t: dict.fromkeys(range(n), 10) for t, n in actual.items() if n == CONTRACT[t]}
        return {t: actual[t] for t in topics}, dict.fromkeys(topics, limit), floors

    def look(topic: str, refused: bool) -> tuple[int, dict | None]:
        n = actual.get(topic, 0)
        return n, dict.fromkeys(range(n), 10) if n == CONTRACT[topic] and refused else None

    def counts(topics: list[str]) -> dict[str, int]:
        return {t: actual.get(t, 0) for t in topics}

    plane.admin.describe = describe  # type: ignore[method-assign]
    plane.admin.look = look  # type: ignore[method-assign]
    plane.admin.counts = counts  # type: ignore[method-assign]
    plane.admin.leader = lambda _topic, _partition: 1  # type: ignore[method-assign]
    return plane, errors, []


async def connected(tmp_path, caplog, **counts: int) -> tuple[DataPlane, list]:
    plane, errors, _ = door(tmp_path, **counts)
    caplog.set_level(logging.INFO, logger="tests.dataplane")
    await plane.connect(list(CONTRACT))
    return plane, errors


def events(caplog, name: str) -> list[dict]:
    return [r.fields for r in caplog.records if r.getMessage() == name]  # type: ignore[attr-defined]


def file_lines(table: str = "node_order_statuses_streaming") -> FileLines:
    spec = TABLE_BY_DIR[table]
    topic = BOOK if "book" in table else ORDERS
    return FileLines(spec, Topics(topic, 6, DLQ, 3), "x", WriterState(0, SEQ_START, None, None), b"", 1 << 20)


def test_records_are_partitioned_over_the_contracts_counts_and_nothing_is_written_before_the_check(tmp_path):
    plane, _, _ = door(tmp_path, orders=1)
    assert dict(plane.partitions) == CONTRACT
    assert plane.guard.refusal(ORDERS).name() == TOPIC_UNCHECKED


async def test_a_topic_with_another_count_at_start_is_named_with_both_counts_and_not_written(tmp_path, caplog):
    plane, errors = await connected(tmp_path, caplog, orders=1)
    assert events(caplog, "topic_partitions_mismatch") == [{"topic": ORDERS, "partitions": 1, "contract": 6, "seen_by": "broker"}]
    assert errors == ["partitions"]
    assert plane.partitions[ORDERS] == 6  # still partitioned over the contract's count
    assert plane.guard.refusal(ORDERS).name() == PARTITION_COUNT and plane.guard.refusal(BOOK) is None
    assert not events(caplog, "topic_checked")  # the topics that are fine are not logged at every start


async def test_a_line_engines_hand_over_hands_nothing_while_its_data_topic_or_the_dlq_may_not_be_written(tmp_path, caplog):
    plane, _ = await connected(tmp_path, caplog, orders=1)
    producer = plane._producer
    window = Window()
    lines = plane.lines(file_lines())
    cycle = window.open("x", lines.state(), deliveries=lines.deliveries())
    handover = lines.handover(b'{"x": 1}\n', cycle)
    assert not await handover.step()
    assert isinstance(handover.refusal, TopicNotWritable) and not producer.produced
    assert handover.refusal.reason().startswith(f"{ORDERS}: PARTITION_COUNT (1 partition(s), the contract says 6")
    assert cycle.deliveries.epochs(ORDERS) is None
    # The book-diffs table writes another data topic: it goes on, and its cycle notes the epochs.
    book = plane.lines(file_lines("node_raw_book_diffs_streaming"))
    cycle = Window().open("y", book.state(), deliveries=book.deliveries())
    assert await book.handover(b"not json\n", cycle).step()
    assert len(producer.produced) == 1 and producer.produced[0][0] == DLQ
    assert (cycle.deliveries.epochs(BOOK), cycle.deliveries.epochs(DLQ)) == ((1, 1), (1, 1))
    # The DLQ with another count holds every table: a read may hold a bad line.
    plane.guard.producer_saw(DLQ, 1)
    handover = book.handover(b"not json\n", Window().open("z", book.state(), deliveries=book.deliveries()))
    assert not await handover.step() and handover.refusal.topic == DLQ and len(producer.produced) == 1


async def test_a_record_sent_again_is_refused_as_a_hold_while_its_topic_may_not_be_written(tmp_path, caplog):
    plane, _ = await connected(tmp_path, caplog, orders=1)
    with pytest.raises(TopicNotWritable) as refused:
        plane.resend(Record(ORDERS, 0, b"BTC", b"v", []), print)
    error = Refusal.of(refused.value)
    assert (error.name(), verdict(error)) == (PARTITION_COUNT, Verdict.HOLD)
    plane.resend(Record(BOOK, 0, b"BTC", b"v", []), print)
    assert [args[0] for args in plane._producer.produced] == [BOOK]


async def test_the_producers_own_view_of_a_topic_is_followed_every_second(tmp_path, caplog):
    plane, errors = await connected(tmp_path, caplog)
    on_stats = plane._config()["stats_cb"]
    on_stats(orjson.dumps({"topics": {ORDERS: topic_stats(6)}}).decode())
    assert plane.guard.refusal(ORDERS) is None and not errors
    on_stats(orjson.dumps({"topics": {ORDERS: topic_stats(1), "unknown.topic": topic_stats(2)}}).decode())
    assert plane.guard.refusal(ORDERS).name() == PARTITION_COUNT
    assert events(caplog, "topic_partitions_mismatch") == [
        {"topic": ORDERS, "partitions": 1, "contract": 6, "seen_by": "producer"}
    ]
    on_stats(orjson.dumps({"topics": {ORDERS: topic_stats(0)}}).decode())
    assert plane.guard.refusal(ORDERS).name() == TOPIC_MISSING
    assert events(caplog, "topic_missing") == [{"topic": ORDERS, "contract": 6, "seen_by": "producer"}]
    assert errors == ["partitions"]


async def test_the_topics_the_door_refuses_are_listed_with_why_once_looked_at(tmp_path, caplog):
    plane, _, _ = door(tmp_path, orders=1)
    assert plane.refused_topics() == {}  # nothing looked at yet: the connect names that
    await plane.connect(list(CONTRACT))
    assert list(plane.refused_topics()) == [ORDERS]
    assert plane.refused_topics()[ORDERS].startswith("PARTITION_COUNT (1 partition(s), the contract says 6")
    plane._config()["stats_cb"](orjson.dumps({"topics": {BOOK: topic_stats(0)}}).decode())
    assert plane.refused_topics()[BOOK].startswith("TOPIC_MISSING (not in the broker's metadata")


@pytest.mark.parametrize("delivery", ["exactly_once", "at_least_once"])
async def test_a_topic_found_unwritable_aborts_the_open_transaction_at_once_in_exactly_once(tmp_path, caplog, delivery):
    """Its records in the open transaction cannot be delivered where they belong (a deleted topic's
    would fail only after TXN_TIMEOUT_MS, holding every table's commit): the transaction is aborted
    now and the reads redone; at_least_once has no transaction and keeps its records."""
    plane, _, _ = door(tmp_path, env={"DELIVERY": delivery}, book=1)
    caplog.set_level(logging.INFO, logger="tests.dataplane")
    await plane.connect(list(CONTRACT))
    assert plane.txn.abort_reason is None  # a topic refused at connect: no transaction was open yet
    plane._config()["stats_cb"](orjson.dumps({"topics": {ORDERS: topic_stats(0)}}).decode())
    if delivery == "exactly_once":
        assert plane.txn.abort_reason == f"{ORDERS} may not be written: {TOPIC_MISSING}"
    else:
        assert plane.txn.abort_reason is None
    plane.txn.abort_reason = None
    plane._config()["stats_cb"](orjson.dumps({"topics": {ORDERS: topic_stats(1)}}).decode())
    assert plane.guard.refusal(ORDERS).name() == PARTITION_COUNT
    assert plane.txn.abort_reason is None  # refused already: no record of it in the transaction
    assert events(caplog, "topic_missing") == [{"topic": ORDERS, "contract": 6, "seen_by": "producer"}]


async def test_asked_again_after_an_abort_a_deleted_topic_is_refused_and_one_with_the_contracts_count_left(tmp_path, caplog):
    plane, _errors = await connected(tmp_path, caplog, orders=1)
    plane.broker_counts[ORDERS] = 6  # created again right: the held table checks it before it sends
    plane.broker_counts[BOOK] = 0  # deleted
    await plane.check_topics()
    assert plane.guard.refusal(BOOK).name() == TOPIC_MISSING
    assert plane.guard.refusal(ORDERS).name() == PARTITION_COUNT and plane.guard.refusal(DLQ) is None
    assert events(caplog, "topic_missing") == [{"topic": BOOK, "contract": 6, "seen_by": "broker"}]

    def unreachable(_topics: list[str]) -> dict[str, int]:
        raise TopicLookFailed("broker metadata: _TRANSPORT")

    plane.admin.counts = unreachable  # type: ignore[method-assign]
    await plane.check_topics()
    assert events(caplog, "topic_check_failed") == [{"error": "broker metadata: _TRANSPORT"}]


class PurgingProducer(FakeProducer):
    """Keeps each record's delivery callback; ``purge`` fails them all, served by the next ``poll``."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Any] = []
        self.purged: list[Any] = []

    def produce(self, *args: Any) -> None:
        super().produce(*args)
        self.pending.append(args[4])

    def purge(self) -> None:
        self.purged, self.pending = self.pending, []

    def poll(self, timeout: float = 0) -> int:
        served, self.purged = self.purged, []
        for callback in served:
            callback(KafkaError(KafkaError._PURGE_QUEUE), None)
        return len(served)

    def __len__(self) -> int:
        return len(self.pending) + len(self.purged)


async def test_a_replaced_producer_serves_its_purged_records_reports_before_it_is_dropped(tmp_path):
    """Nothing polls the old producer once the new one is in place: a cycle waiting on its
    records' reports would wait for good, and the redo with it (open finding 5)."""
    plane, _, _ = door(tmp_path, env={"DELIVERY": "exactly_once"})
    await plane.connect(list(CONTRACT))
    old = PurgingProducer()
    plane._producer = old
    reports: list[str] = []
    old.produce(BOOK, b"v", b"BTC", 0, lambda error, _msg: reports.append(error.name()), None, 0, [])
    new = await plane._renew()
    assert reports == ["_PURGE_QUEUE"] and len(old) == 0 and plane._producer is new is not old


LEADERLESS = "Partition {topic}(bloiRfArRn2mN9a/G7Bczg)[2]: new leader-1 not found in cache"


def stuck_stats(topic: str, queued: int) -> str:
    return orjson.dumps({"topics": {topic: {"partitions": {"2": {"txmsgs": 10, "msgq_cnt": queued}}}}}).decode()


async def test_a_partition_stuck_by_librdkafkas_leaderless_update_stops_the_worker_in_at_least_once(
    tmp_path, caplog, monkeypatch
):
    """confluentinc/librdkafka#5430: after the line, the partition never sends again though the
    broker names its leader; the line engines hold this producer, so the worker stops and the
    restart resumes. While the broker names no leader (or cannot be asked), the producer waits."""
    monkeypatch.setattr("hyperdata_sidecar.dataplane.STUCK_AFTER_S", 0.0)
    plane, _changes, errors, fatal = make_counting(tmp_path)
    leaders: list[int | None] = [None, 1]
    asked: list[tuple[str, int]] = []

    def leader(topic: str, partition: int) -> int | None:
        asked.append((topic, partition))
        return leaders.pop(0)

    plane.admin.leader = leader  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="tests.dataplane")
    config = plane._config()
    config["stats_cb"](stuck_stats(ORDERS, 40))
    assert plane._confirming is None  # a queue that waits is an outage until librdkafka's line names the partition
    config["logger"].log(logging.WARNING, "%s [%s] %s", "METADATAUPDATE", "client", LEADERLESS.format(topic=ORDERS))
    config["stats_cb"](stuck_stats(ORDERS, 0))
    assert plane._confirming is None  # nothing waits on it
    config["stats_cb"](stuck_stats(ORDERS, 40))
    await plane._confirming  # no leader at the broker: asked again at the next statistics
    assert asked == [(ORDERS, 2)] and not fatal and not events(caplog, "producer_stuck")
    config["stats_cb"](stuck_stats(ORDERS, 40))
    await plane._confirming
    [error] = fatal
    assert error.fatal() and "librdkafka#5430" in error.str() and errors == ["stuck"]
    [stuck] = events(caplog, "producer_stuck")
    assert (stuck["topic"], stuck["partition"], stuck["records"], stuck["broker_leader"]) == (ORDERS, 2, 40, 1)
    config["stats_cb"](stuck_stats(ORDERS, 40))
    assert len(fatal) == 1 and errors == ["stuck"]  # once


async def test_a_partition_connected_that_sends_nothing_is_stuck_without_the_line(tmp_path, caplog, monkeypatch):
    """CI's drill 14: after the broker's thaw a partition sent nothing for two minutes and the
    leader-less line never came. Connected (a broker UP), holding records, sending none for the
    bound, its leader named by the broker: stuck all the same, and named so."""
    monkeypatch.setattr("hyperdata_sidecar.dataplane.STUCK_AFTER_S", 0.0)
    plane, _changes, _errors, fatal = make_counting(tmp_path)
    plane.admin.leader = lambda topic, partition: 1  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger="tests.dataplane")
    config = plane._config()
    up = orjson.loads(stuck_stats(ORDERS, 40))
    up["brokers"] = {"127.0.0.1:9092/1": {"state": "UP"}}
    config["stats_cb"](orjson.dumps(up).decode())
    assert plane._confirming is None  # its quiet starts now
    config["stats_cb"](orjson.dumps(up).decode())
    await plane._confirming
    [error] = fatal
    assert "sending nothing for 0 s while connected" in error.str()
    [stuck] = events(caplog, "producer_stuck")
    assert (stuck["topic"], stuck["partition"]) == (ORDERS, 2) and "line of confluentinc/librdkafka#5430 not seen" in stuck[
        "cause"
    ]


async def test_a_stuck_partition_in_exactly_once_aborts_and_a_new_producer_takes_over(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("hyperdata_sidecar.dataplane.STUCK_AFTER_S", 0.0)
    plane, errors, _ = door(tmp_path, env={"DELIVERY": "exactly_once"})
    await plane.connect(list(CONTRACT))
    caplog.set_level(logging.INFO, logger="tests.dataplane")
    old = plane._producer
    config = plane._config()
    config["logger"].log(logging.WARNING, "%s [%s] %s", "METADATAUPDATE", "client", LEADERLESS.format(topic=BOOK))
    config["stats_cb"](stuck_stats(BOOK, 5))
    await plane._confirming
    assert plane.txn.abort_reason is not None and "librdkafka#5430" in plane.txn.abort_reason
    assert errors == ["stuck"] and plane.stuck is not None
    await plane._drained()  # the stuck records are never reported: the commit does not wait for them
    await plane.txn.abort(plane.txn.abort_reason)
    assert plane._producer is not old and plane.stuck is None  # renewed: watched afresh
    assert events(caplog, "producer_stuck")[0]["action"] == "a new producer: reads redone"


def topic_stats(partitions: int, *, age: int = 1200, desired: int = 0) -> dict:
    found = {str(p): {"partition": p, "unknown": False} for p in range(partitions)}
    found.update({str(partitions + d): {"partition": partitions + d, "unknown": True, "desired": True} for d in range(desired)})
    return {"metadata_age": age, "partitions": {**found, "-1": {"partition": -1, "unknown": False}}}


def test_the_producers_partition_counts_come_from_its_statistics():
    stats = {"topics": {"a": topic_stats(6), "b": topic_stats(1, desired=2), "c": topic_stats(0), "d": topic_stats(3, age=0)}}
    assert producer_partition_counts(stats) == {"a": 6, "b": 1, "c": 0}  # d: no metadata yet
    assert producer_partition_counts({}) == {}


async def test_before_a_held_table_sends_again_the_topic_is_checked_and_written_once_it_has_the_contracts_count(tmp_path, caplog):
    plane, _ = await connected(tmp_path, caplog, orders=1)
    assert await plane.refresh_metadata(ORDERS) is None
    assert plane._producer.refreshed == [ORDERS] and plane.guard.refusal(ORDERS).name() == PARTITION_COUNT
    plane.broker_counts[ORDERS] = 0  # the copy deleted
    await plane.refresh_metadata(ORDERS)
    assert plane.guard.refusal(ORDERS).name() == TOPIC_MISSING
    plane.broker_counts[ORDERS] = 6  # created with the contract's partitions
    await plane.refresh_metadata(ORDERS)
    assert plane.guard.refusal(ORDERS) is None and plane.guard.epoch(ORDERS) == 1
    assert events(caplog, "topic_checked") == [{"topic": ORDERS, "partitions": 6, "epoch": 1}]
    assert plane.guard.floor(ORDERS, 5, 1) == 10


async def test_a_failed_check_keeps_the_topic_held_and_reports_the_error(tmp_path, caplog):
    plane, _ = await connected(tmp_path, caplog, orders=1)

    def unreachable(topic: str, refused: bool) -> Any:
        raise TopicLookFailed("broker metadata: timed out")

    plane.admin.look = unreachable  # type: ignore[method-assign]
    assert await plane.refresh_metadata(ORDERS) == "broker metadata: timed out"
    assert plane.guard.refusal(ORDERS).name() == PARTITION_COUNT


async def test_records_found_in_another_incarnation_hold_the_topic_until_it_is_checked(tmp_path, caplog):
    plane, errors = await connected(tmp_path, caplog)
    plane.suspect(ORDERS, "partition 0: a record landed at offset 3, below 10")
    assert plane.guard.refusal(ORDERS).name() == OFFSETS_WENT_BACK
    assert not errors and not events(caplog, "topic_partitions_mismatch")  # the table that found it logs it
    await plane.refresh_metadata(ORDERS)
    assert plane.guard.refusal(ORDERS) is None and plane.guard.epoch(ORDERS) == 2


async def test_a_seal_for_a_topic_with_another_count_is_refused_after_one_more_look(tmp_path, caplog):
    plane, _ = await connected(tmp_path, caplog, seals=1)
    with pytest.raises(KafkaException) as refused:  # what the seal agent retries with its back-off
        await plane.send(SEALS, b"k", b"v")
    assert isinstance(refused.value, TopicNotWritable) and "the contract says 3" in str(refused.value)
    assert plane._producer.refreshed == [SEALS] and not plane._producer.produced


async def test_exactly_once_refuses_topics_that_cannot_take_the_longest_line(tmp_path):
    exactly_once = {"DELIVERY": "exactly_once", "MAX_LINE_BYTES": "1000000"}
    plane, _, _ = door(tmp_path, exactly_once, limit=1_000_000)
    with pytest.raises(DataPlaneError, match=r"max.message.bytes >= MAX_LINE_BYTES \+ 65536 = 1065536"):
        await plane.connect(load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit"}).contract_topics())
    plane, _, _ = door(tmp_path, exactly_once, limit=1_065_536)
    plane.engine.producer = lambda _config: None  # type: ignore[method-assign,assignment,return-value]
    plane.txn.start = _started  # type: ignore[method-assign]
    await plane.connect(load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit"}).contract_topics())
    assert plane.connected
    plane, _, _ = door(tmp_path, limit=1_000_000)  # at_least_once: a refused line becomes a dead letter
    await plane.connect(load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit"}).contract_topics())
    assert plane.connected


async def _started(*_args: object) -> None:
    return None
