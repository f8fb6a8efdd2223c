"""The benchmark harness's own arithmetic: latency percentiles, local_time parsing, the CPU window,
and how a run's figures are written into docs/benchmarks.md."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time

from bench.context import ScenarioResult
from bench.latency import LatencyHistogram, LatencyRecorder, LocalTimeParser
from bench.procstat import CpuWindow, memory_kib
from bench.report import markdown

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
    }
    text = markdown(run, [result, failed])
    assert "commit abc1234 (working tree dirty: 3 files differ from the commit)" in text
    assert "| catch-up | lines/s | 30,000 | ≥ 200,000 | **missed** |" in text
    assert "| catch-up | peak RSS | 190 MB | ≤ 300 MB | met |" in text
    assert "the worker exited \\| see log" in text
    assert "on the same 2 cores" in text
