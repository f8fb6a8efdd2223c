"""How far this node has written, per table, as the stream's heads announce it: the block_time of
the newest complete line of the newest hour file (the one before while the newest has none)."""

from __future__ import annotations

from pathlib import Path

import orjson

from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.stream_heads import look

BOOK, FILLS = "node_raw_book_diffs_streaming", "node_fills_streaming"


def line(block_time: str) -> bytes:
    return orjson.dumps({"local_time": "x", "block_time": block_time, "block_number": 1, "events": []}) + b"\n"


def write(root: Path, table: str, hour: int, content: bytes) -> None:
    path = root / table / "hourly" / "20260610" / str(hour)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def test_each_table_s_head_is_its_newest_complete_line_s_block_time(tmp_path):
    write(tmp_path, BOOK, 9, line("2026-06-10T09:59:59"))
    write(tmp_path, BOOK, 10, line("2026-06-10T10:00:01") + line("2026-06-10T10:00:02") + b'{"block_time":"2026-06-10T10:59')
    assert look(tmp_path) == {BOOK: epoch_of("2026-06-10T10:00:02")}


def test_a_newest_file_without_a_complete_line_yet_gives_the_one_before(tmp_path):
    write(tmp_path, FILLS, 9, line("2026-06-10T09:59:59") + b"not json\n")
    write(tmp_path, FILLS, 10, b'{"local_time":')
    assert look(tmp_path) == {FILLS: epoch_of("2026-06-10T09:59:59")}


def test_a_table_with_nothing_written_has_no_head(tmp_path):
    assert look(tmp_path) == {}
