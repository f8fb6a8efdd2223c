"""A worker started on a multi-hour backlog (real broker, worker subprocess): its backlog, read from
``/sidecar/status/``, ``/metrics`` and the ``startup`` line, shrinks hour file by hour file to 0.

A table's next hour file is read only once the previous one is finalized (``SEAL_GRACE_MS`` after
it was read to its end), so with a grace of two seconds each table's backlog stays at each hour
file for a few samples (one a second): the test sees every step without racing the catch-up.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections import defaultdict

import pytest

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import generate_corpus

from sidecar_run import Sidecar
from worker_process import current_hour_minus

HOURS = 4
LINES_PER_HOUR = 400

Observed = dict[str, list[tuple[int, int]]]  # table -> (bytes, files) as seen, in order


def backlog_in_metrics(text: str) -> dict[str, tuple[int, int]]:
    """{table: (backlog bytes, backlog files)} from a /metrics body."""
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for name, table, value in re.findall(r'^(\w+)\{table="([^"]+)"\} (\S+)$', text, re.M):
        found[table][name] = float(value)
    return {
        table: (int(names["hyperdata_sidecar_backlog_bytes"]), int(names["hyperdata_sidecar_backlog_files"]))
        for table, names in found.items()
    }


def backlog_in_status(status: dict) -> dict[str, tuple[int, int]]:
    """{table: (backlog bytes, backlog files)} of the tables /sidecar/status/ has sampled."""
    return {t["table"]: (t["backlog"]["bytes"], t["backlog"]["files"]) for t in status["tables"] if t["backlog"] is not None}


def non_increasing(values: list[int]) -> bool:
    return all(later <= earlier for earlier, later in itertools.pairwise(values))


@pytest.fixture(scope="module")
def catch_up(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Sidecar, Observed, Observed, dict[str, int]]:
    """A sidecar started on HOURS hour files per table, watched until every table is live; what its
    status view and its metrics said about the backlog meanwhile, and each table's bytes on disk."""
    sidecar = Sidecar(
        tmp_path_factory.mktemp("backlog"), kafka_bootstrap, f"t-backlog-{uuid.uuid4().hex[:8]}.", SEAL_GRACE_MS="2000"
    )
    corpus = generate_corpus(sidecar.watch, hours=HOURS, lines_per_hour=LINES_PER_HOUR, seed=11, start=current_hour_minus(HOURS))
    on_disk = {spec.dir_name: sum(f.size for f in corpus.files if f.table == spec.dir_name) for spec in TABLES}
    from_status: Observed = defaultdict(list)
    from_metrics: Observed = defaultdict(list)

    def live() -> bool:
        status = backlog_in_status(worker.get_json("/sidecar/status/"))
        metrics = backlog_in_metrics(worker.get("/metrics")[2].decode())
        for table, seen in status.items():
            from_status[table].append(seen)
        for table in status:  # the gauges read 0 until the first sample
            from_metrics[table].append(metrics[table])
        return (
            len(status) == len(TABLES)
            and all(seen == (0, 0) for seen in status.values())
            and all(metrics[spec.dir_name] == (0, 0) for spec in TABLES)
        )

    worker = sidecar.start()
    try:
        worker.wait_until(live, "every table's backlog at 0 in /sidecar/status/ and /metrics")
        files = worker.get_json("/sidecar/files/")
    finally:
        worker.stop()
    published = {row["path"]: row["lines"] for row in files["files"]}
    assert {f.relpath: f.lines for f in corpus.files} == published  # live means every line published
    return sidecar, from_status, from_metrics, on_disk


def test_the_startup_line_gives_each_tables_whole_backlog(catch_up) -> None:
    sidecar, _status, _metrics, on_disk = catch_up

    (startup,) = sidecar.events("startup")
    assert startup["backlog"] == {table: {"bytes": size, "files": HOURS} for table, size in on_disk.items()}


@pytest.mark.parametrize("view", ["status", "metrics"])
def test_the_backlog_shrinks_file_by_file_to_zero(catch_up, view) -> None:
    _sidecar, from_status, from_metrics, on_disk = catch_up
    observed = from_status if view == "status" else from_metrics

    for spec in TABLES:
        seen = observed[spec.dir_name]
        sizes, files = [nbytes for nbytes, _ in seen], [count for _, count in seen]
        assert 0 < max(sizes) <= on_disk[spec.dir_name]
        assert max(files) >= HOURS - 1  # seen while the first hour files still waited
        assert non_increasing(sizes) and non_increasing(files)
        assert seen[-1] == (0, 0)
