"""Readiness: every reason the worker is not ready, from the rooms that know them (the broker link,
the state writer, the disk), in one list; the gauge written on every move and refresh, never on a read.
With fakes for the broker link and the state writer."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.readiness import Readiness


@dataclass
class Broker:
    reason: str | None = None

    def not_ready_reason(self) -> str | None:
        return self.reason


@dataclass
class State:
    problem: str | None = None


@dataclass
class Topics:
    refused: dict[str, str]

    def refused_topics(self) -> dict[str, str]:
        return self.refused


def make_readiness(
    tmp_path: Path, broker: Broker | None = None, state: State | None = None, topics: Topics | None = None
) -> Readiness:
    (tmp_path / "watch").mkdir(exist_ok=True)
    settings = load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit"})
    log = EventLog(logging.getLogger("tests.readiness"))
    return Readiness(settings, SidecarMetrics(), log, broker or Broker(), state or State(), topics=topics)


def running(readiness: Readiness) -> Readiness:
    for phase in (Phase.CONNECTING, Phase.SYNCING, Phase.RUNNING):
        readiness.move_to(phase)
    return readiness


def ready_gauge(readiness: Readiness) -> float | None:
    return readiness._metrics.registry.get_sample_value("hyperdata_sidecar_ready")


def test_a_running_worker_with_nothing_wrong_is_ready(tmp_path):
    assert running(make_readiness(tmp_path)).not_ready_reasons() == []


def test_each_phase_before_running_is_its_own_reason(tmp_path):
    readiness = make_readiness(tmp_path)
    assert readiness.not_ready_reasons() == ["tables not recovered yet"]
    readiness.move_to(Phase.CONNECTING)
    assert len(readiness.not_ready_reasons()) == 1 and readiness.not_ready_reasons() != ["tables not recovered yet"]


def test_the_broker_links_reason_is_given_except_while_stopping(tmp_path):
    broker = Broker("broker unreachable (k:9092)")
    readiness = running(make_readiness(tmp_path, broker))
    assert readiness.not_ready_reasons() == ["broker unreachable (k:9092)"]
    readiness.move_to(Phase.STOPPING)
    assert "broker unreachable (k:9092)" not in readiness.not_ready_reasons()


def test_held_and_unreadable_tables_are_named_in_table_order(tmp_path):
    readiness = running(make_readiness(tmp_path))
    readiness.hold("node_fills_streaming", "hyperliquid.fills: UNKNOWN_TOPIC_OR_PART")
    readiness.hold("node_book", "x")
    readiness.unreadable["node_order_statuses_streaming"] = "PermissionError: denied"
    assert readiness.not_ready_reasons() == [
        "node_book: cannot publish, keeping its position: x",
        "node_fills_streaming: cannot publish, keeping its position: hyperliquid.fills: UNKNOWN_TOPIC_OR_PART",
        "node_order_statuses_streaming: cannot read the watched tree, keeping its position: PermissionError: denied",
    ]
    readiness.hold("node_book", None)
    readiness.hold("node_fills_streaming", None)
    readiness.unreadable.clear()
    assert readiness.not_ready_reasons() == []


def test_a_topic_the_data_plane_refuses_is_named_unless_a_tables_hold_names_it(tmp_path):
    """exactly_once redoes the reads before a table holds on a deleted topic: readiness names the
    topic meanwhile; once a table holds on it, the hold says it (once)."""
    topics = Topics({"hl.orders": "TOPIC_MISSING (gone)", "hl.dlq": "PARTITION_COUNT (1 partition(s), the contract says 3)"})
    readiness = running(make_readiness(tmp_path, topics=topics))
    assert readiness.not_ready_reasons() == [
        "may not write hl.orders: TOPIC_MISSING (gone)",
        "may not write hl.dlq: PARTITION_COUNT (1 partition(s), the contract says 3)",
    ]
    readiness.hold("node_order_statuses_streaming", "hl.orders: TOPIC_MISSING (gone)")
    assert readiness.not_ready_reasons() == [
        "node_order_statuses_streaming: cannot publish, keeping its position: hl.orders: TOPIC_MISSING (gone)",
        "may not write hl.dlq: PARTITION_COUNT (1 partition(s), the contract says 3)",
    ]
    topics.refused.clear()
    readiness.hold("node_order_statuses_streaming", None)
    assert readiness.not_ready_reasons() == []


def test_a_missing_watch_dir_and_a_state_store_refusing_writes_are_named(tmp_path):
    state = State("STATE_PATH /state: IO error: No space left on device")
    readiness = running(make_readiness(tmp_path, state=state))
    (tmp_path / "watch").rmdir()
    assert readiness.not_ready_reasons() == [
        f"WATCH_DIR {tmp_path / 'watch'} is not a readable directory",
        "STATE_PATH /state: IO error: No space left on device (the tailers read nothing new until the state store takes writes again)",
    ]


def test_the_gauge_is_written_on_moves_and_refreshes_not_on_reads(tmp_path):
    broker = Broker()
    readiness = running(make_readiness(tmp_path, broker))
    assert ready_gauge(readiness) == 1
    broker.reason = "broker unreachable (k:9092)"
    assert readiness.not_ready_reasons() != []
    assert ready_gauge(readiness) == 1
    readiness.refresh()
    assert ready_gauge(readiness) == 0
