"""Small inline SVG line charts for the status page: pure functions, no script, no external asset.

A chart spans the ``span_s`` seconds before ``now``: time runs left to right over ``width``, values
from 0 at the bottom to the largest one shown at the top, ``PAD`` pixels inside the edges. Each
run of known values is one ``<polyline>`` (a lone value, one ``<circle>``); an unknown value
(None) breaks the line.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from hyperdata_sidecar.web.history import Point

WIDTH = 240
HEIGHT = 40
PAD = 2


def visible(points: Sequence[Point], *, now: float, span_s: float) -> list[Point]:
    """The points inside the ``span_s`` seconds up to ``now``."""
    return [(at, value) for at, value in points if now - span_s <= at <= now]


def line_chart(
    points: Sequence[Point], *, now: float, span_s: float, label: str, width: int = WIDTH, height: int = HEIGHT
) -> str:
    """An ``<svg>`` drawing ``points`` (see the module docstring); ``label`` names it for screen readers."""
    shown = visible(points, now=now, span_s=span_s)
    top = max((value for _at, value in shown if value is not None), default=0.0) or 1.0

    def xy(at: float, value: float) -> str:
        x = (at - (now - span_s)) / span_s * width
        y = height - PAD - value / top * (height - 2 * PAD)
        return f"{x:.1f},{y:.1f}"

    shapes = []
    for run in _runs(shown):
        coords = [xy(at, value) for at, value in run]
        if len(coords) == 1:
            cx, cy = coords[0].split(",")
            shapes.append(f'<circle cx="{cx}" cy="{cy}" r="1.5"/>')
        else:
            shapes.append(f'<polyline points="{" ".join(coords)}"/>')
    name = html.escape(label, quote=True)
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{name}">'
        f'<title>{name}</title><line class="base" x1="0" y1="{height - PAD}" x2="{width}" y2="{height - PAD}"/>'
        f"{''.join(shapes)}</svg>"
    )


def _runs(points: Sequence[Point]) -> list[list[tuple[float, float]]]:
    """The maximal runs of consecutive points with a known value."""
    runs: list[list[tuple[float, float]]] = [[]]
    for at, value in points:
        if value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((at, value))
    return [run for run in runs if run]
