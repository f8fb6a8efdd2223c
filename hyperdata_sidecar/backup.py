"""Backup sinks: where a sealed hour file is copied once it is whole, immutable and checksummed.

The backup agent hands every sealed file to one ``BackupSink``: the one registered under the name
``BACKUP_SINK`` in the ``hyperdata_sidecar.backup_sinks`` entry-point group. This project registers
three (``pyproject.toml``):

* ``local`` (``LocalBackupSink``) copies it to ``BACKUP_DIR/<relative path>``, atomically and verified;
* ``object_store`` (``ObjectStoreBackupSink`` in :mod:`hyperdata_sidecar.object_store_sink`, with the
  ``object-store`` extra) uploads it to S3, an S3-compatible store or GCS;
* ``none`` (``NoBackupSink``) disables backups.

A sink never deletes or alters the source file, and ``LocalBackupSink`` never writes outside
``BACKUP_DIR``: relative paths are normalized, and no symlink below ``BACKUP_DIR`` is followed.

Writing a sink of your own
--------------------------
A sink for another store is a distribution of its own, installed in the sidecar's environment.
``tests/integration/sink_plugin/`` is a complete one (a test installs it), and the shipped
``object_store`` sink is the model of one that uploads (checksums sent, ``sha256`` metadata, the
store's errors mapped to ``REASONS``, reads in a thread).

1. Subclass ``BackupSink`` (its docstring is the contract), set ``name`` and implement
   ``backup()``: copy ``local_path`` under ``relpath``, check it against ``sha256``, and return a
   URL naming the copy as the remote ref.
2. Keep the contract: a copy already present with the expected ``sha256`` is a no-op returning the
   same ref; every failure is a ``BackupError`` with one of the ``REASONS`` (throttling and network
   errors are ``io_error``: the agent retries with backoff).
3. Run blocking calls in a thread (``asyncio.to_thread``) or use an async client; a multi-GB
   upload must not stall the event loop that tails the node's files.
4. Optionally override ``find_existing()`` with a cheap metadata lookup so the agent can count
   no-op backups.
5. Override ``create()`` to read the sink's own settings from the environment — ``faust.ini``
   accepts only the sidecar's keys — and raise ``ConfigError`` naming the one that is missing or
   wrong. Credentials come from the client's usual chain and are never logged.
6. Register the class in the distribution's ``pyproject.toml``, under the name it sets::

       [project.entry-points."hyperdata_sidecar.backup_sinks"]
       acme = "acme_backup:AcmeBackupSink"

   then ``pip install`` it next to the sidecar (or in a layer on its image) and set ``BACKUP_SINK=acme``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import errno
import hashlib
import os
import secrets
import stat
from importlib.metadata import entry_points
from pathlib import Path, PurePosixPath

from hyperdata_sidecar.config import BACKUP_SINK_GROUP, ConfigError, Settings, backup_sink_names

_CHUNK_BYTES = 4 * 1024 * 1024  # what this process reads (or copies, without the kernel) at a time
# What the kernel copies per call: a step of the progress, and what the read-back finds in the page cache.
_COPY_STEP = 64 * 1024 * 1024
# copy_file_range's errors that mean "not between these two files" (another filesystem; a kernel or a
# seccomp profile without it; a filesystem without it): the copy goes on in user space.
_REFUSALS = frozenset({errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP})
VIA_KERNEL = "copy_file_range"
VIA_USER_SPACE = "read/write"
_TEMP_SUFFIX = ".partial"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

REASONS = ("io_error", "no_space", "permission", "hash_mismatch", "source_missing", "unsafe_path")


class BackupError(Exception):
    """A backup that did not happen; ``reason`` is one word of ``REASONS``, the message is for humans."""

    def __init__(self, reason: str, message: str) -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown backup failure reason {reason!r}; expected one of {REASONS}")
        super().__init__(message)
        self.reason = reason
        self.message = message

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def failure_reason(err: OSError, *, on_source: bool) -> str:
    """The ``BackupError`` reason for an OS error raised while reading the source or writing the copy."""
    if err.errno == errno.ENOENT and on_source:
        return "source_missing"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "no_space"
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "permission"
    return "io_error"


class BackupProgress:
    """How far the running attempt has copied its file. The backup agent gives the sink a new one
    before each ``backup()`` call (``sink.progress``); the sink calls :meth:`advance` as bytes
    reach the target. Attempts run one at a time, so one sink holds one. A sink may say how it
    moves the bytes in ``via`` (the local sink: ``copy_file_range``, or ``read/write`` and why);
    the agent's ``backup`` log line carries it."""

    __slots__ = ("relpath", "total_bytes", "done_bytes", "started_at", "via")

    def __init__(self, relpath: str = "", total_bytes: int = 0, started_at: float = 0.0) -> None:
        self.relpath = relpath
        self.total_bytes = total_bytes
        self.done_bytes = 0
        self.started_at = started_at  # time.monotonic() when the attempt began
        self.via = ""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more of the file reached the target."""
        self.done_bytes += nbytes


class BackupSink(abc.ABC):
    """Where sealed hour files are backed up; one instance serves the whole sidecar.

    A sink is a plug-in: its class is registered in the ``hyperdata_sidecar.backup_sinks``
    entry-point group under its ``name``, and ``BACKUP_SINK=<name>`` selects it. Its lifecycle:

    ``from_settings(settings)``
        Called once, when the sidecar is installed on its Faust app (before the worker connects to
        Kafka), with the sidecar's ``Settings``. Returns the sink. The default calls
        ``create(settings.backup_dir)``, which a plug-in overrides (``BACKUP_DIR``, which a sink
        that stores elsewhere ignores). Either raises ``ConfigError`` naming the setting when the
        sink's own configuration is missing or invalid; the worker then stops with that one line
        (exit 2), as it does for any other exception here, reported as a ``BACKUP_SINK`` error.
    ``find_existing(relpath, sha256)``
        Called by the backup agent for each sealed file before ``backup()``, to tell a no-op from a
        fresh copy. Returns the ref of a copy already stored under ``relpath`` with ``sha256``, else
        ``None``. Raises ``BackupError`` like ``backup()``.
    ``backup(local_path, relpath=..., sha256=...)``
        Called by the backup agent once per sealed file, after its seal is published, unless
        ``find_existing()`` found the copy; called again for the same file after a failure, a
        restart or a replayed rotation record. ``local_path`` is the file, ``relpath`` its path
        relative to WATCH_DIR, ``sha256`` the seal's digest. Returns a remote ref (a URL-like string
        naming the copy) once the copy is durable and verified against ``sha256``; a copy that
        already exists with that hash is left as it is and its ref returned (the call is
        idempotent). Raises ``BackupError`` for every failure: the agent records it in the
        ``sidecar-backups`` table, counts it (``hyperdata_sidecar_backups_total{result="failed"}``)
        and retries with backoff, except after ``source_missing``.

    Every call runs on the worker's event loop: blocking I/O belongs in a thread. A sink never
    deletes or alters the source file. The agent records ``name`` and the ref in ``sidecar-backups``.
    """

    name: str
    #: The running attempt's progress (:class:`BackupProgress`), replaced by the agent before each
    #: ``backup()``; a sink that can tell calls ``self.progress.advance(nbytes)``.
    progress: BackupProgress = BackupProgress()

    @classmethod
    def from_settings(cls, settings: Settings) -> BackupSink:
        """Build the sink from the sidecar's settings; see the class contract."""
        return cls.create(settings.backup_dir)

    @classmethod
    def create(cls, backup_dir: Path) -> BackupSink:
        """Build the sink for ``BACKUP_DIR``; see the class contract. The default takes no arguments."""
        return cls()

    @abc.abstractmethod
    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        """Copy ``local_path`` to this sink under ``relpath`` and verify it; see the class contract."""

    async def find_existing(self, relpath: str, sha256: str) -> str | None:
        """The ref of a copy already stored under ``relpath`` with ``sha256``, else ``None``.

        The default finds nothing, which is always correct: ``backup()`` is idempotent on its own.
        """
        return None


class NoBackupSink(BackupSink):
    """``BACKUP_SINK=none``: backups are disabled; every call returns ``""`` and touches nothing."""

    name = "none"

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        return ""


class LocalBackupSink(BackupSink):
    """``BACKUP_SINK=local``: copies to ``root/<relpath>`` (temp file, fsync, rename, fsync dir).

    The kernel copies (``copy_file_range``: a reflink where the filesystem shares extents, as btrfs
    and XFS do, else a copy inside the kernel), 64 MiB at a time; where it refuses the two files
    (``EXDEV``: ``BACKUP_DIR`` on another filesystem than ``WATCH_DIR``; ``ENOSYS``, ``EOPNOTSUPP``)
    this process copies them with ``pread``/``pwrite``, and ``progress.via`` (in the agent's ``backup``
    log line) says so and why. Any other error is the attempt's failure.

    Each step is read back from the copy and hashed as soon as it is written; a copy whose hash is
    not ``sha256`` fails with ``hash_mismatch`` (the source changed after its seal, or the copy is
    damaged) and a failure leaves no partial file behind. So the source is read once, by the kernel
    (not at all for a reflink), and the copy once, mostly from the page cache. That one read of the
    copy stays, reflink or not: the seal's hash is the only proof the copy holds the sealed bytes,
    and a reflink shares the extents of the source as it is now, which may have changed since its
    seal. The remote ref is the copy's ``file://`` URI. Blocking I/O runs in a worker thread.
    """

    name = "local"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.progress = BackupProgress()

    @classmethod
    def create(cls, backup_dir: Path) -> LocalBackupSink:
        return cls(backup_dir)

    async def backup(self, local_path: Path, *, relpath: str, sha256: str) -> str:
        return await asyncio.to_thread(self._backup, Path(local_path), relpath, sha256.lower(), self.progress)

    async def find_existing(self, relpath: str, sha256: str) -> str | None:
        return await asyncio.to_thread(self._find_existing, relpath, sha256.lower())

    # -- blocking work, run in a thread ------------------------------------------------------

    def _backup(self, local_path: Path, relpath: str, sha256: str, progress: BackupProgress) -> str:
        parts = normalize_relpath(relpath)
        src_fd = _open_source(local_path)
        try:
            try:
                dir_fd = self._open_target_dir(parts[:-1], create=True)
            except OSError as err:
                what = f"cannot prepare the directory for {relpath!r}"
                raise _error(err, on_source=False, what=what) from err
            try:
                if not _matching_copy(dir_fd, parts[-1], sha256, relpath):
                    _discard_stale_temps(dir_fd, parts[-1])
                    _copy_verified(src_fd, dir_fd, parts[-1], sha256, local_path, progress)
            finally:
                os.close(dir_fd)
        finally:
            os.close(src_fd)
        return self._ref(parts)

    def _find_existing(self, relpath: str, sha256: str) -> str | None:
        parts = normalize_relpath(relpath)
        try:
            dir_fd = self._open_target_dir(parts[:-1], create=False)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise _error(err, on_source=False, what=f"cannot open the directory of {relpath!r}") from err
        try:
            return self._ref(parts) if _matching_copy(dir_fd, parts[-1], sha256, relpath) else None
        finally:
            os.close(dir_fd)

    def _ref(self, parts: tuple[str, ...]) -> str:
        return self.root.absolute().joinpath(*parts).as_uri()

    def _open_target_dir(self, dirs: tuple[str, ...], *, create: bool) -> int:
        """Open ``root/<dirs>`` one component at a time, never following a symlink below root.

        Walking by directory fd (rather than checking a path, then using it) means a symlink
        swapped in between the check and the write cannot redirect the copy. The root itself
        may be a symlink: the operator chose it. Raises ``OSError`` or ``BackupError``.
        """
        if create:
            os.makedirs(self.root, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for name in dirs:
            fd = _enter_dir(fd, name, create=create)
        return fd


# -- path safety ------------------------------------------------------------------------------


def normalize_relpath(relpath: str) -> tuple[str, ...]:
    """The components of a backup's relative path; raises ``BackupError("unsafe_path")``.

    Empty and ``.`` components are dropped; absolute paths, ``..`` and NUL bytes are rejected,
    so the target is always ``root`` joined with plain names.
    """
    if not relpath or relpath.startswith("/") or "\0" in relpath:
        raise BackupError("unsafe_path", f"backup path must be relative and non-empty: {relpath!r}")
    parts = tuple(p for p in PurePosixPath(relpath).parts if p != ".")
    if not parts or ".." in parts:
        raise BackupError("unsafe_path", f"backup path must stay below the backup root: {relpath!r}")
    return parts


def _enter_dir(parent_fd: int, name: str, *, create: bool) -> int:
    """Open directory ``name`` inside ``parent_fd`` (creating it if asked) and close the parent."""
    try:
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
                os.fsync(parent_fd)  # the new entry must survive a crash like the file below it
            except FileExistsError:
                pass
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as err:
            # O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR on Linux, ELOOP elsewhere.
            if err.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink(parent_fd, name):
                raise BackupError("unsafe_path", f"{name!r} below the backup root is a symlink") from err
            raise
    finally:
        os.close(parent_fd)


def _is_symlink(dir_fd: int, name: str) -> bool:
    return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)


# -- copy and verify --------------------------------------------------------------------------


def _open_source(local_path: Path) -> int:
    """The hour file opened for reading. Something else now at its name (a symlink, which is not
    followed; a pipe, which is not waited on; a directory) is ``source_missing``: the file is gone."""
    try:
        fd = os.open(local_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise BackupError("source_missing", f"{local_path} is a symlink now, not the hour file") from err
        raise _error(err, on_source=True, what=f"cannot open source {local_path}") from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise BackupError("source_missing", f"{local_path} is no longer a regular file")
    os.set_blocking(fd, True)
    return fd


def _matching_copy(dir_fd: int, name: str, sha256: str, relpath: str) -> bool:
    """True if ``name`` in ``dir_fd`` is a regular file whose bytes hash to ``sha256``."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise BackupError("unsafe_path", f"backup target {relpath!r} is a symlink") from err
        raise _error(err, on_source=False, what=f"cannot open existing backup {relpath!r}") from err
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BackupError("io_error", f"backup target {relpath!r} exists and is not a regular file")
        return _hash_fd(fd) == sha256
    except OSError as err:
        raise _error(err, on_source=False, what=f"cannot read existing backup {relpath!r}") from err
    finally:
        os.close(fd)


def _copy_verified(src_fd: int, dir_fd: int, name: str, sha256: str, local_path: Path, progress: BackupProgress) -> None:
    """Copy ``src_fd`` to ``name`` in ``dir_fd`` through a temp file; no partial file survives a failure."""
    tmp = _temp_name(name)
    try:
        tmp_fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except OSError as err:
        raise _error(err, on_source=False, what=f"cannot create a temp file for {name!r}") from err
    try:
        try:
            copied = _copy_and_hash(src_fd, tmp_fd, progress)
            if copied != sha256:
                raise BackupError(
                    "hash_mismatch",
                    f"the copy of {local_path} hashes to {copied}, the seal says {sha256}:"
                    " the source changed after its seal, or the copy is damaged",
                )
            os.fsync(tmp_fd)
        finally:
            os.close(tmp_fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.fsync(dir_fd)
    except OSError as err:
        _discard(dir_fd, tmp)
        raise _error(err, on_source=False, what=f"cannot copy {local_path} to the backup") from err
    except BaseException:
        _discard(dir_fd, tmp)
        raise


def _copy_and_hash(src_fd: int, dst_fd: int, progress: BackupProgress) -> str:
    """Copy every byte of ``src_fd`` to ``dst_fd``, one step at a time, each step read back from the
    copy and hashed right after it is written (so the read finds it in the page cache); return the
    sha256 of the copy. The kernel copies (``copy_file_range``) unless it refuses these two files,
    then this process does; ``progress.via`` says which, ``progress`` counts each step."""
    digest = hashlib.sha256()
    buf = bytearray(_CHUNK_BYTES)
    in_kernel = True
    progress.via = VIA_KERNEL
    offset = 0
    while True:
        if in_kernel:
            try:
                n = os.copy_file_range(src_fd, dst_fd, _COPY_STEP, offset, offset)
            except OSError as err:
                if err.errno not in _REFUSALS:
                    raise
                in_kernel = False  # a refusal copies nothing: the same step is made in user space
                progress.via = f"{VIA_USER_SPACE} (copy_file_range refused: {errno.errorcode[err.errno]})"
                continue
        else:
            n = _user_space_copy(src_fd, dst_fd, offset, buf)
        if n == 0:
            return digest.hexdigest()
        _hash_range(dst_fd, offset, n, digest, buf)
        offset += n
        progress.advance(n)


def _user_space_copy(src_fd: int, dst_fd: int, offset: int, buf: bytearray) -> int:
    """Up to one buffer from ``offset`` read and written by this process; 0 at the end of the source."""
    n = os.preadv(src_fd, [buf], offset)
    view = memoryview(buf)
    written = 0
    while written < n:
        written += os.pwrite(dst_fd, view[written:n], offset + written)
    return n


def _hash_range(fd: int, offset: int, length: int, digest: hashlib._Hash, buf: bytearray) -> None:
    """Feed ``length`` bytes of ``fd`` from ``offset`` into ``digest``; a file shorter than that is
    an ``OSError`` (the copy lost bytes it was just given)."""
    view = memoryview(buf)
    end = offset + length
    while offset < end:
        n = os.preadv(fd, [view[: min(len(buf), end - offset)]], offset)
        if n == 0:
            raise OSError(errno.EIO, f"the copy ends at byte {offset}, {end - offset} bytes short")
        digest.update(view[:n])
        offset += n


def _hash_fd(fd: int) -> str:
    digest = hashlib.sha256()
    buf = bytearray(_CHUNK_BYTES)
    view = memoryview(buf)
    while n := os.readv(fd, [buf]):
        digest.update(view[:n])
    return digest.hexdigest()


def _temp_name(name: str) -> str:
    return f".{name}.{secrets.token_hex(6)}{_TEMP_SUFFIX}"


def _discard_stale_temps(dir_fd: int, name: str) -> None:
    """Remove temp files a killed earlier attempt left for ``name``; only this sink writes them."""
    prefix = f".{name}."
    for entry in os.listdir(dir_fd):
        if entry.startswith(prefix) and entry.endswith(_TEMP_SUFFIX):
            _discard(dir_fd, entry)


def _discard(dir_fd: int, tmp: str) -> None:
    # Best effort: when even unlink fails (read-only remount), the original error is the one to report.
    with contextlib.suppress(OSError):
        os.unlink(tmp, dir_fd=dir_fd)


def _error(err: OSError, *, on_source: bool, what: str) -> BackupError:
    return BackupError(failure_reason(err, on_source=on_source), f"{what}: {err.strerror or err}")


# -- selection --------------------------------------------------------------------------------


def make_sink(name: str, settings: Settings) -> BackupSink:
    """The sink registered as ``name`` in the ``hyperdata_sidecar.backup_sinks`` entry points, built
    from ``settings``.

    Raises ``ConfigError`` for ``BACKUP_SINK`` when no distribution or more than one registers
    ``name``, when the entry point cannot be loaded or is not a ``BackupSink`` class whose ``name``
    is ``name``, or when its ``from_settings()`` fails with anything but a ``ConfigError`` of its own.
    """
    found = list(entry_points(group=BACKUP_SINK_GROUP, name=name))
    if not found:
        registered = ", ".join(backup_sink_names()) or "none at all"
        raise ConfigError("BACKUP_SINK", f"no backup sink is registered as {name!r} (registered: {registered})")
    if len(found) > 1:
        owners = ", ".join(sorted(f"{ep.value} from {ep.dist.name if ep.dist else '?'}" for ep in found))
        raise ConfigError("BACKUP_SINK", f"{name!r} is registered more than once: {owners}")
    entry = found[0]
    try:
        sink_class = entry.load()
    except Exception as exc:
        raise ConfigError("BACKUP_SINK", f"cannot load sink {name!r} ({entry.value}): {type(exc).__name__}: {exc}") from exc
    if not (isinstance(sink_class, type) and issubclass(sink_class, BackupSink)):
        raise ConfigError("BACKUP_SINK", f"sink {name!r} ({entry.value}) is not a BackupSink subclass")
    if getattr(sink_class, "name", None) != name:
        raise ConfigError("BACKUP_SINK", f"sink {name!r} ({entry.value}) names itself {getattr(sink_class, 'name', None)!r}")
    try:
        return sink_class.from_settings(settings)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError("BACKUP_SINK", f"sink {name!r} could not be created: {type(exc).__name__}: {exc}") from exc
