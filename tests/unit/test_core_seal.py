import calendar
import datetime
import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.seal import SealManifest, merge_ranges
from hyperdata_sidecar.core.times import iso_utc

JUNE_10_14H = calendar.timegm((2026, 6, 10, 14, 0, 0))


def manifest(**overrides) -> SealManifest:
    fields = dict(
        table="node_raw_book_diffs_streaming",
        path="node_raw_book_diffs_streaming/hourly/20260610/13",
        date="20260610",
        hour="13",
        block_range=(1030140001, 1030196121),
        size=15320775857,
        sha256="a" * 64,
        finalized_at="2026-06-10T14:00:00.123Z",
        lines=3_600_000,
        dlq_lines=2,
        node="node-1",
    )
    fields.update(overrides)
    return SealManifest(**fields)


# --- iso_utc ---------------------------------------------------------------------------------------


def test_iso_utc_formats_utc_with_milliseconds_and_a_z():
    assert iso_utc(JUNE_10_14H + 0.123) == "2026-06-10T14:00:00.123Z"


def test_iso_utc_of_a_whole_second_shows_zero_milliseconds():
    assert iso_utc(JUNE_10_14H) == "2026-06-10T14:00:00.000Z"


def test_iso_utc_of_the_epoch():
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"


def test_iso_utc_truncates_to_the_millisecond():
    assert iso_utc(JUNE_10_14H + 0.9999) == "2026-06-10T14:00:00.999Z"


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 4_102_444_800))  # up to 2100-01-01
def test_iso_utc_reads_back_as_the_same_instant_to_the_millisecond(ts):
    text = iso_utc(ts)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", text)
    parsed = datetime.datetime.fromisoformat(text[:-1]).replace(tzinfo=datetime.UTC).timestamp()
    assert ts - 0.001 < parsed <= ts + 1e-6


# --- SealManifest ----------------------------------------------------------------------------------


def test_key_is_table_date_and_hour():
    assert manifest().key == "node_raw_book_diffs_streaming|20260610|13"


def test_key_keeps_the_hour_as_the_node_spells_it():
    unpadded = manifest(hour="9", path="node_raw_book_diffs_streaming/hourly/20260610/9")
    assert unpadded.key == "node_raw_book_diffs_streaming|20260610|9"


def test_to_json_writes_the_fields_in_contract_order_with_block_range_as_a_list():
    assert manifest().to_json() == (
        b'{"table":"node_raw_book_diffs_streaming","path":"node_raw_book_diffs_streaming/hourly/20260610/13",'
        b'"date":"20260610","hour":"13","block_range":[1030140001,1030196121],"size":15320775857,'
        b'"sha256":"' + b"a" * 64 + b'","finalized_at":"2026-06-10T14:00:00.123Z","lines":3600000,'
        b'"dlq_lines":2,"node":"node-1","revision":1,"block_regressions":0,"offsets":null}'
    )


def test_file_without_good_lines_has_a_null_block_range():
    data = manifest(block_range=None, lines=0).to_json()
    assert orjson.loads(data)["block_range"] is None
    assert SealManifest.from_json(data).block_range is None


def test_from_json_reads_back_what_to_json_wrote():
    original = manifest()
    restored = SealManifest.from_json(original.to_json())
    assert restored == original
    assert type(restored.block_range) is tuple


def test_from_json_ignores_fields_it_does_not_know():
    obj = orjson.loads(manifest().to_json())
    obj["added_later"] = 1
    assert SealManifest.from_json(orjson.dumps(obj)) == manifest()


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_INTS = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=150, deadline=None)
@given(
    st.builds(
        SealManifest,
        table=_TEXT,
        path=_TEXT,
        date=_TEXT,
        hour=_TEXT,
        block_range=st.none() | st.tuples(_INTS, _INTS),
        size=_INTS,
        sha256=_TEXT,
        finalized_at=_TEXT,
        lines=_INTS,
        dlq_lines=_INTS,
        node=_TEXT,
        revision=_INTS,
        block_regressions=_INTS,
    )
)
def test_any_manifest_round_trips_through_json(original):
    assert SealManifest.from_json(original.to_json()) == original


FIELDS = ["table", "path", "date", "hour", "block_range", "size", "sha256", "finalized_at", "lines", "dlq_lines", "node"]
ADDED_FIELDS = ["revision", "block_regressions", "offsets"]


def test_to_json_writes_exactly_the_contract_fields_then_the_revision_regressions_and_offsets():
    assert list(orjson.loads(manifest().to_json())) == FIELDS + ADDED_FIELDS


def test_a_later_revision_round_trips_with_its_regression_count():
    revised = manifest(revision=3, block_regressions=2, size=15320775900)
    assert SealManifest.from_json(revised.to_json()) == revised
    assert orjson.loads(revised.to_json())["revision"] == 3


def test_a_seal_written_before_revisions_existed_reads_as_the_first_revision_without_regressions():
    obj = orjson.loads(manifest().to_json())
    for name in ADDED_FIELDS:
        del obj[name]
    restored = SealManifest.from_json(orjson.dumps(obj))
    assert (restored.revision, restored.block_regressions, restored.offsets) == (1, 0, None)


def test_offsets_round_trip_as_first_and_last_per_partition():
    located = manifest(offsets={"hyperliquid.book-diffs": {"0": [10, 99], "5": [7, 7]}})
    assert SealManifest.from_json(located.to_json()) == located
    assert orjson.loads(located.to_json())["offsets"] == {"hyperliquid.book-diffs": {"0": [10, 99], "5": [7, 7]}}


@pytest.mark.parametrize("field", FIELDS)
def test_from_json_rejects_a_missing_field_naming_it(field):
    obj = orjson.loads(manifest().to_json())
    del obj[field]
    with pytest.raises(ValueError, match=field):
        SealManifest.from_json(orjson.dumps(obj))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("table", 1),
        ("hour", 13),
        ("size", "15320775857"),
        ("size", 1.0),
        ("lines", True),
        ("dlq_lines", None),
        ("node", None),
        ("block_range", [1]),
        ("block_range", [1, 2, 3]),
        ("block_range", [1, "2"]),
        ("block_range", [1, True]),
        ("block_range", {"first": 1, "last": 2}),
        ("block_range", "1-2"),
        ("revision", "2"),
        ("block_regressions", False),
        ("offsets", []),
        ("offsets", {"t": [1, 2]}),
        ("offsets", {"t": {"0": [1]}}),
        ("offsets", {"t": {"x": [1, 2]}}),
        ("offsets", {"t": {"0": [1, "2"]}}),
    ],
    ids=repr,
)
def test_from_json_rejects_a_field_of_the_wrong_type_naming_it(field, value):
    obj = orjson.loads(manifest().to_json())
    obj[field] = value
    with pytest.raises(ValueError, match=field):
        SealManifest.from_json(orjson.dumps(obj))


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b"null", b'"seal"', b"\xff"])
def test_from_json_rejects_anything_but_a_json_object(data):
    with pytest.raises(ValueError):
        SealManifest.from_json(data)


# --- merge_ranges ----------------------------------------------------------------------------------


def test_merge_ranges_widens_known_partitions_and_adds_new_ones_in_partition_order():
    known = {"t": {"2": [10, 20]}, "u": {"0": [1, 1]}}
    merged = merge_ranges(known, "t", {2: (21, 30), 10: (5, 6), 0: (3, 4)})
    assert merged == {"t": {"0": [3, 4], "2": [10, 30], "10": [5, 6]}, "u": {"0": [1, 1]}}
    assert list(merged["t"]) == ["0", "2", "10"]
    assert known == {"t": {"2": [10, 20]}, "u": {"0": [1, 1]}}  # unchanged


def test_merge_ranges_takes_the_lowest_first_and_highest_last():
    assert merge_ranges({"t": {"0": [10, 20]}}, "t", {0: (5, 15)}) == {"t": {"0": [5, 20]}}


def test_merge_ranges_keeps_unknown_offsets_unknown():
    assert merge_ranges(None, "t", {0: (1, 2)}) is None
    known = {"t": {"0": [1, 2]}}
    assert merge_ranges(known, "t", {}) is known
