"""BACKUP_SINK=object_store in a real worker: every sealed file uploaded to the S3 server the tests
start (moto), recorded in the backups table; while the bucket is missing every file is parked as
``permission``, and a retry backs it up once the bucket is made; a worker without BACKUP_URL does
not start."""

from __future__ import annotations

import hashlib
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devs3 import MotoS3, credentials_env

from drill_kit import metric_value
from sidecar_run import Sidecar, write_corpus
from worker_process import FAUST, SIDECAR_APP, WorkerProcess, sidecar_env

HOURS = 2
PREFIX = "hl/node-1"


@pytest.fixture(scope="module")
def s3_worker(s3_server: MotoS3, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """A worker with BACKUP_SINK=object_store that has sealed and backed up the older hour of every table."""
    root = tmp_path_factory.mktemp("s3-worker")
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    settings = sidecar_env(
        root,
        kafka_bootstrap,
        f"t-s3-{uuid.uuid4().hex[:8]}.",
        BACKUP_SINK="object_store",
        BACKUP_URL=f"s3://{bucket}/{PREFIX}",
        BACKUP_ENDPOINT=s3_server.endpoint,
        BACKUP_PATH_STYLE="true",
        **credentials_env(),
    )
    write_corpus(Path(settings["WATCH_DIR"]), hours=HOURS, lines=300)
    worker = WorkerProcess(SIDECAR_APP, settings, root)
    worker.start()
    try:
        worker.wait_until(lambda: len(worker.backed_up()) == len(TABLES) * (HOURS - 1), "every finished hour backed up")
        yield worker
    finally:
        worker.stop()


def test_every_sealed_file_is_an_object_with_its_sha256_and_the_backups_table_records_its_url(
    s3_worker: WorkerProcess, s3_server: MotoS3
) -> None:
    bucket = urllib.parse.urlsplit(s3_worker.env["BACKUP_URL"]).netloc
    watch = Path(s3_worker.env["WATCH_DIR"])
    client = s3_server.client()

    rows = s3_worker.backed_up()
    for row in rows:
        content = (watch / row["path"]).read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        key = f"{PREFIX}/{row['path']}"
        record = s3_worker.get_json(f"/table/sidecar-backups/{urllib.parse.quote(row['path'], safe='')}/")
        assert (record["status"], record["sink"], record["ref"], record["sha256"]) == (
            "ok",
            "object_store",
            f"s3://{bucket}/{key}",
            digest,
        )
        stored = client.get_object(Bucket=bucket, Key=key)
        assert (stored["Body"].read(), stored["Metadata"]) == (content, {"sha256": digest})
    listed = client.list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(f"{PREFIX}/{row['path']}" for row in rows)
    assert not list(Path(s3_worker.env["BACKUP_DIR"]).iterdir())  # the local sink never ran


def test_the_status_json_shows_the_object_store_target(s3_worker: WorkerProcess) -> None:
    config = s3_worker.get_json("/sidecar/status/")["config"]

    assert config["backup_sink"] == "object_store"
    assert config["backup_store"]["url"] == s3_worker.env["BACKUP_URL"]


async def test_while_the_bucket_is_missing_every_file_is_parked_as_permission_then_a_retry_backs_it_up(
    s3_server: MotoS3, kafka_bootstrap: str, unique_topic_prefix: str, tmp_path: Path
) -> None:
    bucket = f"t-{uuid.uuid4().hex[:12]}"  # not made yet
    sidecar = Sidecar(
        tmp_path,
        kafka_bootstrap,
        unique_topic_prefix,
        BACKUP_SINK="object_store",
        BACKUP_URL=f"s3://{bucket}/{PREFIX}",
        BACKUP_ENDPOINT=s3_server.endpoint,
        BACKUP_PATH_STYLE="true",
        BACKUP_MAX_TRIES="2",
        **credentials_env(),
    )
    write_corpus(sidecar.watch, hours=HOURS, lines=300)
    finished = len(TABLES) * (HOURS - 1)
    worker = sidecar.start()
    try:
        await sidecar.until_events("backup_parked", finished)
        await worker.until(lambda: metric_value(worker, "hyperdata_sidecar_backups_parked") == finished, "the parked gauge")
        failed = metric_value(worker, "hyperdata_sidecar_backups_total", result="failed")
        s3_server.client().create_bucket(Bucket=bucket)  # the operator makes the bucket, then asks again
        path = sidecar.events("backup_parked")[0]["path"]
        asked = subprocess.run(
            [FAUST, "-A", SIDECAR_APP, "backup-retry", path], cwd=worker.cwd, env=worker.env, capture_output=True, text=True
        )
        await sidecar.until_events("backup")
    finally:
        assert worker.stop() == 0
    parked = sidecar.events("backup_parked")
    assert all((e["attempts"], e["reason"]) == (2, "permission") for e in parked)
    assert all(
        e["error"] == f"permission: upload to s3://{bucket}/{PREFIX}/{e['path']}: the bucket does not exist (NoSuchBucket)"
        for e in parked
    )
    assert failed == 2 * finished
    assert asked.returncode == 0, asked.stderr
    assert [e["ref"] for e in sidecar.events("backup")] == [f"s3://{bucket}/{PREFIX}/{path}"]


def test_a_worker_without_its_bucket_url_stops_with_one_line(tmp_path: Path) -> None:
    settings = sidecar_env(tmp_path, "127.0.0.1:9", "t-s3-refused.", BACKUP_SINK="object_store")
    env = WorkerProcess(SIDECAR_APP, settings, tmp_path).env

    result = subprocess.run(
        [FAUST, "-A", SIDECAR_APP, "worker"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert lines == [
        "hyperdata-sidecar: configuration error: BACKUP_URL: required with BACKUP_SINK=object_store: "
        "s3://bucket/prefix or gs://bucket/prefix"
    ], result.stderr
