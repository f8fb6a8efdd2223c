"""What the sidecar integration tests share: a worker on a temp tree, its JSON log, the verifier."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

from hyperdata_sidecar.tools.generate import generate_corpus
from hyperdata_sidecar.tools.replay import ReplaySummary, replay
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.verify import default_topics, verify

from worker_process import SIDECAR_APP, WorkerProcess, sidecar_env

DAY_BOUNDARY = datetime.datetime(2026, 6, 10, 22)


class Sidecar:
    """A sidecar worker rooted at ``root`` (watch/, state/, backups/ below it)."""

    def __init__(self, root: Path, bootstrap: str, prefix: str, **overrides: str) -> None:
        self.root = root
        self.bootstrap = bootstrap
        self.env = sidecar_env(root, bootstrap, prefix, **overrides)
        self.watch = Path(self.env["WATCH_DIR"])
        self.state = Path(self.env["STATE_PATH"])
        self.backups = Path(self.env["BACKUP_DIR"])
        self.worker: WorkerProcess | None = None

    def start(self) -> WorkerProcess:
        run_dir = self.root / "run"
        run_dir.mkdir(exist_ok=True)
        self.worker = WorkerProcess(SIDECAR_APP, self.env, run_dir)
        self.worker.start()
        return self.worker

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """The sidecar's JSON log events so far (all runs), optionally only those named ``name``."""
        found = []
        for line in (self.root / "run" / "worker.log").read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a dict in the task stacks a drill had the worker write (SIGUSR1), not an event
                if name is None or event["event"] == name:
                    found.append(event)
        return found

    def wait_for_events(self, name: str, count: int = 1) -> None:
        assert self.worker is not None
        self.worker.wait_until(lambda: len(self.events(name)) >= count, f"{count} {name!r} log events")

    async def until_events(self, name: str, count: int = 1) -> None:
        """:meth:`wait_for_events` for async tests."""
        assert self.worker is not None
        await self.worker.until(lambda: len(self.events(name)) >= count, f"{count} {name!r} log events")

    async def verify(self, **kwargs: Any) -> VerifyReport:
        """The verifier on this sidecar's tree and topics; with ``DELIVERY=exactly_once`` it reads
        ``read_committed``, as downstream does."""
        kwargs.setdefault("timeout_s", 120.0)
        if self.env.get("DELIVERY") == "exactly_once":
            kwargs.setdefault("isolation", "read_committed")
        return await verify(self.watch, self.bootstrap, topics=default_topics(self.env), node=self.env["NODE_ID"], **kwargs)


def write_corpus(target: Path, *, hours: int = 3, lines: int = 3000, seed: int = 7, bad_every: int | None = None) -> None:
    generate_corpus(target, hours=hours, lines_per_hour=lines, seed=seed, start=DAY_BOUNDARY, bad_every=bad_every)


async def replay_ragged(corpus: Path, target: Path, *, chunk_bytes: int = 8 * 1024, seed: int = 3) -> ReplaySummary:
    """Append ``corpus`` into ``target`` in ragged chunks as fast as the tap goes (lines split across chunks)."""
    return await replay(corpus, target, chunk_bytes=chunk_bytes, cadence_s=0.02, speed=math.inf, progress=False, seed=seed)


def assert_clean(report: VerifyReport, *, allowed_duplicates: int = 0) -> None:
    assert report.ok, report.summary()
    assert report.duplicates <= allowed_duplicates
