"""The object-store sink's server: one moto S3 server per test session (per pytest-xdist worker),
started when a test first asks for it, like the broker of tests/conftest.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from hyperdata_sidecar.devs3 import MotoS3, credentials_env


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
