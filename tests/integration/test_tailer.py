"""The tailer against the real broker: every complete line once, exact, keyed, ordered, resumable."""

from __future__ import annotations

import os
import shutil
import signal

from drills import unpersisted_lines
from sidecar_run import Sidecar, assert_clean, replay_ragged, write_corpus


async def test_ragged_appends_across_a_day_boundary_arrive_exactly_once(tmp_path, kafka_bootstrap, unique_topic_prefix):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, hours=3, lines=4000, bad_every=997)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix)
    worker = sidecar.start()
    try:
        await sidecar.until_events("startup")
        replayed = await replay_ragged(corpus, sidecar.watch)
        report = await sidecar.verify(backup_dir=sidecar.backups)
    finally:
        assert worker.stop() == 0
    assert all(t.partial_chunks > 0 for t in replayed.tables.values())  # lines really were split
    assert_clean(report)
    for table in report.tables.values():
        # hours 22 and 23 of 20260610 are finalized, sealed and backed up; hour 0 of the next day is newest
        assert (table.files, table.finalized, table.seals_ok, table.backups_ok) == (3, 2, 2, 2)
        assert table.lines_ok == table.lines > 0 and table.dlq_ok == table.dlq_lines
    assert sum(t.dlq_lines for t in report.tables.values()) > 0
    assert len(sidecar.events("seal")) == 6


async def test_sigkill_mid_catch_up_loses_nothing_and_duplicates_only_the_last_window(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=2, lines=60000)
    total = sum(p.stat().st_size for p in (tmp_path / "watch").rglob("*") if p.is_file())
    budget = 64 * 1024
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, READ_BUDGET_BYTES=str(budget), BACKUP_SINK="none")
    worker = sidecar.start()

    def acked() -> int:
        return sum(f["offset"] for f in worker.get_json("/sidecar/files/")["files"])

    await worker.until(lambda: acked() > 0, "the first checkpoints")
    at_kill = acked()
    os.killpg(worker._process.pid, signal.SIGKILL)
    worker._process.wait()
    assert 0 < at_kill < total  # the kill landed in the middle of the catch-up
    worker = sidecar.start()
    try:
        report = await sidecar.verify(allowed_duplicates=10**6)
    finally:
        assert worker.stop() == 0
    # At most the cycles in flight when the worker died come again.
    assert_clean(report, allowed_duplicates=unpersisted_lines(budget))
    assert len(sidecar.events("seal")) == 3  # one seal per finalized file, the kill notwithstanding


async def test_restart_without_local_state_resumes_from_the_changelog(tmp_path, kafka_bootstrap, unique_topic_prefix):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, hours=2, lines=3000)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    first_hour = [p for p in corpus.rglob("*") if p.is_file() and p.name == "22"]
    for path in first_hour:
        target = sidecar.watch / path.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    worker = sidecar.start()
    try:
        await sidecar.verify()
    finally:
        assert worker.stop() == 0
    shutil.rmtree(sidecar.state)
    await replay_ragged(_only_hour(corpus, "23", tmp_path / "rest"), sidecar.watch)
    worker = sidecar.start()
    try:
        report = await sidecar.verify()
    finally:
        assert worker.stop() == 0
    assert_clean(report, allowed_duplicates=0)
    assert len(sidecar.events("seal")) == 3


def _only_hour(corpus, hour, target):
    for path in corpus.rglob("*"):
        if path.is_file() and path.name == hour:
            dest = target / path.relative_to(corpus)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
    return target
