"""Finding the stream's position in this node's hour files: the binary search for the block, the
walk from there across files, and the walk from the start where this node's blocks went down."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.stream_position import Disagreement, Found
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.position_search import _first_line_of_block, locate

from test_core_stream_position import position_of

TABLE = "node_fills_streaming"
SPEC = TABLE_BY_DIR[TABLE]


def line(block: int, tid: int, events: int = 1, local_time: str = "a") -> bytes:
    fills = [["0xuser", {"coin": "BTC", "tid": tid * 10 + n}] for n in range(events)]
    return orjson.dumps({"local_time": local_time, "block_number": block, "events": fills})


def write(root: Path, hours: list[list[bytes]], *, tail: bytes = b"") -> list[str]:
    paths = []
    for hour, lines in enumerate(hours):
        path = f"{TABLE}/hourly/20260610/{hour}"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"".join(item + b"\n" for item in lines) + (tail if hour == len(hours) - 1 else b""))
        paths.append(path)
    return paths


def end_of(root: Path, path: str, index_in_file: int) -> int:
    return sum(len(item) + 1 for item in (root / path).read_bytes().split(b"\n")[: index_in_file + 1])


@given(
    st.lists(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3)), min_size=1, max_size=15), min_size=1, max_size=3),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_every_line_of_the_stream_is_found_where_this_node_wrote_it(tmp_path_factory, shape, data):
    root = tmp_path_factory.mktemp("node")
    block, tid, hours = 500, 0, []
    for hour_shape in shape:
        lines = []
        for step, events in hour_shape:
            block, tid = block + step, tid + 1
            lines.append(line(block, tid, events, local_time="b"))
        hours.append(lines)
    files = write(root, hours)
    everything = [item for hour in hours for item in hour]
    index = data.draw(st.integers(0, len(everything) - 1))
    published = [orjson.dumps({**orjson.loads(item), "local_time": "a"}) for item in everything]  # the other node's bytes
    hour = next(h for h, lines in enumerate(hours) if index < sum(len(x) for x in hours[: h + 1]))
    in_file = index - sum(len(x) for x in hours[:hour])
    assert locate(root, SPEC, files, position_of(published, index)) == Found(files[hour], end_of(root, files[hour], in_file))


def test_a_block_begun_in_the_previous_file_counts_its_events_there(tmp_path):
    first, second = [line(7, 1), line(8, 2, 2)], [line(8, 3), line(8, 4), line(9, 5)]
    files = write(tmp_path, [first, second])
    position = position_of(first + second, 3)  # block 8, event 3
    assert position.seq == 3
    assert locate(tmp_path, SPEC, files, position) == Found(files[1], end_of(tmp_path, files[1], 1))


def test_a_line_not_written_here_yet_is_neither_found_nor_a_disagreement(tmp_path):
    lines = [line(7, 1), line(8, 2), line(8, 3)]
    files = write(tmp_path, [lines[:2]], tail=lines[2][:10])  # the third line is still being written
    assert locate(tmp_path, SPEC, files, position_of(lines, 2)) is None
    assert locate(tmp_path, SPEC, [], position_of(lines, 2)) is None


def test_files_that_begin_after_the_streams_line_are_a_disagreement(tmp_path):
    files = write(tmp_path, [[line(20, 1), line(21, 2)]])
    result = locate(tmp_path, SPEC, files, position_of([line(10, 9)], 0))
    assert isinstance(result, Disagreement) and "oldest line is in block 20" in result.reason


def test_another_event_at_the_streams_line_is_a_disagreement_named_by_file_and_offset(tmp_path):
    files = write(tmp_path, [[line(7, 1), line(8, 2), line(8, 77), line(9, 4)]])
    result = locate(tmp_path, SPEC, files, position_of([line(7, 1), line(8, 2), line(8, 3)], 2))
    assert result == Disagreement(
        files[0], end_of(tmp_path, files[0], 1), "another event than the stream's line node_fills_streaming|8|1"
    )


def test_a_block_that_went_down_in_this_nodes_file_is_walked_from_the_start(tmp_path):
    # This node's file regressed (blocks 2 to 6 written again after 9): the binary search lands on
    # the second block 6, another event; the walk from the start finds the line.
    lines = [line(6, 1), line(9, 2), *(line(2, n) for n in range(3, 9)), line(6, 9), line(7, 10)]
    files = write(tmp_path, [lines])
    position = position_of([line(6, 1)], 0)
    assert _first_line_of_block(tmp_path / files[0], SPEC, 6) == end_of(tmp_path, files[0], 7)
    assert locate(tmp_path, SPEC, files, position) == Found(files[0], end_of(tmp_path, files[0], 0))


@pytest.mark.parametrize("bad", [b"", b"{not json", b'{"block_number": 8}'])
def test_dead_letters_around_the_line_are_passed_over(tmp_path, bad):
    files = write(tmp_path, [[line(7, 1), bad, line(8, 2), bad, line(8, 3), bad]])
    position = position_of([line(7, 1), line(8, 2), line(8, 3)], 2)
    assert locate(tmp_path, SPEC, files, position) == Found(files[0], end_of(tmp_path, files[0], 4))
