"""What the scenarios of one run share: the broker, the work dir, the options, earlier results."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.broker import Broker
from hyperdata_sidecar.tools.generate import CorpusSummary


@dataclass
class Row:
    """One reported figure; ``target`` is the issue's target in words ("" when there is none) and
    ``met`` whether the figure meets it (None when there is no target or no figure)."""

    scenario: str
    figure: str
    value: str
    target: str = ""
    met: bool | None = None


@dataclass
class ScenarioResult:
    """What a scenario measured: the rows for the table and everything else for the JSON file."""

    name: str
    rows: list[Row] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def row(self, figure: str, value: str, target: str = "", met: bool | None = None) -> None:
        self.rows.append(Row(self.name, figure, value, target, met))


@dataclass
class RunContext:
    """Shared by the scenarios of one run, in the order they run."""

    broker: Broker
    work: Path
    run_id: str
    options: argparse.Namespace
    results: dict[str, ScenarioResult] = field(default_factory=dict)
    backlog: CorpusSummary | None = None  # written by the first catch-up, read by every engine, pushed again by kcat
    live_corpus: CorpusSummary | None = None  # written by the first live scenario, replayed for every engine
    engines: list[str] = field(default_factory=list)  # the line engines the per-engine scenarios run, in order
    deliveries: list[str] = field(default_factory=list)  # the delivery modes they run, the first for the others

    def worker_settings(self, delivery: str | None = None) -> dict[str, str]:
        """A worker's settings: ``--set``'s and ``DELIVERY=delivery``, by default the run's first mode
        (a scenario that runs once runs in it)."""
        return {**self.options.worker_settings, "DELIVERY": delivery or self.deliveries[0]}

    def topic_prefix(self, scenario: str) -> str:
        """A topic-name prefix no other run or scenario uses, so every scenario starts on empty topics."""
        return f"bench-{self.run_id}-{scenario}."

    def scenario_dir(self, scenario: str) -> Path:
        path = self.work / scenario
        path.mkdir(parents=True, exist_ok=True)
        return path
