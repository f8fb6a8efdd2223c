"""The benchmark harness's own arithmetic: latency percentiles, local_time parsing, the CPU window,
the choice of line engines and their targets, the broker's log bytes, the backup scenario's file,
its backup process and its overlap with the tap, and how a run's figures are written into
docs/benchmarks.md."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import engines
from bench.backup import back_up_in_a_process, overlap, write_source
from bench.compression import log_bytes
from bench.context import ScenarioResult
from bench.engines import EngineFigures, comparison, of_run
from bench.latency import LatencyHistogram, LatencyRecorder, LocalTimeParser
from bench.live import _report as live_report
from bench.live import tap_clocks
from bench.procstat import CpuWindow, io_counters, memory_kib
from bench.report import engines_console, markdown
from bench.targets import ENGINE_TARGETS, Bound
from bench.worker import BenchError, SidecarWorker

LINE = b'{"local_time":"2026-06-10T13:10:56.723695057","block_time":"2026-06-10T12:56:15.035481067","events":[]}'


def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()


def test_histogram_percentiles_are_the_upper_edge_of_their_millisecond() -> None:
    histogram = LatencyHistogram()
    histogram.add_all([i / 1000 + 0.0005 for i in range(100)])  # 0.5 ms, 1.5 ms, ... 99.5 ms
    assert histogram.percentile(0.50) == 0.050
    assert histogram.percentile(0.99) == 0.099
    assert histogram.summary()["max_s"] == 0.0995


def test_histogram_keeps_latencies_beyond_its_range_in_the_last_slot_and_exact_max() -> None:
    histogram = LatencyHistogram()
    histogram.add_all([0.001, 900.0])
    assert histogram.percentile(1.0) == 600.001
    assert histogram.max_s == 900.0


def test_local_time_parser_reads_the_lines_first_field_to_the_nanosecond() -> None:
    parsed = LocalTimeParser()(LINE)
    assert abs(parsed - (_epoch("2026-06-10T13:10:56") + 0.723695057)) < 1e-6


def test_recorder_splits_each_latency_at_the_records_create_time() -> None:
    appended = _epoch("2026-06-10T13:10:56") + 0.723695057
    recorder = LatencyRecorder()
    recorder.received_lines(appended + 0.5, [b"%d %s" % (round((appended + 0.2) * 1000), LINE)])
    summary = recorder.summary(expect=1)
    assert summary["append_to_receive"]["max_s"] == 0.5
    assert abs(summary["append_to_create_time"]["max_s"] - 0.2) < 0.001
    assert abs(summary["create_time_to_receive"]["max_s"] - 0.3) < 0.001


def test_recorder_counts_lines_it_cannot_read_apart_from_the_latencies() -> None:
    recorder = LatencyRecorder()
    recorder.received_lines(0.0, [b"not-a-timestamp " + LINE, b"1749561056723 {}"])
    assert recorder.received == 2
    assert recorder.unparsed == 2
    assert recorder.total.n == 0


def test_cpu_window_agrees_with_the_kernels_own_accounting_of_a_busy_and_an_idle_process() -> None:
    idle = subprocess.Popen(
        [sys.executable, "-c", "import time; print('sleeping', flush=True); time.sleep(30)"], stdout=subprocess.PIPE
    )
    try:
        assert idle.stdout is not None and idle.stdout.readline() == b"sleeping\n"  # start-up CPU is behind it
        window = CpuWindow({"me": os.getpid(), "idle": idle.pid}).start()
        began = time.process_time()  # independent of /proc/<pid>/stat, which the window reads
        while time.process_time() - began < 0.2:
            pass
        burned = time.process_time() - began
        window.stop()
    finally:
        idle.kill()
        idle.wait()
    tick = 1.0 / os.sysconf("SC_CLK_TCK")
    assert abs(window.cpu_s("me") - burned) <= 3 * tick
    assert window.cpu_s("idle") <= 3 * tick
    assert memory_kib(os.getpid())["VmHWM"] >= memory_kib(os.getpid())["VmRSS"] > 0


def test_markdown_names_the_commit_and_marks_missed_targets() -> None:
    result = ScenarioResult("catch-up")
    result.row("lines/s", "30,000", "≥ 200,000", False)
    result.row("peak RSS", "190 MB", "≤ 300 MB", True)
    failed = ScenarioResult("live", error="BenchError: the worker exited | see log")
    run = {
        "started_at": "2026-06-10 14:00 UTC",
        "command": "make bench",
        "harness_command": "python -m bench",
        "git": {"commit": "abc1234", "dirty": True, "changed_files": 3},
        "machine": {
            "nproc": 2,
            "memory_gib": 23.5,
            "cpu_model": "Xeon",
            "python": "3.11.7",
            "load_average_at_start": 1.5,
        },
        "broker_local": True,
        "kafka_version": "4.1.1",
        "kcat_version": "kcat 1.7.1, librdkafka 2.0.2",
        "total_s": 360.0,
        "json": "var/bench/x.json",
        "engines": ["native", "python"],
        "deliveries": ["at_least_once", "exactly_once"],
    }
    text = markdown(run, [result, failed])
    assert "commit abc1234 (working tree dirty: 3 files differ from the commit)" in text
    assert "| catch-up | lines/s | 30,000 | ≥ 200,000 | **missed** |" in text
    assert "| catch-up | peak RSS | 190 MB | ≤ 300 MB | met |" in text
    assert "the worker exited \\| see log" in text
    assert "on the same 2 cores" in text


# --- the line engines side by side ---------------------------------------------------------------

MISSING = "the native line engine (module hyperdata_sidecar_engine) is not installed"


def test_default_engines_are_native_then_python() -> None:
    assert engines.choose(None, None) == (["native", "python"], None)


def test_default_skips_a_missing_native_engine_and_says_so() -> None:
    chosen, note = engines.choose(None, MISSING)
    assert chosen == ["python"]
    assert note == f"skipping the native engine: {MISSING}"


def test_native_asked_by_name_and_missing_is_refused_in_one_line() -> None:
    with pytest.raises(engines.EngineChoiceError) as refusal:
        engines.choose("python,native", MISSING)
    assert str(refusal.value) == f"--engines python,native: {MISSING}"


@pytest.mark.parametrize("asked", ["cuda", "native,,gpu", " , "])
def test_engines_outside_the_known_ones_are_refused(asked: str) -> None:
    with pytest.raises(engines.EngineChoiceError, match="comma-separated list of native, python"):
        engines.choose(asked, None)


def test_engines_run_in_the_order_asked() -> None:
    assert engines.choose("python, native", None) == (["python", "native"], None)


def test_bound_says_its_direction_and_judges_the_edge_as_met() -> None:
    at_most, at_least = Bound(3.5, at_most=True, unit=" µs"), Bound(1.1, at_most=False, unit="×")
    assert (str(at_most), str(at_least)) == ("≤ 3.5 µs", "≥ 1.1×")
    assert at_most.met(3.5) and not at_most.met(3.51)
    assert at_least.met(1.1) and not at_least.met(1.09)


def test_the_same_figure_is_judged_against_each_engines_own_target() -> None:
    figures = EngineFigures(lines_per_s=300_000, cpu_us_per_line=5.0)
    table = comparison(
        {("native", "exactly_once"): figures, ("python", "exactly_once"): figures},
        EngineFigures(lines_per_s=250_000, cpu_us_per_line=5.2),
    )
    assert table.columns == ["native, exactly_once", "python, exactly_once", "kcat"]
    rows = dict(table.rows)
    native, python, kcat = rows["CPU µs per line, all the worker's threads"]
    assert (native.value, native.target, native.met) == ("5.00 µs", ENGINE_TARGETS["native"].cpu_us_per_line, False)
    assert (python.value, python.target, python.met) == ("5.00 µs", ENGINE_TARGETS["python"].cpu_us_per_line, True)
    assert (kcat.value, kcat.target) == ("5.20 µs", None)
    ratio_native, ratio_python, _ = rows["catch-up / kcat"]
    assert ratio_native.value == ratio_python.value == "1.20×"
    assert (ratio_native.met, ratio_python.met) == (True, True)


def test_figures_of_a_scenario_that_failed_or_did_not_run_are_blank_with_their_target() -> None:
    results = {
        "catchup/native/at_least_once": ScenarioResult("catch-up (native, at_least_once)", error="BenchError: the worker exited"),
        "live/native/at_least_once": ScenarioResult(
            "live (native, at_least_once)",
            details={"cpu_pct_of_one_core": {"sidecar": 10.04}, "latency": {"append_to_receive": {"p50_s": 0.2, "p99_s": 0.7}}},
        ),
    }
    rows = dict(of_run(results, ["native"], ["at_least_once"]).rows)
    (rate, kcat_rate) = rows["catch-up lines/s"]
    assert (rate.value, kcat_rate.value) == ("—", "—")
    assert rows["catch-up / kcat"][0].met is None
    assert (rows["live: CPU, % of one core"][0].value, rows["live: CPU, % of one core"][0].met) == ("10.0%", True)
    assert (rows["live: append→receive p99"][0].value, rows["live: append→receive p99"][0].met) == ("0.700 s", False)


def test_figures_come_from_the_catchup_and_reference_details() -> None:
    results = {
        "catchup/python/at_least_once": ScenarioResult(
            "catch-up (python, at_least_once)",
            details={
                "lines_per_s": 170_000,
                "cpu_s_per_million_lines": 6.2,
                "peak_rss_kib": 150 * 1024,
                "backlog": {"lines": 1_000_000},
                "cpu": {"cpu_s": {"sidecar": 6.2}},
            },
        ),
        "reference": ScenarioResult("reference (kcat)", details={"lines_per_s": 200_000, "kcat_cpu_s": 5.0, "lines": 1_000_000}),
    }
    rows = dict(of_run(results, ["python"], ["at_least_once"]).rows)
    assert [c.value for c in rows["catch-up lines/s"]] == ["170,000", "200,000"]
    assert [c.value for c in rows["CPU µs per line, all the worker's threads"]] == ["6.20 µs", "5.00 µs"]
    assert rows["catch-up / kcat"][0].value == "0.85×"
    assert rows["peak RSS"][0].value == "150 MB"


def test_markdown_and_console_show_the_engines_side_by_side_with_verdicts() -> None:
    table = comparison(
        {
            ("native", "at_least_once"): EngineFigures(cpu_us_per_line=3.0),
            ("python", "at_least_once"): EngineFigures(cpu_us_per_line=7.0),
        },
        None,
    )
    run = {
        "started_at": "2026-12-01 14:00 UTC",
        "command": "make bench",
        "harness_command": "python -m bench",
        "git": {"commit": "abc1234", "dirty": False, "changed_files": 0},
        "machine": {"nproc": 2, "memory_gib": 8, "cpu_model": "Xeon", "python": "3.11.7", "load_average_at_start": 0.1},
        "broker_local": True,
        "kafka_version": "4.1.1",
        "kcat_version": "kcat 1.7.1",
        "total_s": 60.0,
        "json": "var/bench/x.json",
        "engines": ["native", "python"],
        "engines_note": None,
        "deliveries": ["at_least_once"],
    }
    text = markdown(run, [], table)
    assert "Line engines: native, python; delivery modes: at_least_once." in text
    assert "| figure | native, at_least_once | python, at_least_once | kcat |" in text
    assert "| CPU µs per line, all the worker's threads | 3.00 µs (≤ 3.5 µs, met) | 7.00 µs (≤ 6.4 µs, **missed**) | — |" in text
    console = engines_console(table)
    assert "3.00 µs (≤ 3.5 µs, met)" in console
    assert "7.00 µs (≤ 6.4 µs, MISSED)" in console


def test_worker_running_another_engine_than_asked_is_a_bench_error(tmp_path: Path) -> None:
    worker = SidecarWorker(tmp_path, "127.0.0.1:9", "t.", SIDECAR_ENGINE="native")
    worker.log_path.write_text('{"event": "startup", "engine": "python 0.9.0"}\n')
    with pytest.raises(BenchError, match=r"asked for SIDECAR_ENGINE=native and runs 'python 0\.9\.0'"):
        worker.wait_for_startup(timeout_s=0)


def test_worker_running_the_engine_asked_for_starts(tmp_path: Path) -> None:
    worker = SidecarWorker(tmp_path, "127.0.0.1:9", "t.", SIDECAR_ENGINE="native")
    worker.log_path.write_text('{"event": "startup", "engine": "native 0.1.0"}\n')
    assert worker.wait_for_startup(timeout_s=0)["engine"] == "native 0.1.0"


# --- the compression scenario's bytes on the broker -----------------------------------------------


def test_log_bytes_counts_the_segments_of_the_topics_partitions_only(tmp_path: Path) -> None:
    for directory, files in {
        "bench.fills-0": {"00000000000000000000.log": 100, "00000000000000000000.index": 10_485_760},
        "bench.fills-1": {"00000000000000000000.log": 20, "00000000000000005000.log": 3},
        "bench.fills-x-0": {"00000000000000000000.log": 7_000},  # topic bench.fills-x, not bench.fills
        "bench.other-0": {"00000000000000000000.log": 9_000},
    }.items():
        (tmp_path / directory).mkdir()
        for name, size in files.items():
            (tmp_path / directory / name).write_bytes(b"x" * size)
    assert log_bytes(tmp_path, ["bench.fills"]) == 123
    assert log_bytes(tmp_path, ["bench.fills", "bench.other"]) == 9_123


# ---------------------------------------------------------------------- the backup scenario


def test_io_counters_count_what_this_process_reads(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(os.urandom(1 << 20))
    before = io_counters(os.getpid())
    path.read_bytes()
    after = io_counters(os.getpid())

    assert after["rchar"] - before["rchar"] >= 1 << 20
    assert {"read_bytes", "wchar", "write_bytes"} <= set(after)


def test_the_file_to_back_up_has_its_size_and_the_hash_of_its_bytes(tmp_path: Path) -> None:
    path, digest = write_source(tmp_path / "a" / "13", 40 * 1024 * 1024 + 5)

    assert path.stat().st_size == 40 * 1024 * 1024 + 5
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_the_backup_process_backs_the_file_up_through_the_settings_sink_and_says_what_it_cost(tmp_path: Path) -> None:
    path, digest = write_source(tmp_path / "watch" / "13", 3 * 1024 * 1024)

    copied = back_up_in_a_process(tmp_path, path, digest, {"BACKUP_SINK": "local", "BACKUP_DIR": str(tmp_path / "b")})

    assert (copied["sink"], copied["via"], copied["bytes"]) == ("local", "copy_file_range", 3 * 1024 * 1024)
    assert copied["ref"].startswith("file://") and copied["ref"].endswith("/13")
    assert copied["io"]["rchar"] >= 2 * 3 * 1024 * 1024  # the source once, the copy once
    assert copied["peak_rss_kib"] >= copied["idle_rss_kib"] > 0
    assert json.loads((tmp_path / "sink_copy.json").read_text()) == copied


def test_a_backup_the_sink_refuses_fails_the_scenario_with_the_sinks_reason(tmp_path: Path) -> None:
    path, _digest = write_source(tmp_path / "watch" / "13", 1024)

    with pytest.raises(BenchError, match="hash_mismatch"):
        back_up_in_a_process(tmp_path, path, "0" * 64, {"BACKUP_SINK": "local", "BACKUP_DIR": str(tmp_path / "b")})


@pytest.mark.parametrize(
    ("span", "share"),
    [((110.0, 120.0), "100%"), ((150.0, 170.0), "50%"), ((170.0, 180.0), "0%")],
)
def test_the_snapshot_backup_is_set_against_the_taps_run(span: tuple[float, float], share: str) -> None:
    began, ended = span
    stamp = datetime.datetime.fromtimestamp(ended, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    run = {
        "tap_window": (100.0, 160.0),
        "backups": [{"time": stamp, "seconds": ended - began, "size": 2 * 2**20, "via": "copy_file_range"}],
    }

    assert overlap(run) == f"2 MiB in {ended - began:.1f} s via copy_file_range, {share} of it while the tap ran"


def test_a_live_run_without_a_backup_says_so() -> None:
    assert overlap({"tap_window": (0.0, 1.0), "backups": []}).startswith("none made")


@pytest.mark.parametrize(("standby", "met"), [(1.8, True), (5.1, False), (None, None)])
def test_a_live_run_of_a_stream_judges_its_standbys_cpu_against_the_issues_bound(standby: float | None, met: bool | None) -> None:
    spread = {"p50_s": 0.1, "p99_s": 0.2, "max_s": 0.3}
    latency = {"received": 10, "append_to_receive": spread, "append_to_create_time": spread, "create_time_to_receive": spread}
    shares = {"sidecar": 30.0, "tap": 10.0, "consumer": 20.0, **({} if standby is None else {"standby": standby})}
    result = ScenarioResult("live (native, exactly_once)")
    live_report(result, 10, latency, {"tables": {"fills": {"lines": 10}}, "seconds": 1.0}, shares, 80.0, ENGINE_TARGETS["native"])
    rows = [row for row in result.rows if row.figure == "standby CPU share (STREAM_ID)"]
    if standby is None:
        assert rows == []
    else:
        assert [(row.value, row.target, row.met) for row in rows] == [(f"{standby:.1f}% of one core", "≤ 5%", met)]


def test_a_live_run_names_a_pause_of_the_machine_that_its_latencies_include() -> None:
    # 2026-12-04: the tap's 60 s took 95.6 s by the wall clock, 60.1 s by its own monotonic one, and
    # the run's maximum latency was 36.6 s (the kernel logged a "virtual machine fork").
    assert tap_clocks((100.0, 160.6), 60.1) == "60.6 s / 60.1 s"
    assert tap_clocks((100.0, 195.6), 60.1) == (
        "95.6 s / 60.1 s: the machine stood still ~35 s, and the latencies above include it"
    )
