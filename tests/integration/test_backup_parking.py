"""A backup that cannot succeed, against the real broker and a real worker: the other files are
backed up all the same, the poisoned ones are parked after BACKUP_MAX_TRIES (log, metric, status
page), and come back through ``backup-retry`` or the next start."""

from __future__ import annotations

import json
import subprocess

from aiokafka import AIOKafkaProducer

from drill_kit import metric_value
from sidecar_run import Sidecar, assert_clean, write_corpus
from worker_process import FAUST, SIDECAR_APP

FILLS = "node_fills_streaming"
POISONED = [f"{FILLS}/hourly/20260610/22", f"{FILLS}/hourly/20260610/23"]


def backup_retry(sidecar: Sidecar, path: str) -> subprocess.CompletedProcess:
    assert sidecar.worker is not None
    return subprocess.run(
        [FAUST, "-A", SIDECAR_APP, "backup-retry", path],
        cwd=sidecar.worker.cwd,
        env=sidecar.worker.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def send_raw(bootstrap: str, topic: str, value: dict) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, key=b'"x"', value=json.dumps(value).encode())
    finally:
        await producer.stop()


async def test_a_backup_that_cannot_succeed_is_parked_while_every_other_file_is_backed_up(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=4, lines=600)  # 20260610/22, 23 and 20260611/0 finalized per table; 1 newest
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_MAX_TRIES="3")
    (tmp_path / "outside").mkdir()
    poisoned_dir = sidecar.backups / FILLS / "hourly" / "20260610"
    poisoned_dir.parent.mkdir(parents=True)
    poisoned_dir.symlink_to(tmp_path / "outside", target_is_directory=True)  # every try fails: unsafe_path
    worker = sidecar.start()
    try:
        await worker.until(
            lambda: {e["path"] for e in sidecar.events("backup_parked")} == set(POISONED), "both poisoned backups parked"
        )
        await worker.until(lambda: len(sidecar.events("backup")) == 7, "the seven other backups")
        # The state gauges are refreshed every GAUGES_EVERY_S.
        await worker.until(lambda: metric_value(worker, "hyperdata_sidecar_backups_parked") == 2, "the parked gauge at 2")
        shown = worker.get_json("/sidecar/status/")["problems"]
        states = {f["path"]: f["state"] for f in worker.get_json("/sidecar/files/")["files"]}
        poisoned_dir.unlink()  # the operator fixes the target, then asks for one file again
        asked = backup_retry(sidecar, str(sidecar.watch / POISONED[0]))
        await worker.until(lambda: POISONED[0] in {e["path"] for e in sidecar.events("backup")}, "the requested backup")
        refused = backup_retry(sidecar, "notes.txt")
        await send_raw(
            kafka_bootstrap, f"hyperdata-sidecar-{sidecar.env['NODE_ID']}-sidecar-backup-attempts", {"kind": "nonsense"}
        )
        await sidecar.until_events("unknown_backup_attempt_record")
    finally:
        assert worker.stop() == 0
    assert {e["path"] for e in sidecar.events("backup")} & set(POISONED) == {POISONED[0]}
    assert all((e["level"], e["attempts"], e["reason"]) == ("error", 3, "unsafe_path") for e in sidecar.events("backup_parked"))
    tries = [e["retry_in_s"] for e in sidecar.events("backup_failed") if e["path"] == POISONED[1]]
    assert tries == [1.0, 2.0]  # then parked: no third wait
    assert all(states[path] == "backup_parked" for path in POISONED)
    assert all(any(path in p["text"] and "backup-retry" in p["text"] for p in shown) for path in POISONED)
    assert asked.returncode == 0 and POISONED[0] in asked.stdout, asked.stderr
    assert refused.returncode == 2 and "names no hour file" in refused.stderr
    assert not any((tmp_path / "outside").iterdir())

    worker = sidecar.start()  # the next start tries the parked one again
    try:
        report = await sidecar.verify(backup_dir=sidecar.backups)
    finally:
        assert worker.stop() == 0
    assert_clean(report)
