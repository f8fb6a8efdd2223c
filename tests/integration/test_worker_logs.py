"""What a failed integration test shows of its workers' logs (worker_process.log_sections, used by
tests/integration/conftest.py's report hook). No broker."""

from __future__ import annotations

from pathlib import Path

from worker_process import log_digest, log_sections

EVENT = '{"time":"2026-12-04T15:28:55.049Z","level":"%s","event":"%s","node":"n"}'
FAUST = "[2026-12-04 15:28:20,610] [16845] [%s] [^--Producer]: %s"


def test_the_digest_keeps_warnings_and_errors_of_both_kinds_of_line_and_the_end(tmp_path):
    lines = [
        EVENT % ("info", "startup"),
        EVENT % ("warning", "topic_missing"),
        FAUST % ("INFO", "Creating topic"),
        FAUST % ("ERROR", "Crashed reason=KafkaError"),
        *(EVENT % ("info", f"tail_lag_{n}") for n in range(12)),
        EVENT % ("error", "topic_not_writable"),
        EVENT % ("info", "lifecycle stopping"),
    ]
    digest = log_digest(_log(tmp_path, lines), last=3)
    head, ending = digest.split("the last 3 lines:\n")
    assert head.splitlines() == [
        "18 lines; the last 3 warnings and errors:",
        EVENT % ("warning", "topic_missing"),
        FAUST % ("ERROR", "Crashed reason=KafkaError"),
        EVENT % ("error", "topic_not_writable"),
    ]
    assert ending.splitlines() == lines[-3:]


def test_the_digest_keeps_the_last_warnings_and_cuts_long_lines(tmp_path):
    lines = [EVENT % ("warning", f"w{n}") for n in range(50)] + [EVENT % ("error", "x" * 1000)]
    digest = log_digest(_log(tmp_path, lines), notable=5, last=1, width=100)
    shown = digest.splitlines()
    assert shown[0] == "51 lines; the last 5 warnings and errors:"
    assert shown[1:5] == [EVENT % ("warning", f"w{n}") for n in range(46, 50)]
    assert shown[5] == f"{lines[-1][:100]} [{len(lines[-1]) - 100} more]"
    assert shown[6:] == ["the last 1 lines:", shown[5]]


def test_each_worker_log_under_the_test_dir_is_a_section_named_by_its_path(tmp_path):
    _log(tmp_path / "node-a" / "run", [EVENT % ("error", "a")])
    _log(tmp_path / "node-b", [EVENT % ("warning", "b")])
    (tmp_path / "node-c").mkdir()
    (tmp_path / "node-c" / "broker.log").write_text(EVENT % ("error", "not a worker's"))
    sections = log_sections(tmp_path)
    assert [title for title, _ in sections] == ["worker log node-a/run/worker.log", "worker log node-b/worker.log"]
    assert EVENT % ("error", "a") in sections[0][1] and EVENT % ("warning", "b") in sections[1][1]
    assert log_sections(tmp_path / "node-c") == []


def _log(directory: Path, lines: list[str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "worker.log"
    path.write_text("\n".join(lines) + "\n")
    return path
