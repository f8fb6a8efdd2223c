"""The object-store sink's logic that needs no server: how the store's errors become backup
failures, how the source is read and checked, and how the sink is built from the settings. Its
uploads are tested against a real server in tests/integration/test_object_store_uploads.py."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from obstore.exceptions import GenericError, PermissionDeniedError, UnauthenticatedError

from hyperdata_sidecar.backup import BackupError, BackupProgress, make_sink
from hyperdata_sidecar.config import ConfigError, load_settings
from hyperdata_sidecar.object_store_sink import READ_CHUNK_BYTES, ObjectStoreBackupSink, SourceChunks, store_error

WHAT = "upload to s3://archive/hl/13"


def test_refused_credentials_are_permission_naming_the_code_but_nothing_of_the_text():
    exc = PermissionDeniedError(
        "The operation lacked the necessary privileges: <Error><Code>InvalidAccessKeyId</Code>"
        "<AWSAccessKeyId>AKIAEXAMPLEKEY</AWSAccessKeyId></Error>"
    )

    err = store_error(exc, WHAT)

    assert err.reason == "permission"
    assert str(err) == f"permission: {WHAT}: the store refused the credentials or their permissions (InvalidAccessKeyId)"


def test_unauthenticated_is_permission_too():
    assert store_error(UnauthenticatedError("401 Unauthorized"), WHAT).reason == "permission"


def test_a_missing_bucket_is_permission_saying_so():
    err = store_error(FileNotFoundError("Object at location hl/13 not found: <Code>NoSuchBucket</Code>"), WHAT)

    assert str(err) == f"permission: {WHAT}: the bucket does not exist (NoSuchBucket)"


@pytest.mark.parametrize(
    "exc",
    [
        FileNotFoundError("Object at location hl/13 not found: <Code>NoSuchUpload</Code>"),
        GenericError(
            "Generic S3 error: Error after 3 retries in 1.4s,\n  max_retries:3: HTTP status server error (503 Slow Down)"
        ),
        GenericError(
            "Generic S3 error: Error performing HEAD http://127.0.0.1:9/a in 1s - error sending request "
            'Debug source: Generic { store: "S3", source: RetryError( RetryErrorImpl { method: HEAD } ) }'
        ),
        TimeoutError("deadline has elapsed"),
    ],
)
def test_throttling_server_errors_and_the_network_are_io_errors_in_one_line(exc):
    err = store_error(exc, WHAT)

    assert err.reason == "io_error"
    assert str(err).startswith(f"io_error: {WHAT}: {type(exc).__name__}: ") and "\n" not in str(err)
    assert "Debug source" not in str(err)  # the client's dump of the same error is left out


# -- the source, read and checked ----------------------------------------------------------------


def chunks_of(path: Path, sha256: str) -> tuple[SourceChunks, BackupProgress]:
    progress = BackupProgress("13")
    fd = os.open(path, os.O_RDONLY)
    return SourceChunks(fd, path, sha256, None, progress), progress


async def read_all(chunks: SourceChunks) -> bytes:
    try:
        return b"".join([chunk async for chunk in chunks])
    finally:
        os.close(chunks.fd)


async def test_the_source_is_read_whole_in_chunks_and_counted_as_sent(tmp_path: Path):
    path = tmp_path / "13"
    path.write_bytes(os.urandom(2 * READ_CHUNK_BYTES + 7))
    chunks, progress = chunks_of(path, hashlib.sha256(path.read_bytes()).hexdigest())

    assert await read_all(chunks) == path.read_bytes()
    assert chunks.sent == progress.done_bytes == path.stat().st_size
    assert chunks.failure is None


async def test_a_source_that_does_not_hash_to_its_seal_fails_instead_of_ending(tmp_path: Path):
    path = tmp_path / "13"
    path.write_bytes(b"changed after the seal\n")
    chunks, _ = chunks_of(path, "0" * 64)

    with pytest.raises(BackupError) as err:
        await read_all(chunks)

    assert err.value is chunks.failure and err.value.reason == "hash_mismatch"


async def test_a_read_error_of_the_source_fails_with_its_reason(tmp_path: Path):
    chunks, _ = chunks_of(tmp_path, "0" * 64)  # a directory: pread fails with EISDIR

    with pytest.raises(BackupError) as err:
        await read_all(chunks)

    assert err.value is chunks.failure and err.value.reason == "io_error"


# -- built from the settings ----------------------------------------------------------------------


def test_the_sink_is_registered_and_built_from_the_settings():
    settings = load_settings({"BACKUP_SINK": "object_store", "BACKUP_URL": "gs://archive/hl", "BACKUP_MAX_BYTES_PER_S": "1000"})

    sink = make_sink("object_store", settings)

    assert isinstance(sink, ObjectStoreBackupSink)
    assert (str(sink.location), sink.max_bytes_per_s) == ("gs://archive/hl", 1000)


def test_without_the_extra_installed_the_sink_says_which_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "obstore.store", None)  # what an environment without obstore imports
    settings = load_settings({"BACKUP_SINK": "object_store", "BACKUP_URL": "s3://archive"})

    with pytest.raises(ConfigError) as err:
        make_sink("object_store", settings)

    assert err.value.setting == "BACKUP_SINK"
    assert "pip install 'hyperdata-sidecar[object-store]'" in str(err.value)
