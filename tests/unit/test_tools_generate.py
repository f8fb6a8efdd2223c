"""The fixture generator: deterministic, node-shaped, laid out like the node's tree."""

from __future__ import annotations

import datetime
import hashlib
import itertools
from collections import Counter
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.tools.generate import (
    DEFAULT_SNAPSHOT_BYTES,
    OVERSIZE_BYTES,
    PRODUCTION_LINES_PER_S,
    generate_corpus,
    parse_size,
    parse_start,
    snapshot_heights,
    split_lines_per_hour,
)
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES

TABLES = (BOOK_DIFFS, ORDER_STATUSES, FILLS)
MIDNIGHT_EVE = datetime.datetime(2026, 6, 10, 22)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def lines_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def small(root: Path, **overrides):
    args = {
        "hours": 2,
        "lines_per_hour": {BOOK_DIFFS: 300, ORDER_STATUSES: 400, FILLS: 30},
        "lines_per_block": {BOOK_DIFFS: 40, ORDER_STATUSES: 50, FILLS: 3},
        "seed": 7,
        "start": MIDNIGHT_EVE,
    }
    args.update(overrides)
    return generate_corpus(root, **args)


def test_the_same_seed_writes_the_same_bytes(tmp_path):
    small(tmp_path / "a")
    small(tmp_path / "b")

    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")


def test_another_seed_writes_other_bytes(tmp_path):
    small(tmp_path / "a", seed=1)
    small(tmp_path / "b", seed=2)

    assert tree_bytes(tmp_path / "a") != tree_bytes(tmp_path / "b")


def test_hour_files_are_named_unpadded_across_a_day_boundary(tmp_path):
    small(tmp_path, hours=4)

    for table in TABLES:
        names = sorted(
            p.relative_to(tmp_path / table / "hourly").as_posix() for p in (tmp_path / table).rglob("*") if p.is_file()
        )
        assert names == ["20260610/22", "20260610/23", "20260611/0", "20260611/1"]


def test_local_time_stays_inside_the_file_hour_and_advances_line_by_line(tmp_path):
    small(tmp_path, hours=3)

    for table in TABLES:
        for date, hour in (("20260610", "22"), ("20260610", "23"), ("20260611", "0")):
            times = [line["local_time"] for line in lines_of(tmp_path / table / "hourly" / date / hour)]
            prefix = f"{date[:4]}-{date[4:6]}-{date[6:]}T{int(hour):02d}:"
            assert all(t.startswith(prefix) and len(t) == 29 for t in times)
            assert times == sorted(times) and len(set(times)) == len(times)


def test_blocks_are_continuous_across_hours_and_each_has_one_block_time(tmp_path):
    small(tmp_path, hours=3)

    for table in TABLES:
        lines = [
            line for hour in ("20260610/22", "20260610/23", "20260611/0") for line in lines_of(tmp_path / table / "hourly" / hour)
        ]
        blocks = [line["block_number"] for line in lines]
        assert all(b - a in (0, 1) for a, b in itertools.pairwise(blocks))
        block_times = {}
        for line in lines:
            assert block_times.setdefault(line["block_number"], line["block_time"]) == line["block_time"]


def test_some_block_straddles_an_hour_boundary(tmp_path):
    summary = small(tmp_path, hours=3)

    files = {f.relpath: f for f in summary.files}
    straddles = [
        table
        for table in TABLES
        if files[f"{table}/hourly/20260610/22"].last_block == files[f"{table}/hourly/20260610/23"].first_block
        or files[f"{table}/hourly/20260610/23"].last_block == files[f"{table}/hourly/20260611/0"].first_block
    ]
    assert straddles


def test_a_blocks_lines_outnumber_those_of_fills_by_the_configured_means(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 2000, ORDER_STATUSES: 2000, FILLS: 200})

    per_block = {}
    for table in TABLES:
        counts = Counter(line["block_number"] for line in lines_of(tmp_path / table / "hourly/20260610/22"))
        per_block[table] = sum(counts.values()) / len(counts)
    assert 25 <= per_block[BOOK_DIFFS] <= 55
    assert 30 <= per_block[ORDER_STATUSES] <= 70
    assert 1 <= per_block[FILLS] <= 5


def test_book_diffs_carry_the_closed_union_in_measured_proportions(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 20_000, ORDER_STATUSES: 0, FILLS: 0})

    kinds = Counter()
    for line in lines_of(tmp_path / BOOK_DIFFS / "hourly/20260610/22"):
        for event in line["events"]:
            assert set(event) == {"user", "oid", "coin", "side", "px", "raw_book_diff"}
            diff = event["raw_book_diff"]
            if diff == "remove":
                kinds["remove"] += 1
            elif set(diff) == {"new"}:
                assert set(diff["new"]) == {"sz"}
                kinds["new"] += 1
            else:
                assert set(diff) == {"update"} and set(diff["update"]) == {"origSz", "newSz"}
                kinds["update"] += 1
    total = sum(kinds.values())
    assert 0.44 < kinds["new"] / total < 0.56
    assert 0.44 < kinds["remove"] / total < 0.56
    assert 0.001 < kinds["update"] / total < 0.03


def test_order_statuses_nest_an_order_and_sometimes_its_children(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 0, ORDER_STATUSES: 20_000, FILLS: 0})

    with_children = 0
    for line in lines_of(tmp_path / ORDER_STATUSES / "hourly/20260610/22"):
        for event in line["events"]:
            assert set(event) == {"time", "user", "status", "hash", "builder", "order"}
            assert event["time"] == line["block_time"]
            order = event["order"]
            assert {"coin", "side", "limitPx", "sz", "oid", "timestamp", "children", "tif", "cloid"} <= set(order)
            assert (order["tif"] is None) == order["orderType"].endswith("Market")
            with_children += bool(order["children"])
    assert with_children > 0


def test_fills_are_user_payload_tuples_with_sparse_optional_keys(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 0, ORDER_STATUSES: 0, FILLS: 5_000})

    required = {
        "coin",
        "px",
        "sz",
        "side",
        "time",
        "startPosition",
        "dir",
        "closedPnl",
        "hash",
        "oid",
        "crossed",
        "fee",
        "tid",
        "feeToken",
    }
    optional = Counter()
    for line in lines_of(tmp_path / FILLS / "hourly/20260610/22"):
        for user, fill in line["events"]:
            assert user.startswith("0x") and len(user) == 42
            assert required <= set(fill)
            optional.update(set(fill) - required)
    assert set(optional) <= {
        "cloid",
        "deployerFee",
        "builder",
        "builderFee",
        "twapId",
        "priorityGas",
        "liquidation",
    }
    assert 0.6 < optional["cloid"] / 5_000 < 0.85
    assert optional["priorityGas"] < optional["builder"] < optional["deployerFee"]


def test_about_forty_percent_of_keys_are_namespaced_coins(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 10_000, ORDER_STATUSES: 0, FILLS: 0})

    coins = [line["events"][0]["coin"] for line in lines_of(tmp_path / BOOK_DIFFS / "hourly/20260610/22")]
    share = sum(":" in c for c in coins) / len(coins)
    assert 0.32 < share < 0.48


def test_line_lengths_are_those_of_the_node(tmp_path):
    small(tmp_path, hours=1, lines_per_hour={BOOK_DIFFS: 3_000, ORDER_STATUSES: 3_000, FILLS: 0})

    def mean_length(table):
        lines = (tmp_path / table / "hourly/20260610/22").read_bytes().splitlines()
        return sum(map(len, lines)) / len(lines)

    assert 240 <= mean_length(BOOK_DIFFS) <= 360
    assert 500 <= mean_length(ORDER_STATUSES) <= 700


def test_some_lines_carry_several_events(tmp_path):
    small(tmp_path, hours=1, multi_event_rate=0.05)

    lines = lines_of(tmp_path / ORDER_STATUSES / "hourly/20260610/22")
    assert any(len(line["events"]) > 1 for line in lines)
    assert all(1 <= len(line["events"]) <= 3 for line in lines)


def test_a_total_per_hour_is_split_in_the_production_mix():
    split = split_lines_per_hour(393_000)

    assert sum(split.values()) == 393_000
    for table, rate in PRODUCTION_LINES_PER_S.items():
        assert split[table] == pytest.approx(rate * 10, abs=1)


def test_the_summary_matches_the_files_on_disk(tmp_path):
    summary = small(tmp_path, bad_every=10)

    for f in summary.files:
        data = (tmp_path / f.relpath).read_bytes()
        assert f.size == len(data)
        assert f.lines + f.bad_lines == data.count(b"\n")
    assert summary.bytes == sum(len(d) for d in tree_bytes(tmp_path).values())


def test_injected_bad_lines_sit_where_the_summary_says_with_their_defect(tmp_path):
    summary = small(tmp_path, bad_every=10)

    assert len(summary.bad_lines) == (600 + 800 + 60) // 10
    assert {b.reason for b in summary.bad_lines} == {"blank", "malformed", "no_block", "no_coin"}
    for bad in summary.bad_lines:
        data = (tmp_path / bad.relpath).read_bytes()
        assert bad.offset == 0 or data[bad.offset - 1 : bad.offset] == b"\n"
        line = data[bad.offset : data.index(b"\n", bad.offset)]
        if bad.reason == "blank":
            assert line == b""
            continue
        if bad.reason == "malformed":
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(line)
            continue
        envelope = orjson.loads(line)
        if bad.reason == "no_block":
            assert "block_number" not in envelope and envelope["events"]
        else:
            first = envelope["events"][0]
            holder = first[1] if bad.relpath.startswith(FILLS) else first.get("order", first)
            assert "coin" not in holder


def test_an_oversize_line_is_just_past_the_8_mib_limit(tmp_path):
    summary = small(
        tmp_path,
        hours=1,
        lines_per_hour={BOOK_DIFFS: 10, ORDER_STATUSES: 0, FILLS: 0},
        bad_every=5,
        bad_kinds=["oversize"],
    )

    first, _ = summary.bad_lines
    data = (tmp_path / first.relpath).read_bytes()
    line = data[first.offset : data.index(b"\n", first.offset)]
    assert 8 * 1024 * 1024 < len(line) < 8 * 1024 * 1024 + OVERSIZE_BYTES
    assert orjson.loads(line)["block_number"] > 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lines_per_hour": {"node_unknown_streaming": 5}},
        {"lines_per_hour": {BOOK_DIFFS: -1}},
        {"bad_every": 0},
        {"bad_every": 3, "bad_kinds": ["late"]},
        {"hours": -1},
        {"snapshot_every": 0},
        {"snapshot_every": 5, "snapshot_bytes": 0},
    ],
)
def test_invalid_arguments_raise_value_error(tmp_path, kwargs):
    with pytest.raises(ValueError):
        small(tmp_path, **kwargs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20260610/9", datetime.datetime(2026, 6, 10, 9)),
        ("20260610:23", datetime.datetime(2026, 6, 10, 23)),
        ("2026-06-10T13", datetime.datetime(2026, 6, 10, 13)),
        ("2026-06-10T13:00:00", datetime.datetime(2026, 6, 10, 13)),
    ],
)
def test_start_hours_parse_from_the_node_and_iso_forms(text, expected):
    assert parse_start(text) == expected


def test_a_start_that_is_no_hour_is_rejected():
    with pytest.raises(ValueError, match="YYYYMMDD"):
        parse_start("yesterday")


# ---- node snapshots -------------------------------------------------------------


def all_lines(root: Path, table: str) -> list[dict]:
    paths = sorted((root / table / "hourly").glob("*/*"), key=lambda p: (p.parent.name, int(p.name)))
    return [line for path in paths for line in lines_of(path)]


def test_snapshot_heights_are_the_multiples_every_table_passes():
    assert snapshot_heights(25, 1_030_140_001, [1_030_140_090, 1_030_140_080]) == [1_030_140_025, 1_030_140_050, 1_030_140_075]
    assert snapshot_heights(25, 1_030_140_001, [1_030_140_075]) == [1_030_140_025, 1_030_140_050]
    assert snapshot_heights(10, 100, [125]) == [100, 110, 120]
    assert snapshot_heights(10, 101, [105]) == []
    assert snapshot_heights(10, 100, []) == []


def test_no_snapshots_are_written_unless_asked(tmp_path):
    summary = small(tmp_path)

    assert summary.snapshots == [] and not (tmp_path / "periodic_abci_states").exists()


def test_each_snapshot_lies_inside_every_tables_blocks_and_is_dated_by_its_block_time(tmp_path):
    summary = small(tmp_path, hours=3, snapshot_every=5)

    assert [s.height for s in summary.snapshots] == list(range(1_030_140_005, summary.snapshots[-1].height + 1, 5))
    assert len(summary.snapshots) >= 3
    for snapshot in summary.snapshots:
        times = []
        for table in TABLES:
            lines = all_lines(tmp_path, table)
            assert any(line["block_number"] <= snapshot.height for line in lines)
            assert any(line["block_number"] > snapshot.height for line in lines)
            times += [line["block_time"] for line in lines if line["block_number"] == snapshot.height]
        date = min(times)[:10].replace("-", "")
        assert snapshot.relpath == SnapshotFile(snapshot.height, date).relpath


def test_snapshots_are_dated_on_both_sides_of_midnight(tmp_path):
    aligned = {BOOK_DIFFS: 30, ORDER_STATUSES: 40, FILLS: 3}  # 10 blocks an hour in each table
    summary = small(tmp_path, hours=3, lines_per_block=aligned, snapshot_every=3)

    assert {SnapshotFile.parse(s.relpath).date for s in summary.snapshots} == {"20260610", "20260611"}


def test_no_table_has_a_block_above_the_last_multiple_it_does_not_pass(tmp_path):
    summary = small(tmp_path, hours=3, snapshot_every=5)

    lowest_last = min(max(line["block_number"] for line in all_lines(tmp_path, table)) for table in TABLES)
    assert summary.snapshots[-1].height + 5 >= lowest_last


def test_a_snapshot_holds_the_asked_size_and_the_summary_says_its_sha256(tmp_path):
    summary = small(tmp_path, snapshot_every=5, snapshot_bytes=5 * 1024 * 1024 + 3)

    for snapshot in summary.snapshots:
        data = (tmp_path / snapshot.relpath).read_bytes()
        assert len(data) == snapshot.size == 5 * 1024 * 1024 + 3
        assert hashlib.sha256(data).hexdigest() == snapshot.sha256
    assert len({s.sha256 for s in summary.snapshots}) == len(summary.snapshots)


def test_snapshots_are_the_same_bytes_for_the_same_seed_and_other_bytes_for_another(tmp_path):
    small(tmp_path / "a", snapshot_every=5)
    small(tmp_path / "b", snapshot_every=5)
    small(tmp_path / "c", snapshot_every=5, seed=8)

    a, b, c = (tree_bytes(tmp_path / name) for name in "abc")
    snapshots_a = {path: data for path, data in a.items() if path.startswith("periodic_abci_states/")}
    assert snapshots_a and len(next(iter(snapshots_a.values()))) == DEFAULT_SNAPSHOT_BYTES
    assert a == b
    assert all(c.get(path) != data for path, data in snapshots_a.items())


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1048576", 1048576), ("1MiB", 1048576), ("64k", 64_000), ("1.3GB", 1_300_000_000), ("2 gi", 2 * 1024**3)],
)
def test_sizes_parse_as_bytes_with_decimal_or_binary_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "1.3 XB", "1i", "-5"])
def test_a_size_that_is_no_byte_count_is_rejected(text):
    with pytest.raises(ValueError, match="byte count"):
        parse_size(text)
