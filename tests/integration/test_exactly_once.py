"""DELIVERY=exactly_once against the real broker and real workers: every line once for a
``read_committed`` reader after SIGKILLs, a second worker with the same NODE_ID fencing the first, a
frozen worker's transaction aborted by the broker and redone after it thaws."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from functools import partial
from pathlib import Path

import pytest

from drill_kit import caught_up, exit_code, kill, metric_value, pid
from sidecar_run import Sidecar, assert_clean, write_corpus

EXACTLY_ONCE = {"DELIVERY": "exactly_once", "TXN_MAX_MS": "100", "TXN_TIMEOUT_MS": "10000", "READ_BUDGET_BYTES": "65536"}


def committed(worker) -> float:
    return metric_value(worker, "hyperdata_sidecar_transactions_committed_total")


def enough_committed(worker) -> bool:
    return committed(worker) >= 3


@pytest.mark.parametrize("engine", ["python", "native"])
async def test_sigkills_during_a_catch_up_repeat_nothing_for_a_read_committed_reader(
    tmp_path, kafka_bootstrap, unique_topic_prefix, engine
):
    write_corpus(tmp_path / "watch", hours=3, lines=6000, bad_every=997)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, SIDECAR_ENGINE=engine, **EXACTLY_ONCE)
    worker = sidecar.start()
    try:
        for k in range(3):
            await sidecar.until_events("startup", k + 1)
            await worker.until(partial(enough_committed, worker), "a few committed transactions")
            kill(worker)
            worker = sidecar.start()
        await sidecar.until_events("startup", 4)
        await worker.until(lambda: caught_up(worker, sidecar.watch), "the catch-up")
        report = await sidecar.verify(backup_dir=sidecar.backups)
        assert_clean(report)
        assert report.duplicates == 0 and report.isolation == "read_committed"
    finally:
        await asyncio.to_thread(worker.stop)


async def test_a_second_worker_with_the_same_node_id_fences_the_first(tmp_path, kafka_bootstrap, unique_topic_prefix):
    write_corpus(tmp_path / "corpus", hours=3, lines=6000)
    first = Sidecar(tmp_path / "first", kafka_bootstrap, unique_topic_prefix, **EXACTLY_ONCE)
    second = Sidecar(
        tmp_path / "second", kafka_bootstrap, unique_topic_prefix, **{**EXACTLY_ONCE, "NODE_ID": first.env["NODE_ID"]}
    )
    second.env["WATCH_DIR"], second.watch = first.env["WATCH_DIR"], first.watch
    hours = sorted({(p.parent.name, int(p.name)) for p in (tmp_path / "corpus").glob("*/hourly/*/*")})
    for date, hour in hours[:-1]:  # the last hour comes once the second worker has started
        for path in (tmp_path / "corpus").glob(f"*/hourly/{date}/{hour}"):
            copy_into(path, tmp_path / "corpus", first.watch)
    a = first.start()
    b = None
    try:
        await a.until(lambda: committed(a) >= 2, "the first worker's first transactions")
        b = second.start()
        await second.until_events("transactions_started")  # the second took the transactional.id
        date, hour = hours[-1]
        for path in (tmp_path / "corpus").glob(f"*/hourly/{date}/{hour}"):
            copy_into(path, tmp_path / "corpus", first.watch)
        assert await exited(a) not in (None, 0)
        fenced = first.events("producer_fenced")
        assert len(fenced) == 1 and "same NODE_ID" in fenced[0]["meaning"]
        # The second waits for the progress topic's partition, which the first held until the
        # group gave it up (its session timeout when it did not leave cleanly).
        for _ in range(1500):
            if second.events("startup") or exit_code(b) is not None:
                break
            await asyncio.sleep(0.2)
        assert second.events("startup"), "the second worker never started its tables"
        await b.until(lambda: caught_up(b, second.watch), "the second worker's catch-up")
        report = await second.verify()
        assert_clean(report)
        assert report.duplicates == 0
    finally:
        await asyncio.to_thread(a.stop)
        if b is not None:
            await asyncio.to_thread(b.stop)


async def exited(worker, timeout_s: float = 120.0) -> int | None:
    """The worker's exit code once it exits by itself (None if it still runs after ``timeout_s``)."""
    for _ in range(int(timeout_s / 0.2)):
        if exit_code(worker) is not None:
            break
        await asyncio.sleep(0.2)
    return exit_code(worker)


def copy_into(path: Path, corpus: Path, watch: Path) -> None:
    target = watch / path.relative_to(corpus)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)


async def test_a_frozen_workers_transaction_is_aborted_by_the_broker_and_redone_after_it_thaws(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=2, lines=20000)
    sidecar = Sidecar(
        tmp_path, kafka_bootstrap, unique_topic_prefix, **{**EXACTLY_ONCE, "TXN_TIMEOUT_MS": "2000", "TXN_MAX_MS": "250"}
    )
    worker = sidecar.start()
    try:
        await worker.until(lambda: committed(worker) >= 3, "a few committed transactions")
        os.killpg(pid(worker), signal.SIGSTOP)
        await asyncio.sleep(15.0)  # the broker aborts transactions open longer than 2 s (checked every 10 s)
        os.killpg(pid(worker), signal.SIGCONT)
        await worker.until(lambda: caught_up(worker, sidecar.watch), "the catch-up after the thaw")
        report = await sidecar.verify()
        assert_clean(report)
        assert report.duplicates == 0
        assert sidecar.events("transaction_aborted"), "the broker's abort was not seen"
        assert sidecar.events("reads_redone")
    finally:
        await asyncio.to_thread(worker.stop)
