"""The test harness itself, against the real broker: aiokafka, transactions, Faust + RocksDB.

Running a Faust app inside a test (the pattern the other integration tests reuse):

    app = faust.App(app_id, broker=f"kafka://{kafka_bootstrap}", store="rocksdb://",
                    datadir=tmp_path / "faust", web_enabled=False, topic_partitions=1,
                    table_standby_replicas=0, consumer_auto_offset_reset="earliest")
    ... declare topics, tables and agents on it (agents with an explicit name=) ...
    await app.start()      # returns once table recovery has completed
    try:
        ...                # produce input, then poll the table or an output topic
    finally:
        await app.stop()   # commits, leaves the group, closes RocksDB

- Build a new App object for every start: a stopped Faust service cannot start again.
- ``app_id`` must be unique per test (``unique_topic_prefix``): it names the consumer
  group and the changelog topics, which outlive the test on a shared broker.
- Table writes only inside an agent: the RocksDB store needs the current event to pick
  the partition. Reads from the test body are fine.
- Do not declare tables with ``use_partitioner=True``: its writes crash while the
  changelog's metadata is still unknown.
- Wait for results with ``eventually`` below (a deadline, not a timing assertion).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from faust.stores.rocksdb import Store as RocksDBStore

DEADLINE_S = 60.0


async def eventually(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds; fail naming ``what`` after DEADLINE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"gave up after {DEADLINE_S:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


async def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def consume(bootstrap: str, topic: str, count: int, **consumer_kwargs) -> list:
    """The first ``count`` records of ``topic``, from the beginning."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **consumer_kwargs,
    )
    await consumer.start()
    records: list = []
    try:

        async def fill() -> None:
            async for record in consumer:
                records.append(record)
                if len(records) == count:
                    return

        await asyncio.wait_for(fill(), DEADLINE_S)
    finally:
        await consumer.stop()
    return records


# --------------------------------------------------------------------------- aiokafka


async def test_messages_round_trip_with_key_headers_and_zstd(kafka_bootstrap, unique_topic_prefix):
    topic = f"{unique_topic_prefix}lines"
    await create_topic(kafka_bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type="zstd", acks="all", enable_idempotence=True)
    await producer.start()
    try:
        for n in range(3):
            await producer.send_and_wait(topic, value=b'{"n":%d}' % n, key=b"xyz:TSLA", headers=[("line_id", b"t|1|%d" % n)])
    finally:
        await producer.stop()

    records = await consume(kafka_bootstrap, topic, 3)

    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"xyz:TSLA", b'{"n":%d}' % n, (("line_id", b"t|1|%d" % n),)) for n in range(3)
    ]


async def test_read_committed_consumer_sees_committed_transactions_only(kafka_bootstrap, unique_topic_prefix):
    topic = f"{unique_topic_prefix}tx"
    await create_topic(kafka_bootstrap, topic)
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"{unique_topic_prefix}producer")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"committed")
        await producer.begin_transaction()
        await producer.send(topic, b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"committed-after-abort")
    finally:
        await producer.stop()

    records = await consume(kafka_bootstrap, topic, 2, isolation_level="read_committed")

    assert [r.value for r in records] == [b"committed", b"committed-after-abort"]


# --------------------------------------------------------------------------- Faust


def counting_app(app_id: str, bootstrap: str, datadir: Path, events_topic: str) -> tuple[faust.App, faust.Table]:
    """A Faust app whose agent adds each event's integer value to a RocksDB table per key."""
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap}",
        store="rocksdb://",
        datadir=datadir,
        web_enabled=False,
        topic_partitions=1,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
    )
    events = app.topic(events_topic, key_type=str, value_type=str, partitions=1)
    totals = app.Table("totals", default=int, partitions=1)

    @app.agent(events, name="add")
    async def add(stream):
        async for key, value in stream.items():
            totals[key] += int(value)

    return app, totals


async def produce(bootstrap: str, topic: str, items: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in items:
            await producer.send_and_wait(topic, value=value, key=key)
    finally:
        await producer.stop()


async def stopped_cleanly(stop: Callable[[], Awaitable[None]]) -> list[asyncio.Task]:
    """Run ``stop`` and return the tasks it left running in this loop."""
    await stop()
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]


async def test_faust_table_is_recovered_from_changelog_after_local_state_is_deleted(
    kafka_bootstrap, unique_topic_prefix, tmp_path
):
    app_id = f"{unique_topic_prefix}app"
    events = f"{unique_topic_prefix}events"
    datadir = tmp_path / "faust"
    await create_topic(kafka_bootstrap, events)
    await produce(kafka_bootstrap, events, [(b"BTC", b"2"), (b"ETH", b"5"), (b"BTC", b"3")])

    first, totals = counting_app(app_id, kafka_bootstrap, datadir, events)
    await first.start()
    try:
        assert isinstance(totals.data, RocksDBStore)
        await eventually(lambda: dict(totals.items()) == {"BTC": 5, "ETH": 5}, "the agent to fill the table")
    finally:
        leftover_tasks = await stopped_cleanly(first.stop)
    assert leftover_tasks == []

    shutil.rmtree(datadir)
    # The second instance reads an empty topic: whatever its table holds came from the changelog.
    idle = f"{unique_topic_prefix}idle"
    await create_topic(kafka_bootstrap, idle)
    second, recovered = counting_app(app_id, kafka_bootstrap, datadir, idle)
    await second.start()
    try:
        assert dict(recovered.items()) == {"BTC": 5, "ETH": 5}
    finally:
        leftover_tasks = await stopped_cleanly(second.stop)
    assert leftover_tasks == []


# --------------------------------------------------------------------------- broker


async def test_broker_restarted_on_its_data_dir_keeps_topics_and_messages(kafka_broker, kafka_bootstrap, unique_topic_prefix):
    if kafka_broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker; it is not ours to restart")
    topic = f"{unique_topic_prefix}durable"
    await create_topic(kafka_bootstrap, topic)
    await produce(kafka_bootstrap, topic, [(b"k", b"before-restart")])

    await asyncio.to_thread(kafka_broker.stop)
    assert not kafka_broker.is_running()
    await asyncio.to_thread(kafka_broker.start)

    records = await consume(kafka_bootstrap, topic, 1)
    assert [r.value for r in records] == [b"before-restart"]
