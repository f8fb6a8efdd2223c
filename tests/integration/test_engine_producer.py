"""The compiled engine's producer against the real broker, next to confluent-kafka's.

The data plane drives either producer through the same calls (``produce`` positionally, ``poll``,
``len``, ``purge``, ``error_cb``, ``stats_cb``); what it reads back (delivery callbacks, error
names, ``BufferError``, a refusal's error) must mean the same from both, or the verdicts
(``core/delivery.verdict``) and the holds would differ by engine.

The transactional calls (``init_transactions``, ``begin_transaction``, ``commit_transaction``,
``abort_transaction``) too: each test below runs on both engines' producers, made by the engine,
their errors read by ``Engine.txn_error``, and what a ``read_committed`` consumer sees is the verdict.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient, NewTopic

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.engines import Engine, Producer, TxnError
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonEngine

native = pytest.importorskip("hyperdata_sidecar_engine", reason="the native engine is not installed (make engine)")

SMALL_LIMIT = 2048  # max.message.bytes of the topic that refuses large records


def producers(bootstrap: str, **extra: Any) -> dict[str, Any]:
    config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5, **extra}
    return {"confluent": ConfluentProducer(dict(config)), "native": native.Producer(dict(config))}


def make_topic(bootstrap: str, partitions: int = 2, **config: str) -> str:
    name = f"t-engine-producer-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
    return name


def settle(producer: Any, reports: list[Any], count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(reports) < count and time.monotonic() < deadline:
        producer.poll(0.05)
    assert len(reports) == count, f"{len(reports)} of {count} reports"


def test_both_producers_report_the_same_deliveries_in_produce_order(kafka_bootstrap):
    topic = make_topic(kafka_bootstrap)
    for name, producer in producers(kafka_bootstrap).items():
        reports: list[tuple[Any, str, int, int]] = []

        def delivered(error: Any, message: Any, reports: list = reports) -> None:
            reports.append((error, message.topic(), message.partition(), message.offset()))

        for n in range(20):
            producer.produce(topic, b"v%d" % n, b"k", n % 2, delivered, None, 0, [("line_id", b"%d" % n)])
        assert len(producer) > 0
        settle(producer, reports, 20)
        assert all(error is None for error, *_ in reports), name
        for partition in (0, 1):
            offsets = [offset for _, t, p, offset in reports if p == partition and t == topic]
            assert offsets == sorted(offsets) and len(offsets) == 10, name
        assert len(producer) == 0, name


def test_a_record_too_large_for_its_topic_fails_with_the_same_error_name_from_both(kafka_bootstrap):
    topic = make_topic(kafka_bootstrap, 1, **{"max.message.bytes": str(SMALL_LIMIT)})
    names = {}
    for name, producer in producers(kafka_bootstrap, **{"compression.type": "none"}).items():
        reports: list[Any] = []
        producer.produce(topic, b"x" * (SMALL_LIMIT * 4), b"k", 0, lambda error, _m, r=reports: r.append(error), None, 0, [])
        settle(producer, reports, 1)
        [error] = reports
        names[name] = (error.name(), error.fatal())
    assert names["native"] == names["confluent"] == ("MSG_SIZE_TOO_LARGE", False)


def test_a_full_queue_raises_buffer_error_from_both(kafka_bootstrap):
    topic = make_topic(kafka_bootstrap, 1)
    for name, producer in producers(kafka_bootstrap, **{"queue.buffering.max.messages": 5, "linger.ms": 1000}).items():
        for _ in range(5):
            producer.produce(topic, b"v", b"k", 0, None, None, 0, [])
        with pytest.raises(BufferError):
            producer.produce(topic, b"v", b"k", 0, None, None, 0, [])
        producer.purge()
        producer.poll(0)
        assert len(producer) == 0, name


def test_a_partition_the_topic_does_not_have_is_refused_or_failed_with_the_same_name(kafka_bootstrap):
    topic = make_topic(kafka_bootstrap, 1)
    seen = {}
    for name, producer in producers(kafka_bootstrap).items():
        producer.list_topics(topic, 10) if name == "confluent" else producer.refresh_metadata(topic, 10)
        reports: list[Any] = []
        try:
            producer.produce(topic, b"v", b"k", 5, lambda error, _m, r=reports: r.append(error), None, 0, [])
        except KafkaException as exc:  # confluent-kafka
            seen[name] = exc.args[0].name()
            continue
        except native.ProduceError as exc:
            seen[name] = exc.args[0].name()
            continue
        settle(producer, reports, 1)
        seen[name] = reports[0].name()
    assert seen["native"] == seen["confluent"] == "_UNKNOWN_PARTITION"


def test_errors_and_statistics_reach_the_callbacks_of_the_configuration(kafka_bootstrap):
    errors: list[Any] = []
    stats: list[dict[str, Any]] = []
    down = native.Producer(
        {"bootstrap.servers": "127.0.0.1:1", "error_cb": errors.append, "reconnect.backoff.max.ms": 100, "log_level": 0}
    )
    up = native.Producer(
        {"bootstrap.servers": kafka_bootstrap, "statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s))}
    )
    deadline = time.monotonic() + 30
    while (not errors or not stats) and time.monotonic() < deadline:
        down.poll(0.05)
        up.poll(0.05)
    assert {error.name() for error in errors} & {"_TRANSPORT", "_ALL_BROKERS_DOWN"}
    assert not any(error.fatal() for error in errors)
    assert "brokers" in stats[-1]


def test_asking_for_metadata_answers_none_or_the_error(kafka_bootstrap):
    assert native.Producer({"bootstrap.servers": kafka_bootstrap}).refresh_metadata(make_topic(kafka_bootstrap, 1), 10) is None
    unreachable = native.Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
    assert unreachable.refresh_metadata("any", 1)  # the client's error, as text


# -- transactions -----------------------------------------------------------------------------

# A transactional producer: librdkafka refuses a message.timeout.ms above transaction.timeout.ms.
TRANSACTIONAL = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "transaction.timeout.ms": 10000,
    "message.timeout.ms": 10000,
}
WAIT_S = 30.0  # the longest a transactional call of these tests may take


@pytest.fixture(params=["python", "native"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """The engine whose producer the test drives (the Python engine's is confluent-kafka's)."""
    return PythonEngine("test") if request.param == "python" else NativeEngine(native)


def transactional(engine: Engine, bootstrap: str, transactional_id: str, **extra: Any) -> Producer:
    """A transactional producer of ``engine``, its transactions initialised."""
    producer = engine.producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **TRANSACTIONAL, **extra})
    producer.init_transactions(WAIT_S)
    return producer


def a_transactional_id() -> str:
    return f"t-engine-producer-{uuid.uuid4().hex[:8]}"


def txn_error_of(engine: Engine, call: Any, *args: Any) -> TxnError:
    """What ``engine`` reads from the exception ``call(*args)`` raises."""
    with pytest.raises(Exception) as raised:
        call(*args)
    error = engine.txn_error(raised.value)
    assert error is not None, f"{raised.value!r} is no error of {engine.name}'s producer"
    return error


def judged(error: TxnError | None) -> tuple[str, bool, bool, bool] | None:
    """``error``'s name and what may follow, without librdkafka's words (a refused record's differ by engine)."""
    return None if error is None else (error.name, error.fatal, error.retriable, error.requires_abort)


def values_read(bootstrap: str, topic: str, isolation: str, count: int) -> list[bytes]:
    """The first ``count`` values a consumer in ``isolation`` (``read_committed``, ``read_uncommitted``)
    reads from partition 0 of ``topic``."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "isolation.level": isolation}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count and time.monotonic() < deadline:
            record = consumer.poll(0.2)
            if record is not None and record.error() is None:
                values.append(record.value())
        assert len(values) == count, f"{len(values)} of {count} records read from {topic} ({isolation}): {values}"
        return values
    finally:
        consumer.close()


def produce_all(producer: Producer, topic: str, values: list[bytes]) -> list[tuple[Any, int]]:
    """Produce ``values`` to partition 0 of ``topic`` and wait for their reports: (error, offset) each."""
    reports: list[tuple[Any, int]] = []
    for value in values:
        producer.produce(topic, value, b"k", 0, lambda error, message: reports.append((error, message.offset())), None, 0, [])
    settle(producer, reports, len(values))
    return reports


def test_a_committed_transaction_is_read_committed_and_its_reports_carry_offsets(kafka_bootstrap, engine):
    topic = make_topic(kafka_bootstrap, 1)
    producer = transactional(engine, kafka_bootstrap, a_transactional_id())
    values = [b"c%d" % n for n in range(5)]

    producer.begin_transaction()
    reports: list[tuple[Any, int]] = []
    for value in values:
        producer.produce(topic, value, b"k", 0, lambda error, message: reports.append((error, message.offset())), None, 0, [])
    producer.commit_transaction(WAIT_S)  # waits for every report itself
    settle(producer, reports, len(values))

    assert reports == [(None, offset) for offset in range(5)]
    assert values_read(kafka_bootstrap, topic, "read_committed", 5) == values


def test_a_commit_in_another_thread_calls_no_callback_once_poll_served_every_report(kafka_bootstrap, engine):
    """How the transactions' driver keeps callbacks on the event loop: confluent-kafka's commit
    serves what is outstanding on its own thread; once ``poll`` has served every report, nothing is."""
    topic = make_topic(kafka_bootstrap, 1)
    producer = transactional(engine, kafka_bootstrap, a_transactional_id())
    threads: list[str] = []

    producer.begin_transaction()
    for n in range(3):
        producer.produce(topic, b"v%d" % n, b"k", 0, lambda _e, _m: threads.append(threading.current_thread().name), None, 0, [])
    settle(producer, threads, 3)
    assert len(producer) == 0
    committing = threading.Thread(target=producer.commit_transaction, args=(WAIT_S,), name="committing")
    committing.start()
    committing.join(WAIT_S)

    assert threads == [threading.current_thread().name] * 3
    assert values_read(kafka_bootstrap, topic, "read_committed", 3) == [b"v0", b"v1", b"v2"]


def test_an_aborted_transaction_is_read_uncommitted_only_and_the_next_one_commits(kafka_bootstrap, engine):
    topic = make_topic(kafka_bootstrap, 1)
    producer = transactional(engine, kafka_bootstrap, a_transactional_id())
    aborted, committed = [b"a0", b"a1", b"a2"], [b"c0", b"c1"]

    producer.begin_transaction()
    # Delivered first, so that the aborted records are in the log (abort drops what is not).
    assert [error for error, _ in produce_all(producer, topic, aborted)] == [None] * 3
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    produce_all(producer, topic, committed)
    producer.commit_transaction(WAIT_S)

    assert values_read(kafka_bootstrap, topic, "read_committed", 2) == committed
    assert values_read(kafka_bootstrap, topic, "read_uncommitted", 5) == aborted + committed


def test_abort_drops_the_records_not_yet_sent_and_purge_works_inside_a_transaction(kafka_bootstrap, engine):
    topic = make_topic(kafka_bootstrap, 1)
    producer = transactional(engine, kafka_bootstrap, a_transactional_id(), **{"linger.ms": 5000})
    reports: list[Any] = []

    def record(error: Any, _message: Any) -> None:
        reports.append(error.name())

    producer.begin_transaction()
    producer.produce(topic, b"purged", b"k", 0, record, None, 0, [])
    producer.purge()
    producer.poll(0)
    assert reports == ["_PURGE_QUEUE"] and len(producer) == 0
    producer.produce(topic, b"dropped", b"k", 0, record, None, 0, [])
    producer.abort_transaction(WAIT_S)
    settle(producer, reports, 2)
    assert reports == ["_PURGE_QUEUE", "_PURGE_QUEUE"] and len(producer) == 0

    producer.begin_transaction()
    producer.produce(topic, b"after", b"k", 0, None, None, 0, [])
    producer.commit_transaction(WAIT_S)
    assert values_read(kafka_bootstrap, topic, "read_uncommitted", 1) == [b"after"]


def test_a_newer_producer_of_the_same_transactional_id_fences_the_older_for_good(kafka_bootstrap, engine):
    topic = make_topic(kafka_bootstrap, 1)
    transactional_id = a_transactional_id()
    errors: list[Any] = []
    older = transactional(engine, kafka_bootstrap, transactional_id, error_cb=errors.append)
    older.begin_transaction()
    produce_all(older, topic, [b"fenced"])

    newer = transactional(engine, kafka_bootstrap, transactional_id)  # aborts the older's open transaction

    # The broker refuses the older's commit: librdkafka's _FENCED, fatal (and not worth a retry).
    commit = txn_error_of(engine, older.commit_transaction, WAIT_S)
    assert judged(commit) == ("_FENCED", True, False, False)
    # Every call after it fails with that error (the words of the commit's and of the client's
    # fatal error may differ); a record is refused with _FATAL (confluent-kafka does not flag that
    # one fatal; TxnError does, for both).
    assert judged(txn_error_of(engine, older.abort_transaction, WAIT_S)) == judged(commit)
    assert judged(txn_error_of(engine, older.begin_transaction)) == judged(commit)
    refused = txn_error_of(engine, older.produce, topic, b"late", b"k", 0, None, None, 0, [])
    assert judged(refused) == ("_FATAL", True, False, False)
    # The client's fatal error: confluent-kafka raises it from the next poll(), the engine's producer
    # hands it to error_cb (as the data plane's on_fatal expects of both).
    try:
        older.poll(0.5)
    except KafkaException as exc:
        errors.append(exc.args[0])
    assert {(error.name(), error.fatal()) for error in errors} == {("_FENCED", True)}

    newer.begin_transaction()
    produce_all(newer, topic, [b"newer"])
    newer.commit_transaction(WAIT_S)
    assert values_read(kafka_bootstrap, topic, "read_committed", 1) == [b"newer"]


def test_a_record_outside_a_transaction_is_refused_with_state(kafka_bootstrap, engine):
    topic = make_topic(kafka_bootstrap, 1)
    producer = engine.producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": a_transactional_id(), **TRANSACTIONAL})

    # Before init_transactions, and between transactions: confluent-kafka raises KafkaException,
    # the engine's producer ProduceError; both _STATE, neither fatal nor retriable.
    before = txn_error_of(engine, producer.produce, topic, b"v", b"k", 0, None, None, 0, [])
    producer.init_transactions(WAIT_S)
    between = txn_error_of(engine, producer.produce, topic, b"v", b"k", 0, None, None, 0, [])
    assert judged(before) == judged(between) == ("_STATE", False, False, False)
    # And the transactional calls out of turn: librdkafka's words, the same from both.
    assert txn_error_of(engine, producer.commit_transaction, WAIT_S) == TxnError(
        "_STATE", "Operation not valid in state Ready", False, False, False
    )
    producer.begin_transaction()
    assert txn_error_of(engine, producer.begin_transaction) == TxnError(
        "_STATE", "Operation not valid in state InTransaction", False, False, False
    )
    assert len(producer) == 0


def dead_letter_engine(data: str, dlq: str) -> Any:
    """A compiled line engine of one table, its data topic ``data`` and its dead letters on partition 0 of ``dlq``."""
    spec = TABLES[0]
    return native.LineEngine(
        table=spec.dir_name,
        coin_location=spec.coin_location.value,
        data_topic=data,
        data_partitions=1,
        dlq_topic=dlq,
        dlq_partition=0,
        source="s",
        offset=0,
        seq=(None, 0, 0),
        first_block=None,
        last_block=None,
        late_tag=b"",
        max_line_bytes=1 << 20,
    )


def rejected_read(lines: Any, deliveries: Any) -> Any:
    """Three lines the engine cannot vouch for, each made a dead letter on ``deliveries``; the last batch."""
    batch = lines.feed(b"x\ny\nz\n", deliveries)
    while batch.undecided is not None and batch.refusal is None:
        batch = lines.reject("malformed", "test", deliveries)
    return batch


def test_the_line_engine_s_records_in_a_transaction_are_counted_in_rust_and_refused_outside_one(kafka_bootstrap):
    """The compiled engine's own path: a read's records queued with the GIL released, their
    reports counted in the cycle's ``Deliveries``; outside a transaction the read stops at the
    refusal (``ProduceError``, ``_STATE``), nothing of it counted."""
    data, dlq = make_topic(kafka_bootstrap, 1), make_topic(kafka_bootstrap, 1)
    engine = NativeEngine(native)
    producer = transactional(engine, kafka_bootstrap, a_transactional_id())

    outside = native.Deliveries(producer, data, 1, dlq, 0)
    refusal = rejected_read(dead_letter_engine(data, dlq), outside).refusal
    assert judged(engine.txn_error(refusal)) == ("_STATE", False, False, False)
    assert outside.reported() == 0

    producer.begin_transaction()
    inside = native.Deliveries(producer, data, 1, dlq, 0)
    assert rejected_read(dead_letter_engine(data, dlq), inside).refusal is None
    producer.commit_transaction(WAIT_S)
    assert (inside.reported(), inside.failures(), inside.offset_ranges(dlq)) == (3, [], {0: (0, 2)})
    assert len(values_read(kafka_bootstrap, dlq, "read_committed", 3)) == 3
