"""Both delivery modes in one benchmark run: which modes a run measures, the order its runs take,
the settings each worker gets, and how the report sets exactly_once against at_least_once."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench import deliveries
from bench.__main__ import _effective, parse_args
from bench.broker import Broker
from bench.context import RunContext, ScenarioResult
from bench.deliveries import PlannedRun, compared, run_order, side_by_side
from bench.engines import EngineFigures, of_run
from bench.report import markdown, modes_console

ALO, EOS = "at_least_once", "exactly_once"

# ---------------------------------------------------------------------- which modes


def test_default_deliveries_are_at_least_once_then_exactly_once() -> None:
    assert deliveries.choose(None) == [ALO, EOS]


def test_deliveries_run_in_the_order_asked() -> None:
    assert deliveries.choose(" exactly_once, at_least_once") == [EOS, ALO]
    assert deliveries.choose("exactly_once") == [EOS]


@pytest.mark.parametrize("asked", ["at_most_once", "exactly_once,exactly_once", " , "])
def test_deliveries_outside_the_known_ones_or_twice_are_refused(asked: str) -> None:
    with pytest.raises(deliveries.DeliveryChoiceError, match="comma-separated list of at_least_once, exactly_once"):
        deliveries.choose(asked)


def test_the_harness_takes_the_modes_from_its_own_option_not_from_set(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        parse_args(["--engines", "python", "--set", "DELIVERY=exactly_once"])
    assert refused.value.code == 2
    assert "--set DELIVERY: the harness sets it per worker; choose the modes with --deliveries" in capsys.readouterr().err


def test_the_modes_in_effect_are_recorded_with_the_run() -> None:
    args = parse_args(["--engines", "python", "--deliveries", "exactly_once,at_least_once"])
    assert args.deliveries == [EOS, ALO]
    effective = _effective(args)
    assert effective[effective.index("--deliveries") + 1] == "exactly_once,at_least_once"


# ---------------------------------------------------------------------- the order of the runs


def test_each_engine_runs_both_modes_back_to_back_and_each_has_each_mode_first_once() -> None:
    order = [
        (run.scenario, run.engine, run.delivery)
        for run in run_order(["catchup", "reference", "live", "seal"], ["native", "python"], [ALO, EOS])
    ]
    assert order == [
        ("catchup", "native", ALO),
        ("catchup", "native", EOS),
        ("catchup", "python", EOS),
        ("catchup", "python", ALO),
        ("reference", None, None),
        ("live", "native", EOS),
        ("live", "native", ALO),
        ("live", "python", ALO),
        ("live", "python", EOS),
        ("seal", None, None),
    ]


def test_one_engine_alternates_the_first_mode_from_the_catchup_to_the_live_scenario() -> None:
    order = [(run.scenario, run.delivery) for run in run_order(["live", "catchup"], ["native"], [EOS, ALO])]
    assert order == [("live", EOS), ("live", ALO), ("catchup", ALO), ("catchup", EOS)]


def test_one_mode_runs_each_per_engine_scenario_once_per_engine() -> None:
    order = run_order(["catchup", "stages", "live"], ["native", "python"], [EOS])
    assert [run.key for run in order] == [
        "catchup/native/exactly_once",
        "catchup/python/exactly_once",
        "stages",
        "live/native/exactly_once",
        "live/python/exactly_once",
    ]


def test_a_scenario_that_runs_once_is_kept_under_its_name() -> None:
    assert PlannedRun("seal").key == "seal"
    assert PlannedRun("live", "python", ALO).key == "live/python/at_least_once"


def test_a_worker_gets_its_runs_mode_and_one_that_runs_once_the_first_mode() -> None:
    options = argparse.Namespace(worker_settings={"PRODUCER_LINGER_MS": "20"})
    ctx = RunContext(Broker("127.0.0.1:9", None, "test"), Path("."), "run", options, deliveries=[EOS, ALO])
    assert ctx.worker_settings(ALO) == {"PRODUCER_LINGER_MS": "20", "DELIVERY": ALO}
    assert ctx.worker_settings() == {"PRODUCER_LINGER_MS": "20", "DELIVERY": EOS}


def test_the_modes_name_directories_and_topics_without_underscores() -> None:
    assert deliveries.directory_word(ALO) == "at-least-once"


# ---------------------------------------------------------------------- the modes side by side


def _catchup(lines_per_s: float, cpu_us: float, broker_cpu_s: float | None) -> dict:
    cpu_s = {"sidecar": cpu_us * 2.0} | ({} if broker_cpu_s is None else {"broker": broker_cpu_s})
    return {
        "lines_per_s": lines_per_s,
        "cpu_s_per_million_lines": cpu_us,
        "peak_rss_kib": 200 * 1024,
        "backlog": {"lines": 2_000_000},
        "cpu": {"cpu_s": cpu_s},
    }


def _live(p50: float, p99: float, sidecar: float, broker: float) -> dict:
    return {
        "latency": {"append_to_receive": {"p50_s": p50, "p99_s": p99}},
        "cpu_pct_of_one_core": {"sidecar": sidecar, "broker": broker},
    }


RESULTS = {
    "catchup/native/at_least_once": ScenarioResult("catch-up (native, at_least_once)", details=_catchup(240_000, 5.0, 4.0)),
    "catchup/native/exactly_once": ScenarioResult("catch-up (native, exactly_once)", details=_catchup(204_000, 4.6, 3.0)),
    "live/native/at_least_once": ScenarioResult("live (native, at_least_once)", details=_live(0.189, 0.339, 24.0, 9.5)),
    "live/native/exactly_once": ScenarioResult("live (native, exactly_once)", details=_live(0.378, 0.699, 25.0, 11.0)),
}


def test_each_engines_modes_are_set_side_by_side_with_exactly_once_as_a_share_of_at_least_once() -> None:
    (native,) = side_by_side(RESULTS, ["native"], [ALO, EOS])
    assert native.engine == "native"
    assert dict(native.cells) == {
        "catch-up: CPU per line": "5.00 µs → 4.60 µs (92%)",
        "catch-up: lines/s": "240,000 → 204,000 (0.85×)",
        "catch-up: broker CPU per line": "2.00 µs → 1.50 µs (75%)",
        "live: append→receive p50": "0.189 s → 0.378 s",
        "live: append→receive p99": "0.339 s → 0.699 s",
        "live: worker CPU": "24.0% → 25.0%",
        "live: broker CPU": "9.5% → 11.0%",
    }


def test_the_order_the_modes_ran_in_does_not_change_the_comparison() -> None:
    assert side_by_side(RESULTS, ["native"], [EOS, ALO]) == side_by_side(RESULTS, ["native"], [ALO, EOS])


def test_a_run_of_one_mode_has_no_modes_side_by_side() -> None:
    assert side_by_side(RESULTS, ["native"], [ALO]) == []


def test_a_figure_one_mode_lacks_shows_a_dash_and_no_ratio() -> None:
    cells = dict(compared("python", EngineFigures(lines_per_s=100_000), EngineFigures()).cells)
    assert cells["catch-up: lines/s"] == "100,000 → —"
    assert cells["catch-up: broker CPU per line"] == "— → —"


def test_the_engines_table_has_a_column_per_engine_and_mode() -> None:
    table = of_run(RESULTS, ["native"], [ALO, EOS])
    assert table.columns == ["native, at_least_once", "native, exactly_once", "kcat"]
    assert [cell.value for cell in dict(table.rows)["live: append→receive p99"]] == ["0.339 s", "0.699 s", ""]


def test_the_report_names_the_modes_and_gives_each_engine_a_line() -> None:
    run = {
        "started_at": "2026-12-03 10:00 UTC",
        "command": "make bench",
        "harness_command": "python -m bench",
        "git": {"commit": "abc1234", "dirty": False, "changed_files": 0},
        "machine": {"nproc": 2, "memory_gib": 8, "cpu_model": "Xeon", "python": "3.11.7", "load_average_at_start": 0.1},
        "broker_local": True,
        "kafka_version": "4.1.1",
        "kcat_version": "kcat 1.7.1",
        "total_s": 600.0,
        "json": "var/bench/x.json",
        "engines": ["native"],
        "deliveries": [ALO, EOS],
    }
    row = ScenarioResult("catch-up (native, exactly_once)")
    row.row("lines/s", "204,000")
    modes = side_by_side(RESULTS, ["native"], [ALO, EOS])
    text = markdown(run, [row], of_run(RESULTS, ["native"], [ALO, EOS]), modes)
    assert "delivery modes: at_least_once, exactly_once." in text
    assert "| catch-up (native, exactly_once) | lines/s | 204,000 |  |  |" in text
    assert "| engine | catch-up: CPU per line | catch-up: lines/s |" in text
    assert "| native | 5.00 µs → 4.60 µs (92%) | 240,000 → 204,000 (0.85×) | 2.00 µs → 1.50 µs (75%) |" in text
    console = modes_console(modes)
    assert console.splitlines()[0].split() == ["native"]
    assert "catch-up: lines/s" in console and "240,000 → 204,000 (0.85×)" in console
