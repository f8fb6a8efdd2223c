"""The seal agent's work: a finalized revision already recorded is skipped; one the seal topic already
holds (a crash after the ack, before the table write) is recorded, not sent; any other is sent
(counted, logged) and recorded in the seals table through a real StateWriter on a dict. The seal
topic is read once, for this node's seals only. A real PublishOnce on test_agents_publish_once's
fakes (data plane, lifecycle, shutdown), with its ``topic_values`` faked."""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hyperdata_sidecar.agents.publish_once import PublishOnce
from hyperdata_sidecar.agents.seal import PublishedSeals, Sealer

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.times import epoch_of, iso_utc
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateWriter

from test_agents_publish_once import DataPlane, Lifecycle, Shutdown

LOGGER = "tests.agents_seal"
FILLS = "node_fills_streaming"
PATH = f"{FILLS}/hourly/20260610/22"
SEALS = "hyperliquid.node-files"


def manifest(path: str = PATH, revision: int = 1, node: str = "unit", **changes: Any) -> SealManifest:
    date, hour = path.split("/")[-2:]
    return dataclasses.replace(
        SealManifest(
            table=FILLS,
            path=path,
            date=date,
            hour=hour,
            block_range=(100, 200),
            size=4096,
            sha256="ab" * 32,
            finalized_at=iso_utc(time.time() - 30),
            lines=40,
            dlq_lines=1,
            node=node,
            revision=revision,
        ),
        **changes,
    )


class Parts:
    def __init__(self, tmp_path: Path, seals: dict[str, Any] | None = None, on_topic: list[bytes] | None = None) -> None:
        (tmp_path / "watch").mkdir(exist_ok=True)
        settings = load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit", "TOPIC_SEALS": SEALS})
        self.dataplane, self.metrics = DataPlane(), SidecarMetrics()
        log = EventLog(logging.getLogger(LOGGER))
        lifecycle = Lifecycle()
        self.once = PublishOnce(self.dataplane, settings, lifecycle, Shutdown(lifecycle), self.metrics, log)
        self.on_topic = on_topic or []
        self.reads: list[str] = []
        self.once.topic_values = self.topic_values  # type: ignore[method-assign]
        self.seals: dict[str, Any] = seals if seals is not None else {}
        writer = StateWriter(self.metrics, log, "/state", Shutdown(lifecycle).pause, lambda _table: None)
        self.sealer = Sealer(self.seals, self.once, writer)

    async def topic_values(self, topic: str) -> list[bytes]:
        self.reads.append(topic)
        return list(self.on_topic)

    def emitted(self) -> float | None:
        return self.metrics.registry.get_sample_value("hyperdata_sidecar_seals_emitted_total", {"table": FILLS})


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, Any]]]:
    return [(r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


# -- Sealer.seal ----------------------------------------------------------------------------------


async def test_a_new_seal_is_sent_keyed_by_table_date_and_hour(tmp_path):
    p, sealed = Parts(tmp_path), manifest()
    await p.sealer.seal(sealed)
    assert p.dataplane.sent == [(SEALS, b"node_fills_streaming|20260610|22", sealed.to_json())]


async def test_a_sent_seal_is_counted_with_its_latency_since_the_finalization(tmp_path):
    p, sealed = Parts(tmp_path), manifest()
    finalized = epoch_of(sealed.finalized_at)
    assert finalized is not None
    before = time.time()
    await p.sealer.seal(sealed)
    after = time.time()
    assert p.emitted() == 1
    latency = p.metrics.registry.get_sample_value("hyperdata_sidecar_seal_latency_seconds_sum")
    assert before - finalized <= latency <= after - finalized


async def test_a_sent_seal_is_one_line_with_the_files_figures(tmp_path, caplog):
    p = Parts(tmp_path)
    await p.sealer.seal(manifest(revision=2, block_regressions=3))
    [(event, fields)] = events(caplog)
    assert event == "seal"
    assert {k: v for k, v in fields.items() if k != "seal_lag_s"} == {
        "table": FILLS,
        "path": PATH,
        "size": 4096,
        "sha256": "ab" * 32,
        "block_range": (100, 200),
        "lines": 40,
        "dlq_lines": 1,
        "revision": 2,
        "block_regressions": 3,
    }
    assert fields["seal_lag_s"] == round(p.metrics.registry.get_sample_value("hyperdata_sidecar_seal_latency_seconds_sum"), 3)


async def test_a_sent_seal_is_recorded_in_the_seals_table_with_when(tmp_path):
    p, sealed = Parts(tmp_path), manifest()
    await p.sealer.seal(sealed)
    record = p.seals[PATH]
    assert record["sealed_at"].endswith("Z")
    assert {k: v for k, v in record.items() if k != "sealed_at"} == orjson.loads(sealed.to_json())


@pytest.mark.parametrize("recorded", [1, 2])
async def test_a_revision_already_recorded_or_superseded_is_skipped_without_reading_the_topic(tmp_path, caplog, recorded):
    p = Parts(tmp_path, seals={PATH: {"revision": recorded}})
    await p.sealer.seal(manifest(revision=1))
    assert p.dataplane.sent == [] and p.reads == [] and p.seals == {PATH: {"revision": recorded}}
    assert events(caplog) == [("seal_already_recorded", {"path": PATH, "revision": 1})]


async def test_a_later_revision_than_the_recorded_one_is_sealed(tmp_path):
    p = Parts(tmp_path, seals={PATH: {"revision": 1}})
    await p.sealer.seal(manifest(revision=2))
    assert len(p.dataplane.sent) == 1 and p.seals[PATH]["revision"] == 2


async def test_a_seal_the_topic_already_holds_is_recorded_not_sent_nor_counted(tmp_path, caplog):
    sealed = manifest()
    p = Parts(tmp_path, on_topic=[sealed.to_json()])
    await p.sealer.seal(sealed)
    assert p.dataplane.sent == [] and p.emitted() == 0
    assert p.seals[PATH]["revision"] == 1
    assert events(caplog) == [("seal_found_on_topic", {"path": PATH, "revision": 1})]


async def test_a_seal_the_worker_stopped_before_is_not_recorded(tmp_path):
    p = Parts(tmp_path)
    p.once.lifecycle.connected = False  # type: ignore[misc]
    p.once.shutdown = Shutdown(p.once.lifecycle, stop_at=1)  # type: ignore[arg-type]
    await p.sealer.seal(manifest())
    assert p.dataplane.sent == [] and p.seals == {} and p.emitted() == 0


async def test_a_seal_sent_counts_as_on_the_topic_for_the_rest_of_the_run(tmp_path, caplog):
    p, sealed = Parts(tmp_path), manifest()
    await p.sealer.seal(sealed)
    p.seals.clear()  # the table no longer says so: the topic, read once, still does
    await p.sealer.seal(sealed)
    assert len(p.dataplane.sent) == 1 and p.emitted() == 1 and p.reads == [SEALS]
    assert [event for event, _ in events(caplog)] == ["seal", "seal_found_on_topic"]


# -- a stream's standby (STREAM_ID) ----------------------------------------------------------------


def standby_seals(p: Parts) -> float | None:
    return p.metrics.registry.get_sample_value("hyperdata_sidecar_standby_seals_total", {"table": FILLS})


async def test_a_standbys_seal_is_recorded_marked_and_counted_never_sent_nor_looked_for_on_the_topic(tmp_path, caplog):
    p, sealed = Parts(tmp_path), manifest(standby=True, lines=0, dlq_lines=0)
    await p.sealer.seal(sealed)
    assert p.dataplane.sent == [] and p.reads == [] and not p.emitted()
    record = p.seals[PATH]
    assert record["standby"] is True and record["sealed_at"].endswith("Z")
    assert {k: v for k, v in record.items() if k != "sealed_at"} == orjson.loads(sealed.to_json())
    assert standby_seals(p) == 1
    [(event, fields)] = events(caplog)
    assert event == "standby_seal" and fields["path"] == PATH and fields["sha256"] == "ab" * 32


async def test_a_standbys_seal_of_a_file_with_a_seal_recorded_keeps_the_recorded_one(tmp_path, caplog):
    published = {**orjson.loads(manifest().to_json()), "sealed_at": "2026-06-10T23:00:00Z"}
    p = Parts(tmp_path, seals={PATH: published})
    await p.sealer.seal(manifest(standby=True, sha256="cd" * 32))
    assert p.seals == {PATH: published} and not standby_seals(p)
    assert events(caplog) == [("seal_already_recorded", {"path": PATH, "revision": 1, "standby": True})]


async def test_a_standbys_later_revision_replaces_its_earlier_seal_and_an_equal_one_is_skipped(tmp_path, caplog):
    p = Parts(tmp_path)
    await p.sealer.seal(manifest(standby=True))
    grown = manifest(standby=True, sha256="cd" * 32, revision=2)
    await p.sealer.seal(grown)
    await p.sealer.seal(manifest(standby=True, sha256="ef" * 32, revision=2))
    assert (p.seals[PATH]["revision"], p.seals[PATH]["sha256"], p.seals[PATH]["standby"]) == (2, "cd" * 32, True)
    assert standby_seals(p) == 2 and p.dataplane.sent == []
    assert [fields.get("revision") for event, fields in events(caplog) if event == "standby_seal"] == [1, 2]


async def test_a_file_sealed_as_standby_is_sealed_and_published_once_this_sidecar_publishes_it(tmp_path):
    p = Parts(tmp_path)
    await p.sealer.seal(manifest(standby=True))
    active = manifest(lines=12, offsets={"orders": {"0": [5, 16]}})
    await p.sealer.seal(active)
    assert p.dataplane.sent == [(SEALS, b"node_fills_streaming|20260610|22", active.to_json())]
    assert "standby" not in p.seals[PATH] and p.seals[PATH]["lines"] == 12


# -- PublishedSeals -------------------------------------------------------------------------------


async def test_the_seal_topic_is_read_once_for_every_seal_after_a_start(tmp_path):
    p = Parts(tmp_path)
    await p.sealer.seal(manifest(f"{FILLS}/hourly/20260610/21"))
    await p.sealer.seal(manifest(f"{FILLS}/hourly/20260610/22"))
    assert p.reads == [SEALS] and len(p.dataplane.sent) == 2


async def test_the_topic_holds_a_revision_when_this_node_sealed_it_or_a_later_one(tmp_path):
    p = Parts(tmp_path, on_topic=[manifest(revision=3).to_json(), manifest(revision=1).to_json()])
    published = PublishedSeals(p.once)
    assert await published.contains(manifest(revision=3))
    assert await published.contains(manifest(revision=2))
    assert not await published.contains(manifest(revision=4))
    assert not await published.contains(manifest(f"{FILLS}/hourly/20260610/23"))


async def test_another_nodes_seals_and_records_that_are_not_seals_do_not_count(tmp_path):
    p = Parts(tmp_path, on_topic=[manifest(node="node-b").to_json(), b"not json", b'{"path": "x"}'])
    assert not await PublishedSeals(p.once).contains(manifest())


async def test_a_seal_added_after_the_read_counts_as_on_the_topic(tmp_path):
    p = Parts(tmp_path)
    published = PublishedSeals(p.once)
    assert not await published.contains(manifest())
    published.add(manifest(revision=2))
    assert await published.contains(manifest(revision=2))
    assert p.reads == [SEALS]
