"""Node snapshots and offset watermarks, against the real broker and a real worker: one event per
snapshot with its digest and resume offsets (checked by consuming every partition), seals that say
where their file's lines are, snapshot backups, and exactly one event across a SIGKILL between a
snapshot's completion and its event."""

from __future__ import annotations

import hashlib
import os

import orjson
from aiokafka import AIOKafkaConsumer

from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import FIRST_BLOCK, generate_corpus
from hyperdata_sidecar.tools.verify import default_topics

from drill_kit import caught_up, end_offsets, kill, metric_value, records_since
from sidecar_run import DAY_BOUNDARY, Sidecar, assert_clean
from test_seals import read_seals

LINES_PER_HOUR = 200
SNAPSHOT_BYTES = 3 * 1024 * 1024 + 11


def write_corpus(watch, hours: int) -> None:
    """One line per block in every table, so that all three tables hold the same block numbers, as
    on a node: hour 22 holds blocks FIRST_BLOCK .. FIRST_BLOCK+199, hour 23 the next 200, ..."""
    lines = {spec.dir_name: LINES_PER_HOUR for spec in TABLES}
    generate_corpus(watch, hours=hours, lines_per_hour=lines, lines_per_block=1, seed=11, start=DAY_BOUNDARY)


def write_snapshot(watch, date: str, height: int) -> tuple[str, bytes]:
    """A snapshot file (random bytes: the sidecar never parses it) at ``height``; its relpath and bytes."""
    relpath = f"{SNAPSHOT_DIR}/{date}/{height}.rmp"
    data = os.urandom(SNAPSHOT_BYTES)
    (watch / relpath).parent.mkdir(parents=True, exist_ok=True)
    (watch / relpath).write_bytes(data)
    return relpath, data


async def read_events(bootstrap: str, topic: str) -> list[tuple[bytes, dict]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        events = []
        while batches := await consumer.getmany(timeout_ms=2000):
            events += [(r.key, orjson.loads(r.value)) for records in batches.values() for r in records]
        return events
    finally:
        await consumer.stop()


def block_of(line_id: bytes) -> int:
    return int(line_id.split(b"|")[1])


def resume_property_holds(records, topic: str, partition: int, offset: int, height: int) -> bool:
    """Every record of the partition before ``offset`` has block <= height, every one at or after it > height."""
    mine = [r for r in records if r.topic == topic and r.partition == partition]
    return all((block_of(r.line_id) <= height) == (r.offset < offset) for r in mine)


async def test_each_snapshot_is_announced_once_with_offsets_that_split_every_partition_at_its_height(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    watch = tmp_path / "watch"
    write_corpus(watch, hours=3)
    heights = [FIRST_BLOCK + LINES_PER_HOUR // 2, FIRST_BLOCK + LINES_PER_HOUR * 3 // 2]  # in hours 22 and 23: across a rotation
    snapshots = dict(write_snapshot(watch, "20260610", height) for height in heights)
    (watch / SNAPSHOT_DIR / "20260610" / "notes.txt").write_bytes(b"not a snapshot")
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, SNAPSHOT_GRACE_MS="500")
    worker = sidecar.start()
    try:
        await sidecar.until_events("snapshot", 2)
        await worker.until(lambda: caught_up(worker, sidecar.watch), "the catch-up")
        await sidecar.until_events("seal", 6)
        await worker.until(lambda: len(sidecar.events("backup")) >= 8, "6 hour files and 2 snapshots backed up")
        view = worker.get_json("/sidecar/snapshots/")
        emitted = metric_value(worker, "hyperdata_sidecar_snapshots_emitted_total")
        report = await sidecar.verify(backup_dir=sidecar.backups, snapshot_grace_s=0.5)
    finally:
        assert worker.stop() == 0
    assert_clean(report)  # the verifier's own reading: lines, seals and their ranges, snapshot events, backups
    topics = default_topics(sidecar.env)
    events = await read_events(kafka_bootstrap, sidecar.env["TOPIC_SNAPSHOTS"])
    records = (await records_since(kafka_bootstrap, topics, dict.fromkeys(await end_offsets(kafka_bootstrap, topics), 0))).data

    assert sorted(event["height"] for _key, event in events) == sorted(heights)
    for key, event in events:
        data = snapshots[event["path"]]
        assert key == str(event["height"]).encode()
        assert (event["size"], event["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
        assert event["node"] == sidecar.env["NODE_ID"] and "partial" not in event
        assert set(event["offsets"]) == {topics[spec.dir_name] for spec in TABLES}
        for topic, partitions in event["offsets"].items():
            assert partitions, topic
            for partition, offset in partitions.items():
                assert resume_property_holds(records, topic, int(partition), offset, event["height"]), (topic, partition)
        assert (sidecar.backups / event["path"]).read_bytes() == data
    assert [s["height"] for s in view["snapshots"]] == sorted(heights, reverse=True)
    assert all(s["backup"] == "ok" for s in view["snapshots"]) and emitted == 2
    assert len([e for e in sidecar.events("snapshot_file_ignored") if e["path"].endswith("notes.txt")]) == 1

    seals = await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"])
    assert len(seals) == 6
    for seal in seals:
        topic = topics[seal.table]
        assert set(seal.offsets) == {topic}
        mine = [r for r in records if r.topic == topic and r.source == seal.path]
        assert {str(r.partition) for r in mine} == set(seal.offsets[topic])
        for partition, (first, last) in seal.offsets[topic].items():
            in_partition = [r for r in records if r.topic == topic and r.partition == int(partition)]
            ours = [r.offset for r in in_partition if r.source == seal.path]
            assert (min(ours), max(ours)) == (first, last), (seal.path, partition)
            assert all(r.source == seal.path for r in in_partition if first <= r.offset <= last)


async def test_a_sigkill_between_a_snapshots_completion_and_its_event_still_gives_exactly_one_event(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    watch = tmp_path / "watch"
    write_corpus(watch, hours=2)
    height = FIRST_BLOCK + 10**6  # no table publishes past it: the event waits SNAPSHOT_OFFSETS_WAIT_S
    relpath, data = write_snapshot(watch, "20260611", height)
    waiting = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, SNAPSHOT_GRACE_MS="200", SNAPSHOT_OFFSETS_WAIT_S="3600")
    worker = waiting.start()
    try:
        await waiting.until_events("snapshot_complete")
        await worker.until(lambda: caught_up(worker, waiting.watch), "the catch-up")
        assert worker.get_json("/sidecar/snapshots/")["waiting"][0]["waiting_for"] == "offsets"
        kill(worker)
    finally:
        worker.stop()
    assert waiting.events("snapshot") == []  # the kill landed between the completion and the event

    restarted = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, SNAPSHOT_GRACE_MS="200", SNAPSHOT_OFFSETS_WAIT_S="1")
    restarted.env["NODE_ID"] = waiting.env["NODE_ID"]
    worker = restarted.start()
    try:
        await restarted.until_events("snapshot")
        await worker.until(lambda: any(e["path"] == relpath for e in restarted.events("backup")), "the snapshot's backup")
    finally:
        assert worker.stop() == 0
    events = await read_events(kafka_bootstrap, restarted.env["TOPIC_SNAPSHOTS"])
    [(_key, event)] = events
    topics = default_topics(restarted.env)
    assert (event["height"], event["path"], event["sha256"]) == (height, relpath, hashlib.sha256(data).hexdigest())
    assert sorted(event["partial"]) == sorted(
        ["node_fills_streaming", "node_order_statuses_streaming", "node_raw_book_diffs_streaming"]
    )
    ends = await end_offsets(kafka_bootstrap, topics)
    for topic, partitions in event["offsets"].items():
        for partition, offset in partitions.items():
            assert offset == next(end for tp, end in ends.items() if tp.topic == topic and tp.partition == int(partition))
