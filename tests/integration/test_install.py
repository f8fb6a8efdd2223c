"""A non-editable install runs: `pip install .` into a fresh venv, then the worker from anywhere.

The other integration tests run the editable install of `make venv`, whose import hook hides how a
plain install lays the package out. Here the worker is that venv's `faust`, with no PYTHONPATH:
from the repository root it imports the source tree (Faust puts the working directory first on
sys.path), from any other directory the installed copy. Both must find `hyperdata_sidecar.agents`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from sidecar_run import Sidecar, assert_clean, write_corpus
from worker_process import REPO, SIDECAR_APP, WorkerProcess

INSTALL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def installed_faust(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`faust` of a fresh venv holding `pip install <repo>` (not editable)."""
    venv = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(REPO)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert install.returncode == 0, f"pip install {REPO} failed:\n{install.stdout}\n{install.stderr}"
    return venv / "bin" / "faust"


class InstalledWorker(WorkerProcess):
    """``faust -A hyperdata_sidecar worker`` of another venv, started in ``cwd``, logging to ``log_dir``."""

    def __init__(self, faust: Path, settings: Mapping[str, str], cwd: Path, log_dir: Path) -> None:
        super().__init__(SIDECAR_APP, settings, cwd)
        del self.env["PYTHONPATH"]  # import only what the venv installed, or what cwd holds
        self.faust = faust
        self.log_path = log_dir / "worker.log"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [str(self.faust), "-A", self.app, "worker", "-l", "info", "--web-port", str(self.port)],
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


@pytest.mark.parametrize("where", ["repository root", "another directory"])
async def test_an_installed_worker_publishes_started_from(where, installed_faust, tmp_path, kafka_bootstrap, unique_topic_prefix):
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix)
    write_corpus(sidecar.watch, hours=2, lines=600)
    cwd = REPO if where == "repository root" else tmp_path
    (tmp_path / "run").mkdir()
    sidecar.worker = worker = InstalledWorker(installed_faust, sidecar.env, cwd, tmp_path / "run")
    worker.start()
    try:
        await sidecar.until_events("startup")
        report = await sidecar.verify(backup_dir=sidecar.backups)
    finally:
        assert worker.stop() == 0, worker.log_tail()
    assert_clean(report)
    # the first hour of each table is finalized: its seal and backup were checked too
    assert sum(t.finalized for t in report.tables.values()) == 3, report.summary()
