"""Publishing a seal or a snapshot event once: it waits while the worker is not connected, skips what
the topic already holds, sends the rest through the data plane, and retries a refusal (counted as the
kind's producer error, logged, rate-limited) after a back-off until it is taken or the worker stops.
Fakes for the data plane (``partitions``, ``send``), the lifecycle and the shutdown."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError
from confluent_kafka import KafkaError, KafkaException
from hyperdata_sidecar.agents import publish_once
from hyperdata_sidecar.agents.publish_once import Published, PublishOnce

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

LOGGER = "tests.publish_once"
PATH = "node_fills_streaming/hourly/20260610/22"
RECORD = ("hyperliquid.node-files", b"node_fills_streaming|20260610|22", b'{"path": "..."}')


class DataPlane:
    """The data plane: refuses its next ``refusals`` sends for good (as a topic that is missing)."""

    def __init__(self, refusals: int = 0) -> None:
        self.partitions = {"hyperliquid.node-files": 3}
        self.refusals = refusals
        self.sent: list[tuple[Any, ...]] = []

    async def send(self, topic: str, key: bytes, value: bytes, headers: list[tuple[str, bytes]] | None = None) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        self.sent.append((topic, key, value))


class Lifecycle:
    connected = True


class Shutdown:
    """Records each pause; the worker connects after ``connect_after`` pauses, stops at ``stop_at``."""

    def __init__(self, lifecycle: Lifecycle, *, connect_after: int | None = None, stop_at: int | None = None) -> None:
        self.lifecycle = lifecycle
        self.connect_after = connect_after
        self.stop_at = stop_at
        self.pauses: list[float] = []

    async def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        if self.connect_after is not None and len(self.pauses) >= self.connect_after:
            self.lifecycle.connected = True
        return self.stop_at is None or len(self.pauses) < self.stop_at


class Parts:
    def __init__(self, tmp_path: Path, *, refusals: int = 0, connected: bool = True, **pausing: int) -> None:
        (tmp_path / "watch").mkdir(exist_ok=True)
        settings = load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit"})
        self.dataplane, self.lifecycle, self.metrics = DataPlane(refusals), Lifecycle(), SidecarMetrics()
        self.lifecycle.connected = connected
        self.shutdown = Shutdown(self.lifecycle, **pausing)
        log = EventLog(logging.getLogger(LOGGER))
        self.once = PublishOnce(self.dataplane, settings, self.lifecycle, self.shutdown, self.metrics, log)
        self.asked = 0

    async def on_topic(self, answer: bool = False) -> bool:
        self.asked += 1
        return answer

    async def publish(self, kind: str = "seal", on_topic: Any = None) -> Published:
        return await self.once.publish(kind, PATH, RECORD, on_topic or self.on_topic)  # type: ignore[arg-type]

    def errors(self, kind: str) -> float | None:
        return self.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": kind})


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


async def test_a_record_not_on_the_topic_is_sent_through_the_data_plane(tmp_path):
    p = Parts(tmp_path)
    assert await p.publish() is Published.SENT
    assert p.dataplane.sent == [RECORD] and p.asked == 1


async def test_a_record_the_topic_already_holds_is_not_sent(tmp_path):
    p = Parts(tmp_path)

    async def on_topic() -> bool:
        return await p.on_topic(True)

    assert await p.publish(on_topic=on_topic) is Published.ON_TOPIC
    assert p.dataplane.sent == []


async def test_while_the_worker_is_not_connected_it_waits_before_looking_at_the_topic(tmp_path):
    p = Parts(tmp_path, connected=False, connect_after=3)
    assert await p.publish() is Published.SENT
    assert p.shutdown.pauses == [publish_once.STOP_CHECK_S] * 3
    assert p.dataplane.sent == [RECORD]


async def test_a_worker_that_stops_before_it_connects_publishes_nothing(tmp_path):
    p = Parts(tmp_path, connected=False, stop_at=2)
    assert await p.publish() is Published.STOPPED
    assert p.asked == 0 and p.dataplane.sent == []


@pytest.mark.parametrize("kind, event", [("seal", "seal_failed"), ("snapshot", "snapshot_event_failed")])
async def test_a_refusal_is_counted_logged_once_and_retried_after_a_doubling_back_off(tmp_path, caplog, kind, event):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = Parts(tmp_path, refusals=2)
    assert await p.publish(kind) is Published.SENT
    assert p.dataplane.sent == [RECORD] and p.asked == 3  # the topic is asked again before each try
    assert p.shutdown.pauses == [0.5, 1.0]
    assert p.errors(kind) == 2
    [(level, said, fields)] = lines(caplog)  # rate-limited per path
    assert (level, said) == ("WARNING", event)
    assert fields["path"] == PATH and fields["retry_in_s"] == 0.5 and "UNKNOWN_TOPIC_OR_PART" in fields["error"]


@pytest.mark.parametrize("failure", [KafkaTimeoutError(), OSError("connection reset")])
async def test_a_failed_read_of_the_topic_is_counted_and_retried(tmp_path, failure):
    p = Parts(tmp_path)
    failures = [failure]

    async def on_topic() -> bool:
        if failures:
            raise failures.pop()
        return False

    assert await p.publish("snapshot", on_topic) is Published.SENT
    assert p.errors("snapshot") == 1 and p.errors("seal") == 0 and p.shutdown.pauses == [0.5]


async def test_a_read_of_the_topic_that_does_not_answer_in_time_is_a_failure_retried(tmp_path, monkeypatch):
    monkeypatch.setattr(publish_once, "TOPIC_READ_TIMEOUT_S", 0.01)
    p = Parts(tmp_path)
    reads = 0

    async def on_topic() -> bool:
        nonlocal reads
        reads += 1
        if reads == 1:
            await asyncio.Event().wait()  # the first read never answers
        return False

    assert await asyncio.wait_for(p.publish("seal", on_topic), timeout=5) is Published.SENT
    assert p.errors("seal") == 1 and p.dataplane.sent == [RECORD]


async def test_a_worker_that_stops_during_the_back_off_gives_the_record_up(tmp_path):
    p = Parts(tmp_path, refusals=5, stop_at=2)
    assert await p.publish() is Published.STOPPED
    assert p.dataplane.sent == [] and p.shutdown.pauses == [0.5, 1.0]
