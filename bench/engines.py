"""Both line engines in one run: which engines a run measures, and the table that compares them.

``--engines native,python`` (the default) runs the ``catchup`` and ``live`` scenarios once per
engine (and per delivery mode, :mod:`bench.deliveries`), in that order, against the same broker and
corpus sizes, each worker started with ``SIDECAR_ENGINE=<engine>``; the kcat ``reference`` runs
once. Each run's results are kept under ``<scenario>/<engine>/<mode>``, and :func:`comparison` puts
the figures of every engine and mode and kcat's side by side, each against its engine's targets
(:data:`bench.targets.ENGINE_TARGETS`, the same in both modes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench import targets
from bench.context import ScenarioResult
from bench.targets import Bound
from hyperdata_sidecar.engines import EngineUnavailable, select

ENGINES = ("native", "python")
"""Every engine the harness knows, in the order the default runs them."""

PER_ENGINE_SCENARIOS = ("catchup", "live")


class EngineChoiceError(ValueError):
    """``--engines`` asks for something this run cannot do; ``str(err)`` is one line saying what."""


def result_key(scenario: str, engine: str | None = None, delivery: str | None = None) -> str:
    """Where a scenario's result is kept: ``catchup/native/exactly_once`` for a per-engine run, else
    its name."""
    return "/".join(part for part in (scenario, engine, delivery) if part is not None)


def native_missing() -> str | None:
    """Why the native engine cannot run here (one line), or None when it is installed."""
    try:
        select("native")
    except EngineUnavailable as missing:
        return str(missing)
    return None


def choose(asked: str | None, missing: str | None) -> tuple[list[str], str | None]:
    """The engines to run for ``--engines asked`` (None: the default, every engine) and a note to
    print when one is skipped. ``missing``: why the native engine cannot run (None: it can).

    Raises :class:`EngineChoiceError` for an unknown engine, an empty list, or a native engine asked
    for by name that is not installed; the default skips it and says so.
    """
    names = list(ENGINES) if asked is None else [n.strip() for n in asked.split(",") if n.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise EngineChoiceError(f"--engines takes a comma-separated list of {', '.join(ENGINES)}, not {asked!r}")
    if "native" not in names or missing is None:
        return names, None
    if asked is not None:
        raise EngineChoiceError(f"--engines {asked}: {missing}")
    rest = [n for n in names if n != "native"]
    return rest, f"skipping the native engine: {missing}"


# ------------------------------------------------------------------ the comparison


@dataclass(frozen=True)
class EngineFigures:
    """One engine's figures in one delivery mode (or kcat's) in a run; None where its scenario did
    not run or complete, or (the broker's) where the run did not start the broker."""

    lines_per_s: float | None = None
    cpu_us_per_line: float | None = None
    peak_rss_mb: float | None = None
    broker_cpu_us_per_line: float | None = None
    live_cpu_pct: float | None = None
    live_broker_cpu_pct: float | None = None
    live_p50_s: float | None = None
    live_p99_s: float | None = None


@dataclass(frozen=True)
class Cell:
    """One figure of one engine: its text, and its target and verdict when it has one."""

    value: str
    target: Bound | None = None
    met: bool | None = None


def figures_of(results: Mapping[str, ScenarioResult], engine: str, delivery: str) -> EngineFigures:
    """An engine's figures in one delivery mode, from its ``catchup`` and ``live`` results' details."""
    catchup = _details(results, result_key("catchup", engine, delivery))
    live = _details(results, result_key("live", engine, delivery))
    figures: dict[str, float | None] = {}
    if catchup is not None:
        broker_cpu_s = catchup["cpu"]["cpu_s"].get("broker")
        figures.update(
            lines_per_s=catchup["lines_per_s"],
            # CPU seconds per million lines are CPU µs per line.
            cpu_us_per_line=catchup["cpu_s_per_million_lines"],
            peak_rss_mb=catchup["peak_rss_kib"] / 1024,
            broker_cpu_us_per_line=None if broker_cpu_s is None else broker_cpu_s / catchup["backlog"]["lines"] * 1e6,
        )
    if live is not None:
        latency = live["latency"]["append_to_receive"]
        figures.update(
            live_cpu_pct=live["cpu_pct_of_one_core"]["sidecar"],
            live_broker_cpu_pct=live["cpu_pct_of_one_core"].get("broker"),
            live_p50_s=latency["p50_s"],
            live_p99_s=latency["p99_s"],
        )
    return EngineFigures(**figures)


def kcat_figures(results: Mapping[str, ScenarioResult]) -> EngineFigures | None:
    reference = _details(results, "reference")
    if reference is None:
        return None
    return EngineFigures(lines_per_s=reference["lines_per_s"], cpu_us_per_line=reference["kcat_cpu_s"] / reference["lines"] * 1e6)


@dataclass(frozen=True)
class Comparison:
    """The engines' figures side by side: ``columns`` names each engine and delivery mode
    (``native, exactly_once``) then kcat, each row is a figure and one cell per column."""

    columns: list[str]
    rows: list[tuple[str, list[Cell]]]


def comparison(engines: Mapping[tuple[str, str], EngineFigures], kcat: EngineFigures | None) -> Comparison:
    """The figures of each (engine, delivery mode) of ``engines`` (in its order) and kcat's, each
    against its engine's targets."""
    rows: list[tuple[str, list[Cell]]] = []

    def row(figure: str, cell_of: Callable[[str, EngineFigures], Cell], kcat_cell: Cell) -> None:
        rows.append((figure, [*(cell_of(engine, f) for (engine, _mode), f in engines.items()), kcat_cell]))

    kcat = kcat or EngineFigures()
    kcat_rate = kcat.lines_per_s
    row("catch-up lines/s", lambda _n, f: _cell(f.lines_per_s, "{:,.0f}"), _cell(kcat_rate, "{:,.0f}"))
    row(
        "CPU µs per line, all the worker's threads",
        lambda n, f: _cell(f.cpu_us_per_line, "{:.2f} µs", _target(n).cpu_us_per_line),
        _cell(kcat.cpu_us_per_line, "{:.2f} µs"),
    )
    row(
        "catch-up / kcat",
        lambda n, f: _cell(_ratio(f.lines_per_s, kcat_rate), "{:.2f}×", _target(n).vs_kcat),
        Cell("1×" if kcat_rate else "—"),
    )
    row("peak RSS", lambda n, f: _cell(f.peak_rss_mb, "{:.0f} MB", _target(n).peak_rss_mb), Cell(""))
    row("live: CPU, % of one core", lambda n, f: _cell(f.live_cpu_pct, "{:.1f}%", _target(n).live_cpu_pct), Cell(""))
    row("live: append→receive p50", lambda _n, f: _cell(f.live_p50_s, "{:.3f} s", targets.LIVE_P50), Cell(""))
    row("live: append→receive p99", lambda n, f: _cell(f.live_p99_s, "{:.3f} s", _target(n).live_p99_s), Cell(""))
    return Comparison([*(f"{engine}, {mode}" for engine, mode in engines), "kcat"], rows)


def of_run(results: Mapping[str, ScenarioResult], engines: Sequence[str], deliveries: Sequence[str]) -> Comparison:
    """The comparison of a run's results, the modes of each engine next to each other."""
    figures = {(engine, mode): figures_of(results, engine, mode) for engine in engines for mode in deliveries}
    return comparison(figures, kcat_figures(results))


def _target(engine: str) -> targets.EngineTargets:
    return targets.ENGINE_TARGETS[engine]


def _cell(value: float | None, form: str, target: Bound | None = None) -> Cell:
    if value is None:
        return Cell("—", target)
    return Cell(form.format(value), target, None if target is None else target.met(value))


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def _details(results: Mapping[str, ScenarioResult], key: str) -> dict | None:
    result = results.get(key)
    return None if result is None or result.error else result.details
