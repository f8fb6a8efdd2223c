"""Shared fixtures: one real Kafka broker per pytest session, and unique names per test.

Only tests that request ``kafka_bootstrap`` or ``kafka_broker`` start the broker (and are
marked ``kafka``, so ``-m "not kafka"`` deselects them); the unit tests run without Java.

``HYPERDATA_TEST_BOOTSTRAP=HOST:PORT`` points the tests at a broker that is already up
(for example ``make kafka-up``'s, on 127.0.0.1:9092) instead of starting one.

Under pytest-xdist (``make test`` runs ``-n``) each worker process is a session of its own: it
starts its own broker, on its own free ports and in its own temp dir, so a fault drill that stops
or freezes its broker disturbs only the tests of its own worker. Topic names and app ids stay
unique across workers (``unique_topic_prefix``). Which tests go to one worker together is
:func:`xdist_scope`'s choice.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import pytest

from hyperdata_sidecar.devkafka import LocalKafka, free_low_port

_KAFKA_FIXTURES = {"kafka_bootstrap", "kafka_broker"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)


_DRILLS = "tests/integration/test_drills.py"


def xdist_scope(nodeid: str) -> str:
    """The unit of work pytest-xdist hands one worker: a whole module for the integration tests,
    which then run in their order on one worker, as without xdist (several share a module-scoped
    fixture: a SASL broker, a worker, an install into a fresh venv; and test_web.py's gauge tests
    read the gauges after test_metrics_count_exactly_what_the_corpus_holds waited for their
    refresh); each test alone for the fault drills (each has its own worker process, data dir and
    topics, and they are the longest tests) and for the unit tests."""
    module = nodeid.split("::", 1)[0]
    if module.startswith("tests/integration/") and module != _DRILLS:
        return module
    return nodeid


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's load-by-scope scheduling with :func:`xdist_scope` as the scope (xdist's own
    --dist loadgroup does not group with pytest 9.2, whose nodeids it no longer sets)."""
    from xdist.scheduler import LoadScopeScheduling

    class ScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ScopeScheduling(config, log)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka | None]:
    """The session's LocalKafka (None when HYPERDATA_TEST_BOOTSTRAP names an external one).

    Fault drills may stop and start it (through ``asyncio.to_thread`` from async tests);
    a test that stops it must start it again before it ends.
    """
    if os.environ.get("HYPERDATA_TEST_BOOTSTRAP"):
        yield None
        return
    port = free_low_port()
    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), port=port, controller_port=free_low_port(exclude={port}))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: LocalKafka | None) -> str:
    """``HOST:PORT`` of the broker the tests use."""
    return os.environ.get("HYPERDATA_TEST_BOOTSTRAP") or kafka_broker.bootstrap


@pytest.fixture
def unique_topic_prefix(request: pytest.FixtureRequest) -> str:
    """A prefix no other test (or earlier run against the same broker) uses, ending in '.'.

    Legal in topic names, consumer group ids and Faust app ids, e.g.
    ``t-test-transactional-commit-3f9a2c1b.``.
    """
    readable = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    return f"t-{readable}-{uuid.uuid4().hex[:8]}."
