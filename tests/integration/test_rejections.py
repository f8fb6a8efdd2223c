"""A record the broker refuses for good, against the real broker: a valid line too large for a topic
configured below the contract goes to the DLQ as a ``rejected`` reference naming the broker's error;
every other line arrives once, in order, and the worker goes on."""

from __future__ import annotations

import asyncio
import os

import orjson
from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.tools.expected import hour_files

from sidecar_run import Sidecar, assert_clean, write_corpus

BOOK = TABLE_BY_DIR["node_raw_book_diffs_streaming"]
SMALL_LIMIT = 65536


def create_small_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"max.message.bytes": str(SMALL_LIMIT), "retention.ms": "259200000"}
    admin.create_topics([NewTopic(topic, 6, 1, config=config)])[topic].result(timeout=30)


def insert_big_line(path, pad_bytes: int) -> tuple[int, int]:
    """Put a valid line of about ``pad_bytes`` that zstd cannot shrink (random hex in an extra field)
    in the middle of the file, in the block of the line before it; returns its offset and length."""
    lines = path.read_bytes().split(b"\n")[:-1]
    middle = len(lines) // 2
    before = orjson.loads(lines[middle - 1])
    big = orjson.dumps({**before, "local_time": before["local_time"], "note": os.urandom(pad_bytes // 2).hex()})
    offset = sum(len(line) + 1 for line in lines[:middle])
    path.write_bytes(b"".join(line + b"\n" for line in [*lines[:middle], big, *lines[middle:]]))
    return offset, len(big)


def dead_letters(bootstrap: str, topic: str) -> list[Message]:
    """Every record of ``topic`` (blocking: run it in a thread)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        records = []
        for partition in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            consumer.assign([TopicPartition(topic, partition, low)])
            while high > low and (record := consumer.poll(10)) is not None:
                records.append(record)
                if record.offset() + 1 >= high:
                    break
        return records
    finally:
        consumer.close()


async def test_a_line_too_large_for_its_topic_is_dead_lettered_and_the_rest_arrive_once_in_order(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    await asyncio.to_thread(create_small_topic, kafka_bootstrap, sidecar.env[BOOK.topic_env])
    write_corpus(sidecar.watch, hours=2, lines=4000)
    first_book = hour_files(sidecar.watch, BOOK.dir_name)[0]
    offset, length = insert_big_line(sidecar.watch / first_book.relpath, 400_000)
    worker = sidecar.start()
    try:
        report = await sidecar.verify()
    finally:
        assert worker.stop() == 0
    assert_clean(report, allowed_duplicates=0)
    assert report.count("rejected") == 1
    [warning] = sidecar.events("topic_limit_below_contract")
    assert warning["max_message_bytes"] == SMALL_LIMIT
    [event] = sidecar.events("record_rejected")
    assert (event["source"], event["offset"], event["error"]) == (first_book.relpath, offset, "MSG_SIZE_TOO_LARGE")
    records = await asyncio.to_thread(dead_letters, kafka_bootstrap, sidecar.env["TOPIC_DLQ"])
    [record] = [r for r in records if dict(r.headers())["reason"] == b"rejected"]
    headers = dict(record.headers())
    assert headers["error"] == b"MSG_SIZE_TOO_LARGE" and headers["source"] == first_book.relpath.encode()
    assert orjson.loads(record.value())["length"] == length
