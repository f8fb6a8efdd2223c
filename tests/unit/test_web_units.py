"""Human units and labels of the status page."""

from __future__ import annotations

import pytest

from hyperdata_sidecar.web.units import duration, hour_label, size, table_label


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 2**20, "5.0 MiB"),
        (3 * 2**30, "3.0 GiB"),
        (2**41, "2.0 TiB"),
    ],
)
def test_size_uses_binary_units(nbytes: int, text: str) -> None:
    assert size(nbytes) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-1, "0.0 s"), (0.42, "0.4 s"), (42, "42 s"), (185, "3 m 05 s"), (7620, "2 h 07 m"), (273600, "3 d 04 h")],
)
def test_duration_is_short_and_human(seconds: float, text: str) -> None:
    assert duration(seconds) == text


@pytest.mark.parametrize(
    ("table", "label"),
    [("node_fills_streaming", "fills"), ("node_raw_book_diffs_streaming", "raw_book_diffs"), ("other", "other")],
)
def test_table_label_drops_the_node_prefix_and_streaming_suffix(table: str, label: str) -> None:
    assert table_label(table) == label


@pytest.mark.parametrize(
    ("path", "label"),
    [("node_fills_streaming/hourly/20260610/9", "20260610/9"), ("odd/path", "odd/path"), (None, "—")],
)
def test_hour_label_is_date_and_hour_of_an_hour_file(path: str | None, label: str) -> None:
    assert hour_label(path) == label
