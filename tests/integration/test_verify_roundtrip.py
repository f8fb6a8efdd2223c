"""The verifier against the real broker: a hand-published correct stream passes, one lost line fails.

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

from hyperdata_sidecar.tools.generate import CorpusSummary, generate_corpus
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
