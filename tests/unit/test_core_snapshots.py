"""Snapshot files and the block index that gives a snapshot's resume offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.snapshots import BlockIndex, SnapshotFile, is_complete


def test_a_snapshot_path_gives_its_height_and_date():
    found = SnapshotFile.parse("periodic_abci_states/20260610/1030150000.rmp")
    assert found == SnapshotFile(1030150000, "20260610")
    assert found.relpath == "periodic_abci_states/20260610/1030150000.rmp"


@pytest.mark.parametrize(
    "path",
    [
        "periodic_abci_states/20260610/1030150000.rmp.tmp",
        "periodic_abci_states/20260610/01030150000.rmp",
        "periodic_abci_states/20260610/-5.rmp",
        "periodic_abci_states/20260230/5.rmp",
        "periodic_abci_states/2026061/5.rmp",
        "periodic_abci_states/20260610/x/5.rmp",
        "node_fills_streaming/hourly/20260610/5.rmp",
        "periodic_abci_states/20260610/5.json",
    ],
)
def test_other_names_are_not_snapshots(path):
    assert SnapshotFile.parse(path) is None


def test_a_snapshot_is_complete_once_its_size_stood_still_for_the_grace():
    assert is_complete(size=10, stable_since=0.0, now=10.0, grace_s=10.0)
    assert not is_complete(size=10, stable_since=0.5, now=10.0, grace_s=10.0)
    assert not is_complete(size=0, stable_since=0.0, now=100.0, grace_s=10.0)


def test_a_partition_resumes_at_the_first_block_above_the_height():
    index = BlockIndex()
    for block, first, last in [(100, 0, 4), (101, 5, 9), (103, 10, 12)]:
        index.record("t", 0, block, first, last)
    assert index.resume(100, [("t", 0)]).offsets == {"t": {0: 5}}
    assert index.resume(101, [("t", 0)]).offsets == {"t": {0: 10}}
    assert index.resume(102, [("t", 0)]).offsets == {"t": {0: 10}}


def test_a_partition_without_a_block_above_the_height_resumes_past_its_last_record():
    index = BlockIndex()
    index.seed("t", 1, 500)
    index.record("t", 0, 100, 7, 9)
    resume = index.resume(100, [("t", 0), ("t", 1)])
    assert resume.offsets == {"t": {0: 10, 1: 500}}
    assert resume.quiet == [("t", 0), ("t", 1)]


def test_a_block_recorded_twice_keeps_its_first_offset():
    index = BlockIndex()
    index.record("t", 0, 100, 3, 5)
    index.record("t", 0, 100, 8, 9)  # the same block, later in the partition (a block spanning two cycles)
    index.record("t", 0, 101, 10, 11)
    assert index.resume(99, [("t", 0)]).offsets == {"t": {0: 3}}
    assert index.resume(100, [("t", 0)]).offsets == {"t": {0: 10}}


def test_the_index_covers_only_heights_whose_records_all_came_after_the_start():
    index = BlockIndex()
    assert not index.covers("t", 100)
    index.record("t", 2, 200, 0, 0)
    assert index.covers("t", 199) and index.covers("t", 250)
    assert not index.covers("t", 198)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=60), st.integers(0, 70))
def test_resume_offsets_split_any_partition_at_the_height(blocks_per_record, height):
    """Records of non-decreasing blocks land in one partition; the resume offset is the first
    record above the height, or just past the last record."""
    blocks = [sum(blocks_per_record[: i + 1]) for i in range(len(blocks_per_record))]
    index = BlockIndex()
    for offset, block in enumerate(blocks):
        index.record("t", 0, block, offset, offset)
    start = index.resume(height, [("t", 0)]).offsets["t"][0]
    assert all(block <= height for block in blocks[:start])
    assert all(block > height for block in blocks[start:])


def test_forgetting_through_a_height_keeps_the_answers_from_it_on():
    index = BlockIndex()
    for block in range(100, 110):
        index.record("t", 0, block, block * 10, block * 10 + 9)
    index.forget_through(105)
    assert len(index) == 5  # blocks 105 to 109
    assert index.resume(105, [("t", 0)]).offsets == {"t": {0: 1060}}
    assert index.resume(107, [("t", 0)]).offsets == {"t": {0: 1080}}
