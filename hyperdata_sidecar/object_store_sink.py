"""``BACKUP_SINK=object_store``: sealed files uploaded to S3, an S3-compatible store or GCS.

Built on obstore (the Rust ``object_store`` crate), installed with the ``object-store`` extra. The
target is ``BACKUP_URL`` (``s3://bucket/prefix`` or ``gs://bucket/prefix``); a file backed up as
``<relpath>`` becomes the object ``<prefix>/<relpath>``, its ref ``s3://bucket/<prefix>/<relpath>``.
Credentials come from the client's standard chain (environment, web identity, container and
instance metadata) and are never logged.

How a file goes up:

* The file is read with ``os.pread`` in a worker thread, one chunk at a time, and hashed as it is
  read. The chunks are handed to obstore's upload as an async iterator, paced by the bandwidth limit
  (``BACKUP_MAX_BYTES_PER_S``, :class:`~hyperdata_sidecar.core.token_bucket.TokenBucket`).
* A file larger than one part (:class:`~hyperdata_sidecar.core.upload_plan.UploadPlan`) is a
  multipart upload with ``PARTS_IN_FLIGHT`` parts uploading at once: memory is a few parts whatever
  the file's size. A smaller file is one PUT.
* On S3 every request carries the sha256 of its body (``x-amz-checksum-sha256``), which the store
  checks before it takes a part; the multipart upload is created with the SHA256 checksum algorithm.
  GCS gets no checksum from the client (the crate sends none there); TLS and our own check below
  cover the transfer.
* The sidecar's own sha256 of the bytes sent is compared with the seal's once the last byte is
  read, before the upload is completed; a mismatch fails the iterator instead of ending it, so
  obstore aborts the upload and no object is completed (``hash_mismatch``). The digest is stored as
  the object's metadata ``sha256`` (``x-amz-meta-sha256``, ``x-goog-meta-sha256``), and a HEAD
  after the upload checks the object's size and metadata.
* An object already stored with metadata ``sha256`` equal to the seal's is a no-op.
* The attempt's progress (``BackupProgress``) counts the bytes handed to the upload: at most the
  parts in flight ahead of what the store has acknowledged.

A restart in the middle of an upload starts it again from the first byte. obstore exposes neither
the upload id nor the parts already stored, so an upload cannot be resumed; a failed attempt aborts
its upload (obstore calls AbortMultipartUpload), and one that is killed leaves an incomplete upload
that only ``ListMultipartUploads`` shows. Nothing partial is ever visible as an object: the object
appears whole when the upload completes. The bucket's lifecycle rule
``AbortIncompleteMultipartUpload`` (README, docs/operations.md) deletes the parts left behind.

Every failure is a :class:`~hyperdata_sidecar.backup.BackupError`: refused credentials or
permissions, and a bucket that does not exist, are ``permission``; throttling, server errors and the
network, after the client's own retries, are ``io_error``, which the backup agent retries with
back-off. The source file is only read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from hyperdata_sidecar.backup import BackupError, BackupProgress, BackupSink, _open_source, failure_reason, normalize_relpath
from hyperdata_sidecar.config import ConfigError, ObjectStoreTarget, Settings
from hyperdata_sidecar.core.object_location import ObjectLocation
from hyperdata_sidecar.core.token_bucket import TokenBucket
from hyperdata_sidecar.core.upload_plan import UploadPlan

if TYPE_CHECKING:
    from obstore.store import ClientConfig, GCSConfig, GCSStore, RetryConfig, S3Config, S3Store

SHA256_METADATA = "sha256"  # the object's metadata key for the sidecar's digest
READ_CHUNK_BYTES = 4 * 1024 * 1024  # one pread, one hash update, one paced hand-over
PARTS_IN_FLIGHT = 2  # parts uploading at once; one more fills meanwhile
# The client's own retries of one request (5xx, 429, timeouts, connection errors), before the
# failure reaches the backup agent, whose back-off takes over from there.
RETRY_CONFIG: RetryConfig = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=60),
    "backoff": {"init_backoff": timedelta(milliseconds=200), "max_backoff": timedelta(seconds=5), "base": 2},
}
# A request (one part: 14 MiB for a 60 GB file) that has not ended after 120 s is a failure.
CLIENT_TIMEOUT: ClientConfig = {"connect_timeout": "10s", "timeout": "120s"}
_S3_ERROR_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")


class ObjectStoreBackupSink(BackupSink):
    """Uploads each file to ``location`` in ``store``, verified; see the module docstring."""

    name = "object_store"

    def __init__(
        self,
        store: S3Store | GCSStore,
        location: ObjectLocation,
        *,
        max_bytes_per_s: int = 0,
    ) -> None:
        self.store = store
        self.location = location
        self.max_bytes_per_s = max_bytes_per_s

    @classmethod
    def from_settings(cls, settings: Settings) -> ObjectStoreBackupSink:
        target = settings.backup_store
        if target is None:
            raise ConfigError("BACKUP_URL", "required with BACKUP_SINK=object_store: s3://bucket/prefix or gs://bucket/prefix")
        try:
            store = open_store(target)
        except ImportError as exc:
            raise ConfigError(
                "BACKUP_SINK", f"object_store needs the object-store extra: pip install 'hyperdata-sidecar[object-store]' ({exc})"
            ) from None
        return cls(store, target.location, max_bytes_per_s=target.max_bytes_per_s)

    async def find_existing(self, relpath: str, sha256: str) -> str | None:
        key = self.location.key(normalize_relpath(relpath))
        stored = await self._stored(key)
        return self.location.ref(key) if stored is not None and stored[0] == sha256.lower() else None

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        key = self.location.key(normalize_relpath(relpath))
        ref = self.location.ref(key)
        sha256 = sha256.lower()
        stored = await self._stored(key)
        if stored is not None and stored[0] == sha256:
            return ref
        fd = await asyncio.to_thread(_open_source, Path(local_path))
        try:
            sent = await self._upload(fd, Path(local_path), key, ref, sha256)
        finally:
            os.close(fd)
        stored = await self._stored(key)
        if stored != (sha256, sent):
            found = "no object" if stored is None else f"{stored[1]} bytes with sha256 {stored[0] or 'unset'}"
            raise BackupError("hash_mismatch", f"{ref} holds {found} after {sent} bytes with sha256 {sha256} were sent")
        return ref

    async def _upload(self, fd: int, local_path: Path, key: str, ref: str, sha256: str) -> int:
        """Upload the file open as ``fd``; returns the bytes sent. Raises ``BackupError``."""
        try:
            plan = UploadPlan.for_size(os.fstat(fd).st_size)
        except ValueError as exc:
            raise BackupError("io_error", f"cannot upload {local_path}: {exc}") from exc
        self.progress.via = (
            f"multipart upload, {plan.parts} parts of {plan.part_bytes / 2**20:g} MiB" if plan.multipart else "one PUT"
        )
        chunks = SourceChunks(fd, local_path, sha256, self._pacing(), self.progress)
        try:
            await self.store.put_async(
                key,
                chunks,
                attributes={SHA256_METADATA: sha256},
                use_multipart=plan.multipart,
                chunk_size=plan.part_bytes,
                max_concurrency=PARTS_IN_FLIGHT,
            )
        except Exception as exc:
            # A failure of the source (read error, hash mismatch) is the iterator's: obstore aborts
            # the upload and may report the abort's own error instead.
            if chunks.failure is not None:
                raise chunks.failure from exc
            raise store_error(exc, f"upload to {ref}") from exc
        return chunks.sent

    async def _stored(self, key: str) -> tuple[str, int] | None:
        """The metadata ``sha256`` ("" when unset) and size of the object ``key``; None if absent."""
        try:
            head = await self.store.get_async(key, options={"head": True})
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise store_error(exc, f"HEAD {self.location.ref(key)}") from exc
        return head.attributes.get(SHA256_METADATA, "").lower(), head.meta["size"]

    def _pacing(self) -> Pacing | None:
        return Pacing(self.max_bytes_per_s) if self.max_bytes_per_s else None


class Pacing:
    """The bandwidth limit of one upload: the wait before each chunk, from a token bucket that
    lets one chunk go at once."""

    def __init__(self, bytes_per_s: int) -> None:
        self.bucket = TokenBucket(bytes_per_s, READ_CHUNK_BYTES, time.monotonic())

    async def before(self, nbytes: int) -> None:
        wait = self.bucket.take(nbytes, time.monotonic())
        if wait > 0:
            await asyncio.sleep(wait)


class SourceChunks:
    """The source file as an async iterator of chunks for obstore's upload, read with ``os.pread``
    in a worker thread and hashed as read.

    Past the last byte it compares the digest with ``sha256``: a mismatch raises (and is kept in
    ``failure``) instead of ending the iteration, so the upload is aborted, never completed. A read
    error does the same.
    """

    def __init__(self, fd: int, path: Path, sha256: str, pacing: Pacing | None, progress: BackupProgress) -> None:
        self.fd = fd
        self.path = path
        self.sha256 = sha256
        self.pacing = pacing
        self.progress = progress
        self.sent = 0
        self.failure: BackupError | None = None
        self._digest = hashlib.sha256()

    def __aiter__(self) -> SourceChunks:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await asyncio.to_thread(self._read)
        except OSError as err:
            what = f"cannot read source {self.path}: {err.strerror or err}"
            raise self._failed(failure_reason(err, on_source=True), what) from err
        if not chunk:
            actual = self._digest.hexdigest()
            if actual != self.sha256:
                raise self._failed(
                    "hash_mismatch", f"source {self.path} changed: it hashes to {actual}, the seal says {self.sha256}"
                )
            raise StopAsyncIteration
        if self.pacing is not None:
            await self.pacing.before(len(chunk))
        self.sent += len(chunk)
        self.progress.advance(len(chunk))
        return chunk

    def _read(self) -> bytes:
        chunk = os.pread(self.fd, READ_CHUNK_BYTES, self.sent)
        self._digest.update(chunk)
        return chunk

    def _failed(self, reason: str, message: str) -> BackupError:
        self.failure = BackupError(reason, message)
        return self.failure


def store_error(exc: BaseException, what: str) -> BackupError:
    """The ``BackupError`` for an error of the store's client during ``what``.

    Refused credentials (401) and permissions (403), and a bucket that does not exist (404 on a
    write), are ``permission``: one line that names the operation and the store's error code, never
    the error's text, which may quote the access key's id. Everything else (throttling, 5xx after
    the client's retries, timeouts, the network, an upload the store no longer knows) is
    ``io_error``.
    """
    from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

    text = str(exc)
    code = _S3_ERROR_CODE.search(text)
    named = f" ({code.group(1)})" if code else ""
    if isinstance(exc, UnauthenticatedError | PermissionDeniedError):
        return BackupError("permission", f"{what}: the store refused the credentials or their permissions{named}")
    if isinstance(exc, FileNotFoundError) and (code is None or code.group(1) == "NoSuchBucket"):
        return BackupError("permission", f"{what}: the bucket does not exist{named}")
    # The client's text ends in a debug dump of the same error: the line keeps what comes before.
    summary = " ".join(text.split(" Debug source:")[0].split())[:300]
    return BackupError("io_error", f"{what}: {type(exc).__name__}: {summary}")


def open_store(target: ObjectStoreTarget) -> S3Store | GCSStore:
    """The obstore client for ``target``; credentials from the client's standard chain."""
    from obstore.store import GCSStore, S3Store

    client: ClientConfig = {**CLIENT_TIMEOUT, "allow_http": target.endpoint.startswith("http://")}
    location = target.location
    if location.scheme == "gs":
        gcs: GCSConfig = {"base_url": target.endpoint} if target.endpoint else {}
        return GCSStore(location.bucket, config=gcs, client_options=client, retry_config=RETRY_CONFIG)
    s3: S3Config = {"checksum_algorithm": "sha256", "virtual_hosted_style_request": not target.path_style}
    if target.endpoint:
        s3["endpoint"] = location.s3_endpoint(target.endpoint, path_style=target.path_style)
    if target.region:
        s3["region"] = target.region
    return S3Store(location.bucket, config=s3, client_options=client, retry_config=RETRY_CONFIG)
