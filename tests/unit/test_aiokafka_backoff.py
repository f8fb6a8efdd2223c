"""aiokafka pauses after a failed metadata refresh or connection (no broker needed)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import client as aiokafka_client
from aiokafka.client import AIOKafkaClient
from aiokafka.cluster import BrokerMetadata
from aiokafka.errors import KafkaError

from hyperdata_sidecar import aiokafka_backoff


async def test_a_failed_refresh_reports_the_failure_only_after_the_pause():
    aiokafka_backoff.install()
    client = AIOKafkaClient(bootstrap_servers="127.0.0.1:9")  # never bootstrapped: no broker to ask
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        with pytest.raises(KafkaError, match="Unable to get cluster metadata"):
            await client.fetch_all_metadata()
    finally:
        await client.close()
    assert loop.time() - began >= aiokafka_backoff.FAILED_REFRESH_PAUSE_S


def test_installing_twice_wraps_once():
    aiokafka_backoff.install()
    wrapped = (AIOKafkaClient._metadata_update, AIOKafkaClient._get_conn)
    aiokafka_backoff.install()
    assert (AIOKafkaClient._metadata_update, AIOKafkaClient._get_conn) == wrapped


class _Conn:
    def connected(self) -> bool:
        return True

    def close(self, reason: Any = None) -> None:
        pass


class _Broker:
    """Stands in for aiokafka's ``create_conn``: refuses while down, counts every attempt."""

    def __init__(self) -> None:
        self.up = False
        self.attempts = 0

    async def create_conn(self, host: str, port: int, **_kwargs: Any) -> _Conn:
        self.attempts += 1
        if not self.up:
            raise ConnectionRefusedError(111, "Connection refused")
        return _Conn()


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> _Broker:
    fake = _Broker()
    monkeypatch.setattr(aiokafka_client, "create_conn", fake.create_conn)
    return fake


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake monotonic clock; the pause's waits advance it and are listed in ``clock[1:]``."""
    now = [1000.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds
        now.append(seconds)

    monkeypatch.setattr(aiokafka_backoff, "_now", lambda: now[0])
    monkeypatch.setattr(aiokafka_backoff, "_sleep", sleep)
    return now


def _client() -> AIOKafkaClient:
    aiokafka_backoff.install()
    client = AIOKafkaClient(bootstrap_servers="127.0.0.1:9")
    client.cluster._brokers[1] = BrokerMetadata(1, "127.0.0.1", 9, None)
    client.force_metadata_update = lambda: None  # the failed connection's refresh: not under test
    return client


PAUSE = aiokafka_backoff.FAILED_CONNECT_PAUSE_S


async def test_within_the_pause_a_request_waits_it_out_and_is_not_ready_without_an_attempt(broker, clock):
    client = _client()
    assert await client.ready(1) is False
    assert (broker.attempts, clock[1:]) == (1, [])
    clock[0] += PAUSE / 4
    assert await client.ready(1) is False
    assert broker.attempts == 1, "tried again within the pause"
    assert clock[1:] == [PAUSE * 3 / 4], "did not wait out the rest of the pause"
    assert await client.ready(1) is False
    assert broker.attempts == 2, "not tried again once the pause had passed"


async def test_a_returning_broker_is_connected_after_the_pause_and_the_pause_is_forgotten(broker, clock):
    client = _client()
    assert await client.ready(1) is False
    broker.up = True
    assert await client.ready(1) is False  # waits out the pause
    assert await client.ready(1) is True
    assert broker.attempts == 2
    # Connected: a later failure pauses afresh, from its own time.
    del client._conns[(1, aiokafka_client.ConnectionGroup.DEFAULT)]
    broker.up = False
    assert await client.ready(1) is False
    assert broker.attempts == 3
    assert clock[1:] == [PAUSE]


async def test_the_pause_is_per_node_and_per_client(broker, clock):
    client, other = _client(), _client()
    client.cluster._brokers[2] = BrokerMetadata(2, "127.0.0.1", 9, None)
    assert await client.ready(1) is False
    assert await client.ready(2) is False
    assert await other.ready(1) is False
    assert (broker.attempts, clock[1:]) == (3, [])
