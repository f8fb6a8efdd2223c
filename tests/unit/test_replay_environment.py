"""The replay command takes every setting from the environment, as the compose replay service runs it."""

from __future__ import annotations

import faust
import pytest
from click.testing import CliRunner
from faust.cli.base import cli

from hyperdata_sidecar.commands import install_commands
from hyperdata_sidecar.tools.generate import generate_corpus, parse_start


@pytest.fixture(scope="module")
def app() -> faust.App:
    app = faust.App("replay-environment-test", autodiscover=False)
    install_commands(app)
    return app


def test_replay_with_no_options_reads_corpus_target_and_pace_from_the_environment(app, tmp_path):
    corpus, watch = tmp_path / "corpus", tmp_path / "watch"
    summary = generate_corpus(corpus, hours=2, lines_per_hour=40, seed=5, start=parse_start("20260610/23"))
    env = {"REPLAY_CORPUS": str(corpus), "REPLAY_DIR": str(watch), "REPLAY_SPEED": "max", "REPLAY_CADENCE": "10"}

    result = CliRunner().invoke(cli, ["replay"], app=app, env=env)

    assert result.exit_code == 0, result.output
    assert summary.files
    for f in summary.files:
        assert (watch / f.relpath).read_bytes() == (corpus / f.relpath).read_bytes()


def test_replay_help_names_the_corpus_variable(app):
    output = CliRunner().invoke(cli, ["replay", "--help"], app=app).output

    assert "REPLAY_CORPUS" in output
