"""Backup sinks: verified atomic local copies (by the kernel, or in user space where it refuses),
each file read once, idempotence, failure reasons, and path safety."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import distribution
from pathlib import Path

import pytest

from hyperdata_sidecar.backup import (
    VIA_KERNEL,
    VIA_USER_SPACE,
    BackupError,
    BackupProgress,
    LocalBackupSink,
    NoBackupSink,
    failure_reason,
    make_sink,
    normalize_relpath,
)
from hyperdata_sidecar.config import BACKUP_SINK_GROUP, ConfigError, load_settings

RELPATH = "node_fills_streaming/hourly/20260610/13"
CONTENT = b'{"block_number":1,"events":[]}\n' * 5000
# More than one of the kernel's 64 MiB steps, and not a whole number of pages: random bytes, so a
# step copied to the wrong offset cannot hash the same.
LARGE_SIZE = 64 * 1024 * 1024 + 12_293


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(path: Path) -> tuple[bytes, int, int, int]:
    """What 'the source is untouched' means: same bytes, inode, size and mtime."""
    st = path.stat()
    return path.read_bytes(), st.st_ino, st.st_size, st.st_mtime_ns


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir())


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "watch" / RELPATH
    path.parent.mkdir(parents=True)
    path.write_bytes(CONTENT)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "backups"


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A file of LARGE_SIZE random bytes, and its sha256 (written once for the module)."""
    data = random.Random(7).randbytes(LARGE_SIZE)
    path = tmp_path_factory.mktemp("large") / "13"
    path.write_bytes(data)
    return path, sha(data)


def refuse_copy_file_range(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """``os.copy_file_range`` fails with ``code``, as a kernel that cannot copy these files does."""

    def refused(*_args: object) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "copy_file_range", refused)


@pytest.fixture(params=["kernel", "user space"])
def copying(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with each copy: the kernel's, and this process's where the kernel refuses
    (``copy_file_range`` failing with ENOSYS, as under a seccomp profile without it). The ``via``
    the sink reports for it."""
    if request.param == "kernel":
        return VIA_KERNEL
    refuse_copy_file_range(monkeypatch, errno.ENOSYS)
    return f"{VIA_USER_SPACE} (copy_file_range refused: ENOSYS)"


def rchar() -> int:
    """Bytes this process has read so far through read-like system calls, copy_file_range included
    (``rchar`` of /proc/self/io: every thread, page cache or disk alike)."""
    line = next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:"))
    return int(line.split()[1])


class Reads:
    """Bytes read from each file through the calls the sink reads with (``os.copy_file_range``: what
    the kernel read from its source; ``os.preadv``, ``os.readv``), by the file's path at the time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes: dict[str, int] = {}
        for name in ("copy_file_range", "preadv", "readv"):  # each takes the fd it reads first
            monkeypatch.setattr(os, name, self._counting(getattr(os, name)))

    def _counting(self, call: Callable[..., int]) -> Callable[..., int]:
        def counted(fd: int, *args: object) -> int:
            n = call(fd, *args)
            path = os.readlink(f"/proc/self/fd/{fd}")
            self.bytes[path] = self.bytes.get(path, 0) + n
            return n

        return counted

    def of(self, source: Path, root: Path) -> dict[str, int]:
        """Bytes read from ``source`` and from the files below ``root`` (the copy and its temp name)."""
        below = sum(n for path, n in self.bytes.items() if Path(path).is_relative_to(root.resolve()))
        return {"source": self.bytes.get(str(source.resolve()), 0), "copy": below}


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Mount a small tmpfs with the given options: a real full or read-only disk, even for root."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)]
        done = subprocess.run(command, capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", str(point)], check=True)


# -- copying -----------------------------------------------------------------------------------


async def test_backup_copies_the_file_under_its_relative_path(source: Path, root: Path, copying: str) -> None:
    ref = await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert (root / RELPATH).read_bytes() == CONTENT
    assert ref == (root / RELPATH).as_uri()


async def test_backup_leaves_only_the_final_file(source: Path, root: Path) -> None:
    await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert all_files(root) == [RELPATH]


async def test_backup_accepts_an_uppercase_hash(source: Path, root: Path) -> None:
    await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT).upper())

    assert (root / RELPATH).read_bytes() == CONTENT


async def test_backup_of_an_empty_file_is_an_empty_copy(tmp_path: Path, root: Path, copying: str) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")

    await LocalBackupSink(root).backup(empty, relpath="t/hourly/20260610/0", sha256=sha(b""))

    assert (root / "t/hourly/20260610/0").read_bytes() == b""


async def test_redundant_separators_and_dots_in_the_relpath_are_normalized(source: Path, root: Path) -> None:
    await LocalBackupSink(root).backup(source, relpath="./a//b/./c", sha256=sha(CONTENT))

    assert all_files(root) == ["a/b/c"]


async def test_backup_never_alters_the_source(source: Path, root: Path, copying: str) -> None:
    before = snapshot(source)

    await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert snapshot(source) == before


async def test_the_backup_root_may_be_a_symlink_chosen_by_the_operator(source: Path, tmp_path: Path) -> None:
    real = tmp_path / "disk2"
    real.mkdir()
    link = tmp_path / "backups-link"
    link.symlink_to(real)

    await LocalBackupSink(link).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert (real / RELPATH).read_bytes() == CONTENT


# -- the kernel's copy, one read of each file, the copy in user space ---------------------------


async def test_a_file_of_several_steps_is_copied_whole_and_its_progress_counts_every_byte(
    large: tuple[Path, str], root: Path, copying: str
) -> None:
    path, digest = large
    sink = LocalBackupSink(root)
    sink.progress = BackupProgress(RELPATH, LARGE_SIZE)

    await sink.backup(path, relpath=RELPATH, sha256=digest)

    assert sha((root / RELPATH).read_bytes()) == digest
    assert (sink.progress.done_bytes, sink.progress.via) == (LARGE_SIZE, copying)


async def test_the_source_is_read_once_and_the_copy_once(
    large: tuple[Path, str], root: Path, copying: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, digest = large
    reads = Reads(monkeypatch)
    before = rchar()

    await LocalBackupSink(root).backup(path, relpath=RELPATH, sha256=digest)

    read = rchar() - before
    assert reads.of(path, root) == {"source": LARGE_SIZE, "copy": LARGE_SIZE}
    # Whatever reads it, by whichever call: nothing else read the file again (a third of it would show).
    assert 2 * LARGE_SIZE <= read < 2 * LARGE_SIZE + LARGE_SIZE // 3


@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP], ids=errno.errorcode.get)
async def test_a_refused_kernel_copy_is_made_in_user_space_and_says_why(
    source: Path, root: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    refuse_copy_file_range(monkeypatch, code)
    sink = LocalBackupSink(root)

    await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert (root / RELPATH).read_bytes() == CONTENT
    assert sink.progress.via == f"read/write (copy_file_range refused: {errno.errorcode[code]})"


async def test_a_backup_dir_on_another_filesystem_is_copied_in_user_space(source: Path, tmpfs: Callable[[str], Path]) -> None:
    # Since Linux 5.19 copy_file_range refuses two filesystems of which the target's has no copy of its own (EXDEV).
    disk = tmpfs("size=1m")
    sink = LocalBackupSink(disk)

    await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert (disk / RELPATH).read_bytes() == CONTENT
    assert sink.progress.via == "read/write (copy_file_range refused: EXDEV)"


async def test_any_other_error_of_the_kernel_copy_fails_the_attempt_and_leaves_nothing(
    source: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refuse_copy_file_range(monkeypatch, errno.EIO)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "io_error"
    assert all_files(root) == []


async def test_a_copy_that_reads_back_short_fails_as_io_error_and_leaves_nothing(
    source: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = os.preadv

    def short_copy(fd: int, buffers: list[bytearray], offset: int) -> int:
        # The temp copy reads as ending early, as a file truncated under the sink would.
        return 0 if os.readlink(f"/proc/self/fd/{fd}").endswith(".partial") else read(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", short_copy)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "io_error"
    assert "bytes short" in failure.value.message
    assert all_files(root) == []


async def test_a_full_disk_under_the_kernel_copy_is_no_space_and_leaves_no_temp_file(
    tmpfs: Callable[[str], Path],
) -> None:
    disk = tmpfs("size=256k")  # the source (165 kB) and what is left for its copy: one filesystem
    source = disk / "watch" / RELPATH
    source.parent.mkdir(parents=True)
    source.write_bytes(CONTENT)
    sink = LocalBackupSink(disk / "backups")

    with pytest.raises(BackupError) as failure:
        await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "no_space"
    assert sink.progress.via == VIA_KERNEL
    assert all_files(disk / "backups") == []


# -- idempotence -------------------------------------------------------------------------------


async def test_a_second_backup_with_the_same_hash_is_a_noop_with_the_same_ref(source: Path, root: Path) -> None:
    sink = LocalBackupSink(root)
    first = await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))
    inode = (root / RELPATH).stat().st_ino

    second = await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert second == first
    assert (root / RELPATH).stat().st_ino == inode


async def test_find_existing_reports_a_verified_copy_only(source: Path, root: Path) -> None:
    sink = LocalBackupSink(root)
    before = await sink.find_existing(RELPATH, sha(CONTENT))
    ref = await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert before is None
    assert await sink.find_existing(RELPATH, sha(CONTENT)) == ref
    assert await sink.find_existing(RELPATH, sha(b"other")) is None


async def test_find_existing_creates_nothing(root: Path) -> None:
    await LocalBackupSink(root).find_existing(RELPATH, sha(CONTENT))

    assert not root.exists()


async def test_an_existing_copy_with_the_wrong_hash_is_replaced(source: Path, root: Path) -> None:
    stale = root / RELPATH
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older, different file\n")

    await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert stale.read_bytes() == CONTENT


async def test_temp_files_left_by_a_killed_attempt_are_removed(source: Path, root: Path) -> None:
    target = root / RELPATH
    target.parent.mkdir(parents=True)
    leftover = target.parent / f".{target.name}.0123456789ab.partial"
    leftover.write_bytes(CONTENT[:100])

    await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert all_files(root) == [RELPATH]


# -- failures ----------------------------------------------------------------------------------


async def test_a_source_that_does_not_match_the_seal_hash_is_not_backed_up(source: Path, root: Path, copying: str) -> None:
    before = snapshot(source)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(b"what the seal hashed"))

    assert failure.value.reason == "hash_mismatch"
    assert str(source) in failure.value.message
    assert all_files(root) == []
    assert snapshot(source) == before


async def test_a_missing_source_is_source_missing(tmp_path: Path, root: Path) -> None:
    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(tmp_path / "gone", relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "source_missing"


@pytest.mark.parametrize("swap", ["fifo", "symlink", "directory"])
async def test_something_else_in_place_of_the_source_is_source_missing_and_is_neither_followed_nor_waited_on(
    source: Path, root: Path, tmp_path: Path, swap: str
) -> None:
    source.unlink()
    if swap == "fifo":
        os.mkfifo(source)  # opening it for reading without O_NONBLOCK would wait for a writer forever
    elif swap == "symlink":
        (tmp_path / "elsewhere").write_bytes(CONTENT)
        source.symlink_to(tmp_path / "elsewhere")
    else:
        source.mkdir()
    with pytest.raises(BackupError) as failure:
        await asyncio.wait_for(LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT)), 30)

    assert failure.value.reason == "source_missing"
    assert all_files(root) == []


async def test_a_file_in_place_of_a_target_directory_fails_as_io_error(source: Path, root: Path) -> None:
    (root / "node_fills_streaming").mkdir(parents=True)
    (root / "node_fills_streaming" / "hourly").write_bytes(b"not a directory")

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "io_error"
    assert all_files(root) == ["node_fills_streaming/hourly"]


async def test_a_directory_in_place_of_the_target_file_fails_as_io_error(source: Path, root: Path) -> None:
    (root / RELPATH).mkdir(parents=True)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "io_error"


async def test_a_full_disk_is_no_space_and_leaves_no_temp_file(source: Path, tmpfs: Callable[[str], Path]) -> None:
    disk = tmpfs("size=64k")

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(disk).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "no_space"
    assert all_files(disk) == []


async def test_a_read_only_disk_is_permission_and_succeeds_once_writable(source: Path, tmpfs: Callable[[str], Path]) -> None:
    disk = tmpfs("ro,size=1m")
    sink = LocalBackupSink(disk)
    with pytest.raises(BackupError) as failure:
        await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))
    subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)

    await sink.backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "permission"
    assert (disk / RELPATH).read_bytes() == CONTENT


@pytest.mark.parametrize(
    ("code", "on_source", "reason"),
    [
        (errno.ENOENT, True, "source_missing"),
        (errno.ENOENT, False, "io_error"),
        (errno.ENOSPC, False, "no_space"),
        (errno.EDQUOT, False, "no_space"),
        (errno.EACCES, False, "permission"),
        (errno.EPERM, True, "permission"),
        (errno.EROFS, False, "permission"),
        (errno.EIO, True, "io_error"),
        (errno.ENOTDIR, False, "io_error"),
    ],
)
def test_os_errors_map_to_backup_reasons(code: int, on_source: bool, reason: str) -> None:
    assert failure_reason(OSError(code, os.strerror(code)), on_source=on_source) == reason


def test_backup_error_carries_its_reason_and_message() -> None:
    error = BackupError("no_space", "BACKUP_DIR is full")

    assert (error.reason, error.message) == ("no_space", "BACKUP_DIR is full")
    assert str(error) == "no_space: BACKUP_DIR is full"


def test_backup_error_rejects_an_unknown_reason() -> None:
    with pytest.raises(ValueError, match="io_error"):
        BackupError("oops", "message")


# -- path safety -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "relpath",
    ["", ".", "/etc/passwd", "../outside", "a/../../outside", "a/b/..", "a\0b"],
)
async def test_paths_that_leave_the_root_are_rejected(relpath: str, source: Path, tmp_path: Path) -> None:
    root = tmp_path / "deep" / "backups"
    root.mkdir(parents=True)
    outside_before = all_files(tmp_path)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=relpath, sha256=sha(CONTENT))

    assert failure.value.reason == "unsafe_path"
    assert all_files(tmp_path) == outside_before


async def test_a_symlinked_directory_below_the_root_cannot_redirect_the_copy(source: Path, root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root.mkdir()
    (root / "node_fills_streaming").symlink_to(elsewhere)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "unsafe_path"
    assert list(elsewhere.iterdir()) == []


async def test_a_symlink_at_the_target_cannot_redirect_the_copy(source: Path, root: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (root / RELPATH).parent.mkdir(parents=True)
    (root / RELPATH).symlink_to(victim)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert failure.value.reason == "unsafe_path"
    assert victim.read_bytes() == b"keep me"


async def test_find_existing_does_not_follow_a_symlink_below_the_root(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "hourly" / "20260610").mkdir(parents=True)
    (elsewhere / "hourly" / "20260610" / "13").write_bytes(CONTENT)
    root.mkdir()
    (root / "node_fills_streaming").symlink_to(elsewhere)

    with pytest.raises(BackupError) as failure:
        await LocalBackupSink(root).find_existing(RELPATH, sha(CONTENT))

    assert failure.value.reason == "unsafe_path"


def test_normalize_relpath_returns_plain_components() -> None:
    assert normalize_relpath("node_fills_streaming/hourly/20260610/13") == (
        "node_fills_streaming",
        "hourly",
        "20260610",
        "13",
    )


# -- the disabled sink and selection -----------------------------------------------------------


async def test_the_none_sink_returns_an_empty_ref_and_writes_nothing(source: Path, root: Path) -> None:
    before = snapshot(source)

    ref = await NoBackupSink().backup(source, relpath=RELPATH, sha256=sha(CONTENT))

    assert ref == ""
    assert not root.exists()
    assert snapshot(source) == before


def test_make_sink_builds_the_local_sink_on_the_backup_dir(root: Path) -> None:
    sink = make_sink("local", load_settings({"BACKUP_DIR": str(root)}))

    assert isinstance(sink, LocalBackupSink)
    assert sink.root == root


def test_make_sink_builds_the_disabled_sink() -> None:
    assert isinstance(make_sink("none", load_settings({})), NoBackupSink)


def test_make_sink_names_the_valid_choices_for_an_unknown_sink() -> None:
    with pytest.raises(ConfigError, match=r"'s3'.*local, none") as err:
        make_sink("s3", load_settings({}))

    assert err.value.setting == "BACKUP_SINK"


def test_the_built_in_sinks_are_registered_as_entry_points_of_this_distribution() -> None:
    registered = {ep.name: ep.value for ep in distribution("hyperdata-sidecar").entry_points if ep.group == BACKUP_SINK_GROUP}

    assert registered == {
        "local": "hyperdata_sidecar.backup:LocalBackupSink",
        "none": "hyperdata_sidecar.backup:NoBackupSink",
        "object_store": "hyperdata_sidecar.object_store_sink:ObjectStoreBackupSink",
    }


# -- plug-ins that cannot be used --------------------------------------------------------------
# Each test installs a minimal distribution (its dist-info, and a module when it needs one) into a
# directory put on sys.path for the test only; importlib.metadata finds it like any other.


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("failing_sink", None)


def register(site: Path, dist: str, **sinks: str) -> None:
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{BACKUP_SINK_GROUP}]\n" + "".join(f"{name} = {target}\n" for name, target in sinks.items())
    )


def refusal(name: str) -> str:
    with pytest.raises(ConfigError) as err:
        make_sink(name, load_settings({}))
    assert err.value.setting == "BACKUP_SINK"
    return str(err.value)


def test_a_name_two_distributions_register_is_refused_naming_both(site: Path) -> None:
    register(site, "first_sinks", twice="hyperdata_sidecar.backup:NoBackupSink")
    register(site, "second_sinks", twice="hyperdata_sidecar.backup:LocalBackupSink")

    message = refusal("twice")

    assert "registered more than once" in message and "first_sinks" in message and "second_sinks" in message


def test_a_sink_registered_under_another_name_than_its_own_is_refused(site: Path) -> None:
    register(site, "alias_sinks", alias="hyperdata_sidecar.backup:NoBackupSink")

    assert "names itself 'none'" in refusal("alias")


def test_an_entry_point_that_is_not_a_sink_class_is_refused(site: Path) -> None:
    register(site, "odd_sinks", odd="hyperdata_sidecar.backup:make_sink")

    assert "is not a BackupSink subclass" in refusal("odd")


def test_a_sink_whose_create_fails_is_refused_with_the_reason(site: Path) -> None:
    (site / "failing_sink.py").write_text(
        "from hyperdata_sidecar.backup import NoBackupSink\n\n"
        "class FailingSink(NoBackupSink):\n"
        "    name = 'failing'\n\n"
        "    @classmethod\n"
        "    def create(cls, backup_dir):\n"
        "        raise RuntimeError('no credentials found')\n"
    )
    register(site, "failing_sinks", failing="failing_sink:FailingSink")

    assert refusal("failing").endswith("could not be created: RuntimeError: no credentials found")
