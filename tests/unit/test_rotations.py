"""The rotation topic's room: a finalized file handed to the agents, whether a revision is sealed,
and the handover again of the finalized files whose seal or backup is not recorded (at start every
unfinished backup gets a new series; after a rebalance a parked one stays parked). A recorder stands
in for the internal topic, plain mappings for the tables."""

from __future__ import annotations

import logging

import pytest
from aiokafka.errors import KafkaTimeoutError

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor, manifest_from_cursor
from hyperdata_sidecar.core.handover import Occasion
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.rotations import Rotations

FILLS = "node_fills_streaming"
UNSEALED = f"{FILLS}/hourly/20260610/22"
DONE = f"{FILLS}/hourly/20260610/21"
PARKED = f"{FILLS}/hourly/20260610/20"
TAILING = f"{FILLS}/hourly/20260610/23"


class TopicRecorder:
    """Stands in for the internal rotation topic: keeps what is sent, refuses the first ``refusals`` sends."""

    def __init__(self, refusals: int = 0) -> None:
        self.sent: list[SealManifest] = []
        self.refusals = refusals

    async def send(self, *, key: str, value: bytes) -> None:
        if self.refusals:
            self.refusals -= 1
            raise KafkaTimeoutError("the rotation topic is unreachable")
        manifest = SealManifest.from_json(value)
        assert key == manifest.path
        self.sent.append(manifest)


def finalized(path: str, revision: int = 1) -> FileCursor:
    return FileCursor(
        path=path, stage=CursorStage.FINALIZED, revision=revision, sha256="ab" * 32, finalized_at="2026-06-10T23:00:03.000Z"
    )


CURSORS = [finalized(UNSEALED), finalized(DONE), finalized(PARKED), FileCursor(path=TAILING, byte_offset=10)]


def rotations_with(topic: TopicRecorder) -> Rotations:
    seals = {DONE: {"revision": 1}, PARKED: {"revision": 1}}
    backups = {
        UNSEALED: {"status": "ok", "revision": 1},
        DONE: {"status": "ok", "revision": 1},
        PARKED: {"status": "parked", "revision": 1},
    }
    return Rotations(topic, seals, backups, "node-a", EventLog(logging.getLogger("tests.rotations")))  # type: ignore[arg-type]


async def test_a_finalized_file_goes_to_the_topic_keyed_by_its_path():
    topic = TopicRecorder()
    manifest = manifest_from_cursor(finalized(UNSEALED), "node-a")
    assert manifest is not None
    await rotations_with(topic).rotate(manifest)
    assert topic.sent == [manifest]


def test_a_revision_is_sealed_once_the_seal_of_it_or_a_later_one_is_recorded():
    rotations = rotations_with(TopicRecorder())
    assert rotations.sealed(DONE, 1) and not rotations.sealed(DONE, 2) and not rotations.sealed(UNSEALED, 1)


async def test_at_start_every_finalized_file_not_sealed_or_not_backed_up_is_handed_over_again_parked_included():
    topic = TopicRecorder()
    await rotations_with(topic).hand_over(CURSORS, Occasion.START)
    assert sorted(m.path for m in topic.sent) == sorted([UNSEALED, PARKED])
    assert all(m.node == "node-a" for m in topic.sent)


async def test_after_a_rebalance_a_parked_backup_stays_parked():
    topic = TopicRecorder()
    await rotations_with(topic).hand_over(CURSORS, Occasion.REBALANCE)
    assert [m.path for m in topic.sent] == [UNSEALED]


async def test_a_refusal_of_the_topic_is_raised_for_the_caller_to_retry():
    with pytest.raises(KafkaTimeoutError):
        await rotations_with(TopicRecorder(refusals=1)).hand_over(CURSORS, Occasion.REBALANCE)
