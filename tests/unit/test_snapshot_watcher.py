"""The snapshot watcher against a real directory and a recording host (standing in for the node
tables, the offsets reader, the announcements and the progress topic): when a snapshot is complete,
when its event goes out, what it says, what is ignored and what is forgotten."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperdata_sidecar import snapshots
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.snapshots import SnapshotWatcher
from tests.unit.fake_broker import tailer_settings

TABLES = ("node_raw_book_diffs_streaming", "node_order_statuses_streaming", "node_fills_streaming")
OFFSETS = {"hyperliquid.book-diffs": {0: 12, 1: 7}, "hyperliquid.fills": {0: 3}}


@dataclass
class Host:
    log: EventLog = field(default_factory=lambda: EventLog(logging.getLogger("tests.snapshots")))
    metrics: SidecarMetrics = field(default_factory=SidecarMetrics)
    past: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(TABLES, True))
    offsets: dict[str, dict[int, int]] | None = field(default_factory=lambda: OFFSETS)
    asked: list[int] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    def published_past(self, height: int) -> dict[str, bool]:
        return dict(self.past)

    async def resume_offsets(self, height: int) -> dict[str, dict[int, int]] | None:
        self.asked.append(height)
        return self.offsets

    async def announce(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    async def forget(self, relpath: str) -> None:
        self.forgotten.append(relpath)


def write_snapshot(watch: Path, date: str, height: int, data: bytes) -> Path:
    path = watch / "periodic_abci_states" / date / f"{height}.rmp"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def watcher(watch: Path, host: Host, announced: set[str] = frozenset(), **env: str) -> SnapshotWatcher:
    settings = tailer_settings(watch, **{"SNAPSHOT_GRACE_MS": "0", "SNAPSHOT_OFFSETS_WAIT_S": "120", **env})
    found = SnapshotWatcher(settings, host, host, host, host, host.metrics, host.log)
    found.start(set(announced))
    return found


@pytest.fixture
def watch(tmp_path: Path) -> Path:
    path = tmp_path / "watch"
    path.mkdir()
    return path


async def test_a_complete_snapshot_is_announced_once_with_its_digest_size_and_offsets(watch):
    data = os.urandom(3 * 1024 * 1024 + 17)
    write_snapshot(watch, "20260610", 1030150000, data)
    host = Host()
    w = watcher(watch, host)
    for _ in range(3):
        await w.tick()
    [event] = host.events
    assert event["height"] == 1030150000 and event["date"] == "20260610"
    assert event["path"] == "periodic_abci_states/20260610/1030150000.rmp"
    assert (event["size"], event["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert event["offsets"] == {"hyperliquid.book-diffs": {"0": 12, "1": 7}, "hyperliquid.fills": {"0": 3}}
    assert event["node"] == "unit" and event["finalized_at"].endswith("Z") and "partial" not in event
    assert host.asked == [1030150000]


async def test_a_snapshot_still_growing_within_the_grace_waits(watch):
    path = write_snapshot(watch, "20260610", 100, b"x" * 100)
    host = Host()
    w = watcher(watch, host, SNAPSHOT_GRACE_MS="3600000")
    await w.tick()
    with open(path, "ab") as f:
        f.write(b"y")
    await w.tick()
    assert host.events == [] and host.asked == []


async def test_the_event_waits_for_every_table_to_publish_past_the_height(watch):
    write_snapshot(watch, "20260610", 100, b"x")
    host = Host()
    host.past["node_fills_streaming"] = False
    w = watcher(watch, host)
    await w.tick()
    assert host.events == []
    host.past["node_fills_streaming"] = True
    await w.tick()
    assert len(host.events) == 1 and "partial" not in host.events[0]


async def test_a_table_quiet_past_the_wait_is_named_partial(watch):
    write_snapshot(watch, "20260610", 100, b"x")
    host = Host()
    host.past["node_fills_streaming"] = False
    w = watcher(watch, host, SNAPSHOT_OFFSETS_WAIT_S="0")
    await w.tick()
    [event] = host.events
    assert event["partial"] == ["node_fills_streaming"]


async def test_offsets_that_cannot_be_read_now_are_asked_for_again(watch):
    write_snapshot(watch, "20260610", 100, b"x")
    host = Host(offsets=None)
    w = watcher(watch, host)
    await w.tick()
    assert host.events == [] and host.asked == [100]
    host.offsets = OFFSETS
    await w.tick()
    assert len(host.events) == 1 and host.asked == [100, 100]


async def test_snapshots_out_of_order_are_each_announced(watch):
    write_snapshot(watch, "20260611", 300, b"c")
    host = Host()
    w = watcher(watch, host)
    await w.tick()
    write_snapshot(watch, "20260610", 200, b"b")
    await w.tick()
    assert [e["height"] for e in host.events] == [300, 200]


async def test_an_announced_snapshot_is_not_announced_again_and_is_forgotten_when_pruned(watch):
    path = write_snapshot(watch, "20260610", 100, b"x")
    host = Host()
    w = watcher(watch, host, announced={"periodic_abci_states/20260610/100.rmp"})
    await w.tick()
    assert host.events == []
    path.unlink()
    await w.tick()
    await w.tick()
    assert host.forgotten == ["periodic_abci_states/20260610/100.rmp"]


async def test_other_names_are_ignored_with_one_log_line_each(watch, caplog):
    write_snapshot(watch, "20260610", 100, b"x")
    (watch / "periodic_abci_states" / "20260610" / "100.rmp.tmp").write_bytes(b"partial")
    (watch / "periodic_abci_states" / "20260610" / "sub").mkdir()
    (watch / "periodic_abci_states" / "notes.txt").write_bytes(b"")
    host = Host()
    w = watcher(watch, host)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await w.tick()
    ignored = sorted(r.getMessage() for r in caplog.records if "snapshot_file_ignored" in r.getMessage())
    assert len(ignored) == 3
    assert [e["height"] for e in host.events] == [100]


async def test_no_snapshot_dir_is_not_an_error(watch):
    host = Host()
    await watcher(watch, host).tick()
    assert host.events == []


async def test_the_age_metric_follows_the_newest_snapshot_seen(watch):
    path = write_snapshot(watch, "20260610", 100, b"x")
    os.utime(path, (1_000_000, 1_000_000))
    host = Host()
    await watcher(watch, host).tick()
    age = host.metrics.registry.get_sample_value("hyperdata_sidecar_snapshot_age_seconds")
    assert age is not None and age > 1_000_000


async def test_snapshots_are_hashed_on_a_thread_of_lower_priority(watch, monkeypatch):
    niceness = []

    def record_priority(path, size):
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return hashlib.sha256(path.read_bytes()[:size]).hexdigest()

    monkeypatch.setattr(snapshots, "_sha256", record_priority)
    write_snapshot(watch, "20260610", 100, b"x")
    host = Host()
    await watcher(watch, host).tick()
    assert len(host.events) == 1
    assert niceness == [min(os.getpriority(os.PRIO_PROCESS, 0) + snapshots.HASH_NICE, 19)]
