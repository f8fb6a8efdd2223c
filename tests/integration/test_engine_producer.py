"""The compiled engine's producer against the real broker, next to confluent-kafka's.

The data plane drives either producer through the same calls (``produce`` positionally, ``poll``,
``len``, ``purge``, ``error_cb``, ``stats_cb``); what it reads back (delivery callbacks, error
names, ``BufferError``, a refusal's error) must mean the same from both, or the verdicts
(``core/delivery.verdict``) and the holds would differ by engine.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.admin import AdminClient, NewTopic

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
