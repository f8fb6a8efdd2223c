"""One stream from two nodes (STREAM_ID) against the real broker: two node trees with the same events
and other ``local_time``s, two workers, one stream. The group elects one active; a standby publishes
nothing but seals and backs up its own finished files (seals kept, not published); a standby takes
over where the stream's committed position is, in its own files, which it followed standing by;
where the nodes disagree, that table publishes nothing past the stream's line (the others go on)
and it is said, standing by already. A ``read_committed`` reader sees every line id
once, as the same event, in file order per partition. How fast a standby takes over is checked by
drill 19 (`make drills`); no timing is asserted here."""

from __future__ import annotations

import asyncio
import hashlib
import shutil

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.scanner import table_hour_files

from drill_kit import caught_up, kill, metric_value, wait_for
from sidecar_run import Sidecar, write_corpus
from stream_kit import (
    committed,
    data_topics,
    following,
    role,
    second_node_tree,
    split_last_hour,
    stream_report,
    two_nodes,
)


async def test_a_killed_actives_standby_takes_over_from_the_streams_position_and_a_restarted_one_stands_by(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "corpus", hours=3, lines=5000)
    earlier, last_hour = split_last_hour(tmp_path / "corpus", tmp_path / "before", tmp_path / "hour")
    a, b = two_nodes(tmp_path, kafka_bootstrap, unique_topic_prefix)
    shutil.copytree(earlier, a.watch, dirs_exist_ok=True)
    second_node_tree(earlier, b.watch)
    a.start()
    try:
        await a.until_events("stream_elected")
        b.start()
        await b.until_events("stream_standby")
        assert b.worker is not None and a.worker is not None
        await a.worker.until(lambda: committed(a) >= 3, "a few committed transactions")
        assert role(b) == "standby" and committed(b) == 0
        # Standing by, b seals and backs up its own node's finished files (each table's first
        # hour; the second is the newest) and publishes none of it.
        finished = {path for spec in TABLES for path in table_hour_files(b.watch, spec.dir_name)[:-1]}
        await b.until_events("standby_seal", len(finished))
        await b.until_events("backup", len(finished))
        sealed = {e["path"]: e["sha256"] for e in b.events("standby_seal")}
        assert sealed == {path: hashlib.sha256((b.watch / path).read_bytes()).hexdigest() for path in finished}
        assert {e["path"] for e in b.events("backup")} == set(finished)
        assert all(hashlib.sha256((b.backups / path).read_bytes()).hexdigest() == sealed[path] for path in finished)
        assert metric_value(b.worker, "hyperdata_sidecar_standby_seals_total") == len(finished)
        assert metric_value(b.worker, "hyperdata_sidecar_seals_emitted_total") == 0 and committed(b) == 0
        # It follows the stream: the newest line of each table is found in its own files.
        await b.worker.until(
            lambda: {t: look["state"] for t, look in following(b).items()} == {s.dir_name: "ready" for s in TABLES},
            "the standby finding the stream's newest line of every table in its files",
        )
        assert all(metric_value(b.worker, "hyperdata_sidecar_stream_standby_ready", table=s.dir_name) == 1 for s in TABLES)
        kill(a.worker)
        shutil.copytree(last_hour, a.watch, dirs_exist_ok=True)  # both nodes write the next hour
        second_node_tree(last_hour, b.watch)
        await b.until_events("stream_elected")
        await b.worker.until(lambda: committed(b) >= 1, "the new active's first commit")
        assert b.events("stream_handover"), "the standby did not take the stream's position"
        a.start()  # as systemd would: it stands by, the active keeps the stream
        await a.until_events("stream_standby", 1)
        await b.worker.until(lambda: caught_up(b.worker, b.watch), "the new active's catch-up")
        assert role(a) == "standby" and role(b) == "active"
        assert committed(a) == 0, "a restarted standby published"
        report = await asyncio.to_thread(stream_report, kafka_bootstrap, data_topics(a.env), a.watch)
        assert report.ok, report.summary()
        assert report.records == report.expected and report.expected > 0
    finally:
        for sidecar in (a, b):
            if sidecar.worker is not None:
                await asyncio.to_thread(sidecar.worker.stop)


async def test_nodes_that_disagree_are_named_standing_by_and_at_the_handover_that_table_is_held_the_others_go_on(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    write_corpus(tmp_path / "a" / "watch", hours=2, lines=3000)
    second_node_tree(tmp_path / "a" / "watch", tmp_path / "b" / "watch")
    a, b = two_nodes(tmp_path, kafka_bootstrap, unique_topic_prefix)
    fills = next(spec.dir_name for spec in TABLES if "fills" in spec.dir_name)
    newest = sorted((b.watch / fills / "hourly").rglob("*"))[-1]
    lines = newest.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b'"px":"', b'"px":"9', 1)  # node b wrote another last fill
    newest.write_bytes(b"".join(lines))
    a.start()
    try:
        assert a.worker is not None
        await a.until_events("stream_elected")
        await a.worker.until(lambda: caught_up(a.worker, a.watch), "the first active's catch-up")
        b.start()
        assert b.worker is not None
        # Standing by, b finds the stream's newest fills line to be another event in its files, and says so.
        await b.until_events("stream_disagreement")
        [standing_by] = b.events("stream_disagreement")
        assert standing_by["role"] == "standby" and standing_by["path"] == newest.relative_to(b.watch).as_posix()
        assert following(b)[fills]["state"] == "disagree"
        assert metric_value(b.worker, "hyperdata_sidecar_stream_standby_ready", table=fills) == 0
        await asyncio.to_thread(a.worker.stop)  # leaves the group: b is elected at once
        await b.until_events("stream_disagreement", 2)
        reasons = await wait_for(b.worker, lambda: _names_disagreement(b), "readyz naming the disagreement")
        assert reasons >= 0
        assert metric_value(b.worker, "hyperdata_sidecar_stream_disagreements_total", table=fills) >= 1
        disagreement = b.events("stream_disagreement")[1]
        assert (
            "role" not in disagreement
            and disagreement["table"] == fills
            and disagreement["path"] == newest.relative_to(b.watch).as_posix()
        )
        # Only the table that disagrees is held: the others went on from the stream's line.
        assert {e["table"] for e in b.events("stream_handover")} == {spec.dir_name for spec in TABLES} - {fills}
        report = await asyncio.to_thread(stream_report, kafka_bootstrap, data_topics(a.env), a.watch)
        assert report.ok, report.summary()
    finally:
        for sidecar in (a, b):
            if sidecar.worker is not None:
                await asyncio.to_thread(sidecar.worker.stop)


def _names_disagreement(sidecar: Sidecar) -> bool:
    assert sidecar.worker is not None
    status, _type, body = sidecar.worker.get("/readyz")
    return status == 503 and b"the nodes disagree at the stream's line node_fills_streaming|" in body
