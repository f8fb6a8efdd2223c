"""Where a run's results go: a JSON file under ``var/bench/`` and a table appended to the docs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from bench.context import Row, ScenarioResult
from bench.deliveries import CELL_FORM, ModesCompared
from bench.engines import Cell, Comparison


def git_commit(repo: Path) -> dict[str, Any]:
    """The short commit and whether the working tree differs from it (tracked or untracked files)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    changed = [line for line in git("status", "--porcelain").splitlines() if line.strip()]
    return {
        "commit": git("rev-parse", "--short", "HEAD") or "unknown",
        "dirty": bool(changed),
        "changed_files": len(changed),
    }


def machine_notes() -> dict[str, Any]:
    """What a reader needs to compare this run with another machine's."""
    cpu_model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    memory_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024**2, 1),
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg()[0],
    }


def write_json(path: Path, run: dict[str, Any], results: dict[str, ScenarioResult]) -> None:
    """``run`` and every scenario's rows and details, keyed by the scenario's command-line name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        **run,
        "scenarios": {
            key: {"title": r.name, "error": r.error, "rows": [row.__dict__ for row in r.rows], "details": r.details}
            for key, r in results.items()
        },
    }
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")


def markdown(
    run: dict[str, Any],
    results: list[ScenarioResult],
    engines: Comparison | None = None,
    modes: list[ModesCompared] | None = None,
) -> str:
    """One run as a section of ``docs/benchmarks.md``: when, what, where, the figures, the line
    engines side by side when ``engines`` is given, and each engine's delivery modes side by side
    when ``modes`` holds them."""
    git, machine = run["git"], run["machine"]
    dirty = f" (working tree dirty: {git['changed_files']} files differ from the commit)" if git["dirty"] else ""
    broker = (
        f"Kafka {run['kafka_version']}, a single-node KRaft broker on the same {machine['nproc']} cores"
        if run["broker_local"]
        else f"an external broker at {run['bootstrap']}"
    )
    lines = [
        f"### {run['started_at']} · commit {git['commit']}{dirty}",
        "",
        f"Command: `{run['command']}` → `{run['harness_command']}`; {run['total_s'] / 60:.1f} min in all. "
        f"Full results: `{run['json']}`.",
        "",
        f"Machine: {machine['nproc']} cores (nproc), {machine['memory_gib']} GiB, {machine['cpu_model']}; "
        f"Python {machine['python']}; {broker}; {run['kcat_version']}; "
        f"load average {machine['load_average_at_start']:.2f} at the start (the machine is shared). "
        f"Line engines: {', '.join(run['engines'])}{_note(run.get('engines_note'))}; "
        f"delivery modes: {', '.join(run['deliveries'])}.",
        "",
        "| scenario | figure | value | target | |",
        "|---|---|---|---|---|",
    ]
    for result in results:
        if result.error:
            lines.append(f"| {result.name} | **did not complete** | {_cell(result.error)} | | |")
        lines.extend(_row(row) for row in result.rows)
    if engines is not None:
        lines += ["", "The line engines side by side (each against its own targets, `bench/targets.py`):", ""]
        lines += _engines_markdown(engines)
    if modes:
        lines += ["", f"The delivery modes side by side ({CELL_FORM}):", ""]
        lines += _modes_markdown(modes)
    return "\n".join(lines) + "\n"


def _note(note: str | None) -> str:
    return f" ({note})" if note else ""


def _engines_markdown(engines: Comparison) -> list[str]:
    lines = [f"| figure | {' | '.join(engines.columns)} |", "|---" * (len(engines.columns) + 1) + "|"]
    for figure, cells in engines.rows:
        lines.append(f"| {_cell(figure)} | {' | '.join(_cell(_engine_cell(c, '**missed**')) for c in cells)} |")
    return lines


def _modes_markdown(modes: list[ModesCompared]) -> list[str]:
    figures = [figure for figure, _text in modes[0].cells]
    lines = [f"| engine | {' | '.join(figures)} |", "|---" * (len(figures) + 1) + "|"]
    for compared in modes:
        lines.append(f"| {compared.engine} | {' | '.join(_cell(text) for _figure, text in compared.cells)} |")
    return lines


def engines_console(engines: Comparison) -> str:
    """The line engines side by side, as the console shows them."""
    table = [["", *engines.columns]] + [[figure, *(_engine_cell(c, "MISSED") for c in cells)] for figure, cells in engines.rows]
    return _aligned(table)


def modes_console(modes: list[ModesCompared]) -> str:
    """Each engine's delivery modes side by side, as the console shows them: a column per engine."""
    table = [["", *(compared.engine for compared in modes)]]
    table += [[figure, *(compared.cells[i][1] for compared in modes)] for i, (figure, _text) in enumerate(modes[0].cells)]
    return _aligned(table)


def _aligned(table: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join(
        "  " + "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip() for row in table
    )


def _engine_cell(cell: Cell, missed: str) -> str:
    if cell.target is None:
        return cell.value
    verdict = "" if cell.met is None else (", met" if cell.met else f", {missed}")
    return f"{cell.value} ({cell.target}{verdict})"


def console_table(results: list[ScenarioResult]) -> str:
    width = max((len(r.figure) for res in results for r in res.rows), default=10)
    out = []
    for result in results:
        out.append(f"{result.name}:" + (f" DID NOT COMPLETE: {result.error}" if result.error else ""))
        for row in result.rows:
            verdict = "" if row.met is None else ("  [met]" if row.met else "  [MISSED]")
            target = f"  (target {row.target})" if row.target else ""
            out.append(f"  {row.figure:<{width}}  {row.value}{target}{verdict}")
    return "\n".join(out)


def _row(row: Row) -> str:
    verdict = "" if row.met is None else ("met" if row.met else "**missed**")
    return f"| {row.scenario} | {_cell(row.figure)} | {_cell(row.value)} | {_cell(row.target)} | {verdict} |"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
