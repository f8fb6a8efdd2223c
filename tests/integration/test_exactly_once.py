"""DELIVERY=exactly_once against the real broker and real workers: every line once for a
``read_committed`` reader after SIGKILLs (the Python engine; the native one in drill 1), and a frozen
worker's transaction aborted by the broker and redone after it thaws. A second worker with the same
NODE_ID and the broker frozen past the transaction timeout are drills 17 and 18 (test_drills.py)."""

from __future__ import annotations

import asyncio
import os
import signal
from functools import partial

from drill_kit import caught_up, kill, metric_value, pid
from sidecar_run import Sidecar, assert_clean, write_corpus

EXACTLY_ONCE = {"DELIVERY": "exactly_once", "TXN_MAX_MS": "100", "TXN_TIMEOUT_MS": "10000", "READ_BUDGET_BYTES": "65536"}


def committed(worker) -> float:
    return metric_value(worker, "hyperdata_sidecar_transactions_committed_total")


def enough_committed(worker) -> bool:
    return committed(worker) >= 3


async def test_sigkills_during_a_catch_up_repeat_nothing_for_a_read_committed_reader_on_the_python_engine(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    """The native engine's twin is drill 1 in exactly_once (test_drills.py)."""
    write_corpus(tmp_path / "watch", hours=3, lines=6000, bad_every=997)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, SIDECAR_ENGINE="python", **EXACTLY_ONCE)
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


async def test_a_frozen_workers_transaction_is_aborted_by_the_broker_and_redone_after_it_thaws(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    """Its Faust consumer's session expires meanwhile: after the thaw it rejoins the group, and the
    redo's progress barrier may have to seek back to records Faust dropped (docs/reliability.md, open
    finding 5: ``progress_rewound``, 30 s into the barrier)."""
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
