"""Runs a Faust worker as a subprocess (``faust -A <app> worker``) and talks to its web server.

Used by the integration tests that need the real worker: its CLI, its web server, its signal
handling. The worker runs in its own temp directory with an environment built from scratch, so no
``faust.ini`` or ``WATCH_DIR`` of the developer's shell leaks in.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devkafka import free_low_port

REPO = Path(__file__).resolve().parents[2]
FAUST = str(Path(sys.executable).with_name("faust"))
SIDECAR_APP = "hyperdata_sidecar"
DEADLINE_S = 120.0
STOP_S = 60.0


#: A warning or an error of a worker log: the sidecar's JSON events and Faust's own lines.
NOTABLE = re.compile(r'"level":"(?:warning|error|critical)"|\] \[(?:WARNING|ERROR|CRITICAL)\] ')


def log_sections(root: Path) -> list[tuple[str, str]]:
    """What a failed test shows (tests/integration/conftest.py): a (title, :func:`log_digest`) section
    for each worker log under ``root``, its ``tmp_path``."""
    return [(f"worker log {log.relative_to(root)}", log_digest(log)) for log in sorted(root.rglob("worker.log"))]


def log_digest(path: Path, *, notable: int = 40, last: int = 10, width: int = 400) -> str:
    """The worker log at ``path`` in short: its last ``notable`` warnings and errors, then its last
    ``last`` lines, each cut at ``width``."""
    lines = path.read_text(errors="replace").splitlines()
    picked = [line for line in lines if NOTABLE.search(line)][-notable:]
    ending = lines[-last:]

    def cut(line: str) -> str:
        return line if len(line) <= width else f"{line[:width]} [{len(line) - width} more]"

    return "\n".join(
        [
            f"{len(lines)} lines; the last {len(picked)} warnings and errors:",
            *map(cut, picked),
            f"the last {len(ending)} lines:",
            *map(cut, ending),
        ]
    )


def sidecar_env(root: Path, bootstrap: str, prefix: str, **overrides: str) -> dict[str, str]:
    """Settings for a sidecar whose dirs live under ``root`` and whose topics start with ``prefix``."""
    for name in ("watch", "state", "backups"):
        (root / name).mkdir(parents=True, exist_ok=True)
    env = {
        "WATCH_DIR": str(root / "watch"),
        "STATE_PATH": str(root / "state"),
        "BACKUP_DIR": str(root / "backups"),
        "KAFKA_BOOTSTRAP": bootstrap,
        "NODE_ID": f"{prefix.rstrip('.')}-{uuid.uuid4().hex[:6]}",
        "WEB_BIND": "127.0.0.1",
        "WEB_PORT": str(free_low_port()),
        "SEAL_GRACE_MS": "200",
        "POLL_INTERVAL_MS": "100",
        "TOPIC_SEALS": f"{prefix}node-files",
        "TOPIC_DLQ": f"{prefix}sidecar-dlq",
        "TOPIC_SNAPSHOTS": f"{prefix}node-snapshots",
    }
    for spec in TABLES:
        env[spec.topic_env] = f"{prefix}{spec.default_topic}"
    env.update(overrides)
    return env


def current_hour_minus(hours: int) -> datetime.datetime:
    """The start of the UTC hour ``hours`` before the current one (naive UTC, as the generator takes it)."""
    now = datetime.datetime.now(datetime.UTC).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    return now - datetime.timedelta(hours=hours)


class WorkerProcess:
    """One ``faust -A <app> worker`` subprocess; its output goes to ``<cwd>/worker.log``."""

    def __init__(self, app: str, settings: Mapping[str, str], cwd: Path, extra_path: Path | None = None) -> None:
        self.app = app
        self.port = int(settings["WEB_PORT"])
        self.cwd = cwd
        self.log_path = cwd / "worker.log"
        python_path = [str(REPO)] + ([str(extra_path)] if extra_path else [])
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(cwd)),
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(python_path),
            **settings,
        }
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [FAUST, "-A", self.app, "worker", "-l", "info", "--web-port", str(self.port)],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within STOP_S; returns its exit code."""
        process = self._process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(STOP_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    # ------------------------------------------------------------------ HTTP

    def get(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of GET ``path``; status 0 when nothing answers."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return response.status, response.headers.get("Content-Type", ""), response.read()
        except urllib.error.HTTPError as err:
            return err.code, err.headers.get("Content-Type", ""), err.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, "", b""

    def get_json(self, path: str) -> Any:
        status, _type, body = self.get(path)
        assert status == 200, f"GET {path} answered {status}: {body[:300]!r}"
        return json.loads(body)

    def backed_up(self) -> list[dict[str, Any]]:
        """The rows of ``/sidecar/files/`` whose backup is done."""
        return [f for f in self.get_json("/sidecar/files/")["files"] if f["state"] == "backed_up"]

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Poll ``condition`` until it holds; fail naming ``what`` (with the worker's log) after DEADLINE_S."""
        deadline = time.monotonic() + DEADLINE_S
        while not self._reached(condition, what, deadline):
            time.sleep(0.2)

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """:meth:`wait_until` for async tests: the same checks, sleeping without blocking the loop."""
        deadline = time.monotonic() + DEADLINE_S
        while not self._reached(condition, what, deadline):
            await asyncio.sleep(0.2)

    def _reached(self, condition: Callable[[], bool], what: str, deadline: float) -> bool:
        if self._process is not None and self._process.poll() is not None:
            pytest.fail(f"worker exited ({self._process.returncode}) while waiting for {what}:\n{self.log_tail()}")
        try:
            if condition():
                return True
        except (AssertionError, ValueError, KeyError):
            pass  # not there yet: an endpoint not up, a value not written
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {DEADLINE_S:.0f}s waiting for {what}:\n{self.log_tail()}")
        return False
