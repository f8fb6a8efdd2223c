"""A backup sink from another distribution: installed with pip, found through its entry point, used by a real worker.

``sink_plugin/`` is a complete plug-in distribution (a content-addressed sink registered as ``cas``,
and a ``broken`` entry point whose module does not exist). The module installs it with
``pip install --target`` into a temp dir that only the workers of these tests have on their
``PYTHONPATH``: a real installed distribution, with its ``.dist-info`` and entry points, that the
test session's own environment never sees.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperdata_sidecar.core.tables import TABLES

from sidecar_run import write_corpus
from worker_process import FAUST, SIDECAR_APP, WorkerProcess, sidecar_env

PLUGIN_SOURCE = Path(__file__).parent / "sink_plugin"
HOURS = 2


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the installed plug-in distribution (built from a copy: the build writes files)."""
    root = tmp_path_factory.mktemp("sink-plugin")
    source = shutil.copytree(PLUGIN_SOURCE, root / "source")
    site = root / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, f"pip install of the sink plug-in failed:\n{install.stderr}"
    return site


@pytest.fixture(scope="module")
def cas_worker(plugin_site: Path, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """A worker with BACKUP_SINK=cas that has sealed and backed up the older hour of every table."""
    root = tmp_path_factory.mktemp("cas")
    settings = sidecar_env(
        root, kafka_bootstrap, f"t-cas-{uuid.uuid4().hex[:8]}.", BACKUP_SINK="cas", CAS_SINK_ROOT=str(root / "objects")
    )
    write_corpus(Path(settings["WATCH_DIR"]), hours=HOURS, lines=300)
    worker = WorkerProcess(SIDECAR_APP, settings, root, extra_path=plugin_site)
    worker.start()
    try:
        worker.wait_until(lambda: len(worker.backed_up()) == len(TABLES) * (HOURS - 1), "every finished hour backed up")
        yield worker
    finally:
        worker.stop()


def test_the_plugin_sink_stores_every_sealed_file_and_the_backups_table_records_it(cas_worker: WorkerProcess) -> None:
    objects = Path(cas_worker.env["CAS_SINK_ROOT"]) / "sha256"
    watch = Path(cas_worker.env["WATCH_DIR"])

    for row in cas_worker.backed_up():
        digest = hashlib.sha256((watch / row["path"]).read_bytes()).hexdigest()
        record = cas_worker.get_json(f"/table/sidecar-backups/{urllib.parse.quote(row['path'], safe='')}/")
        assert (record["status"], record["sink"], record["ref"], record["sha256"]) == ("ok", "cas", f"cas:{digest}", digest)
        assert (objects / digest).read_bytes() == (watch / row["path"]).read_bytes()
    assert not list(Path(cas_worker.env["BACKUP_DIR"]).iterdir())  # the local sink never ran


def test_the_status_json_lists_the_plugin_sinks_backups(cas_worker: WorkerProcess) -> None:
    status = cas_worker.get_json("/sidecar/status/")

    assert status["config"]["backup_sink"] == "cas"
    assert sorted(b["path"] for b in status["backups"]) == sorted(f["path"] for f in cas_worker.backed_up())
    assert {(b["sink"], b["ref"].split(":")[0]) for b in status["backups"]} == {("cas", "cas")}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"BACKUP_SINK": "nope"}, "BACKUP_SINK: must be one of broken, cas, local, none, object_store (got 'nope')"),
        ({"BACKUP_SINK": "broken"}, "BACKUP_SINK: cannot load sink 'broken' (cas_sink_missing:Sink): ModuleNotFoundError"),
        ({"BACKUP_SINK": "cas", "CAS_SINK_ROOT": "objects"}, "CAS_SINK_ROOT: must be an absolute path (got 'objects')"),
    ],
)
def test_a_sink_that_cannot_be_selected_stops_the_worker_with_one_line(
    plugin_site: Path, tmp_path: Path, overrides: dict[str, str], message: str
) -> None:
    settings = sidecar_env(tmp_path, "127.0.0.1:9", "t-cas-refused.", **overrides)
    env = WorkerProcess(SIDECAR_APP, settings, tmp_path, extra_path=plugin_site).env

    result = subprocess.run(
        [FAUST, "-A", SIDECAR_APP, "worker"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )

    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2
    assert len(lines) == 1 and lines[0].startswith(f"hyperdata-sidecar: configuration error: {message}"), result.stderr
