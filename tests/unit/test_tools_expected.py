"""The verifier's own reading of a watch tree: what each file owes to the topics."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar.tools.expected import (
    classify,
    hour_files,
    read_tree,
    value_digest,
)
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES


def book_line(block: int, *coins: str) -> bytes:
    events = [{"user": "0x1", "oid": 1, "coin": c, "side": "B", "px": "1.0", "raw_book_diff": "remove"} for c in coins]
    return orjson.dumps(
        {
            "local_time": "2026-06-10T09:00:00.000000001",
            "block_time": "2026-06-10T08:59:59.9",
            "block_number": block,
            "events": events,
        }
    )


def write(root: Path, relpath: str, data: bytes) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def tree(tmp_path) -> Path:
    """Two book-diff hours: the first finalized with an unterminated tail, the second the newest."""
    first = [book_line(100, "BTC"), book_line(100, "ETH", "SOL"), b"", book_line(101, "xyz:TSLA")]
    write(tmp_path, f"{BOOK_DIFFS}/hourly/20260610/9", b"\n".join(first) + b'\n{"local_time":"cut')
    second = [book_line(101, "BTC"), b"{not json", book_line(102, "BTC")]
    write(tmp_path, f"{BOOK_DIFFS}/hourly/20260610/10", b"\n".join(second) + b'\n{"local_time":"still growing')
    return tmp_path


def offsets(lines: list[bytes]) -> list[int]:
    out, position = [], 0
    for line in lines:
        out.append(position)
        position += len(line) + 1
    return out


def test_good_lines_get_their_coin_as_key_and_a_line_id_counting_events_across_files(tree):
    first, second = list(read_tree(tree))

    assert [(line.key, line.line_id) for line in first.lines] == [
        (b"BTC", f"{BOOK_DIFFS}|100|0".encode()),
        (b"ETH", f"{BOOK_DIFFS}|100|1".encode()),
        (b"xyz:TSLA", f"{BOOK_DIFFS}|101|0".encode()),
    ]
    assert [(line.key, line.line_id) for line in second.lines] == [
        (b"BTC", f"{BOOK_DIFFS}|101|1".encode()),
        (b"BTC", f"{BOOK_DIFFS}|102|0".encode()),
    ]


def test_offsets_are_those_of_each_lines_first_byte_and_values_are_the_line_bytes(tree):
    first, _ = list(read_tree(tree))
    data = (tree / first.relpath).read_bytes()
    lines = data.split(b"\n")[:-1]
    starts = offsets(lines)

    assert [line.offset for line in first.lines] == [starts[0], starts[1], starts[3]]
    assert [line.digest for line in first.lines] == [
        value_digest(lines[0]),
        value_digest(lines[1]),
        value_digest(lines[3]),
    ]


def test_bad_lines_and_the_unterminated_tail_of_a_finalized_file_are_owed_to_the_dlq(tree):
    first, second = list(read_tree(tree))
    data = (tree / first.relpath).read_bytes()

    assert first.finalized and not second.finalized
    assert [(d.offset, set(d.reasons)) for d in first.dlq] == [
        (offsets(data.split(b"\n"))[2], {"blank"}),
        (data.rindex(b"\n") + 1, {"unterminated"}),
    ]
    assert first.dlq[1].digest == value_digest(b'{"local_time":"cut')


def test_the_newest_files_unterminated_tail_is_owed_nowhere(tree):
    _, second = list(read_tree(tree))

    assert [set(d.reasons) for d in second.dlq] == [{"malformed"}]
    assert len(second.lines) == 2


def test_a_file_owes_a_seal_of_its_whole_size_digest_and_good_line_block_range(tree):
    first, _ = list(read_tree(tree))
    data = (tree / first.relpath).read_bytes()

    assert first.size == len(data)
    assert first.sha256 == hashlib.sha256(data).hexdigest()
    assert first.block_range == [100, 101]


def test_a_line_over_the_limit_is_owed_as_a_reference_with_length_and_sha256(tmp_path):
    long_line = book_line(5, "BTC" * 40)
    write(tmp_path, f"{BOOK_DIFFS}/hourly/20260610/1", long_line + b"\n")
    write(tmp_path, f"{BOOK_DIFFS}/hourly/20260610/2", b"")

    first, _ = list(read_tree(tmp_path, max_line_bytes=100))

    [entry] = first.dlq
    assert entry.reasons == {"oversize"} and entry.digest is None
    assert entry.ref == {
        "source": f"{BOOK_DIFFS}/hourly/20260610/1",
        "offset": 0,
        "length": len(long_line),
        "sha256": hashlib.sha256(long_line).hexdigest(),
    }
    assert first.lines == [] and first.block_range is None


def test_hour_files_are_ordered_as_numbers_across_days(tmp_path):
    for name in ("20260611/0", "20260610/23", "20260610/9", "20260610/10"):
        write(tmp_path, f"{FILLS}/hourly/{name}", b"")

    assert [f"{f.date}/{f.hour}" for f in hour_files(tmp_path, FILLS)] == [
        "20260610/9",
        "20260610/10",
        "20260610/23",
        "20260611/0",
    ]
    assert [f.finalized for f in read_tree(tmp_path)] == [True, True, True, False]


@pytest.mark.parametrize(
    ("table", "line", "verdict"),
    [
        (BOOK_DIFFS, b"", "blank"),
        (BOOK_DIFFS, b" \t\r", "blank"),
        (BOOK_DIFFS, b'{"block_number":1,', "malformed"),
        (BOOK_DIFFS, b"[1,2]", "malformed"),
        (BOOK_DIFFS, b'{"block_number":"1","events":[{"coin":"BTC"}]}', "no_block"),
        (BOOK_DIFFS, b'{"block_number":true,"events":[{"coin":"BTC"}]}', "no_block"),
        (BOOK_DIFFS, b'{"block_number":1,"events":[]}', "no_coin"),
        (BOOK_DIFFS, b'{"block_number":1,"events":[{"coin":""}]}', "no_coin"),
        (BOOK_DIFFS, b'{"block_number":1,"events":[{"coin":"BTC"},{"coin":"ETH"}]}', ("BTC", 1, 2)),
        (ORDER_STATUSES, b'{"block_number":1,"events":[{"coin":"BTC"}]}', "no_coin"),
        (
            ORDER_STATUSES,
            b'{"block_number":7,"events":[{"order":{"coin":"cash:HOOD"}}]}',
            ("cash:HOOD", 7, 1),
        ),
        (FILLS, b'{"block_number":1,"events":[{"coin":"BTC"}]}', "no_coin"),
        (FILLS, b'{"block_number":9,"events":[["0xabc",{"coin":"@107"}]]}', ("@107", 9, 1)),
    ],
)
def test_lines_classify_as_the_contract_says(table, line, verdict):
    assert classify(table, line) == verdict


def test_symlinks_pipes_and_symlinked_date_dirs_are_not_hour_files(tree, tmp_path):
    hourly = tree / BOOK_DIFFS / "hourly"
    (hourly / "20260610" / "11").symlink_to(hourly / "20260610" / "9")
    os.mkfifo(hourly / "20260610" / "12")
    (hourly / "20260611").symlink_to(hourly / "20260610", target_is_directory=True)
    assert [f.relpath for f in hour_files(tree, BOOK_DIFFS)] == [
        f"{BOOK_DIFFS}/hourly/20260610/9",
        f"{BOOK_DIFFS}/hourly/20260610/10",
    ]
