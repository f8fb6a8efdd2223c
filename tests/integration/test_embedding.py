"""examples/embedded_app.py as a real worker: the sidecar and the host's own agent run side by side."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import CorpusSummary, generate_corpus
from hyperdata_sidecar.topics import apply_contract, load_contract

from worker_process import REPO, WorkerProcess, current_hour_minus, sidecar_env

HOURS = 2
LINES_PER_HOUR = {"node_raw_book_diffs_streaming": 50, "node_order_statuses_streaming": 50, "node_fills_streaming": 80}
FILLS = "node_fills_streaming"


def fills_per_coin(watch: Path, corpus: CorpusSummary) -> dict[str, int]:
    """Lines per coin of the first event, over every fills line of the corpus (all of them good)."""
    counts: Counter[str] = Counter()
    for summary in corpus.files:
        if summary.table == FILLS:
            for line in (watch / summary.relpath).read_bytes().splitlines():
                counts[orjson.loads(line)["events"][0][1]["coin"]] += 1
    return dict(counts)


@pytest.fixture
def embedded(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[WorkerProcess, dict[str, int]]]:
    prefix = f"t-embed-{uuid.uuid4().hex[:8]}."
    settings = sidecar_env(tmp_path, kafka_bootstrap, prefix)
    watch = Path(settings["WATCH_DIR"])
    corpus = generate_corpus(
        watch, hours=HOURS, lines_per_hour=LINES_PER_HOUR, seed=11, start=current_hour_minus(HOURS), lines_per_block=4
    )
    worker = WorkerProcess("embedded_app", settings, tmp_path, extra_path=REPO / "examples")
    yield worker, fills_per_coin(watch, corpus)
    worker.stop()


async def test_the_host_agent_counts_the_lines_the_embedded_sidecar_publishes(embedded, kafka_bootstrap: str) -> None:
    worker, expected = embedded
    await apply_contract(kafka_bootstrap, load_contract(worker.env))  # the host agent subscribes to the fills topic
    worker.start()

    await worker.until(lambda: worker.get_json("/fills/per-coin/") == expected, "the host agent's counts per coin")
    await worker.until(
        lambda: len(worker.get_json("/sidecar/seals/")["seals"]) == (HOURS - 1) * len(TABLES),
        "the sidecar to seal every finished hour",
    )

    assert sum(expected.values()) == HOURS * LINES_PER_HOUR[FILLS]
    assert worker.get_json("/readyz")["ready"] is True
    tables = {t["name"] for t in worker.get_json("/table/")}
    assert {"fills-per-coin", "sidecar-offsets", "sidecar-seals", "sidecar-backups"} <= tables
