"""The object-store sink against a real S3 server (moto, started by the tests), through the real
client: uploads, what the server is sent, and every way an upload fails.

Where a test needs to see or break what the client sends, an HTTP proxy of the test
(``s3_proxy.py``) stands between the sink and the server; the client and the server stay real.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperdata_sidecar.backup import BackupError, BackupProgress
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.upload_plan import MAX_OBJECT_BYTES
from hyperdata_sidecar.devs3 import MotoS3, credentials_env
from hyperdata_sidecar.object_store_sink import PARTS_IN_FLIGHT, READ_CHUNK_BYTES, ObjectStoreBackupSink

from s3_proxy import RefuseParts, S3Proxy
from worker_process import REPO

MIB = 1024 * 1024
RELPATH = "node_order_statuses_streaming/hourly/20260610/13"
PREFIX = "hl/node-1"
KEY = f"{PREFIX}/{RELPATH}"
BIG = 20 * MIB + 12345  # three parts of 8 MiB


def sink(endpoint: str, bucket: str, **settings: str) -> ObjectStoreBackupSink:
    """The sink as a worker builds it, from its settings."""
    env = {
        "BACKUP_SINK": "object_store",
        "BACKUP_URL": f"s3://{bucket}/{PREFIX}",
        "BACKUP_ENDPOINT": endpoint,
        "BACKUP_PATH_STYLE": "true",
        **settings,
    }
    made = ObjectStoreBackupSink.from_settings(load_settings(env))
    made.progress = BackupProgress(RELPATH)
    return made


def source(tmp_path: Path, size: int) -> tuple[Path, str]:
    path = tmp_path / "13"
    path.write_bytes(os.urandom(size))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def stored(server: MotoS3, bucket: str, key: str = KEY) -> tuple[bytes, dict[str, str]]:
    got = server.client().get_object(Bucket=bucket, Key=key)
    return got["Body"].read(), got["Metadata"]


def keys(server: MotoS3, bucket: str) -> list[str]:
    return [o["Key"] for o in server.client().list_objects_v2(Bucket=bucket).get("Contents", [])]


def open_uploads(server: MotoS3, bucket: str) -> list[str]:
    return [u["Key"] for u in server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


# -- uploads ------------------------------------------------------------------------------------


async def test_a_large_file_goes_up_in_parts_each_checksummed_with_the_sha256_as_metadata(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    path, digest = source(tmp_path, BIG)
    async with S3Proxy(s3_server.port).running() as proxy:
        target = sink(proxy.endpoint, s3_bucket)
        ref = await target.backup(path, relpath=RELPATH, sha256=digest)

    body, metadata = stored(s3_server, s3_bucket)
    assert ref == f"s3://{s3_bucket}/{KEY}"
    assert body == path.read_bytes() and metadata == {"sha256": digest}
    assert (target.progress.done_bytes, target.progress.via) == (BIG, "multipart upload, 3 parts of 8 MiB")
    parts = [r for r in proxy.seen if r.is_upload_part]
    assert sorted(len(p.body) for p in parts) == sorted([8 * MIB, 8 * MIB, BIG - 16 * MIB])
    assert all(p.headers["x-amz-checksum-sha256"] == b64_sha256(p.body) for p in parts)
    created = next(r for r in proxy.seen if r.method == "POST" and "uploads" in r.query)
    assert (created.headers["x-amz-checksum-algorithm"], created.headers["x-amz-meta-sha256"]) == ("SHA256", digest)
    assert open_uploads(s3_server, s3_bucket) == []


async def test_no_more_parts_than_the_limit_are_in_flight_at_once(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    path, digest = source(tmp_path, 6 * 8 * MIB)
    async with S3Proxy(s3_server.port).running() as proxy:
        await sink(proxy.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    assert len([r for r in proxy.seen if r.is_upload_part]) == 6
    assert 1 <= proxy.most_parts_in_flight <= PARTS_IN_FLIGHT


async def test_a_small_file_is_one_put_carrying_its_checksum(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    path, digest = source(tmp_path, 1000)
    async with S3Proxy(s3_server.port).running() as proxy:
        target = sink(proxy.endpoint, s3_bucket)
        await target.backup(path, relpath=RELPATH, sha256=digest)

    assert target.progress.via == "one PUT"
    (put,) = [r for r in proxy.seen if r.method == "PUT"]
    assert (put.body, put.headers["x-amz-checksum-sha256"]) == (path.read_bytes(), b64_sha256(path.read_bytes()))
    assert stored(s3_server, s3_bucket) == (path.read_bytes(), {"sha256": digest})


async def test_an_empty_file_is_an_empty_object(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    path, digest = source(tmp_path, 0)

    await sink(s3_server.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    assert stored(s3_server, s3_bucket) == (b"", {"sha256": digest})


async def test_an_object_already_there_with_the_sha256_is_found_and_not_sent_again(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    path, digest = source(tmp_path, 1000)
    await sink(s3_server.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    async with S3Proxy(s3_server.port).running() as proxy:
        again = sink(proxy.endpoint, s3_bucket)
        found = await again.find_existing(RELPATH, digest)
        ref = await again.backup(path, relpath=RELPATH, sha256=digest.upper())

    assert found == ref == f"s3://{s3_bucket}/{KEY}"
    assert {r.method for r in proxy.seen} == {"HEAD"}


async def test_an_object_there_with_another_sha256_is_not_a_copy_and_is_replaced(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    s3_server.client().put_object(Bucket=s3_bucket, Key=KEY, Body=b"older", Metadata={"sha256": "0" * 64})
    path, digest = source(tmp_path, 1000)
    target = sink(s3_server.endpoint, s3_bucket)

    assert await target.find_existing(RELPATH, digest) is None
    await target.backup(path, relpath=RELPATH, sha256=digest)

    assert stored(s3_server, s3_bucket) == (path.read_bytes(), {"sha256": digest})


async def test_the_bandwidth_limit_paces_the_upload(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    rate = 8 * MIB
    path, digest = source(tmp_path, 12 * MIB)
    started = time.monotonic()

    await sink(s3_server.endpoint, s3_bucket, BACKUP_MAX_BYTES_PER_S=str(rate)).backup(path, relpath=RELPATH, sha256=digest)

    # A lower bound only: the first READ_CHUNK_BYTES go at once, the rest at the rate.
    assert time.monotonic() - started >= (12 * MIB - READ_CHUNK_BYTES) / rate
    assert stored(s3_server, s3_bucket)[0] == path.read_bytes()


# -- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [1000, BIG], ids=["one put", "multipart"])
async def test_a_source_that_no_longer_matches_its_seal_completes_no_object(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path, size: int
) -> None:
    path, digest = source(tmp_path, size)
    path.write_bytes(os.urandom(size))  # changed after its seal

    with pytest.raises(BackupError) as err:
        await sink(s3_server.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    assert err.value.reason == "hash_mismatch" and "the seal says" in err.value.message
    assert keys(s3_server, s3_bucket) == [] and open_uploads(s3_server, s3_bucket) == []


async def test_a_source_that_is_gone_is_source_missing(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    with pytest.raises(BackupError) as err:
        await sink(s3_server.endpoint, s3_bucket).backup(tmp_path / "gone", relpath=RELPATH, sha256="0" * 64)

    assert err.value.reason == "source_missing"


async def test_a_file_larger_than_an_object_can_be_is_refused_before_anything_is_sent(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    path = tmp_path / "13"
    with open(path, "wb") as sparse:
        sparse.truncate(MAX_OBJECT_BYTES + 1)  # sparse: nothing is written, or read

    with pytest.raises(BackupError) as err:
        await sink(s3_server.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256="0" * 64)

    assert err.value.reason == "io_error" and "more than an object can hold" in err.value.message
    assert keys(s3_server, s3_bucket) == [] and open_uploads(s3_server, s3_bucket) == []


async def test_a_part_refused_once_is_sent_again_and_the_object_completes(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    path, digest = source(tmp_path, BIG)
    async with S3Proxy(s3_server.port, RefuseParts(nth=2, status=503)).running() as proxy:
        await sink(proxy.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    parts = [r for r in proxy.seen if r.is_upload_part]
    assert [p.refused for p in parts].count(True) == 1 and len(parts) == 4
    assert stored(s3_server, s3_bucket) == (path.read_bytes(), {"sha256": digest})
    assert open_uploads(s3_server, s3_bucket) == []


async def test_a_part_refused_every_time_is_an_io_error_and_the_upload_is_aborted(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    path, digest = source(tmp_path, BIG)
    async with S3Proxy(s3_server.port, RefuseParts(nth=1, status=500, times=1000)).running() as proxy:
        with pytest.raises(BackupError) as err:
            await sink(proxy.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    assert err.value.reason == "io_error" and "\n" not in str(err.value)
    assert any(r.method == "DELETE" and "uploadId" in r.query for r in proxy.seen)  # AbortMultipartUpload
    assert keys(s3_server, s3_bucket) == [] and open_uploads(s3_server, s3_bucket) == []


async def test_a_missing_bucket_is_permission_naming_it(s3_server: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    path, digest = source(tmp_path, 1000)

    with pytest.raises(BackupError) as err:
        await sink(s3_server.endpoint, "no-such-bucket").backup(path, relpath=RELPATH, sha256=digest)

    assert err.value.reason == "permission"
    assert str(err.value) == f"permission: upload to s3://no-such-bucket/{KEY}: the bucket does not exist (NoSuchBucket)"


@pytest.fixture(scope="module")
def authenticating_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MotoS3, str, dict[str, str]]]:
    """A server of its own that authenticates every request, with a bucket and a user allowed only
    to read it; returns the server, the bucket and the reader's key and secret."""
    server = MotoS3(tmp_path_factory.mktemp("moto-auth"))
    server.start()
    try:
        iam = server.client("iam")
        server.client().create_bucket(Bucket="guarded")
        iam.create_user(UserName="reader")
        iam.put_user_policy(
            UserName="reader",
            PolicyName="read",
            PolicyDocument='{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}]}',
        )
        created = iam.create_access_key(UserName="reader")["AccessKey"]
        server.require_authentication()
        yield server, "guarded", {"key": created["AccessKeyId"], "secret": created["SecretAccessKey"]}
    finally:
        server.stop()


@pytest.mark.parametrize("who", ["unknown key", "wrong secret", "no write permission"])
async def test_refused_credentials_are_permission_in_one_line_naming_no_secret(
    authenticating_s3: tuple[MotoS3, str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    server, bucket, reader = authenticating_s3
    key, secret = {
        "unknown key": ("AKIAUNKNOWNUNKNOWN00", "whatever-secret"),
        "wrong secret": (reader["key"], "not-the-readers-secret"),
        "no write permission": (reader["key"], reader["secret"]),
    }[who]
    for name, value in credentials_env(key, secret).items():
        monkeypatch.setenv(name, value)
    path, digest = source(tmp_path, 1000)

    with pytest.raises(BackupError) as err:
        await sink(server.endpoint, bucket).backup(path, relpath=RELPATH, sha256=digest)

    message = str(err.value)
    assert err.value.reason == "permission" and "\n" not in message
    assert re.fullmatch(
        rf"permission: (HEAD|upload to) s3://{bucket}/{KEY}: the store refused the credentials or their permissions( \(\w+\))?",
        message,
    )
    assert key not in message and secret not in message
    assert server.client(**reader).list_objects_v2(Bucket=bucket).get("KeyCount") == 0


async def test_the_server_stopped_during_an_upload_then_restarted_ends_with_one_complete_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto keeps its buckets in memory: the restarted server is an empty one, and the bucket is
    made again (a real store keeps it; the next test keeps the server up instead)."""
    for name, value in credentials_env().items():
        monkeypatch.setenv(name, value)
    server = MotoS3(tmp_path)
    server.start()
    try:
        server.client().create_bucket(Bucket="archive")
        path, digest = source(tmp_path, 3 * 8 * MIB)
        slow = sink(server.endpoint, "archive", BACKUP_MAX_BYTES_PER_S=str(8 * MIB))
        upload = asyncio.create_task(slow.backup(path, relpath=RELPATH, sha256=digest))
        await until(lambda: parts_stored(server, "archive") >= 1)
        server.stop()

        with pytest.raises(BackupError) as err:
            await upload
        assert err.value.reason == "io_error"

        server.start()
        server.client().create_bucket(Bucket="archive")
        ref = await sink(server.endpoint, "archive").backup(path, relpath=RELPATH, sha256=digest)

        assert ref == f"s3://archive/{KEY}"
        assert keys(server, "archive") == [KEY]
        assert stored(server, "archive") == (path.read_bytes(), {"sha256": digest})
    finally:
        server.stop()


async def test_an_upload_killed_midway_leaves_no_object_and_the_next_attempt_uploads_it_whole(
    s3_server: MotoS3, s3_bucket: str, tmp_path: Path
) -> None:
    """The worker killed in the middle of an upload (SIGKILL: no abort is sent). The next attempt
    starts again from the first byte; the killed one's parts stay an incomplete upload, visible
    only to ListMultipartUploads, until the bucket's lifecycle rule deletes them."""
    path, digest = source(tmp_path, 4 * 8 * MIB)
    settings = {
        "BACKUP_SINK": "object_store",
        "BACKUP_URL": f"s3://{s3_bucket}/{PREFIX}",
        "BACKUP_ENDPOINT": s3_server.endpoint,
        "BACKUP_PATH_STYLE": "true",
        "BACKUP_MAX_BYTES_PER_S": str(8 * MIB),
    }
    script = (
        "import asyncio, sys\n"
        "from hyperdata_sidecar.config import load_settings\n"
        "from hyperdata_sidecar.object_store_sink import ObjectStoreBackupSink\n"
        "sink = ObjectStoreBackupSink.from_settings(load_settings())\n"
        "asyncio.run(sink.backup(sys.argv[1], relpath=sys.argv[2], sha256=sys.argv[3]))\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), **credentials_env(), **settings}
    worker = subprocess.Popen([sys.executable, "-c", script, str(path), RELPATH, digest], cwd=tmp_path, env=env)
    try:
        await until(lambda: parts_stored(s3_server, s3_bucket) >= 1)
    finally:
        worker.kill()
        worker.wait(10)
    assert keys(s3_server, s3_bucket) == [] and open_uploads(s3_server, s3_bucket) == [KEY]

    ref = await sink(s3_server.endpoint, s3_bucket).backup(path, relpath=RELPATH, sha256=digest)

    assert ref == f"s3://{s3_bucket}/{KEY}"
    assert keys(s3_server, s3_bucket) == [KEY]
    assert stored(s3_server, s3_bucket) == (path.read_bytes(), {"sha256": digest})
    assert open_uploads(s3_server, s3_bucket) == [KEY]  # the killed attempt's, for the lifecycle rule


def parts_stored(server: MotoS3, bucket: str) -> int:
    """The parts of the bucket's incomplete uploads that the server has taken."""
    client = server.client()
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    return sum(len(client.list_parts(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])) for u in uploads)


async def until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(condition):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)
