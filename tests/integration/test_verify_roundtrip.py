"""The verifier against the real broker: a hand-published correct stream passes, one lost line fails,
and records of an aborted transaction count as duplicates only to a read_uncommitted reader.

The stream is published here with its own small reading of the tree (bad lines come from the
generator's summary, not from the verifier's classifier), so the verifier is checked against
an independent publisher rather than against itself.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer

from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.tools.generate import CorpusSummary, generate_corpus
from hyperdata_sidecar.tools.isolation import READ_COMMITTED, READ_UNCOMMITTED
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.verify import DLQ, SEALS, verify
from hyperdata_sidecar.topics import apply_contract, load_contract

ROLES = {
    BOOK_DIFFS: "book_diffs",
    ORDER_STATUSES: "order_statuses",
    FILLS: "fills",
    DLQ: "dlq",
    SEALS: "seals",
}


def small_tree(root: Path) -> CorpusSummary:
    """Three hours across midnight, a few blocks per hour, some bad lines, and an unterminated
    tail both in a finalized file (owed to the DLQ) and in the newest one (exempt)."""
    summary = generate_corpus(
        root,
        hours=3,
        lines_per_hour={BOOK_DIFFS: 40, ORDER_STATUSES: 50, FILLS: 6},
        lines_per_block={BOOK_DIFFS: 15, ORDER_STATUSES: 20, FILLS: 2},
        seed=11,
        start=datetime.datetime(2026, 6, 10, 22),
        bad_every=17,
    )
    with open(root / BOOK_DIFFS / "hourly/20260610/22", "ab") as f:
        f.write(b'{"local_time":"2026-06-10T22:59:59.9')
    with open(root / BOOK_DIFFS / "hourly/20260611/0", "ab") as f:
        f.write(b'{"local_time":"2026-06-11T00:59:59.9')
    return summary


async def create_topics(bootstrap: str, prefix: str) -> dict[str, str]:
    defaults = load_contract(env={})
    specs = load_contract(env={spec.env: prefix + spec.default for spec in defaults})
    await apply_contract(bootstrap, specs)
    by_role = {spec.role: spec.name for spec in specs}
    return {name: by_role[role] for name, role in ROLES.items()}


def coin_of(table: str, event) -> str:
    if table == FILLS:
        return event[1]["coin"]
    if table == ORDER_STATUSES:
        return event["order"]["coin"]
    return event["coin"]


def stream_for(root: Path, summary: CorpusSummary) -> list[tuple[str, bytes, bytes, list[tuple[str, bytes]]]]:
    """(topic role, key, value, headers) for everything a correct sidecar publishes for ``root``."""
    bad = {(b.relpath, b.offset): b.reason for b in summary.bad_lines}
    out = []
    for table in (BOOK_DIFFS, ORDER_STATUSES, FILLS):
        paths = sorted((root / table / "hourly").glob("*/*"), key=lambda p: (int(p.parent.name), int(p.name)))
        block, seq = None, 0
        for index, path in enumerate(paths):
            relpath = path.relative_to(root).as_posix()
            finalized = index < len(paths) - 1
            data = path.read_bytes()
            *lines, tail = data.split(b"\n")
            position, good, dlq, blocks = 0, 0, 0, []
            for line in lines:
                where = [("source", relpath.encode()), ("offset", str(position).encode())]
                if (relpath, position) in bad:
                    out.append((DLQ, table.encode(), line, where + [("reason", bad[relpath, position].encode())]))
                    dlq += 1
                else:
                    envelope = orjson.loads(line)
                    if envelope["block_number"] != block:
                        block, seq = envelope["block_number"], 0
                    line_id = f"{table}|{block}|{seq}".encode()
                    seq += len(envelope["events"])
                    key = coin_of(table, envelope["events"][0]).encode()
                    out.append((table, key, line, where + [("line_id", line_id)]))
                    good += 1
                    blocks.append(block)
                position += len(line) + 1
            if finalized and tail:
                where = [
                    ("source", relpath.encode()),
                    ("offset", str(position).encode()),
                    ("reason", b"unterminated"),
                ]
                out.append((DLQ, table.encode(), tail, where))
                dlq += 1
            if finalized:
                date, hour = path.parent.name, path.name
                seal = {
                    "table": table,
                    "path": relpath,
                    "date": date,
                    "hour": hour,
                    "block_range": [blocks[0], blocks[-1]],
                    "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "finalized_at": "2026-06-11T01:00:03.000Z",
                    "lines": good,
                    "dlq_lines": dlq,
                    "node": "test-node",
                }
                out.append((SEALS, f"{table}|{date}|{hour}".encode(), orjson.dumps(seal), []))
    return out


async def publish(bootstrap: str, topics: dict[str, str], stream, *, seal_ranges: bool = False) -> None:
    """Publish ``stream``; with ``seal_ranges`` each seal carries the offset ranges its file's lines
    got, from the delivery results (the first and last offset per partition)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    delivered: dict[bytes, list[asyncio.Future]] = {}
    try:
        for role, key, value, headers in stream:
            if seal_ranges and role == SEALS:
                seal = orjson.loads(value)
                results = await asyncio.gather(*delivered.pop(seal["path"].encode(), []))
                seal["offsets"] = ranges_of(results)
                value = orjson.dumps(seal)
            # No explicit partition: the client's default partitioner (murmur2) places the record.
            future = await producer.send(topics[role], value=value, key=key, headers=headers)
            if role in (BOOK_DIFFS, ORDER_STATUSES, FILLS):
                delivered.setdefault(dict(headers)["source"], []).append(future)
        await producer.flush()
    finally:
        await producer.stop()


def publish_transactions(bootstrap: str, topics: dict[str, str], transactional_id: str, transactions) -> None:
    """Blocking: publish each (stream, commit) of ``transactions`` in a transaction of its own,
    committed or aborted, each record on the partition the sidecar picks (murmur2 of its key)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "enable.idempotence": True, "acks": "all"}
    )
    producer.init_transactions(30)
    metadata = producer.list_topics(timeout=10)
    partitions = {name: len(metadata.topics[name].partitions) for name in topics.values()}
    for stream, commit in transactions:
        producer.begin_transaction()
        for role, key, value, headers in stream:
            topic = topics[role]
            producer.produce(topic, value=value, key=key, headers=headers, partition=partition_for(key, partitions[topic]))
        # Aborting purges what is still queued: the aborted records must be on the log first.
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def ranges_of(results) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for result in results:
        span = out.setdefault(result.topic, {}).setdefault(str(result.partition), [result.offset, result.offset])
        span[0], span[1] = min(span[0], result.offset), max(span[1], result.offset)
    return out


@pytest.mark.timeout(120)
async def test_a_complete_stream_verifies_with_one_correct_seal_per_finalized_file(
    kafka_bootstrap, unique_topic_prefix, tmp_path
):
    summary = small_tree(tmp_path)
    topics = await create_topics(kafka_bootstrap, unique_topic_prefix)
    await publish(kafka_bootstrap, topics, stream_for(tmp_path, summary))

    report = await verify(tmp_path, kafka_bootstrap, topics=topics, timeout_s=30, settle_s=0.5)

    assert report.ok, report.summary()
    assert report.failures == 0 and report.duplicates == 0
    for table in (BOOK_DIFFS, ORDER_STATUSES, FILLS):
        t = report.tables[table]
        assert (t.files, t.finalized, t.seals_ok) == (3, 2, 2)
        assert t.lines_ok == t.lines == t.records
        assert t.dlq_ok == t.dlq_lines > 0


@pytest.mark.timeout(120)
async def test_a_stream_missing_one_line_fails_and_names_that_line(kafka_bootstrap, unique_topic_prefix, tmp_path):
    summary = small_tree(tmp_path)
    topics = await create_topics(kafka_bootstrap, unique_topic_prefix)
    stream = stream_for(tmp_path, summary)
    dropped = next(i for i, item in enumerate(stream) if item[0] == ORDER_STATUSES and i > 30)
    *_, headers = stream.pop(dropped)
    await publish(kafka_bootstrap, topics, stream)

    report = await verify(tmp_path, kafka_bootstrap, topics=topics, timeout_s=2, settle_s=0.5)

    assert not report.ok
    assert report.count("lost") == 1 and report.failures == 1
    [lost] = [p for p in report.problems if p.kind == "lost"]
    assert (lost.source, str(lost.offset).encode()) == (
        dict(headers)["source"].decode(),
        dict(headers)["offset"],
    )


@pytest.mark.timeout(120)
async def test_seals_carrying_the_offset_ranges_their_lines_got_verify(kafka_bootstrap, unique_topic_prefix, tmp_path):
    summary = small_tree(tmp_path)
    topics = await create_topics(kafka_bootstrap, unique_topic_prefix)
    await publish(kafka_bootstrap, topics, stream_for(tmp_path, summary), seal_ranges=True)

    report = await verify(tmp_path, kafka_bootstrap, topics=topics, timeout_s=30, settle_s=0.5)

    assert report.ok, report.summary()
    for table in (BOOK_DIFFS, ORDER_STATUSES, FILLS):
        assert (report.tables[table].seal_ranges, report.tables[table].seal_ranges_ok) == (2, 2)
    assert "seal offset ranges ok: 6/6" in report.summary()


@pytest.mark.timeout(180)
async def test_records_of_an_aborted_transaction_are_duplicates_to_a_read_uncommitted_reader_only(
    kafka_bootstrap, unique_topic_prefix, tmp_path
):
    summary = small_tree(tmp_path)
    topics = await create_topics(kafka_bootstrap, unique_topic_prefix)
    stream = stream_for(tmp_path, summary)
    relpath, seal_key = f"{BOOK_DIFFS}/hourly/20260610/22", f"{BOOK_DIFFS}|20260610|22".encode()
    # A file's lines, bad lines and seal again, in a transaction aborted after all of them were written:
    # the partitions it touched end with aborted records and an abort marker.
    again = [item for item in stream if dict(item[3]).get("source") == relpath.encode() or item[1] == seal_key]
    lines_again = sum(role != SEALS for role, *_ in again)
    await asyncio.to_thread(
        publish_transactions, kafka_bootstrap, topics, f"{unique_topic_prefix}verify", [(stream, True), (again, False)]
    )

    committed = await verify(tmp_path, kafka_bootstrap, topics=topics, isolation=READ_COMMITTED, timeout_s=30, settle_s=0.5)
    uncommitted = await verify(tmp_path, kafka_bootstrap, topics=topics, isolation=READ_UNCOMMITTED, timeout_s=30, settle_s=0.5)

    assert lines_again > 10
    assert committed.ok, committed.summary()
    assert committed.failures == 0 and committed.duplicates == 0
    assert committed.duplicates_by_isolation == {READ_COMMITTED: 0, READ_UNCOMMITTED: lines_again}
    assert all(t.records == t.lines_ok == t.lines for t in committed.tables.values())
    assert not any(note.startswith("stopped reading") for note in committed.notes), committed.notes  # read past the markers
    assert any("1 seal_duplicate" in note for note in committed.notes), committed.notes
    assert f"{READ_UNCOMMITTED} view: {lines_again} duplicates" in committed.summary()
    assert (uncommitted.duplicates, uncommitted.count("seal_duplicate"), uncommitted.ok) == (lines_again, 1, False)
    assert uncommitted.duplicates_by_isolation == {READ_UNCOMMITTED: lines_again}
