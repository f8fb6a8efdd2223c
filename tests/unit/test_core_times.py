"""The start of the hour an hour file is named for (no broker, no disk)."""

from __future__ import annotations

import calendar
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.times import hour_start_epoch


@given(st.dates(datetime.date(1970, 1, 1), datetime.date(2200, 12, 31)), st.integers(0, 23))
def test_the_hour_start_is_that_utc_hour_of_that_day(day: datetime.date, hour: int) -> None:
    expected = calendar.timegm((day.year, day.month, day.day, hour, 0, 0))
    assert hour_start_epoch(day.strftime("%Y%m%d"), str(hour)) == expected


@pytest.mark.parametrize("date", ["2026061", "202606100", "2026-6-10", "20261310", "20260230", "２０２６０６１０", ""])
def test_what_is_not_a_calendar_day_in_eight_digits_is_refused(date: str) -> None:
    with pytest.raises(ValueError):
        hour_start_epoch(date, "0")
