"""The snapshot agent's publishing: an event already recorded is skipped; one the snapshot topic
already holds is recorded, not sent; any other is sent keyed by its height (counted, logged) and
recorded in the snapshots table through a real StateWriter on a dict; False when the worker stops
first. The snapshot topic is read once, for this node's heights only. A real PublishOnce on
test_agents_publish_once's fakes, with its ``topic_values`` faked."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from hyperdata_sidecar.agents.publish_once import PublishOnce
from hyperdata_sidecar.agents.snapshot import PublishedSnapshots, SnapshotPublisher

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateWriter

from test_agents_publish_once import DataPlane, Lifecycle, Shutdown

LOGGER = "tests.agents_snapshot"
TOPIC = "hyperliquid.node-snapshots"


def event(height: int = 100, node: str = "unit", **changes: Any) -> dict[str, Any]:
    return {
        "height": height,
        "path": f"periodic_abci_states/20260610/{height}.rmp",
        "date": "20260610",
        "size": 1300,
        "sha256": "ab" * 32,
        "finalized_at": "2026-06-10T22:00:03.000Z",
        "node": node,
        "offsets": {"hyperliquid.fills": {"0": 12}},
        **changes,
    }


PATH = event()["path"]


class Parts:
    def __init__(self, tmp_path: Path, snapshots: dict[str, Any] | None = None, on_topic: list[bytes] | None = None) -> None:
        (tmp_path / "watch").mkdir(exist_ok=True)
        settings = load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit", "TOPIC_SNAPSHOTS": TOPIC})
        self.dataplane, self.metrics = DataPlane(), SidecarMetrics()
        log = EventLog(logging.getLogger(LOGGER))
        self.lifecycle = Lifecycle()
        self.once = PublishOnce(self.dataplane, settings, self.lifecycle, Shutdown(self.lifecycle), self.metrics, log)
        self.on_topic = on_topic or []
        self.reads: list[str] = []
        self.once.topic_values = self.topic_values  # type: ignore[method-assign]
        self.snapshots: dict[str, Any] = snapshots if snapshots is not None else {}
        writer = StateWriter(self.metrics, log, "/state", Shutdown(self.lifecycle).pause, lambda _table: None)
        self.publisher = SnapshotPublisher(self.snapshots, self.once, writer)

    async def topic_values(self, topic: str) -> list[bytes]:
        self.reads.append(topic)
        return list(self.on_topic)

    def emitted(self) -> float | None:
        return self.metrics.registry.get_sample_value("hyperdata_sidecar_snapshots_emitted_total")


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, Any]]]:
    return [(r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


# -- SnapshotPublisher.publish --------------------------------------------------------------------


async def test_a_new_event_is_sent_keyed_by_its_height(tmp_path):
    p = Parts(tmp_path)
    assert await p.publisher.publish(event()) is True
    assert p.dataplane.sent == [(TOPIC, b"100", orjson.dumps(event()))]


async def test_a_sent_event_is_counted_and_one_line_naming_the_quiet_tables(tmp_path, caplog):
    p = Parts(tmp_path)
    await p.publisher.publish(event(partial=["node_fills_streaming"]))
    assert p.emitted() == 1
    assert events(caplog) == [
        (
            "snapshot",
            {"path": PATH, "height": 100, "size": 1300, "sha256": "ab" * 32, "partial": ["node_fills_streaming"]},
        )
    ]


async def test_a_sent_event_is_recorded_in_the_snapshots_table_with_when(tmp_path):
    p = Parts(tmp_path)
    await p.publisher.publish(event())
    record = p.snapshots[PATH]
    assert record["published_at"].endswith("Z")
    assert {k: v for k, v in record.items() if k != "published_at"} == event()


async def test_an_event_already_recorded_is_skipped_without_reading_the_topic(tmp_path, caplog):
    p = Parts(tmp_path, snapshots={PATH: {"height": 100}})
    assert await p.publisher.publish(event()) is True
    assert p.dataplane.sent == [] and p.reads == [] and p.snapshots == {PATH: {"height": 100}}
    assert events(caplog) == [("snapshot_already_recorded", {"path": PATH, "height": 100})]


async def test_an_event_the_topic_already_holds_is_recorded_not_sent_nor_counted(tmp_path, caplog):
    p = Parts(tmp_path, on_topic=[orjson.dumps(event())])
    assert await p.publisher.publish(event()) is True
    assert p.dataplane.sent == [] and p.emitted() == 0 and PATH in p.snapshots
    assert events(caplog) == [("snapshot_found_on_topic", {"path": PATH, "height": 100})]


async def test_an_event_the_worker_stopped_before_is_not_recorded_and_says_so(tmp_path):
    p = Parts(tmp_path)
    p.lifecycle.connected = False
    p.once.shutdown = Shutdown(p.lifecycle, stop_at=1)  # type: ignore[arg-type]
    assert await p.publisher.publish(event()) is False
    assert p.dataplane.sent == [] and p.snapshots == {}


async def test_an_event_whose_table_write_the_worker_stopped_during_says_so(tmp_path):
    class Full(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            raise Exception("IO error: No space left on device")

    p = Parts(tmp_path, snapshots=Full())
    p.publisher.writer = StateWriter(p.metrics, p.once.log, "/state", Shutdown(p.lifecycle, stop_at=1).pause, lambda _t: None)
    assert await p.publisher.publish(event()) is False
    assert len(p.dataplane.sent) == 1


async def test_an_event_sent_counts_as_on_the_topic_for_the_rest_of_the_run(tmp_path, caplog):
    p = Parts(tmp_path)
    await p.publisher.publish(event())
    p.snapshots.clear()
    await p.publisher.publish(event())
    assert len(p.dataplane.sent) == 1 and p.reads == [TOPIC]
    assert [name for name, _ in events(caplog)] == ["snapshot", "snapshot_found_on_topic"]


# -- PublishedSnapshots ---------------------------------------------------------------------------


async def test_the_snapshot_topic_is_read_once_for_every_event_after_a_start(tmp_path):
    p = Parts(tmp_path)
    await p.publisher.publish(event(100))
    await p.publisher.publish(event(200))
    assert p.reads == [TOPIC] and len(p.dataplane.sent) == 2


async def test_only_this_nodes_heights_are_on_the_topic_and_unreadable_records_are_passed_over(tmp_path):
    values = [
        orjson.dumps(event(100)),
        orjson.dumps(event(200, node="node-b")),
        b"not json",
        b"[1, 2]",
        orjson.dumps({"node": "unit"}),
        orjson.dumps({"node": "unit", "height": "three hundred"}),
    ]
    published = PublishedSnapshots(Parts(tmp_path, on_topic=values).once)
    assert await published.contains(100)
    assert not await published.contains(200)
    assert not await published.contains(300)
