"""Seals and backups against the real broker: one seal per finalized file, exact, even across crashes."""

from __future__ import annotations

import hashlib
import os
import signal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.topics import apply_contract, load_contract

from sidecar_run import Sidecar, assert_clean, write_corpus


async def read_seals(bootstrap: str, topic: str) -> list[SealManifest]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        seals = []
        while batches := await consumer.getmany(timeout_ms=2000):
            seals += [SealManifest.from_json(r.value) for records in batches.values() for r in records]
        return seals
    finally:
        await consumer.stop()


def expected_seal(watch, relpath: str) -> tuple[int, str, tuple[int, int]]:
    """Size, sha256 and block range of a file, computed here from its bytes."""
    data = (watch / relpath).read_bytes()
    blocks = []
    for line in data.split(b"\n"):
        marker = line.find(b'"block_number":')
        if marker >= 0:
            digits = line[marker + 15 :].split(b",", 1)[0]
            if digits.isdigit():
                blocks.append(int(digits))
    return len(data), hashlib.sha256(data).hexdigest(), (blocks[0], blocks[-1])


async def test_files_finalized_before_the_first_start_are_sealed_once_with_their_own_digest(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=3, lines=3000)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix)
    worker = sidecar.start()
    try:
        report = await sidecar.verify(backup_dir=sidecar.backups)
    finally:
        assert worker.stop() == 0
    assert_clean(report)
    seals = await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"])
    finalized = sorted(
        h.relpath
        for h in (HourFile.parse(str(p.relative_to(sidecar.watch))) for p in sidecar.watch.rglob("*") if p.is_file())
        if h is not None and h.hour != "0"
    )
    assert sorted(s.path for s in seals) == finalized  # exactly one each; the newest hour (0) has none
    for seal in seals:
        size, sha256, block_range = expected_seal(sidecar.watch, seal.path)
        assert (seal.size, seal.sha256, seal.block_range) == (size, sha256, block_range)
        assert seal.key == f"{seal.table}|{seal.date}|{seal.hour}"
        assert seal.node == sidecar.env["NODE_ID"]
        assert (sidecar.backups / seal.path).read_bytes() == (sidecar.watch / seal.path).read_bytes()


async def test_a_seal_already_on_the_topic_is_not_published_again(tmp_path, kafka_bootstrap, unique_topic_prefix):
    """The crash window after the seal's ack and before the seals table write: the topic knows."""
    write_corpus(tmp_path / "watch", hours=2, lines=600)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    relpath = "node_fills_streaming/hourly/20260610/22"
    size, sha256, block_range = expected_seal(sidecar.watch, relpath)
    earlier = SealManifest(
        table="node_fills_streaming",
        path=relpath,
        date="20260610",
        hour="22",
        block_range=block_range,
        size=size,
        sha256=sha256,
        finalized_at="2026-06-10T23:00:03.000Z",
        lines=0,
        dlq_lines=0,
        node=sidecar.env["NODE_ID"],
    )
    # The topics as the worker would create them: a producer's send to a missing topic would have the
    # broker's auto-create make it with one partition, which the worker does not write.
    await apply_contract(kafka_bootstrap, load_contract(sidecar.env))
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(sidecar.env["TOPIC_SEALS"], earlier.to_json(), key=earlier.key.encode())
    finally:
        await producer.stop()
    worker = sidecar.start()
    try:
        await sidecar.until_events("seal", 2)  # the other two tables' hour 22
        await sidecar.until_events("seal_found_on_topic")
    finally:
        assert worker.stop() == 0
    seals = await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"])
    assert sorted(s.path for s in seals).count(relpath) == 1
    assert len(seals) == 3


async def test_sigkill_right_after_finalization_still_gives_exactly_one_seal(tmp_path, kafka_bootstrap, unique_topic_prefix):
    write_corpus(tmp_path / "watch", hours=2, lines=3000)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix)
    worker = sidecar.start()
    await sidecar.until_events("file_finalized")
    os.killpg(worker._process.pid, signal.SIGKILL)
    worker._process.wait()
    worker = sidecar.start()
    try:
        report = await sidecar.verify(backup_dir=sidecar.backups, allowed_duplicates=10**6)
    finally:
        assert worker.stop() == 0
    assert report.ok, report.summary()
    seals = await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"])
    assert sorted(s.path for s in seals) == sorted({s.path for s in seals}) and len(seals) == 3


async def test_unwritable_backup_dir_is_retried_until_it_can_be_written(tmp_path, kafka_bootstrap, unique_topic_prefix):
    write_corpus(tmp_path / "watch", hours=2, lines=600)
    blocked = tmp_path / "backups-target"
    blocked.write_text("a file where the backup dir should be")  # mkdir below it fails, also for root
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_DIR=str(blocked))
    worker = sidecar.start()
    try:
        await sidecar.until_events("backup_failed", 2)
        status, _, metrics = worker.get("/metrics")
        assert status == 200 and b'hyperdata_sidecar_backups_total{result="failed"}' in metrics
        blocked.unlink()
        blocked.mkdir()
        await sidecar.until_events("backup", 3)
    finally:
        assert worker.stop() == 0
    for event in sidecar.events("backup"):
        assert (blocked / event["path"]).read_bytes() == (sidecar.watch / event["path"]).read_bytes()
    assert all(e["reason"] == "io_error" for e in sidecar.events("backup_failed"))
