"""A sidecar worker (``faust -A hyperdata_sidecar worker``) run as a subprocess for one scenario.

Settings are the production defaults except what a benchmark must own: its directories, a fresh
``NODE_ID`` (so Faust's internal topics and state start empty), its own topic names, a free web
port and whatever the scenario overrides. The worker's output (Faust's log and the sidecar's JSON
events) goes to ``<root>/worker.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hyperdata_sidecar.config import DEFAULTS
from hyperdata_sidecar.core import times
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.devkafka import free_low_port

FAUST = str(Path(sys.executable).with_name("faust"))
REPO = Path(__file__).resolve().parents[1]
STOP_TIMEOUT_S = 60.0


class BenchError(RuntimeError):
    """A scenario could not run (a process died, a wait timed out); the message says what and where."""


def epoch_of(iso: str) -> float:
    """Seconds since the epoch of a sidecar timestamp (log ``time``, seal ``finalized_at``).

    The sidecar writes them as ``2026-06-10T14:00:00.123Z``.
    """
    epoch = times.epoch_of(iso)
    if epoch is None:
        raise ValueError(f"not a sidecar timestamp: {iso!r}")
    return epoch


def topic_names(prefix: str) -> dict[str, str]:
    """Setting name → topic for every topic of the contract, each name prefixed with ``prefix``."""
    names = {spec.topic_env: f"{prefix}{spec.default_topic}" for spec in TABLES}
    names["TOPIC_SEALS"] = f"{prefix}hyperliquid.node-files"
    names["TOPIC_DLQ"] = f"{prefix}hyperliquid.sidecar-dlq"
    names["TOPIC_SNAPSHOTS"] = f"{prefix}hyperliquid.node-snapshots"
    return names


class SidecarWorker:
    """One worker process rooted at ``root`` (``watch/``, ``state/`` below it)."""

    def __init__(self, root: Path, bootstrap: str, topic_prefix: str, **overrides: str) -> None:
        self.root = root
        self.watch = root / "watch"
        self.log_path = root / "worker.log"
        for path in (self.watch, root / "state"):
            path.mkdir(parents=True, exist_ok=True)
        self.port = free_low_port()
        self.settings = {
            "WATCH_DIR": str(self.watch),
            "STATE_PATH": str(root / "state"),
            "BACKUP_SINK": "none",
            "KAFKA_BOOTSTRAP": bootstrap,
            "NODE_ID": f"bench-{uuid.uuid4().hex[:8]}",
            "WEB_BIND": "127.0.0.1",
            "WEB_PORT": str(self.port),
            **topic_names(topic_prefix),
            **overrides,
        }
        self.process: subprocess.Popen | None = None
        self._log_offset = 0
        self._events: list[dict[str, Any]] = []

    @property
    def pid(self) -> int:
        if self.process is None:
            raise BenchError("the worker is not started")
        return self.process.pid

    def topic(self, setting: str) -> str:
        return self.settings[setting]

    def start(self, wrapper: Sequence[str] = ()) -> None:
        """Start the worker; ``wrapper`` is prepended to the command (e.g. ``python -m cProfile -o f``)."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", str(self.root)),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO),
            **self.settings,
        }
        command = [*wrapper, FAUST, "-A", "hyperdata_sidecar", "worker", "-l", "info", "--web-port", str(self.port)]
        with open(self.log_path, "ab") as log:
            # cwd is the worker's root: no faust.ini of the repo or the shell is picked up.
            self.process = subprocess.Popen(
                command, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def stop(self) -> int | None:
        """SIGTERM (Faust shuts down cleanly), SIGKILL if it has not exited within a minute; the exit code."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(STOP_TIMEOUT_S)

    # ------------------------------------------------------------------ its JSON events

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The sidecar's JSON log events so far, optionally only those named ``name``."""
        self._read_new_events()
        return [e for e in self._events if name is None or e.get("event") == name]

    def _read_new_events(self) -> None:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                data = log.read()
        except FileNotFoundError:
            return
        complete = data.rfind(b"\n") + 1
        self._log_offset += complete
        for line in data[:complete].splitlines():
            if line.startswith(b"{"):
                try:
                    self._events.append(json.loads(line))
                except ValueError:
                    continue  # Faust's own output may start with a brace too

    # ------------------------------------------------------------------ its web server

    def get(self, path: str) -> bytes | None:
        """The body of GET ``path`` when it answers 200, else None."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
                return response.read() if response.status == 200 else None
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def files(self) -> dict[str, dict[str, Any]] | None:
        """``/sidecar/files/`` as path → row, or None when the web server does not answer."""
        body = self.get("/sidecar/files/")
        return None if body is None else {row["path"]: row for row in json.loads(body)["files"]}

    def lines_published(self) -> dict[str, float]:
        """``hyperdata_sidecar_lines_published_total`` per table, from ``/metrics``."""
        body = self.get("/metrics") or b""
        totals = {}
        for line in body.decode().splitlines():
            if line.startswith("hyperdata_sidecar_lines_published_total{"):
                labels, value = line.rsplit(" ", 1)
                table = labels.split('table="', 1)[1].split('"', 1)[0]
                totals[table] = float(value)
        return totals

    def wait_for(self, condition: Callable[[], Any], what: str, timeout_s: float, every_s: float = 0.1) -> Any:
        """Poll ``condition`` until it returns something truthy (returned); BenchError on timeout or exit."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise BenchError(f"the worker exited ({self.process.returncode}) waiting for {what}; see {self.log_path}")
            result = condition()
            if result:
                return result
            if time.monotonic() > deadline:
                raise BenchError(f"gave up after {timeout_s:.0f}s waiting for {what}; see {self.log_path}")
            time.sleep(every_s)

    def wait_for_event(self, name: str, timeout_s: float = 120.0) -> dict[str, Any]:
        return self.wait_for(lambda: next(iter(self.events(name)), None), f"the {name!r} event", timeout_s)

    def wait_for_startup(self, timeout_s: float = 180.0) -> dict[str, Any]:
        """The ``startup`` event; BenchError when the worker runs another line engine than its
        ``SIDECAR_ENGINE`` asked for (the event names it as ``native 0.1.0``)."""
        startup = self.wait_for_event("startup", timeout_s)
        asked = self.settings.get("SIDECAR_ENGINE", DEFAULTS["SIDECAR_ENGINE"])
        running = str(startup.get("engine", "")).split(" ", 1)[0]
        if asked != "auto" and running != asked:
            raise BenchError(
                f"the worker was asked for SIDECAR_ENGINE={asked} and runs {startup.get('engine')!r}; see {self.log_path}"
            )
        return startup


def settings_summary(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings a reader needs to judge a figure (the rest are paths, ports and names)."""
    keys = (
        "SIDECAR_ENGINE",
        "DELIVERY",
        "TXN_MAX_MS",
        "TXN_MAX_BYTES",
        "POLL_INTERVAL_MS",
        "READ_BUDGET_BYTES",
        "SEAL_GRACE_MS",
        "PRODUCER_LINGER_MS",
        "PRODUCER_BATCH_BYTES",
        "PRODUCER_COMPRESSION",
        "PRODUCER_COMPRESSION_LEVEL",
        "BACKUP_SINK",
    )
    return {key: settings.get(key, DEFAULTS[key]) for key in keys}
