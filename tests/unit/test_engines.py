"""Choosing the line engine: every SIDECAR_ENGINE choice with the native engine present, absent and broken."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import tomllib
import types
from importlib.metadata import version
from pathlib import Path

import pytest

from hyperdata_sidecar.engines import ENGINE_CHOICES, NATIVE_MODULE, Engine, EngineUnavailable, select
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonEngine

SIDECAR_VERSION = version("hyperdata-sidecar")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def native_present(monkeypatch: pytest.MonkeyPatch) -> str:
    """A native engine module that imports, whatever is installed; its version."""
    module = types.ModuleType(NATIVE_MODULE)
    module.__version__ = "7.8.9"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, NATIVE_MODULE, module)
    return "7.8.9"


@pytest.fixture
def native_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    """No native engine, even where one is installed (None in sys.modules: the import fails as not found)."""
    monkeypatch.setitem(sys.modules, NATIVE_MODULE, None)


@pytest.fixture
def native_broken(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A native engine that is installed and does not load: an extension module file that is no ELF
    object, found first on sys.path."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / f"{NATIVE_MODULE}{suffix}").write_bytes(b"not a shared object\n")
    monkeypatch.delitem(sys.modules, NATIVE_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()


def described(engine: Engine) -> tuple[str, str, str | None]:
    return engine.name, engine.version, engine.fallback_reason


def test_the_choices_are_auto_native_and_python() -> None:
    assert ENGINE_CHOICES == ("auto", "native", "python")


# -- native engine present -------------------------------------------------------------------


def test_auto_takes_the_native_engine_when_it_imports(native_present: str) -> None:
    assert described(select("auto")) == ("native", native_present, None)


def test_native_takes_the_native_engine_when_it_imports(native_present: str) -> None:
    assert described(select("native")) == ("native", native_present, None)


def test_python_takes_the_python_engine_even_when_the_native_one_imports(native_present: str) -> None:
    assert described(select("python")) == ("python", SIDECAR_VERSION, None)


# -- native engine absent --------------------------------------------------------------------


def test_auto_takes_the_python_engine_quietly_when_the_native_one_is_not_installed(native_absent: None) -> None:
    assert described(select("auto")) == ("python", SIDECAR_VERSION, None)


def test_native_refuses_with_one_line_saying_what_is_missing_and_how_to_get_it(native_absent: None) -> None:
    with pytest.raises(EngineUnavailable) as err:
        select("native")

    line = str(err.value)
    assert "\n" not in line
    assert f"module {NATIVE_MODULE}) is not installed" in line
    assert all(way in line for way in ("make engine", "pip install ./engine", "Rust", "SIDECAR_ENGINE=python"))


def test_python_takes_the_python_engine_when_the_native_one_is_not_installed(native_absent: None) -> None:
    assert described(select("python")) == ("python", SIDECAR_VERSION, None)


# -- native engine installed but broken ------------------------------------------------------


def test_auto_falls_back_to_python_and_says_why_when_the_native_engine_does_not_load(native_broken: None) -> None:
    engine = select("auto")

    assert (engine.name, engine.version) == ("python", SIDECAR_VERSION)
    assert engine.fallback_reason is not None and "\n" not in engine.fallback_reason
    assert "is installed but does not import (ImportError: " in engine.fallback_reason


def test_native_refuses_with_the_import_error_when_the_native_engine_does_not_load(native_broken: None) -> None:
    with pytest.raises(EngineUnavailable) as err:
        select("native")

    assert "\n" not in str(err.value)
    assert "is installed but does not import (ImportError: " in str(err.value) and "make engine" in str(err.value)


def test_python_does_not_load_a_broken_native_engine(native_broken: None) -> None:
    assert described(select("python")) == ("python", SIDECAR_VERSION, None)
    assert NATIVE_MODULE not in sys.modules


def test_a_missing_dependency_of_the_native_module_is_a_broken_engine_not_an_absent_one(monkeypatch, tmp_path) -> None:
    (tmp_path / f"{NATIVE_MODULE}.py").write_text("import absent_library_the_engine_needs\n")
    monkeypatch.delitem(sys.modules, NATIVE_MODULE, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))

    reason = select("auto").fallback_reason

    assert reason is not None and "ModuleNotFoundError" in reason and "absent_library_the_engine_needs" in reason


def test_a_module_of_that_name_without_a_version_is_not_taken_for_the_engine(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, NATIVE_MODULE, types.ModuleType(NATIVE_MODULE))

    engine = select("auto")

    assert engine.name == "python" and "no __version__" in (engine.fallback_reason or "")


def test_an_empty_directory_of_that_name_is_named_by_its_path(monkeypatch, tmp_path) -> None:
    # What an image built without the engine leaves (an empty dir imports as a namespace package:
    # a __path__, no __file__).
    namespace = types.ModuleType(NATIVE_MODULE)
    namespace.__path__ = [str(tmp_path / NATIVE_MODULE)]
    monkeypatch.setitem(sys.modules, NATIVE_MODULE, namespace)

    reason = select("auto").fallback_reason

    assert reason is not None and f"at {tmp_path / NATIVE_MODULE} is not the line engine" in reason


# -- the rest --------------------------------------------------------------------------------


def test_an_unknown_choice_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="auto, native, python"):
        select("rust")


def test_the_label_is_name_then_version() -> None:
    assert PythonEngine("0.3.0").label() == "python 0.3.0"
    assert NativeEngine(types.SimpleNamespace(__version__="0.1.0")).label() == "native 0.1.0"


def test_the_installed_native_engine_is_named_with_its_crate_version() -> None:
    if os.environ.get("HYPERDATA_ENGINE_REQUIRED") != "1":  # make test builds it: a missing engine is a failure there
        pytest.importorskip(NATIVE_MODULE, reason="the native engine is not installed (make engine builds it into .venv)")
    crate = tomllib.loads((REPO / "engine" / "Cargo.toml").read_text())["package"]

    assert described(select("auto")) == ("native", crate["version"], None)
