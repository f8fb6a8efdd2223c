"""The sidecar chooses its line engine once, when the worker starts: the refusal, the fallback's
warning, the metric, and that the data plane is not reached without an engine."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from hyperdata_sidecar.config import ConfigError
from hyperdata_sidecar.engines import NATIVE_MODULE
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.plugin import Sidecar

from test_web_routes import make_app

LOGGER = "tests.engine_choice"


def sidecar_with(tmp_path: Path, engine: str) -> Sidecar:
    _app, sidecar = make_app(tmp_path, SIDECAR_ENGINE=engine)
    sidecar.log = EventLog(logging.getLogger(LOGGER))
    return sidecar


def engine_info(sidecar: Sidecar) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in sidecar.metrics.registry.collect()
        if family.name == "hyperdata_sidecar_engine_info"
        for sample in family.samples
    ]


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]


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


def test_native_without_the_engine_is_a_configuration_error_naming_the_setting(tmp_path, native_absent) -> None:
    sidecar = sidecar_with(tmp_path, "native")

    with pytest.raises(ConfigError) as err:
        sidecar.choose_engine()

    assert err.value.setting == "SIDECAR_ENGINE" and "\n" not in str(err.value)
    assert str(err.value).startswith(
        f"SIDECAR_ENGINE: is native and the native line engine (module {NATIVE_MODULE}) is not installed: "
    )
    assert sidecar.chosen_engine is None and engine_info(sidecar) == []


async def test_the_data_plane_is_not_reached_when_the_native_engine_is_missing(tmp_path, native_absent) -> None:
    sidecar = sidecar_with(tmp_path, "native")

    with pytest.raises(ConfigError, match="SIDECAR_ENGINE"):
        await sidecar.connect()

    assert sidecar.dataplane.partitions == {}


def test_auto_with_a_broken_native_engine_runs_python_and_warns_once_with_the_reason(tmp_path, native_broken, caplog) -> None:
    sidecar = sidecar_with(tmp_path, "auto")
    caplog.set_level(logging.INFO, logger=LOGGER)

    engine = sidecar.choose_engine()

    assert engine.name == "python" and sidecar.engine is engine
    [(level, event, fields)] = events(caplog)
    assert (level, event, fields["engine"]) == ("WARNING", "engine_fallback", engine.label())
    assert "ImportError: built for another Python" in fields["reason"]
    assert engine_info(sidecar) == [({"engine": "python", "version": engine.version}, 1.0)]


def test_auto_without_the_native_engine_runs_python_without_a_warning(tmp_path, native_absent, caplog) -> None:
    sidecar = sidecar_with(tmp_path, "auto")
    caplog.set_level(logging.INFO, logger=LOGGER)

    assert sidecar.choose_engine().name == "python"
    assert events(caplog) == []


def test_the_engine_is_chosen_once(tmp_path, native_broken, caplog) -> None:
    sidecar = sidecar_with(tmp_path, "auto")
    caplog.set_level(logging.INFO, logger=LOGGER)

    first, second = sidecar.choose_engine(), sidecar.choose_engine()

    assert first is second and len(events(caplog)) == 1


def test_the_engine_cannot_be_read_before_the_worker_chose_it(tmp_path) -> None:
    sidecar = sidecar_with(tmp_path, "python")

    with pytest.raises(RuntimeError, match="chosen when the worker starts"):
        _ = sidecar.engine
