"""The verifier's reading of positions: a snapshot's resume offsets and a seal's offset ranges."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.snapshots import resume_offset
from hyperdata_sidecar.tools.positions import PartitionBlocks, block_of, misplaced_records, range_problems

T = "node_fills_streaming"


def partition(blocks: list[int], *, first_offset: int = 0) -> list[tuple[int, int, bytes]]:
    """(offset, block, line_id) for lines of the given blocks, numbered within each block."""
    out, seq = [], {}
    for i, block in enumerate(blocks):
        seq[block] = seq.get(block, -1) + 1
        out.append((first_offset + i, block, f"{T}|{block}|{seq[block]}".encode()))
    return out


@pytest.mark.parametrize(
    ("line_id", "block"),
    [
        (b"node_fills_streaming|1030140001|17", 1030140001),
        (b"node_fills_streaming|1030140001|0|r1", 1030140001),
        (b"node_fills_streaming|1030196121|4|late-20260610-13", 1030196121),
        (b"node_fills_streaming|1030196121|4|r2|late-20260610-13", 1030196121),
        (b"node_fills_streaming|x|4", None),
        (b"node_fills_streaming|1030140001", None),
        (b"", None),
        (None, None),
    ],
)
def test_the_block_is_the_second_field_of_the_line_id_whatever_its_suffixes(line_id, block):
    assert block_of(line_id) == block


def test_a_partition_in_block_order_resumes_exactly_at_its_first_record_above_the_height():
    records = partition([100, 100, 101, 101, 102, 103])

    assert misplaced_records(101, 4, records) == []
    assert [m.offset for m in misplaced_records(101, 3, records)] == [3]
    assert [m.offset for m in misplaced_records(101, 5, records)] == [4]


def test_a_record_at_or_after_the_offset_at_or_below_the_height_is_misplaced():
    [record] = misplaced_records(100, 0, partition([100, 101]))

    assert (record.offset, record.block, record.before) == (0, 100, False)
    assert record.describe(100) == f"offset 0 (at or after it) has block 100 <= 100: {T}|100|0"


def test_records_before_the_offset_above_the_height_are_misplaced():
    [record] = misplaced_records(100, 2, partition([100, 101, 102]))

    assert (record.offset, record.block, record.before) == (1, 101, True)
    assert "(before it) has block 101 > 100" in record.describe(100)


def test_offsets_outside_the_records_read_compare_against_all_or_none_of_them():
    records = partition([100, 101], first_offset=50)

    assert misplaced_records(99, 10, records) == []  # the partition was trimmed below its offset
    assert [m.offset for m in misplaced_records(100, 10, records)] == [50]
    assert [m.offset for m in misplaced_records(100, 90, records)] == [51]


def test_after_a_crash_either_crossing_of_the_height_is_a_valid_resume_offset():
    # Published 100, 101, 102, 103; crashed; the window from 101 on published again.
    records = partition([100, 101, 102, 103])
    records += [(4 + i, block, line_id) for i, (_, block, line_id) in enumerate(records[1:])]

    assert misplaced_records(101, 2, records) == []  # the first crossing: 101 again at 4 is a duplicate
    assert misplaced_records(101, 5, records) == []  # the second: 102, 103 before it come again after it
    assert [m.offset for m in misplaced_records(101, 1, records)] == [1, 4]
    assert [m.offset for m in misplaced_records(101, 6, records)] == [2, 5]


def test_a_line_at_or_below_the_height_after_the_offset_is_misplaced_unless_it_came_before():
    records = partition([100, 101, 102])
    records.append((3, 101, f"{T}|101|7".encode()))  # a line of block 101 never seen before

    [record] = misplaced_records(101, 2, records)
    assert (record.offset, record.before) == (3, False)


def test_a_partial_table_is_checked_only_before_its_offset():
    records = partition([100, 101, 102])

    assert misplaced_records(105, 1, records, partial=True) == []
    assert [m.offset for m in misplaced_records(100, 3, records, partial=True)] == [1, 2]


def test_records_without_a_block_are_not_judged():
    records = [(0, 100, f"{T}|100|0".encode()), (1, None, b"garbage"), (2, 101, None), (3, 102, f"{T}|102|0".encode())]

    assert misplaced_records(100, 1, records) == []


def test_one_partition_index_serves_many_heights():
    blocks = PartitionBlocks(partition([100, 100, 101, 102, 102, 103]))

    assert [blocks.misplaced(h, resume_offset(h, 0, 6, [100, 100, 101, 102, 102, 103].__getitem__)) for h in range(99, 104)] == [
        []
    ] * 5


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.integers(0, 60), st.data())
def test_in_block_order_only_the_first_offset_above_the_height_passes(steps, height, data):
    blocks = [sum(steps[: i + 1]) for i in range(len(steps))]
    records = partition(blocks)
    resume = data.draw(st.integers(0, len(blocks)))
    right = next((i for i, block in enumerate(blocks) if block > height), len(blocks))

    assert (misplaced_records(height, resume, records) == []) == (resume == right)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=40), st.data(), st.integers(0, 60))
def test_the_sidecars_search_passes_after_any_crash_window(steps, data, height):
    blocks = [sum(steps[: i + 1]) for i in range(len(steps))]
    lines = partition(blocks)
    cut = data.draw(st.integers(1, len(lines)))
    again = min(data.draw(st.integers(0, len(lines) - 1)), cut - 1)
    republished = [(cut + i, block, line_id) for i, (_, block, line_id) in enumerate(lines[again:])]
    records = lines[:cut] + republished
    resume = resume_offset(height, 0, len(records), lambda offset: records[offset][1])

    assert misplaced_records(height, resume, records) == []


# ---- seal ranges --------------------------------------------------------------------

A = f"{T}/hourly/20260610/22"
B = f"{T}/hourly/20260610/23"


def records_of(*sources: tuple[str, int]) -> list[tuple[int, str, int]]:
    return [(offset, source, line_offset) for offset, (source, line_offset) in enumerate(sources)]


def test_a_range_from_the_files_first_to_its_last_record_holds_it():
    records = records_of((A, 0), (A, 10), (A, 20), (B, 0))

    assert range_problems(A, 0, 2, records) == []
    assert range_problems(B, 3, 3, records) == []


def test_a_range_whose_ends_are_not_the_files_records_is_wrong():
    records = records_of((A, 0), (A, 10), (B, 0))

    assert range_problems(A, 0, 2, records) == [f"last offset 2 holds a line of {B}@0, not of this file"]
    assert range_problems(A, 0, 5, records) == ["last offset 5 holds no record"]
    assert range_problems(A, 2, 1, records) == ["range [2, 1] ends before it begins"]


def test_a_line_of_the_file_outside_the_range_is_wrong_unless_a_copy_is_inside():
    records = records_of((A, 0), (A, 10), (A, 20), (B, 0), (A, 10), (A, 20))

    [problem] = range_problems(A, 0, 1, records)
    assert problem == "2 record(s) of the file outside [0, 1] with no copy inside, e.g. offset 2 (line @20)"
    assert range_problems(A, 1, 5, records) == [
        "1 record(s) of the file outside [1, 5] with no copy inside, e.g. offset 0 (line @0)"
    ]
    assert range_problems(A, 0, 2, records) == []  # the copies at 4 and 5 repeat lines inside


def test_an_earlier_revisions_range_need_not_hold_the_lines_appended_after_it():
    records = records_of((A, 0), (A, 10), (B, 0), (A, 20))

    assert range_problems(A, 0, 1, records, every_line=False) == []
    assert range_problems(A, 0, 2, records, every_line=False) == [f"last offset 2 holds a line of {B}@0, not of this file"]
    assert range_problems(A, 0, 1, records) != []
