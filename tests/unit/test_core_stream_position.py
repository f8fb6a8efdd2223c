"""A stream's position per table, and finding it in another node's files by line id and event."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.stream_position import (
    Disagreement,
    Found,
    StreamPosition,
    WalkedLine,
    event_digest,
    find,
    following,
    position_after,
)
from hyperdata_sidecar.core.tables import TABLE_BY_DIR

TABLE = "node_fills_streaming"
SPEC = TABLE_BY_DIR[TABLE]


def fill_line(block: int, tid: int, events: int = 1, local_time: str = "2026-06-10T22:00:00.1") -> bytes:
    fills = [["0xuser", {"coin": "BTC", "px": "1", "tid": tid * 10 + n}] for n in range(events)]
    envelope = {"local_time": local_time, "block_time": "2026-06-10T22:00:00", "block_number": block, "events": fills}
    return orjson.dumps(envelope)


def walk(lines: list[bytes], path: str = "node_fills_streaming/hourly/20260610/22") -> list[WalkedLine]:
    walked, offset = [], 0
    for line in lines:
        end = offset + len(line) + 1
        walked.append(WalkedLine(path, offset, end, inspect_line(SPEC, line), line))
        offset = end
    return walked


def position_of(lines: list[bytes], index: int) -> StreamPosition:
    """The position after ``lines[index]``, as the active that published ``lines`` writes it."""
    infos = [inspect_line(SPEC, line) for line in lines[: index + 1]]
    assert all(isinstance(info, LineInfo) for info in infos)
    info = infos[-1]
    assert isinstance(info, LineInfo)
    seq = sum(i.n_events for i in infos if isinstance(i, LineInfo) and i.block_number == info.block_number)
    block = info.block_number
    return position_after(TABLE, (block, seq, 0), lines[index], info, node="node-a", source="a/path", offset=index)


NODE_A = [fill_line(100, 1), fill_line(101, 2, events=2), fill_line(101, 3), fill_line(101, 4, events=3), fill_line(102, 5)]
NODE_B = [orjson.dumps({**orjson.loads(line), "local_time": "2026-06-10T22:00:07.9"}) for line in NODE_A]


def test_the_same_event_written_by_two_nodes_has_one_digest():
    assert NODE_A[1] != NODE_B[1]
    assert event_digest(NODE_A[1]) == event_digest(NODE_B[1])
    assert event_digest(NODE_A[1]) != event_digest(NODE_A[2])


@pytest.mark.parametrize("index", range(len(NODE_A)))
def test_the_stream_continues_right_after_its_line_in_the_other_nodes_files(index):
    position = position_of(NODE_A, index)
    found = find(position, walk(NODE_B))
    assert found == Found("node_fills_streaming/hourly/20260610/22", walk(NODE_B)[index].end)


def test_the_position_names_its_line_id_and_the_sequencer_after_it():
    position = position_of(NODE_A, 2)
    assert (position.line_id, position.seq_state) == ("node_fills_streaming|101|2", (101, 3, 0))
    assert StreamPosition.from_record(orjson.loads(orjson.dumps(position.to_record()))) == position
    assert StreamPosition(*position[:4], 2, *position[5:]).line_id == "node_fills_streaming|101|2|r2"


def test_positions_are_ordered_as_the_stream_is_even_across_a_block_regression():
    positions = [position_of(NODE_A, index) for index in range(len(NODE_A))]
    assert [p.order for p in positions] == sorted(p.order for p in positions)
    regressed = position_of(NODE_A, 0)._replace(epoch=1)  # block 100 again, after the node went down
    assert regressed.order > positions[-1].order


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (Found("a/22", 7), ("ready", "a/22", 7, None)),
        (Disagreement("a/22", 3, "another event"), ("disagree", "a/22", 3, "another event")),
        (None, ("not_written", None, None, None)),
    ],
    ids=["found", "disagreement", "not written"],
)
def test_a_standby_s_look_says_what_the_search_found(found, expected):
    position = position_of(NODE_A, 2)
    look = following(position, found, at=5.0)
    assert (look.state, look.path, look.offset, look.reason) == expected
    assert (look.line_id, look.published_by, look.at, look.ready) == (position.line_id, "node-a", 5.0, expected[0] == "ready")


def test_another_event_at_the_stream_s_line_is_a_disagreement():
    other = [NODE_B[0], NODE_B[1], fill_line(101, 99), *NODE_B[3:]]
    result = find(position_of(NODE_A, 2), walk(other))
    assert isinstance(result, Disagreement) and "another event" in result.reason
    assert result.offset == walk(other)[2].start


def test_a_block_with_fewer_events_here_is_a_disagreement():
    shorter = [NODE_B[0], NODE_B[1], NODE_B[2], NODE_B[4]]
    result = find(position_of(NODE_A, 3), walk(shorter))
    assert isinstance(result, Disagreement) and "block 101 ends here after 3 events" in result.reason


def test_lines_cut_differently_are_a_disagreement_not_a_match_elsewhere():
    merged = [NODE_B[0], fill_line(101, 2, events=3), NODE_B[3], NODE_B[4]]  # events 0-2 in one line
    result = find(position_of(NODE_A, 2), walk(merged))  # the stream's line is event 2 of block 101
    assert isinstance(result, Disagreement) and "spans it" in result.reason


def test_a_node_that_has_not_written_the_line_yet_is_neither():
    assert find(position_of(NODE_A, 3), walk(NODE_B[:3])) is None


def test_dead_letters_and_earlier_blocks_are_passed_over():
    noisy = [fill_line(99, 0), b"{not json", NODE_B[1], b"", NODE_B[2]]
    assert find(position_of(NODE_A, 2), walk(noisy)) == Found(walk(noisy)[4].path, walk(noisy)[4].end)


@pytest.mark.parametrize(
    "record",
    [
        None,
        [],
        {},
        {"table": TABLE},
        {**position_of(NODE_A, 1).to_record(), "seq": -1},
        {**position_of(NODE_A, 1).to_record(), "next_seq": 0},
    ],
)
def test_a_record_this_version_cannot_read_is_no_position(record):
    assert StreamPosition.from_record(record) is None


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=12), st.data())
def test_any_line_of_one_node_is_found_in_the_other_s(shape, data):
    blocks, lines = 1000, []
    for tid, (step, events) in enumerate(shape):
        blocks += step
        lines.append(fill_line(blocks, tid, events))
    index = data.draw(st.integers(0, len(lines) - 1))
    other = [orjson.dumps({**orjson.loads(line), "local_time": "x"}) for line in lines]
    assert find(position_of(lines, index), walk(other)) == Found(walk(other)[index].path, walk(other)[index].end)
