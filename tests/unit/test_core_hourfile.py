import datetime
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.tables import TABLES

BOOK = "node_raw_book_diffs_streaming"
FILLS = "node_fills_streaming"


def hf(date: str, hour: str, table: str = BOOK) -> HourFile:
    return HourFile(table, date, hour)


# --- parse -----------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [spec.dir_name for spec in TABLES])
def test_parse_reads_table_date_and_hour_of_every_table(table):
    assert HourFile.parse(f"{table}/hourly/20260610/13") == HourFile(table, "20260610", "13")


def test_parse_keeps_the_hour_as_spelled_so_relpath_names_the_file_on_disk():
    for relpath in (f"{BOOK}/hourly/20260610/9", f"{BOOK}/hourly/20260610/09", f"{BOOK}/hourly/20260610/0"):
        parsed = HourFile.parse(relpath)
        assert parsed is not None
        assert parsed.relpath == relpath


def test_parse_accepts_every_hour_of_the_day_padded_or_not():
    for hour in range(24):
        for spelling in (str(hour), f"{hour:02d}"):
            parsed = HourFile.parse(f"{BOOK}/hourly/20260610/{spelling}")
            assert parsed is not None
            assert parsed.sort_key == (20260610, hour)


def test_parse_accepts_leap_day_of_a_leap_year():
    assert HourFile.parse(f"{BOOK}/hourly/20240229/0") == hf("20240229", "0")


@pytest.mark.parametrize(
    "relpath",
    [
        "",
        "/",
        BOOK,
        f"{BOOK}/hourly",
        f"{BOOK}/hourly/20260610",
        f"{BOOK}/hourly/20260610/",
        f"{BOOK}/hourly/20260610/13/",
        f"{BOOK}/hourly/20260610/13/x",
        f"/{BOOK}/hourly/20260610/13",
        f"./{BOOK}/hourly/20260610/13",
        f"{BOOK}\\hourly\\20260610\\13",
        f"{BOOK}//hourly/20260610/13",
        "node_unknown_streaming/hourly/20260610/13",
        "node_raw_book_diffs/hourly/20260610/13",
        f"{BOOK}/daily/20260610/13",
        f"{BOOK}/Hourly/20260610/13",
        f"{BOOK}/hourly/2026061/13",
        f"{BOOK}/hourly/202606100/13",
        f"{BOOK}/hourly/2026-06-10/13",
        f"{BOOK}/hourly/20260230/13",
        f"{BOOK}/hourly/20261301/13",
        f"{BOOK}/hourly/20260600/13",
        f"{BOOK}/hourly/20260001/13",
        f"{BOOK}/hourly/00000101/13",
        f"{BOOK}/hourly/20250229/13",
        f"{BOOK}/hourly/２０２６０６１０/13",
        f"{BOOK}/hourly/20260610/24",
        f"{BOOK}/hourly/20260610/99",
        f"{BOOK}/hourly/20260610/-1",
        f"{BOOK}/hourly/20260610/+1",
        f"{BOOK}/hourly/20260610/000",
        f"{BOOK}/hourly/20260610/013",
        f"{BOOK}/hourly/20260610/1a",
        f"{BOOK}/hourly/20260610/ 1",
        f"{BOOK}/hourly/20260610/1\n",
        f"{BOOK}/hourly/20260610/１",
        f"{BOOK}/hourly/20260610/²",
        f"{BOOK}/hourly/20260610/13.tmp",
        f"{BOOK}/hourly/20260610/..",
    ],
)
def test_parse_returns_none_for_anything_but_a_known_table_hour_file(relpath):
    assert HourFile.parse(relpath) is None


def test_parse_returns_none_for_a_non_string():
    assert HourFile.parse(f"{BOOK}/hourly/20260610/13".encode()) is None


_PATH_PIECES = st.sampled_from([BOOK, FILLS, "hourly", "20260610", "20240229", "13", "09", "9", "24", "", "x"])


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(_PATH_PIECES, max_size=6).map("/".join)))
def test_parse_never_raises_and_what_it_accepts_round_trips_through_relpath(relpath):
    parsed = HourFile.parse(relpath)
    assert parsed is None or parsed.relpath == relpath


# --- ordering ----------------------------------------------------------------------------------


def test_sort_key_compares_hours_as_numbers():
    assert hf("20260610", "9").sort_key < hf("20260610", "10").sort_key


def test_sort_key_of_a_padded_hour_equals_the_unpadded_one():
    assert hf("20260610", "09").sort_key == hf("20260610", "9").sort_key == (20260610, 9)


def test_hour_nine_sorts_before_hour_ten():
    assert sorted([hf("20260610", "10"), hf("20260610", "9")]) == [hf("20260610", "9"), hf("20260610", "10")]


def test_hour_twenty_three_sorts_before_the_next_days_hour_zero():
    files = [hf("20260611", "0"), hf("20260610", "23")]
    assert sorted(files) == [hf("20260610", "23"), hf("20260611", "0")]


def test_last_hour_of_a_year_sorts_before_the_first_hour_of_the_next():
    assert hf("20261231", "23") < hf("20270101", "0")


def test_a_day_of_unpadded_hours_sorts_in_numeric_order():
    files = [hf("20260610", str(h)) for h in range(24)]
    shuffled = files[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled) == files


def test_padded_and_unpadded_hours_interleave_numerically():
    files = [hf("20260610", "10"), hf("20260610", "9"), hf("20260610", "08"), hf("20260610", "11")]
    assert [f.hour for f in sorted(files)] == ["08", "9", "10", "11"]


def test_two_spellings_of_one_hour_are_distinct_files_in_a_fixed_order():
    padded, unpadded = hf("20260610", "09"), hf("20260610", "9")
    assert padded != unpadded
    assert sorted([unpadded, padded]) == sorted([padded, unpadded])


def test_files_order_by_table_before_time():
    # "node_fills..." < "node_raw...": the later fills hour still sorts first.
    assert hf("20260611", "0", table=FILLS) < hf("20260610", "0", table=BOOK)


def test_comparison_operators_agree_with_each_other():
    early, late = hf("20260610", "9"), hf("20260610", "10")
    assert early < late and early <= late and late > early and late >= early
    assert not (late < early) and not (early > late)
    assert early <= hf("20260610", "9") and early >= hf("20260610", "9")


def test_comparing_with_something_else_is_a_type_error():
    with pytest.raises(TypeError):
        _ = hf("20260610", "9") < "20260610/9"


_HOURS = st.tuples(
    st.dates(min_value=datetime.date(2000, 1, 1), max_value=datetime.date(2099, 12, 31)),
    st.integers(0, 23),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_HOURS, max_size=30))
def test_sorted_files_follow_the_clock(hours):
    files = [hf(d.strftime("%Y%m%d"), f"{h:02d}" if padded else str(h)) for d, h, padded in hours]
    moments = [datetime.datetime.strptime(f.date, "%Y%m%d") + datetime.timedelta(hours=int(f.hour)) for f in sorted(files)]
    assert moments == sorted(moments)


# --- the newest file is the last in order ------------------------------------------------------


def test_hour_ten_sorts_after_hour_nine_and_one():
    assert sorted([hf("20260610", "9"), hf("20260610", "10"), hf("20260610", "1")])[-1] == hf("20260610", "10")


def test_the_next_days_hour_zero_sorts_after_hour_twenty_three():
    assert sorted([hf("20260611", "0"), hf("20260610", "23")])[-1] == hf("20260611", "0")
