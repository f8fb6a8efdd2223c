"""The verifier's entry point: topic names by role, checked before anything is read, and what it waits for."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.snapshot_files import ExpectedSnapshot
from hyperdata_sidecar.tools.verify import DLQ, SEALS, SNAPSHOTS, _owed, default_topics, verify


def test_default_topics_follow_the_sidecars_environment_variables():
    topics = default_topics({"TOPIC_FILLS": "x.fills", "TOPIC_DLQ": "x.dlq", "TOPIC_SNAPSHOTS": "x.snapshots"})

    assert topics == {
        BOOK_DIFFS: "hyperliquid.book-diffs",
        ORDER_STATUSES: "hyperliquid.order-statuses",
        FILLS: "x.fills",
        DLQ: "x.dlq",
        SEALS: "hyperliquid.node-files",
        SNAPSHOTS: "x.snapshots",
    }
    assert default_topics({})[SNAPSHOTS] == "hyperliquid.node-snapshots"


async def test_topics_without_a_name_for_every_role_are_refused_before_connecting(tmp_path):
    topics = default_topics({})
    del topics[SEALS]

    with pytest.raises(ValueError, match="seals"):
        await verify(tmp_path, "127.0.0.1:1", topics=topics)


async def test_an_unknown_isolation_level_is_refused_before_connecting(tmp_path):
    with pytest.raises(ValueError, match="read_uncommitted, read_committed"):
        await verify(tmp_path, "127.0.0.1:1", topics=default_topics({}), isolation="serializable")


def test_the_wait_for_convergence_owes_one_event_per_complete_snapshot_and_its_backup(tmp_path):
    topics = default_topics({})
    snapshots = [
        ExpectedSnapshot(SnapshotFile(100, "20260610"), 10, "a" * 64, complete=True),
        ExpectedSnapshot(SnapshotFile(200, "20260610"), 10, "b" * 64, complete=False),
    ]
    data = {topics[t]: 0 for t in (BOOK_DIFFS, ORDER_STATUSES, FILLS, DLQ)}

    owed = _owed([], snapshots, topics, tmp_path)
    without = _owed([], [], {k: v for k, v in topics.items() if k != SNAPSHOTS}, None)

    assert owed.backups == [(tmp_path / "periodic_abci_states/20260610/100.rmp", 10)]
    assert not owed.met_by(data) and owed.met_by({**data, topics[SNAPSHOTS]: 1})
    assert without.met_by(data) and topics[SNAPSHOTS] not in without.topics
    assert not without.met_by({})  # the data topics and the DLQ must exist
