"""Start-order independence and configuration errors at start."""

from __future__ import annotations

import shutil

from sidecar_run import Sidecar, assert_clean, write_corpus


def test_a_missing_watch_dir_stops_the_worker_with_one_line_naming_the_setting(tmp_path, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix)
    shutil.rmtree(sidecar.watch)
    worker = sidecar.start()
    assert worker._process.wait(60) == 2
    lines = [line for line in worker.log_path.read_text().splitlines() if "configuration error" in line]
    assert len(lines) == 1 and "WATCH_DIR" in lines[0] and "Traceback" not in worker.log_path.read_text()


async def test_the_sidecar_may_start_before_the_node_creates_its_tables(tmp_path, kafka_bootstrap, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    worker = sidecar.start()
    try:
        await sidecar.until_events("table_dir_missing", 3)
        write_corpus(sidecar.watch, hours=2, lines=900)
        report = await sidecar.verify()
    finally:
        assert worker.stop() == 0
    assert_clean(report)
    assert len(sidecar.events("table_dir_missing")) == 3  # once per table, not once per poll
