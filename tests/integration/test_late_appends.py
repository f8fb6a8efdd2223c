"""Sealed files that change and chains that rewind, against the real broker and a real worker:
late appends (published under their file's tagged ids, sealed again, backed up again), sealed files
that shrink, block regressions (ids with an epoch suffix)."""

from __future__ import annotations

import orjson

from hyperdata_sidecar.tools.generate import FIRST_BLOCK, generate_corpus
from hyperdata_sidecar.tools.verify import default_topics

from drill_kit import caught_up, end_offsets, metric_value, records_since
from sidecar_run import DAY_BOUNDARY, Sidecar, assert_clean, write_corpus
from test_seals import read_seals

FILLS = "node_fills_streaming"
SEALED = f"{FILLS}/hourly/20260610/22"
TAG = "|late-20260610-22"


def late_lines(root, count: int = 40) -> bytes:
    """Fills lines of hour 22 from another corpus, with blocks above the first one's."""
    generate_corpus(
        root / "late", hours=1, lines_per_hour={FILLS: count}, seed=99, start=DAY_BOUNDARY, first_block=FIRST_BLOCK + 10**6
    )
    return (root / "late" / SEALED).read_bytes()


def seal_revisions(sidecar: Sidecar, path: str) -> list[int]:
    return [e.get("revision") for e in sidecar.events("seal") if e["path"] == path]


def problems(worker) -> list[dict]:
    return worker.get_json("/sidecar/status/")["problems"]


async def test_a_late_append_is_published_under_the_files_tagged_ids_and_sealed_and_backed_up_again(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=2, lines=600)
    sealed_file = tmp_path / "watch" / SEALED
    whole = sealed_file.read_bytes()
    cut = whole[:-25]  # the seal finds an unterminated last line; the late append completes it
    sealed_file.write_bytes(cut)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix)
    worker = sidecar.start()
    try:
        await worker.until(lambda: seal_revisions(sidecar, SEALED) == [1], "the first seal")
        await sidecar.until_events("backup", 3)
        await worker.until(lambda: caught_up(worker, sidecar.watch), "the catch-up")
        topics = default_topics(sidecar.env)
        before = await end_offsets(kafka_bootstrap, topics)
        with open(sealed_file, "ab") as f:
            f.write(whole[-25:] + late_lines(tmp_path))
        await worker.until(lambda: seal_revisions(sidecar, SEALED) == [1, 2], "the seal of revision 2")
        await worker.until(lambda: sum(e["path"] == SEALED for e in sidecar.events("backup")) == 2, "the second backup")
        report = await sidecar.verify(backup_dir=sidecar.backups)
        late = await records_since(kafka_bootstrap, topics, before)
        counted = metric_value(worker, "hyperdata_sidecar_late_appends_total", table=FILLS)
        shown = problems(worker)
    finally:
        assert worker.stop() == 0
    assert_clean(report)  # every line once under its id, the unterminated tail superseded, seals and backup of revision 2
    late_ids = [r.line_id.decode() for r in late.data if r.source == SEALED]
    assert late_ids and all(i.endswith(TAG) for i in late_ids)
    assert min(r.line_offset for r in late.data if r.source == SEALED) == whole.rfind(b"\n", 0, len(cut)) + 1
    assert {r.source for r in late.data} == {SEALED}  # nothing else was published again
    seals = [s for s in await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"]) if s.path == SEALED]
    assert [(s.revision, s.size) for s in seals] == [(1, len(cut)), (2, sealed_file.stat().st_size)]
    assert (sidecar.backups / SEALED).read_bytes() == sealed_file.read_bytes()
    [event] = sidecar.events("late_append")
    assert (event["level"], event["path"], event["sealed_size"], event["revision"]) == ("error", SEALED, len(cut), 2)
    assert counted == 1
    assert any(p["level"] == "error" and SEALED in p["text"] and "revision 2" in p["text"] for p in shown)


async def test_a_sealed_file_that_shrinks_is_reported_and_nothing_is_published_again(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=2, lines=600)
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    worker = sidecar.start()
    try:
        await worker.until(lambda: seal_revisions(sidecar, SEALED) == [1], "the first seal")
        await worker.until(lambda: caught_up(worker, sidecar.watch), "the catch-up")
        topics = default_topics(sidecar.env)
        before = await end_offsets(kafka_bootstrap, topics)
        sealed_file = sidecar.watch / SEALED
        sealed_file.write_bytes(sealed_file.read_bytes()[:1000])
        await sidecar.until_events("sealed_file_rewritten")
        counted = metric_value(worker, "hyperdata_sidecar_sealed_files_rewritten_total", table=FILLS, reason="truncated")
        shown = problems(worker)
        state = {f["path"]: f["state"] for f in worker.get_json("/sidecar/files/")["files"]}[SEALED]
        after = await records_since(kafka_bootstrap, topics, before)
    finally:
        assert worker.stop() == 0
    [event] = sidecar.events("sealed_file_rewritten")
    assert (event["level"], event["path"], event["reason"], event["size"]) == ("error", SEALED, "truncated", 1000)
    assert (counted, state) == (1, "rewritten")
    assert any(p["level"] == "error" and SEALED in p["text"] and "shrank" in p["text"] for p in shown)
    assert (after.data, after.dlq, after.seals) == ([], [], [])


async def test_a_block_regression_is_published_with_an_epoch_suffix_counted_sealed_and_shown(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "watch", hours=2, lines=600)
    sealed_file = tmp_path / "watch" / SEALED
    data = sealed_file.read_bytes()
    rewound = orjson.loads(data[: data.index(b"\n")])
    rewound["block_number"] = FIRST_BLOCK - 1  # the chain went back below every block so far
    sealed_file.write_bytes(data + orjson.dumps(rewound) + b"\n")
    sidecar = Sidecar(tmp_path, kafka_bootstrap, unique_topic_prefix, BACKUP_SINK="none")
    worker = sidecar.start()
    try:
        report = await sidecar.verify()  # expects |r1 on the rewound line and on every later fills line
        counted = metric_value(worker, "hyperdata_sidecar_block_regressions_total", table=FILLS)
        shown = problems(worker)
        topics = default_topics(sidecar.env)
        observed = await records_since(kafka_bootstrap, topics, dict.fromkeys(await end_offsets(kafka_bootstrap, topics), 0))
    finally:
        assert worker.stop() == 0
    assert_clean(report)
    fills = [r for r in observed.data if r.source is not None and r.source.startswith(FILLS)]
    at_rewind = [r.line_id.decode() for r in fills if r.source == SEALED and r.line_offset == len(data)]
    assert at_rewind == [f"{FILLS}|{FIRST_BLOCK - 1}|0|r1"]
    assert all(r.line_id.endswith(b"|r1") for r in fills if r.source != SEALED)
    [seal] = [s for s in await read_seals(kafka_bootstrap, sidecar.env["TOPIC_SEALS"]) if s.path == SEALED]
    assert seal.block_regressions == 1 and orjson.loads(seal.to_json())["block_regressions"] == 1
    assert counted == 1
    [event] = sidecar.events("block_regression")
    assert (event["path"], event["offset"], event["epoch"]) == (SEALED, len(data), 1)
    assert any(p["level"] == "warning" and FILLS in p["text"] and "|r1" in p["text"] for p in shown)
