"""The object-store sink's server: one moto S3 server per test session (per pytest-xdist worker),
started when a test first asks for it, like the broker of tests/conftest.py; and the worker logs
a failed test shows."""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from hyperdata_sidecar.devs3 import MotoS3, credentials_env

from worker_process import log_sections


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test shows the warnings and errors of each worker log under its ``tmp_path``: CI's
    report is often all that is left of its machine, and a drill's checks name what went wrong, not
    what the worker said meanwhile."""
    report = yield
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if report.when == "call" and report.failed and isinstance(tmp, Path):
        report.sections.extend(log_sections(tmp))
    return report


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """The session's moto S3 server. A test that stops it must start it again before it ends;
    a test that needs to stop a server for good starts its own :class:`MotoS3`."""
    server = MotoS3(tmp_path_factory.mktemp("moto"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: MotoS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the session's server; the sink's client finds the test's credentials
    in the environment."""
    for name, value in credentials_env().items():
        monkeypatch.setenv(name, value)
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    return bucket
