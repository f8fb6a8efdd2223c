"""The generate / replay / verify commands on a Faust app: options in, summary out, errors as one line."""

from __future__ import annotations

import json
import math
import socket

import click
import faust
import pytest
from click.testing import CliRunner
from faust.cli.base import cli

from hyperdata_sidecar.commands import (
    backlog_line,
    install_commands,
    parse_bytes_per_s,
    parse_speed,
    parse_table_numbers,
)
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.web.status import BacklogStatus


@pytest.fixture(scope="module")
def app() -> faust.App:
    app = faust.App("tools-commands-test", autodiscover=False)
    install_commands(app)
    return app


def run(app, *args):
    return CliRunner().invoke(cli, list(args), app=app)


@pytest.mark.parametrize("command", ["generate", "replay", "verify"])
def test_each_command_explains_itself_in_help(app, command):
    result = run(app, command, "--help")

    assert result.exit_code == 0
    assert "Usage:" in result.output and "--" in result.output


def test_replay_help_names_its_environment_defaults(app):
    output = run(app, "replay", "--help").output

    for name in ("REPLAY_DIR", "REPLAY_CADENCE", "REPLAY_SPEED"):
        assert name in output


def test_generate_then_replay_reproduce_the_corpus_in_the_target(app, tmp_path):
    summary_path = tmp_path / "summary.json"
    generated = run(
        app,
        "generate",
        "--out",
        str(tmp_path / "corpus"),
        "--hours",
        "2",
        "--lines-per-hour",
        "fills=5,book_diffs=20",
        "--start",
        "20260610/23",
        "--bad-every",
        "7",
        "--summary-json",
        str(summary_path),
    )
    replayed = run(
        app,
        "replay",
        "--corpus",
        str(tmp_path / "corpus"),
        "--target",
        str(tmp_path / "watch"),
        "--speed",
        "max",
        "--chunk-bytes",
        "500",
    )

    assert generated.exit_code == 0, generated.output
    assert replayed.exit_code == 0, replayed.output
    summary = json.loads(summary_path.read_text())
    assert {f["relpath"] for f in summary["files"]} == {
        f"{table}/hourly/{hour}" for table in (BOOK_DIFFS, FILLS) for hour in ("20260610/23", "20260611/0")
    }
    assert len(summary["bad_lines"]) == 2 * 20 // 7 + 2 * 5 // 7
    for f in summary["files"]:
        assert (tmp_path / "watch" / f["relpath"]).read_bytes() == (tmp_path / "corpus" / f["relpath"]).read_bytes()
    assert "MB/s" in generated.output and "MB/s" in replayed.output


def test_a_command_that_cannot_run_prints_one_error_line_and_exits_2(app, tmp_path):
    (tmp_path / "empty").mkdir()

    result = run(app, "replay", "--corpus", str(tmp_path / "empty"), "--target", str(tmp_path / "watch"))

    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and result.output.startswith("replay: error:")


def test_verify_without_a_reachable_broker_exits_2_with_one_line(app, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connections are refused

        result = run(app, "verify", "--watch-dir", str(tmp_path), "--bootstrap", f"127.0.0.1:{port}", "--timeout", "1")

    assert result.exit_code == 2
    assert result.output.startswith("verify: error:") and result.output.count("\n") == 1


def test_verify_reads_at_the_isolation_level_asked_for_and_refuses_others(app, tmp_path):
    help_text = run(app, "verify", "--help").output
    refused = run(app, "verify", "--watch-dir", str(tmp_path), "--isolation", "serializable")

    assert "--isolation [read_uncommitted|read_committed]" in help_text and "DELIVERY=exactly_once" in help_text
    assert refused.exit_code == 2 and "'serializable' is not one of" in refused.output


def test_table_numbers_parse_as_a_total_or_per_table_with_short_names():
    assert parse_table_numbers("1000", what="x") == 1000
    assert parse_table_numbers("fills=5, order_statuses=7.5", what="x") == {FILLS: 5.0, ORDER_STATUSES: 7.5}
    assert parse_table_numbers(f"{BOOK_DIFFS}=1", what="x") == {BOOK_DIFFS: 1.0}
    assert parse_table_numbers(None, what="x") is None
    for bad in ("lots", "trades=5", "fills=many"):
        with pytest.raises(click.BadParameter):
            parse_table_numbers(bad, what="x")


def test_speed_parses_as_a_positive_factor_or_max():
    assert parse_speed("60") == 60.0
    assert parse_speed("max") == math.inf
    assert parse_speed("") is None
    for bad in ("0", "-2", "fast"):
        with pytest.raises(click.BadParameter):
            parse_speed(bad)


def test_generate_and_replay_write_node_snapshots_when_asked(app, tmp_path):
    summary_path = tmp_path / "summary.json"
    generated = run(
        app,
        "generate",
        "--out",
        str(tmp_path / "corpus"),
        "--hours",
        "2",
        "--lines-per-hour",
        "fills=40,book_diffs=40",
        "--lines-per-block",
        "2",
        "--snapshot-every",
        "10",
        "--snapshot-bytes",
        "64KiB",
        "--summary-json",
        str(summary_path),
    )
    replayed = run(
        app,
        "replay",
        "--corpus",
        str(tmp_path / "corpus"),
        "--target",
        str(tmp_path / "watch"),
        "--speed",
        "max",
        "--snapshot-bytes-per-s",
        "max",
    )

    assert generated.exit_code == 0, generated.output
    assert replayed.exit_code == 0, replayed.output
    snapshots = json.loads(summary_path.read_text())["snapshots"]
    assert len(snapshots) >= 2 and all(s["size"] == 64 * 1024 and s["height"] % 10 == 0 for s in snapshots)
    for s in snapshots:
        assert (tmp_path / "watch" / s["relpath"]).read_bytes() == (tmp_path / "corpus" / s["relpath"]).read_bytes()
    assert f"{len(snapshots)} snapshots" in generated.output and f"{len(snapshots)} snapshots" in replayed.output


def test_a_snapshot_pace_is_a_byte_count_per_second_or_max():
    assert parse_bytes_per_s("max") == math.inf
    assert parse_bytes_per_s("256MiB") == 256 * 1024 * 1024
    with pytest.raises(click.BadParameter):
        parse_bytes_per_s("fast")
    with pytest.raises(click.BadParameter):
        parse_bytes_per_s("0")


@pytest.mark.parametrize(
    ("backlog", "line"),
    [
        (
            BacklogStatus(bytes=3 * 1024**3, files=4, drain_bytes_per_s=2 * 1024**2, eta_s=1536.0, falling_behind=False),
            "backlog node_fills_streaming: 3.0 GiB in 4 hour file(s), draining 2.0 MiB/s, live in 25 m 36 s",
        ),
        (
            BacklogStatus(bytes=3 * 1024**3, files=4, drain_bytes_per_s=-1024.0, eta_s=None, falling_behind=True),
            "backlog node_fills_streaming: 3.0 GiB in 4 hour file(s), falling behind",
        ),
        (
            BacklogStatus(bytes=512, files=1, drain_bytes_per_s=None, eta_s=0.0, falling_behind=False),
            "backlog node_fills_streaming: 512 B in 1 hour file(s), live",
        ),
    ],
)
def test_the_files_command_ends_with_each_tables_backlog(backlog, line) -> None:
    assert backlog_line("node_fills_streaming", backlog) == line
