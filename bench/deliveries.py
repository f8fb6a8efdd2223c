"""Both delivery modes in one run: which modes a run measures, the order of its runs, and how
exactly_once compares with at_least_once.

``--deliveries at_least_once,exactly_once`` (the default) runs the ``catchup`` and ``live``
scenarios once per line engine and delivery mode, each worker started with ``DELIVERY=<mode>``;
the scenarios that run once (``reference`` aside, which has no worker) run in the first mode.
Each result is kept under ``<scenario>/<engine>/<mode>``, and :func:`side_by_side` sets each
engine's exactly_once figures against its at_least_once ones from the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.context import ScenarioResult
from bench.engines import PER_ENGINE_SCENARIOS, EngineFigures, figures_of, result_key
from hyperdata_sidecar.config import DELIVERY_CHOICES

AT_LEAST_ONCE, EXACTLY_ONCE = DELIVERY_CHOICES
DELIVERIES = DELIVERY_CHOICES
"""Every mode the harness knows, in the order the default runs them."""


class DeliveryChoiceError(ValueError):
    """``--deliveries`` asks for something this run cannot do; ``str(err)`` is one line saying what."""


def choose(asked: str | None) -> list[str]:
    """The modes to run for ``--deliveries asked`` (None: the default, every mode), in its order.

    Raises :class:`DeliveryChoiceError` for an unknown mode, one named twice, or an empty list.
    """
    names = list(DELIVERIES) if asked is None else [n.strip() for n in asked.split(",") if n.strip()]
    if not names or any(n not in DELIVERIES for n in names) or len(set(names)) != len(names):
        raise DeliveryChoiceError(f"--deliveries takes a comma-separated list of {', '.join(DELIVERIES)}, not {asked!r}")
    return names


def directory_word(delivery: str) -> str:
    """The mode as it names a run's directory and topics: ``at-least-once`` (Kafka warns about topic
    names that mix ``.`` and ``_``)."""
    return delivery.replace("_", "-")


# ------------------------------------------------------------------ the order of the runs


@dataclass(frozen=True)
class PlannedRun:
    """One scenario to run; ``engine`` and ``delivery`` are None for a scenario that runs once."""

    scenario: str
    engine: str | None = None
    delivery: str | None = None

    @property
    def key(self) -> str:
        """Where its result is kept: ``catchup/native/exactly_once``, or the scenario's name."""
        return result_key(self.scenario, self.engine, self.delivery)


def run_order(scenarios: Sequence[str], engines: Sequence[str], deliveries: Sequence[str]) -> list[PlannedRun]:
    """The runs in the order they run: the scenarios in their order, a per-engine one (``catchup``,
    ``live``) once per engine and delivery mode, the others once.

    The two modes of one scenario and engine run back to back, within a few minutes, so that the
    figures compared meet the same machine (it is shared, and its speed drifts over the hours) and the
    same broker. Which of the pair goes first alternates as in a Latin square: the first mode of
    ``deliveries`` when the scenario's rank among the per-engine scenarios plus the engine's rank is
    even, the other one when it is odd. With two engines and both per-engine scenarios, each engine
    and each scenario has each mode first once, so what the first run of a pair meets and the second
    does not (the backlog or the tap's corpus written just before it, a broker holding fewer topics)
    does not always fall on the same mode.
    """
    per_engine = [name for name in scenarios if name in PER_ENGINE_SCENARIOS]
    runs = []
    for name in scenarios:
        if name not in PER_ENGINE_SCENARIOS:
            runs.append(PlannedRun(name))
            continue
        for engine_rank, engine in enumerate(engines):
            leads = (per_engine.index(name) + engine_rank) % 2 == 0
            runs.extend(PlannedRun(name, engine, delivery) for delivery in (deliveries if leads else deliveries[::-1]))
    return runs


# ------------------------------------------------------------------ the modes side by side

CELL_FORM = (
    "at_least_once → exactly_once; for the catch-up, exactly_once's CPU per line (the worker's, the broker's) "
    "as a share of at_least_once's and its lines/s as a multiple"
)
"""How to read a cell of :class:`ModesCompared`, for the tables' captions."""


@dataclass(frozen=True)
class ModesCompared:
    """One engine's figures in both modes: ``cells`` holds, per figure, its text
    ``<at_least_once> → <exactly_once>``, and for the catch-up's the second as a share of the first
    (CPU per line in %, lines/s as a multiple)."""

    engine: str
    cells: list[tuple[str, str]]


def compared(engine: str, at_least_once: EngineFigures, exactly_once: EngineFigures) -> ModesCompared:
    """``engine``'s figures in both modes, side by side; "—" for a figure a run does not have."""

    def cell(figure: str, value: Callable[[EngineFigures], float | None], form: str, ratio: str = "") -> tuple[str, str]:
        first, second = value(at_least_once), value(exactly_once)
        text = f"{_text(first, form)} → {_text(second, form)}"
        if ratio and first and second is not None:
            text += f" ({ratio.format(second / first)})"
        return figure, text

    return ModesCompared(
        engine,
        [
            cell("catch-up: CPU per line", lambda f: f.cpu_us_per_line, "{:.2f} µs", "{:.0%}"),
            cell("catch-up: lines/s", lambda f: f.lines_per_s, "{:,.0f}", "{:.2f}×"),
            cell("catch-up: broker CPU per line", lambda f: f.broker_cpu_us_per_line, "{:.2f} µs", "{:.0%}"),
            cell("live: append→receive p50", lambda f: f.live_p50_s, "{:.3f} s"),
            cell("live: append→receive p99", lambda f: f.live_p99_s, "{:.3f} s"),
            cell("live: worker CPU", lambda f: f.live_cpu_pct, "{:.1f}%"),
            cell("live: broker CPU", lambda f: f.live_broker_cpu_pct, "{:.1f}%"),
        ],
    )


def side_by_side(results: Mapping[str, ScenarioResult], engines: Sequence[str], deliveries: Sequence[str]) -> list[ModesCompared]:
    """Each engine's two modes side by side, when the run measured both (else nothing)."""
    if set(deliveries) != {AT_LEAST_ONCE, EXACTLY_ONCE}:
        return []
    return [
        compared(engine, figures_of(results, engine, AT_LEAST_ONCE), figures_of(results, engine, EXACTLY_ONCE))
        for engine in engines
    ]


def _text(value: float | None, form: str) -> str:
    return "—" if value is None else form.format(value)
