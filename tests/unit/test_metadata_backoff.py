"""A failed aiokafka metadata refresh pauses before it reports the failure (no broker needed)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError

from hyperdata_sidecar import metadata_backoff


async def test_a_failed_refresh_reports_the_failure_only_after_the_pause():
    metadata_backoff.install()
    client = AIOKafkaClient(bootstrap_servers="127.0.0.1:9")  # never bootstrapped: no broker to ask
    loop = asyncio.get_running_loop()
    began = loop.time()
    try:
        with pytest.raises(KafkaError, match="Unable to get cluster metadata"):
            await client.fetch_all_metadata()
    finally:
        await client.close()
    assert loop.time() - began >= metadata_backoff.FAILED_REFRESH_PAUSE_S


def test_installing_twice_wraps_once():
    metadata_backoff.install()
    wrapped = AIOKafkaClient._metadata_update
    metadata_backoff.install()
    assert AIOKafkaClient._metadata_update is wrapped
