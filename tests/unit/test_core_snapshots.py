"""Snapshot files and the block index that gives a snapshot's resume offsets."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.snapshots import SnapshotBackup, SnapshotFile, is_complete, newest_at_or_below, resume_offset


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


def test_a_partition_resumes_at_the_first_record_above_the_height():
    blocks = [100, 100, 101, 101, 101, 103]
    assert [resume_offset(h, 0, 6, blocks.__getitem__) for h in (99, 100, 101, 102, 103)] == [0, 2, 5, 5, 6]


def test_an_empty_or_trimmed_partition_resumes_at_its_end_or_its_beginning():
    assert resume_offset(5, 40, 40, lambda offset: 1 / 0) == 40
    assert resume_offset(5, 40, 43, lambda offset: 9) == 40


def test_the_search_reads_a_logarithmic_number_of_records():
    reads = []
    blocks = list(range(1_000_000))
    resume_offset(654_321, 0, len(blocks), lambda offset: reads.append(offset) or blocks[offset])
    assert len(reads) <= 21


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=60), st.integers(0, 70), st.integers(0, 5))
def test_resume_offsets_split_any_partition_in_block_order_at_the_height(steps, height, begin):
    blocks = [sum(steps[: i + 1]) for i in range(len(steps))]
    start = resume_offset(height, begin, begin + len(blocks), lambda offset: blocks[offset - begin])
    assert all(block <= height for block in blocks[: start - begin])
    assert all(block > height for block in blocks[start - begin :])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=2, max_size=60), st.data(), st.integers(0, 70))
def test_after_a_crash_repeated_lines_leave_no_line_above_the_height_unread(steps, data, height):
    """Lines published again after a crash: the partition steps back once. A consumer starting at
    the offset found reads every distinct line above the height (duplicates aside)."""
    blocks = [sum(steps[: i + 1]) for i in range(len(steps))]
    cut, again = data.draw(st.integers(1, len(blocks))), data.draw(st.integers(0, len(blocks) - 1))
    again = min(again, cut - 1)
    partition = blocks[:cut] + blocks[again:]  # crashed after `cut`, resumed from the checkpoint at `again`
    start = resume_offset(height, 0, len(partition), partition.__getitem__)
    above = {i for i, block in enumerate(blocks) if block > height}
    read = {again + (i - cut) if i >= cut else i for i in range(start, len(partition))}
    assert above <= read


def test_the_newest_snapshot_at_or_below_a_height_of_one_node():
    events = [
        {"height": 100, "node": "a"},
        {"height": 300, "node": "a"},
        {"height": 250, "node": "b"},
        {"height": 200, "node": "a"},
        {"height": "150", "node": "a"},  # not an event: passed over
        {"node": "a"},
    ]
    assert newest_at_or_below(events, 299, "a") == {"height": 200, "node": "a"}
    assert newest_at_or_below(events, 300, "a") == {"height": 300, "node": "a"}
    assert newest_at_or_below(events, 299, None) == {"height": 250, "node": "b"}
    assert newest_at_or_below(events, 99, "a") is None
    assert newest_at_or_below(events, 1000, "c") is None


def test_a_snapshot_backup_record_round_trips_and_rejects_other_values():
    backup = SnapshotBackup.of_event({"path": "periodic_abci_states/20260610/5.rmp", "sha256": "ab", "size": 9, "height": 5})
    assert SnapshotBackup.from_json(backup.to_json()) == backup and backup.revision == 1
    for bad in (b"", b"[]", b'{"path": "p", "sha256": "s"}', b'{"path": "p", "sha256": "s", "size": "9"}'):
        with pytest.raises(ValueError):
            SnapshotBackup.from_json(bad)
