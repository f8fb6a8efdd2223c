"""A snapshot's resume offsets as the watcher asks for them: read off the data topics in a worker
thread, for each data topic's partitions as the data plane counts them; None and one warning (at most
one a minute per height) when they cannot be read now. The blocking read (``resume_offsets``) is
monkeypatched; a fake data plane gives the partition counts."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar import snapshot_offsets
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.snapshot_offsets import OffsetsUnavailable, SnapshotOffsets

LOGGER = "tests.snapshot_offsets"
PARTITIONS = {
    "hyperliquid.book-diffs": 6,
    "hyperliquid.order-statuses": 4,
    "hyperliquid.fills": 3,
    "hyperliquid.sidecar-dlq": 2,
    "hyperliquid.node-files": 1,
}


class DataPlane:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions


class Read:
    """The blocking read: records each call (and its thread); raises ``failure`` while it is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[dict[str, Any], dict[str, int], int]] = []
        self.threads: list[threading.Thread] = []
        self.failure: Exception | None = None
        monkeypatch.setattr(snapshot_offsets, "resume_offsets", self)

    def __call__(self, config: dict[str, Any], partitions: dict[str, int], height: int) -> dict[str, dict[int, int]]:
        self.calls.append((dict(config), dict(partitions), height))
        self.threads.append(threading.current_thread())
        if self.failure is not None:
            raise self.failure
        return {topic: {p: 10 * p for p in range(count)} for topic, count in partitions.items()}


def offsets(tmp_path: Path, partitions: dict[str, int] = PARTITIONS, **env: str) -> SnapshotOffsets:
    (tmp_path / "watch").mkdir(exist_ok=True)
    settings = load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit", "KAFKA_BOOTSTRAP": "k1:9092", **env})
    return SnapshotOffsets(settings, DataPlane(partitions), EventLog(logging.getLogger(LOGGER)))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


async def test_the_offsets_are_read_for_every_partition_of_each_data_topic_only(tmp_path, monkeypatch):
    read = Read(monkeypatch)
    found = await offsets(tmp_path).resume_offsets(1000)
    [(_config, partitions, height)] = read.calls
    assert height == 1000
    assert partitions == {"hyperliquid.book-diffs": 6, "hyperliquid.order-statuses": 4, "hyperliquid.fills": 3}
    assert found == {topic: {p: 10 * p for p in range(count)} for topic, count in partitions.items()}


async def test_the_data_topics_are_the_configured_ones(tmp_path, monkeypatch):
    read = Read(monkeypatch)
    await offsets(tmp_path, {**PARTITIONS, "acme.fills": 5}, TOPIC_FILLS="acme.fills").resume_offsets(1000)
    [(_config, partitions, _height)] = read.calls
    assert partitions == {"hyperliquid.book-diffs": 6, "hyperliquid.order-statuses": 4, "acme.fills": 5}


async def test_the_read_goes_to_the_bootstrap_with_the_security_settings(tmp_path, monkeypatch):
    read = Read(monkeypatch)
    sasl = {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "sidecar"}
    await offsets(tmp_path, **sasl, KAFKA_SASL_PASSWORD="pw").resume_offsets(1000)
    [(config, _partitions, _height)] = read.calls
    assert config["bootstrap.servers"] == "k1:9092"
    assert (config["security.protocol"], config["sasl.mechanism"], config["sasl.username"]) == (
        "sasl_plaintext",
        "PLAIN",
        "sidecar",
    )


async def test_the_blocking_read_runs_in_a_worker_thread(tmp_path, monkeypatch):
    read = Read(monkeypatch)
    await offsets(tmp_path).resume_offsets(1000)
    assert read.threads != [threading.main_thread()] and read.threads[0] is not threading.current_thread()


async def test_offsets_that_cannot_be_read_now_are_none_and_a_warning_at_most_once_a_minute_per_height(
    tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.INFO, logger=LOGGER)
    read = Read(monkeypatch)
    read.failure = OffsetsUnavailable("hyperliquid.fills[0] @12: no record")
    reader = offsets(tmp_path)
    assert await reader.resume_offsets(1000) is None
    assert await reader.resume_offsets(1000) is None
    assert await reader.resume_offsets(2000) is None
    assert lines(caplog) == [
        ("WARNING", "snapshot_offsets_unavailable", {"height": 1000, "error": "hyperliquid.fills[0] @12: no record"}),
        ("WARNING", "snapshot_offsets_unavailable", {"height": 2000, "error": "hyperliquid.fills[0] @12: no record"}),
    ]
