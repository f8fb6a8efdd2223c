"""The status page's SVG charts: points follow the samples, gaps break the line, nothing escapes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from hyperdata_sidecar.web.charts import HEIGHT, PAD, WIDTH, line_chart

SVG = "{http://www.w3.org/2000/svg}"
NOW = 1_781_100_000.0
SPAN = 3600.0


def parse(svg: str) -> ET.Element:
    """The chart as XML (it must be well-formed), with the SVG namespace an inline <svg> gets in HTML."""
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def polylines(svg: str) -> list[list[tuple[float, float]]]:
    return [
        [tuple(float(c) for c in pair.split(",")) for pair in line.get("points").split()]
        for line in parse(svg).iter(f"{SVG}polyline")
    ]


def as_samples(points: list[tuple[float, float]], top: float) -> list[tuple[float, float]]:
    """Chart coordinates back to (seconds before now, value), by the mapping charts.py documents."""
    return [(SPAN - x / WIDTH * SPAN, (HEIGHT - PAD - y) / (HEIGHT - 2 * PAD) * top) for x, y in points]


def test_the_polyline_follows_the_samples_in_time_and_value() -> None:
    samples = [(NOW - 3600, 0.0), (NOW - 2400, 120.0), (NOW - 900, 400.0), (NOW - 15, 250.0)]

    (line,) = polylines(line_chart(samples, now=NOW, span_s=SPAN, label="x"))

    decoded = as_samples(line, top=400.0)
    for (ago, value), (at, expected) in zip(decoded, samples, strict=True):
        assert ago == pytest.approx(NOW - at, abs=SPAN / WIDTH * 0.05)
        assert value == pytest.approx(expected, abs=400.0 / (HEIGHT - 2 * PAD) * 0.05)


def test_the_largest_value_touches_the_top_and_zero_the_bottom() -> None:
    (line,) = polylines(line_chart([(NOW - 60, 0.0), (NOW - 30, 7.0), (NOW, 3.0)], now=NOW, span_s=SPAN, label="x"))

    ys = [y for _x, y in line]
    assert (max(ys), min(ys)) == (HEIGHT - PAD, PAD)
    assert line[-1][0] == WIDTH  # now is the right edge


def test_all_zero_values_lie_on_the_bottom_line() -> None:
    (line,) = polylines(line_chart([(NOW - 60, 0.0), (NOW, 0.0)], now=NOW, span_s=SPAN, label="x"))

    assert {y for _x, y in line} == {HEIGHT - PAD}


def test_an_unknown_value_breaks_the_line_and_a_lone_value_is_a_dot() -> None:
    samples = [(NOW - 90, 1.0), (NOW - 75, 2.0), (NOW - 60, None), (NOW - 45, 4.0), (NOW - 30, None), (NOW - 15, 3.0), (NOW, 5.0)]
    svg = line_chart(samples, now=NOW, span_s=SPAN, label="x")

    lines = polylines(svg)
    dots = list(parse(svg).iter(f"{SVG}circle"))
    assert [len(line) for line in lines] == [2, 2]
    assert len(dots) == 1
    assert as_samples([(float(dots[0].get("cx")), float(dots[0].get("cy")))], top=5.0)[0] == pytest.approx((45, 4.0), abs=0.2)


def test_samples_outside_the_last_span_are_left_out() -> None:
    samples = [(NOW - 7200, 999.0), (NOW - 3000, 1.0), (NOW - 1000, 2.0), (NOW + 60, 999.0)]

    (line,) = polylines(line_chart(samples, now=NOW, span_s=SPAN, label="x"))

    assert len(line) == 2 and min(y for _x, y in line) == PAD  # 2.0 is the top, not 999


def test_no_samples_draw_no_line() -> None:
    svg = parse(line_chart([], now=NOW, span_s=SPAN, label="x"))

    assert list(svg.iter(f"{SVG}polyline")) == [] and list(svg.iter(f"{SVG}circle")) == []


def test_the_chart_has_its_size_and_an_escaped_accessible_name() -> None:
    evil = '<img src=x onerror="alert(1)">'
    svg = parse(line_chart([(NOW, 1.0)], now=NOW, span_s=SPAN, label=evil))

    assert (svg.get("width"), svg.get("height"), svg.get("viewBox")) == (str(WIDTH), str(HEIGHT), f"0 0 {WIDTH} {HEIGHT}")
    assert svg.get("aria-label") == evil and svg.find(f"{SVG}title").text == evil
    assert svg.find(f".//{SVG}img") is None
