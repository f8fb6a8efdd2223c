"""After a consumer-group rebalance, the finalized files the agents have not finished are handed to
them again (drill 14: a rotation record committed across a rebalance was backed up, never sealed).

A real Faust app with the sidecar installed (no broker, worker not started); the rotation topic is
replaced by a recorder of what is sent to it, the seals and backups tables by plain mappings."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from aiokafka.errors import KafkaTimeoutError

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.plugin import Sidecar
from tests.unit.test_web_routes import make_app, run_as_started

FILLS = "node_fills_streaming"
UNSEALED = f"{FILLS}/hourly/20260610/22"
DONE = f"{FILLS}/hourly/20260610/21"
PARKED = f"{FILLS}/hourly/20260610/20"
TAILING = f"{FILLS}/hourly/20260610/23"


class RotationRecorder:
    """Stands in for the internal rotation topic: keeps what is sent, refuses the first ``refusals`` sends."""

    def __init__(self, refusals: int = 0) -> None:
        self.sent: list[SealManifest] = []
        self.refusals = refusals

    async def send(self, *, key: str, value: bytes) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaTimeoutError("the rotation topic is unreachable")
        self.sent.append(SealManifest.from_json(value))


def finalized(path: str) -> FileCursor:
    return FileCursor(
        path=path, stage=CursorStage.FINALIZED, revision=1, sha256="ab" * 32, finalized_at="2026-06-10T23:00:03.000Z"
    )


def running_sidecar(tmp_path: Path, recorder: RotationRecorder) -> Sidecar:
    _app, sidecar = make_app(tmp_path)
    cursors = {p: finalized(p) for p in (UNSEALED, DONE, PARKED)} | {TAILING: FileCursor(path=TAILING, byte_offset=10)}
    run_as_started(sidecar, {FILLS: cursors})
    # Faust's RocksDB tables take writes inside stream events only: plain mappings stand in for them.
    sidecar.seals = {DONE: {"revision": 1}, PARKED: {"revision": 1}}  # type: ignore[assignment]
    sidecar.backups = {  # type: ignore[assignment]
        UNSEALED: {"status": "ok", "revision": 1},
        DONE: {"status": "ok", "revision": 1},
        PARKED: {"status": "parked", "revision": 1},
    }
    sidecar.rotations_topic = recorder  # type: ignore[assignment]
    return sidecar


async def rebalance(sidecar: Sidecar) -> None:
    """What Faust does once a rebalance's recovery is complete; returns once the handover it started ended."""
    await sidecar.app.on_rebalance_complete.send()
    await asyncio.gather(*sidecar._handovers)


async def test_a_rebalance_hands_the_unsealed_file_to_the_agents_again(tmp_path: Path) -> None:
    recorder = RotationRecorder()
    sidecar = running_sidecar(tmp_path, recorder)

    await rebalance(sidecar)

    assert [m.path for m in recorder.sent] == [UNSEALED]


async def test_a_rebalance_before_the_tables_are_synced_leaves_the_handover_to_the_start(tmp_path: Path) -> None:
    recorder = RotationRecorder()
    _app, sidecar = make_app(tmp_path)
    sidecar.rotations_topic = recorder  # type: ignore[assignment]

    await rebalance(sidecar)

    assert recorder.sent == []


async def test_a_refused_handover_is_counted_logged_and_tried_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder = RotationRecorder(refusals=1)
    sidecar = running_sidecar(tmp_path, recorder)

    with caplog.at_level(logging.WARNING):
        await rebalance(sidecar)

    assert [m.path for m in recorder.sent] == [UNSEALED]
    assert sidecar.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": "seal"}) == 1
    assert "rotation_resend_failed" in caplog.text
