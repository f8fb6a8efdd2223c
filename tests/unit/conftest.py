"""The unit tests' fixtures: ``line_engine``, which runs a test on each line engine, and ``native``;
and the rule that tests/unit runs with no broker."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar.engines import Engine
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonEngine

from fake_broker import FakeBroker

NATIVE_MODULE = "hyperdata_sidecar_engine"
BROKER_FIXTURES = {"kafka_bootstrap", "kafka_broker"}  # tests/conftest.py's: they start the session's Kafka broker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/unit runs with no broker: a test here that asks for one (directly or through another
    fixture) stops the collection, naming it; it belongs in tests/integration."""
    here = Path(__file__).parent
    wanting = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(here) and BROKER_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if wanting:
        raise pytest.UsageError(f"tests/unit runs with no broker; move these to tests/integration: {', '.join(wanting)}")


@pytest.fixture
def native() -> Any:
    """The compiled engine's module. Skips the test when it is not installed, except where
    HYPERDATA_ENGINE_REQUIRED=1 (make test builds it): a missing engine is a failure there."""
    if os.environ.get("HYPERDATA_ENGINE_REQUIRED") == "1":
        return importlib.import_module(NATIVE_MODULE)
    return pytest.importorskip(NATIVE_MODULE, reason="the native engine is not installed (make engine builds it into .venv)")


@pytest.fixture(params=["python", "native"])
def line_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """The line engine the test runs. Every :class:`FakeBroker` made in the test hands its tailers
    that engine."""
    engine: Engine = PythonEngine("test") if request.param == "python" else NativeEngine(request.getfixturevalue("native"))
    monkeypatch.setattr(FakeBroker, "engine", engine)
    return engine
