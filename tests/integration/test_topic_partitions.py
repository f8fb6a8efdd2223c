"""The door's partition check against the real broker (auto-create on, Kafka's default), on both
engines' producers: the data plane never creates a topic; a topic with another count than the
contract's is not written; and a topic deleted and created again with one partition under a
producer whose metadata is still the old incarnation's receives that producer's records for its
partition 0 (librdkafka writes them by name before anything changes) -- which the offsets of their
reports give away, and the producer's own view shows within seconds.

The last test measures that window; docs/reliability.md (drill 15) records its figures.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from hyperdata_sidecar.checked_lines import TopicNotWritable
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.records import Record
from hyperdata_sidecar.core.topic_check import PARTITION_COUNT, TOPIC_MISSING, Landings
from hyperdata_sidecar.dataplane import DataPlane
from hyperdata_sidecar.engines import select
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.topics import apply_contract, load_contract
from hyperdata_sidecar.transactions import Transactions

ENV_OF = {
    "book_diffs": "TOPIC_BOOK_DIFFS",
    "order_statuses": "TOPIC_ORDER_STATUSES",
    "fills": "TOPIC_FILLS",
    "seals": "TOPIC_SEALS",
    "dlq": "TOPIC_DLQ",
    "snapshots": "TOPIC_SNAPSHOTS",
}


@pytest.fixture(params=["python", "native"])
def engine_name(request: pytest.FixtureRequest) -> str:
    if request.param == "native":
        pytest.importorskip("hyperdata_sidecar_engine", reason="the native engine is not installed (make engine)")
    return str(request.param)


def env_of(bootstrap: str, prefix: str, tmp_path) -> dict[str, str]:
    defaults = load_contract({})
    names = {spec.env: prefix + spec.default for spec in defaults}
    return {"WATCH_DIR": str(tmp_path), "NODE_ID": "it", "KAFKA_BOOTSTRAP": bootstrap, **names}


async def contract_topics(bootstrap: str, env: dict[str, str], **counts: int) -> dict[str, str]:
    """The contract's topics, created (``counts``: another partition count by role). Role -> name."""
    specs = load_contract(env)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    odd = [NewTopic(spec.name, counts[spec.role], 1) for spec in specs if spec.role in counts]
    for future in admin.create_topics(odd).values() if odd else []:
        await asyncio.to_thread(future.result, 30)
    await apply_contract(bootstrap, specs)
    return {spec.role: spec.name for spec in specs}


def plane_of(env: dict[str, str], engine_name: str, errors: list[str]) -> DataPlane:
    settings, engine, log = load_settings(env), select(engine_name), EventLog(logging.getLogger("tests.topic_partitions"))
    txn = Transactions(
        settings,
        engine,
        SidecarMetrics(),
        log,
        transactional_id="unused",
        on_abort=lambda _reason: None,
        on_fenced=lambda _reason: None,
    )
    return DataPlane(
        settings,
        log,
        engine,
        txn,
        on_broker=lambda _: None,
        on_login_refused=lambda _: None,
        on_error=errors.append,
        on_fatal=lambda error: errors.append(f"fatal {error}"),
    )


def partition_count(bootstrap: str, topic: str) -> int:
    """Blocking: the topic's partition count at the broker (0: missing). Never creates it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        return len(admin.describe_topics(TopicCollection([topic]))[topic].result(10).partitions)
    except KafkaException:
        return 0


def delete(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while partition_count(bootstrap, topic) and time.monotonic() < deadline:
        time.sleep(0.1)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while partition_count(bootstrap, topic) != partitions and time.monotonic() < deadline:
        time.sleep(0.1)


class Reports:
    """Delivery reports of records sent through the data plane's ``resend``."""

    def __init__(self) -> None:
        self.got: list[tuple[Any, int, int]] = []  # error name or None, partition, offset

    def callback(self, error: Any, message: Any) -> None:
        self.got.append((error.name() if error is not None else None, message.partition(), message.offset()))


async def wait_until(condition, timeout_s: float = 30.0) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_the_data_planes_producer_never_creates_a_deleted_topic(
    kafka_bootstrap, unique_topic_prefix, tmp_path, engine_name
):
    env = env_of(kafka_bootstrap, unique_topic_prefix, tmp_path)
    names = await contract_topics(kafka_bootstrap, env)
    errors: list[str] = []
    plane = plane_of(env, engine_name, errors)
    await plane.connect(list(names.values()))
    serving = asyncio.ensure_future(plane.serve())
    try:
        orders = names["order_statuses"]
        await asyncio.to_thread(delete, kafka_bootstrap, orders)
        await plane.refresh_metadata(orders)  # what a held table does before each retry
        await asyncio.sleep(2.0)  # and librdkafka's own look after it
        assert await asyncio.to_thread(partition_count, kafka_bootstrap, orders) == 0
        assert plane.guard.refusal(orders).name() == TOPIC_MISSING
        with pytest.raises(TopicNotWritable):
            plane.resend(Record(orders, 0, b"BTC", b"v", []), print)
    finally:
        await plane.close(1.0)
        serving.cancel()


async def test_a_topic_with_another_count_is_not_written_and_is_once_it_has_the_contracts(
    kafka_bootstrap, unique_topic_prefix, tmp_path, engine_name
):
    env = env_of(kafka_bootstrap, unique_topic_prefix, tmp_path)
    names = await contract_topics(kafka_bootstrap, env, order_statuses=1)
    orders = names["order_statuses"]
    errors: list[str] = []
    plane = plane_of(env, engine_name, errors)
    await plane.connect(list(names.values()))
    serving = asyncio.ensure_future(plane.serve())
    try:
        assert errors == ["partitions"] and plane.partitions[orders] == 6
        refusal = plane.guard.refusal(orders)
        assert refusal.name() == PARTITION_COUNT and "1 partition(s), the contract says 6" in refusal.str()
        with pytest.raises(TopicNotWritable):
            plane.resend(Record(orders, 0, b"BTC", b"v", []), print)
        await plane.send(names["seals"], b"k", b"v")  # the other topics are written
        await asyncio.to_thread(delete, kafka_bootstrap, orders)
        await asyncio.to_thread(create, kafka_bootstrap, orders, 6)
        await plane.refresh_metadata(orders)
        assert plane.guard.refusal(orders) is None
        reports = Reports()
        plane.resend(Record(orders, 5, b"BTC", b"v", []), reports.callback)
        await wait_until(lambda: reports.got)
        assert reports.got == [(None, 5, 0)]
    finally:
        await plane.close(1.0)
        serving.cancel()


async def test_a_topic_created_again_with_one_partition_under_the_producer_is_found_from_its_offsets(
    kafka_bootstrap, unique_topic_prefix, tmp_path, engine_name, capsys
):
    env = env_of(kafka_bootstrap, unique_topic_prefix, tmp_path)
    names = await contract_topics(kafka_bootstrap, env)
    orders = names["order_statuses"]
    errors: list[str] = []
    plane = plane_of(env, engine_name, errors)
    await plane.connect(list(names.values()))
    serving = asyncio.ensure_future(plane.serve())
    try:
        first = Reports()
        for n in range(60):
            plane.resend(Record(orders, n % 6, b"BTC", b"before %d" % n, []), first.callback)
        await wait_until(lambda: len(first.got) == 60)
        assert all(error is None for error, _, _ in first.got)
        landings = Landings(plane.guard)
        landings.landed(orders, {p: (0, max(o for _, q, o in first.got if q == p)) for p in range(6)}, plane.guard.epoch(orders))
        # Deleted and created again with one partition, faster than the producer notices.
        await asyncio.to_thread(delete, kafka_bootstrap, orders)
        await asyncio.to_thread(create, kafka_bootstrap, orders, 1)
        created = time.monotonic()
        after = Reports()
        sent = 0
        while plane.guard.refusal(orders) is None and time.monotonic() - created < 30:
            try:
                plane.resend(Record(orders, sent % 6, b"BTC", b"after %d" % sent, []), after.callback)
                sent += 1
            except Exception:  # noqa: BLE001 - librdkafka refuses a partition it no longer has (either engine's error)
                break
            await asyncio.sleep(0.002)
        await wait_until(lambda: plane.guard.refusal(orders) is not None, 30.0)
        seen = time.monotonic() - created
        await wait_until(lambda: len(after.got) == sent)
        into_copy = [(p, o) for error, p, o in after.got if error is None]
        failed = {error for error, _, _ in after.got if error is not None}
        assert plane.guard.refusal(orders).name() == PARTITION_COUNT
        # What landed in the copy is given away by its offsets: below where the table's records were.
        if into_copy:
            moved = landings.moved(orders, {0: (into_copy[0][1], into_copy[-1][1])}, (1, 1))
            assert moved is not None and moved.offset == 0
        assert failed <= {"_UNKNOWN_PARTITION", "_DESTROY", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"}
        with capsys.disabled():
            print(
                f"\n[{engine_name}] copy with 1 partition: {sent} records handed over after its creation, "
                f"{len(into_copy)} written into it (partition 0), {len(after.got) - len(into_copy)} failed ({sorted(failed)}); "
                f"the producer's view showed it {seen:.2f} s after the creation"
            )
    finally:
        await plane.close(1.0)
        serving.cancel()
