"""Start-order independence and configuration errors at start."""

from __future__ import annotations

import json
import shutil
import subprocess
from itertools import groupby
from pathlib import Path

from hyperdata_sidecar.core.tables import TABLES

from sidecar_run import Sidecar, assert_clean, write_corpus
from worker_process import FAUST, SIDECAR_APP, WorkerProcess


def test_a_missing_watch_dir_stops_the_worker_with_one_line_naming_the_setting(tmp_path, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix)
    shutil.rmtree(sidecar.watch)
    worker = sidecar.start()
    assert worker._process.wait(60) == 2
    lines = [line for line in worker.log_path.read_text().splitlines() if "configuration error" in line]
    assert len(lines) == 1 and "WATCH_DIR" in lines[0] and "Traceback" not in worker.log_path.read_text()


def configuration_errors(worker) -> list[str]:
    """The worker's ``configuration error`` lines, once it has exited 2 (and printed no traceback)."""
    assert worker._process.wait(60) == 2
    log = worker.log_path.read_text()
    assert "Traceback" not in log
    return [line for line in log.splitlines() if "configuration error" in line]


def test_a_state_path_that_cannot_be_created_stops_the_worker_with_one_line(tmp_path, unique_topic_prefix):
    (tmp_path / "a-file").write_text("")
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix, STATE_PATH=str(tmp_path / "a-file" / "state"))
    [line] = configuration_errors(sidecar.start())
    assert "STATE_PATH" in line and "a-file" in line


def test_the_worker_in_a_place_that_requires_node_id_does_not_start_without_it(tmp_path, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix, NODE_ID="", NODE_ID_REQUIRED="true")
    [line] = configuration_errors(sidecar.start())
    assert "NODE_ID" in line


def test_a_native_engine_that_cannot_be_used_stops_the_worker_with_one_line(tmp_path, unique_topic_prefix):
    broken = tmp_path / "broken-engine"  # first on the worker's path, ahead of an installed engine
    broken.mkdir()
    (broken / "hyperdata_sidecar_engine.py").write_text('raise ImportError("built for another Python")\n')
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix, SIDECAR_ENGINE="native")
    (tmp_path / "run").mkdir()
    worker = WorkerProcess(SIDECAR_APP, sidecar.env, tmp_path / "run", extra_path=broken)
    worker.start()
    [line] = configuration_errors(worker)
    assert "SIDECAR_ENGINE" in line and "built for another Python" in line and "make engine" in line


def test_a_command_other_than_the_worker_creates_no_state_path(tmp_path, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, "127.0.0.1:9", unique_topic_prefix, STATE_PATH=str(tmp_path / "not-yet" / "state"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **sidecar.env}
    result = subprocess.run(
        [FAUST, "-A", SIDECAR_APP, "generate", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "not-yet").exists()


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


def rewrite_by_block(watch: Path) -> None:
    """Turn the streaming trees under ``watch`` into what a ``--batch-by-block`` node writes instead:
    ``node_*_by_block/hourly/<date>/<H>``, one line per block holding every event of the block."""
    for spec in TABLES:
        streaming = watch / spec.dir_name
        by_block = watch / spec.dir_name.replace("_streaming", "_by_block")
        for path in sorted(streaming.rglob("*")):
            if not path.is_file():
                continue
            rows = [json.loads(line) for line in path.read_text().splitlines()]
            target = by_block / path.relative_to(streaming)
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w") as out:
                for _block, lines in groupby(rows, key=lambda row: row["block_number"]):
                    block = list(lines)
                    out.write(json.dumps({**block[0], "events": [e for row in block for e in row["events"]]}) + "\n")
        shutil.rmtree(streaming)


async def test_a_node_writing_by_block_is_named_on_readyz_and_in_one_line_per_table(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    write_corpus(sidecar.watch, hours=2, lines=300)
    rewrite_by_block(sidecar.watch)
    worker = sidecar.start()
    try:
        await sidecar.until_events("node_output_mode", 3)
        status, _type, body = worker.get("/readyz")
        write_corpus(sidecar.watch, hours=2, lines=300)  # the node restarted with --stream-with-block-info
        report = await sidecar.verify()
        await worker.until(lambda: worker.get("/readyz")[0] == 200, "/readyz 200 once the streaming trees are written")
    finally:
        assert worker.stop() == 0
    assert status == 503
    reasons = json.loads(body)["reasons"]
    for spec in TABLES:
        found = spec.dir_name.replace("_streaming", "_by_block")
        assert (
            f"{spec.dir_name}: the node writes {found}/ (by-block output, --batch-by-block), not {spec.dir_name}/: "
            "start hl-visor with --stream-with-block-info" in reasons
        )
    lines = sidecar.events("node_output_mode")
    assert sorted(line["table"] for line in lines) == sorted(spec.dir_name for spec in TABLES)
    assert {(line["mode"], line["flag"]) for line in lines} == {("by-block", "--batch-by-block")}
    assert_clean(report)
