"""The plugin: what ``install`` builds and registers on a Faust app (no broker, worker not started),
and the line engine it chooses, once, when it installs the sidecar: the refusal, the fallback's
warning, the metric, and that the data plane runs the engine chosen."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from hyperdata_sidecar.config import ConfigError, Settings, load_settings
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.engines import NATIVE_MODULE
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.plugin import chosen_engine, install

from test_web_routes import make_app

LOGGER = "tests.engine_choice"


def settings_with(tmp_path: Path, engine: str) -> Settings:
    return load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit", "SIDECAR_ENGINE": engine})


def engine_info(metrics: SidecarMetrics) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in metrics.registry.collect()
        if family.name == "hyperdata_sidecar_engine_info"
        for sample in family.samples
    ]


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]


def choose(tmp_path: Path, engine: str) -> tuple[object, SidecarMetrics]:
    metrics = SidecarMetrics()
    return chosen_engine(settings_with(tmp_path, engine), metrics, EventLog(logging.getLogger(LOGGER))), metrics


@pytest.fixture
def native_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, NATIVE_MODULE, None)


@pytest.fixture
def native_broken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An installed native engine whose import fails (as one built for another Python would)."""
    where = tmp_path / "site"
    where.mkdir()
    (where / f"{NATIVE_MODULE}.py").write_text('raise ImportError("built for another Python")\n')
    monkeypatch.delitem(sys.modules, NATIVE_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(where))


# ---------------------------------------------------------------------- the engine


def test_native_without_the_engine_is_a_configuration_error_naming_the_setting(tmp_path, native_absent) -> None:
    metrics = SidecarMetrics()
    with pytest.raises(ConfigError) as err:
        chosen_engine(settings_with(tmp_path, "native"), metrics, EventLog(logging.getLogger(LOGGER)))

    assert err.value.setting == "SIDECAR_ENGINE" and "\n" not in str(err.value)
    assert str(err.value).startswith(
        f"SIDECAR_ENGINE: is native and the native line engine (module {NATIVE_MODULE}) is not installed: "
    )
    assert engine_info(metrics) == []


def test_install_refuses_an_app_whose_native_engine_is_missing(tmp_path, native_absent) -> None:
    with pytest.raises(ConfigError, match="SIDECAR_ENGINE"):
        make_app(tmp_path, SIDECAR_ENGINE="native")


def test_auto_with_a_broken_native_engine_runs_python_and_warns_once_with_the_reason(tmp_path, native_broken, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)

    engine, metrics = choose(tmp_path, "auto")

    assert engine.name == "python"
    [(level, event, fields)] = events(caplog)
    assert (level, event, fields["engine"]) == ("WARNING", "engine_fallback", engine.label())
    assert "ImportError: built for another Python" in fields["reason"]
    assert engine_info(metrics) == [({"engine": "python", "version": engine.version}, 1.0)]


def test_auto_without_the_native_engine_runs_python_without_a_warning(tmp_path, native_absent, caplog) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)

    engine, _metrics = choose(tmp_path, "auto")

    assert engine.name == "python"
    assert events(caplog) == []


def test_the_data_plane_runs_the_engine_the_sidecar_chose(tmp_path) -> None:
    _app, sidecar = make_app(tmp_path, SIDECAR_ENGINE="python")

    assert sidecar.engine.name == "python" and sidecar.dataplane.engine is sidecar.engine
    assert sidecar.view.engine is sidecar.engine


# ---------------------------------------------------------------------- what install registers


def test_installing_twice_on_one_app_raises(tmp_path: Path) -> None:
    app, sidecar = make_app(tmp_path)

    with pytest.raises(RuntimeError, match="already installed"):
        install(app, sidecar.settings)


def test_install_registers_the_agents_loops_tables_and_internal_topics_under_the_sidecars_names(tmp_path: Path) -> None:
    app, sidecar = make_app(tmp_path)

    assert set(app.agents) == {
        f"hyperdata_sidecar.{name}" for name in ("progress", "seal", "backup", "backup_attempts", "snapshot")
    }
    assert {"sidecar-offsets", "sidecar-seals", "sidecar-backups", "sidecar-snapshots"} <= set(app.tables)
    # Faust keeps the tasks (and timers) it starts after recovery here.
    loops = {task.__qualname__ for task in app._app_tasks if task.__qualname__.startswith("hyperdata_sidecar.poll.")}
    assert loops == {f"hyperdata_sidecar.poll.{spec.dir_name}" for spec in TABLES} | {"hyperdata_sidecar.poll.snapshots"}
    internal = {
        topic.get_topic_name() for topic in (sidecar.progress.topic, sidecar.rotations.topic, sidecar.announcements.topic)
    }
    assert internal == {f"{app.conf.id}-sidecar-{role}" for role in ("progress", "rotations", "snapshot-events")}
    assert sidecar.backup_worker.attempts.get_topic_name() == f"{app.conf.id}-sidecar-backup-attempts"
