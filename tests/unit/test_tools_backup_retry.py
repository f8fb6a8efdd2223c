"""backup-retry's PATH: an hour file or a node snapshot relative to WATCH_DIR, or its absolute path below it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperdata_sidecar.tools.backup_retry import watched_relpath

WATCH = Path("/data/hl")
REL = "node_fills_streaming/hourly/20260610/13"


def test_a_relative_path_is_taken_as_it_is():
    assert watched_relpath(REL, WATCH) == REL


def test_an_absolute_path_below_the_watch_dir_becomes_relative():
    assert watched_relpath(f"/data/hl/./{REL}", WATCH) == REL


def test_a_node_snapshot_is_taken_too():
    assert watched_relpath("/data/hl/periodic_abci_states/20260610/1030150000.rmp", WATCH) == (
        "periodic_abci_states/20260610/1030150000.rmp"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/elsewhere/" + REL,
        "node_fills_streaming/hourly/20260610/24",
        "notes.txt",
        "/data/hl",
        "periodic_abci_states/20260610/x.rmp",
    ],
)
def test_anything_else_is_refused_naming_the_path(path):
    with pytest.raises(ValueError, match=r"hour file|not below"):
        watched_relpath(path, WATCH)
