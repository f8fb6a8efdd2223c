"""What the podman tests share: scripts/image_test.py (`make image-test`) and
scripts/systemd_test.py (`make systemd-test`) import it.

- podman as this machine runs it: runc with cgroupfs, as crun fails on this kernel; runc in turn
  needs `default_ulimits = []` in containers.conf (a drop-in .ci/run writes), as it cannot apply
  podman's default rlimits here.
- Commands run to completion within a timeout; a failure raises StepFailed with the command's
  output (its tail, or the log it went to).
- A Debian bookworm base image made with debootstrap and imported into podman, as no image
  registry is reachable here. Made once: the rootfs tarball is kept under
  ~/.cache/hyperdata-sidecar/ (or $XDG_CACHE_HOME/hyperdata-sidecar/) and the image in podman's
  storage; a file lock keeps two runs on one machine from both running debootstrap.
- A test run: its work dir wiped first, a Kafka broker on the host, and what it made (containers,
  volumes, the broker) removed when it ends, whether it passed, failed or got SIGTERM.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hyperdata_sidecar.devkafka import DevKafkaError, LocalKafka, free_low_port

PODMAN = ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs"]
DEADLINE_S = 180.0
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hyperdata-sidecar"


class StepFailed(Exception):
    """A step failed; the message says which and why."""


# ---- commands -----------------------------------------------------------------------------------


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


def run_command(
    command: list[str], what: str, *, timeout: float = DEADLINE_S, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (``what``, for messages) to completion, its output captured. Raises
    StepFailed if it outlives ``timeout``, or with ``check`` if it exits non-zero (with the tail of
    its output)."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise StepFailed(f"{what} did not finish within {timeout:.0f}s") from None
    if check and result.returncode != 0:
        raise StepFailed(f"{what} exited {result.returncode}:\n{(result.stdout + result.stderr).strip()[-3000:]}")
    return result


def run_logged(command: list[str], what: str, log: Path, *, timeout: float = DEADLINE_S, show: bool = False) -> str:
    """Run ``command`` (``what``, for messages) to completion, its output into ``log`` (and on the
    console with ``show``); returns the output. Raises StepFailed with the output's tail if it
    exits non-zero or outlives ``timeout``."""
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        log.write_bytes(expired.output or b"")
        raise StepFailed(f"{what} did not finish within {timeout:.0f}s (log: {log})") from None
    log.write_text(result.stdout)
    if show:
        print(result.stdout.rstrip())
    if result.returncode != 0:
        tail = "\n".join(result.stdout.splitlines()[-30:])
        raise StepFailed(f"{what} exited {result.returncode} (log: {log}):\n{tail}")
    return result.stdout


def podman(*args: str, timeout: float = DEADLINE_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run_command([*PODMAN, *args], f"podman {' '.join(args[:2])}", timeout=timeout, check=check)


# ---- the base image -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BaseImage:
    """A Debian bookworm image with ``packages`` (debootstrap's ``--include``), named ``name`` in
    podman, its rootfs tarball cached as ``CACHE_ROOT/cache_dir/tarball``."""

    name: str
    packages: str
    cache_dir: str
    tarball: str

    @property
    def cache(self) -> Path:
        return CACHE_ROOT / self.cache_dir

    def ensure(self, logs: Path) -> str:
        """Make the image unless podman has it; returns where it came from. debootstrap and tar,
        when they run, write their output into ``logs``."""
        if podman("image", "exists", self.name, check=False).returncode == 0:
            return "podman storage"
        with file_lock(self.cache / ".lock"):
            made = "cached rootfs tarball"
            if not (self.cache / self.tarball).exists():
                self.make_tarball(logs)
                made = "debootstrap"
            podman("import", str(self.cache / self.tarball), self.name, timeout=300)
        return made

    def make_tarball(self, logs: Path) -> None:
        if shutil.which("debootstrap") is None:
            raise StepFailed("debootstrap not found: apt-get install debootstrap (.ci/run does)")
        # In the cache dir, so the finished tarball is renamed into place, never seen half-written.
        scratch = Path(tempfile.mkdtemp(prefix="rootfs-", dir=self.cache))
        rootfs = scratch / "rootfs"
        left = f"(the partial rootfs is left in {scratch}; check /proc/mounts before deleting it)"
        try:
            run_logged(
                ["debootstrap", "--variant=minbase", f"--include={self.packages}", "bookworm", str(rootfs)],
                "debootstrap",
                logs / "debootstrap.log",
                timeout=900,
            )
        except StepFailed as failure:
            raise StepFailed(f"{failure}\n{left}") from None
        # debootstrap mounts /proc and /sys (sometimes host devices) inside the rootfs while it
        # works: one left behind would be archived, and deleting through it would delete on the host.
        mounts = [
            fields[1]
            for fields in map(str.split, Path("/proc/mounts").read_text().splitlines())
            if fields[1].startswith(f"{scratch}/")
        ]
        if mounts:
            raise StepFailed(f"debootstrap left mounts in its rootfs: {', '.join(mounts)}\n{left}")
        run_logged(["tar", "-C", str(rootfs), "-cf", str(scratch / "rootfs.tar"), "."], "tar", logs / "tar.log", timeout=300)
        (scratch / "rootfs.tar").rename(self.cache / self.tarball)
        shutil.rmtree(scratch)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Held while a base image is made, so two runs on one machine do not both debootstrap."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


# ---- a test run ---------------------------------------------------------------------------------


class TestRun:
    """One run of a test script: its clock, and ``cleanup``, the stack of what to undo when the run
    ends (last made, first undone: containers before their volumes)."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.cleanup = contextlib.ExitStack()

    def seconds(self) -> float:
        return time.monotonic() - self.began

    def broker(self, data_dir: Path) -> LocalKafka:
        """A Kafka broker on the host in ``data_dir``, not started yet, on two free ports below the
        ephemeral range; stopped when the run ends."""
        port = free_low_port()
        broker = LocalKafka(data_dir, port=port, controller_port=free_low_port({port}))
        self.cleanup.callback(broker.stop)
        return broker


def run_test(name: str, work: Path, body: Callable[[TestRun], str]) -> int:
    """Runs ``body`` in a fresh ``work`` dir and ends with one line: ``name: OK in ...: `` and what
    ``body`` returns (what passed), or ``name: FAILED after ...: `` and the reason of the
    StepFailed or DevKafkaError that stopped it. Returns the exit status: 0 or 1. The run's
    cleanup runs in either case, and on SIGTERM."""
    test_run = TestRun()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the cleanup runs
    try:
        with test_run.cleanup:
            if shutil.which("podman") is None:
                raise StepFailed("podman not found: apt-get install podman runc (.ci/run does)")
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            passed = body(test_run)
    except (StepFailed, DevKafkaError) as failure:
        print(f"\n{name}: FAILED after {test_run.seconds():.0f}s: {failure}", file=sys.stderr)
        return 1
    print(f"\n{name}: OK in {test_run.seconds():.0f}s: {passed}")
    return 0
