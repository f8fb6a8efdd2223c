"""generate → replay → sidecar → verify: the demo path, as a test against the real broker.

The sidecar runs as its own worker process (``python -m faust -A hyperdata_sidecar.app worker``),
started before the replay, which appends a three-hour corpus across midnight in ragged chunks.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import generate_corpus
from hyperdata_sidecar.tools.replay import replay
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.verify import DLQ, SEALS, verify

REPO = Path(__file__).resolve().parents[2]
NODE = "e2e-node"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sidecar_env(tmp_path: Path, bootstrap: str, topics: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOPIC_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        WATCH_DIR=str(tmp_path / "watch"),
        KAFKA_BOOTSTRAP=bootstrap,
        STATE_PATH=str(tmp_path / "state"),
        BACKUP_DIR=str(tmp_path / "backups"),
        NODE_ID=NODE,
        WEB_PORT=str(free_port()),
        SEAL_GRACE_MS="500",
        TOPIC_DLQ=topics[DLQ],
        TOPIC_SEALS=topics[SEALS],
    )
    for spec in TABLES:
        env[spec.topic_env] = topics[spec.dir_name]
    return env


async def while_running(worker: subprocess.Popen, log_path: Path, work):
    """``work``'s result; fails with the worker's log as soon as the worker exits."""
    task = asyncio.ensure_future(work)
    while not task.done():
        if worker.poll() is not None:
            task.cancel()
            pytest.fail(f"the sidecar exited ({worker.returncode}):\n{log_path.read_text()[-4000:]}")
        await asyncio.wait({task}, timeout=0.5)
    return task.result()


@pytest.mark.timeout(240)
async def test_a_replayed_corpus_across_midnight_arrives_complete_with_one_seal_and_backup_per_finalized_file(
    kafka_bootstrap, unique_topic_prefix, tmp_path
):
    corpus = tmp_path / "corpus"
    generate_corpus(
        corpus,
        hours=3,
        lines_per_hour={BOOK_DIFFS: 1500, ORDER_STATUSES: 2000, FILLS: 40},
        lines_per_block={BOOK_DIFFS: 60, ORDER_STATUSES: 80, FILLS: 2},
        seed=5,
        start=datetime.datetime(2026, 6, 10, 22),
        bad_every=97,
    )
    for name in ("watch", "state", "backups"):
        (tmp_path / name).mkdir()
    topics = {spec.dir_name: unique_topic_prefix + spec.default_topic for spec in TABLES}
    topics |= {DLQ: unique_topic_prefix + "hyperliquid.sidecar-dlq", SEALS: unique_topic_prefix + "hyperliquid.node-files"}
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "faust", "-A", "hyperdata_sidecar.app", "worker", "-l", "warn"],
            env=sidecar_env(tmp_path, kafka_bootstrap, topics),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            replayed = await replay(corpus, tmp_path / "watch", speed=3600.0, chunk_bytes=4096, cadence_s=0.05, progress=False)
            report = await while_running(
                worker,
                log_path,
                verify(tmp_path / "watch", kafka_bootstrap, topics=topics, node=NODE, backup_dir=tmp_path / "backups", timeout_s=120),
            )
        finally:
            worker.terminate()
            try:
                await asyncio.to_thread(worker.wait, 30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    assert all(t.partial_chunks > 0 for t in replayed.tables.values())
    assert report.ok, report.summary() + "\n--- worker log ---\n" + log_path.read_text()[-4000:]
    for spec in TABLES:
        table = report.tables[spec.dir_name]
        assert (table.files, table.finalized, table.seals_ok, table.backups_ok) == (3, 2, 2, 2)
        assert table.lines_ok == table.lines > 0 and table.dlq_ok == table.dlq_lines
