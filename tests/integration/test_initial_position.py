"""A first start with INITIAL_POSITION=end on a node that already holds several hour files per table
(real broker, worker subprocess): every older file is skipped, the newest starts just past its last
complete line, and only the lines completed after the start are published."""

from __future__ import annotations

import uuid

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import generate_corpus

from sidecar_run import Sidecar
from worker_process import current_hour_minus

HOURS = 3


def test_end_skips_the_older_files_and_publishes_only_what_the_newest_gains_after_the_start(kafka_bootstrap, tmp_path) -> None:
    sidecar = Sidecar(tmp_path, kafka_bootstrap, f"t-end-{uuid.uuid4().hex[:8]}.", INITIAL_POSITION="end")
    corpus = generate_corpus(
        sidecar.watch,
        hours=HOURS,
        lines_per_hour={spec.dir_name: 50 for spec in TABLES},
        seed=5,
        start=current_hour_minus(HOURS - 1),
    )
    newest = {
        spec.dir_name: max((f for f in corpus.files if f.table == spec.dir_name), key=lambda f: HourFile.parse(f.relpath))
        for spec in TABLES
    }
    # The node is in the middle of a line: the start point is before it, and it is published once complete.
    halves: dict[str, bytes] = {}
    for table, file in newest.items():
        path = sidecar.watch / file.relpath
        lines = path.read_bytes().splitlines(keepends=True)
        with open(path, "ab") as f:
            f.write(lines[-1][:40])
        halves[table] = lines[-1][40:] + lines[-2]

    worker = sidecar.start()
    try:

        def adopted() -> bool:
            rows = worker.get_json("/sidecar/files/")["files"]
            return len(rows) == HOURS * len(TABLES)

        worker.wait_until(adopted, "every hour file adopted")
        for table, rest in halves.items():
            with open(sidecar.watch / newest[table].relpath, "ab") as f:
                f.write(rest)

        def published() -> bool:
            rows = {row["path"]: row for row in worker.get_json("/sidecar/files/")["files"]}
            return all(rows[file.relpath]["lines"] == 2 for file in newest.values())

        worker.wait_until(published, "the two lines completed after the start published in every table")
        rows = {row["path"]: row for row in worker.get_json("/sidecar/files/")["files"]}
        totals = worker.get("/metrics")[2].decode()
    finally:
        worker.stop()

    for file in corpus.files:
        row = rows[file.relpath]
        if file.relpath == newest[file.table].relpath:
            assert (row["state"], row["lines"], row["dlq_lines"]) == ("tailing", 2, 0)
        else:
            assert (row["state"], row["lines"], row["offset"]) == ("skipped", 0, 0)
    for spec in TABLES:
        assert f'hyperdata_sidecar_lines_published_total{{table="{spec.dir_name}"}} 2.0' in totals
    adoptions = {event["path"]: event for event in sidecar.events("file_adopted")}
    for file in newest.values():
        assert adoptions[file.relpath]["start_offset"] == file.size
