"""The two line engines against the real broker: the same corpus gives the same records.

The Python engine (the reference, confluent-kafka's producer) and the native one (the compiled
engine on its own librdkafka producer) each publish one copy of a corpus with malformed lines; the
native one reads it appended in ragged chunks while it runs, the Python one finds it whole. Every
data topic and the DLQ must then hold the same records, partition by partition, in the same order:
key, value and headers byte for byte. In both delivery modes: with ``exactly_once`` the records are
read as a ``read_committed`` consumer reads them (the commit markers take offsets of their own).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from hyperdata_sidecar.core.tables import TABLES

from sidecar_run import Sidecar, assert_clean, replay_ragged, write_corpus

Published = dict[str, dict[int, list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]]]


def published(bootstrap: str, topics: dict[str, str]) -> Published:
    """Every committed record of each topic (by its setting), by partition in offset order (blocking)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    found: Published = {}
    try:
        for setting, topic in topics.items():
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            found[setting] = {partition: list(_records(consumer, topic, partition)) for partition in partitions}
    finally:
        consumer.close()
    return found


def _records(consumer: Consumer, topic: str, partition: int) -> Iterator[tuple[bytes | None, bytes | None, list]]:
    """The partition's records up to its end (the partition EOF event: past a last commit marker too)."""
    low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
    consumer.assign([TopicPartition(topic, partition, low)])
    while (record := consumer.poll(10)) is not None:
        error = record.error()
        if error is not None and error.code() == KafkaError._PARTITION_EOF:
            break
        assert error is None, error
        yield record.key(), record.value(), list(record.headers() or [])


def by_table(records: list[tuple[bytes | None, bytes | None, list]]) -> list[tuple[bytes | None, bytes | None, list]]:
    """The DLQ's records grouped by table (its key), each table's in order: the three tables' dead
    letters may share a partition, and how they interleave there is timing."""
    return sorted(records, key=lambda record: record[0] or b"")


def line_topics(sidecar: Sidecar) -> dict[str, str]:
    return {setting: sidecar.env[setting] for setting in [spec.topic_env for spec in TABLES] + ["TOPIC_DLQ"]}


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
async def test_the_native_and_the_python_engine_publish_the_same_records(
    tmp_path, kafka_bootstrap, unique_topic_prefix, delivery
):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, hours=2, lines=3000, bad_every=211)
    runs: dict[str, Published] = {}
    for engine in ("python", "native"):
        root = tmp_path / engine
        sidecar = Sidecar(
            root, kafka_bootstrap, f"{unique_topic_prefix}{engine}.", SIDECAR_ENGINE=engine, BACKUP_SINK="none", DELIVERY=delivery
        )
        if engine == "python":
            shutil.copytree(corpus, sidecar.watch, dirs_exist_ok=True)
        worker = sidecar.start()
        try:
            await sidecar.until_events("startup")
            [startup] = sidecar.events("startup")
            assert startup["engine"].split()[0] == engine
            if engine == "native":
                await replay_ragged(corpus, sidecar.watch)
            report = await sidecar.verify()
        finally:
            assert worker.stop() == 0
        assert_clean(report)
        runs[engine] = await asyncio.to_thread(published, kafka_bootstrap, line_topics(sidecar))
    python, native = runs["python"], runs["native"]
    assert sum(len(records) for records in python["TOPIC_DLQ"].values()) > 0  # malformed lines were dead-lettered
    for setting, partitions in python.items():
        assert sum(map(len, partitions.values())) > 0, setting
        arrange = by_table if setting == "TOPIC_DLQ" else list
        for partition, records in partitions.items():
            assert arrange(native[setting][partition]) == arrange(records), f"{setting} partition {partition}"
