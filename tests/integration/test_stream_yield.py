"""One stream from two nodes (STREAM_ID) against the real broker: an active whose node stalls while
the standby's goes on yields the stream, and is not handed it back once its node resumes."""

from __future__ import annotations

import asyncio
import shutil

from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import generate_corpus
from hyperdata_sidecar.tools.replay import replay

from drill_kit import caught_up, stopped_by_itself
from sidecar_run import DAY_BOUNDARY
from stream_kit import committed, data_topics, finish, role, second_node_tree, split_last_hour, stream_report, two_nodes

REPLAY_S = 20.0


async def test_an_active_whose_node_stalls_yields_to_the_standby_whose_node_goes_on_and_gets_no_stream_back(
    tmp_path, kafka_bootstrap, unique_topic_prefix
):
    """Blocks every 5 lines, so ``block_time`` follows the writing; the last hour is written live on
    both nodes at ~90 hours of blocks an hour. Node a's writing stops: a standby 600 s of blocks ahead
    for 5 s makes the active yield. Node a, restarted and written to the end, stands by."""
    corpus = tmp_path / "corpus"
    generate_corpus(
        corpus, hours=2, lines_per_hour=6000, seed=5, start=DAY_BOUNDARY, lines_per_block={s.dir_name: 5 for s in TABLES}
    )
    earlier, last_hour = split_last_hour(corpus, tmp_path / "before", tmp_path / "hour")
    second_node_tree(last_hour, tmp_path / "hour-b")
    a, b = two_nodes(tmp_path, kafka_bootstrap, unique_topic_prefix, STREAM_YIELD_LAG_S="600")
    second_node_tree(earlier, b.watch)
    shutil.copytree(earlier, a.watch, dirs_exist_ok=True)
    a.start()
    writing: list[asyncio.Future] = []
    try:
        assert a.worker is not None
        await a.until_events("stream_elected")
        b.start()
        assert b.worker is not None
        await b.until_events("stream_standby")
        writing = [append_live(last_hour, a.watch, 1), append_live(tmp_path / "hour-b", b.watch, 2)]
        await asyncio.sleep(6.0)
        writing[0].cancel()  # node a stalls
        await b.until_events("stream_elected")
        await b.worker.until(lambda: committed(b) >= 1, "the new active's first commit")
        yielded = a.events("stream_yielding")
        assert yielded and "ahead of this node's" in yielded[0]["reason"], yielded
        assert a.worker is not None
        assert await stopped_by_itself(a.worker, 60.0) not in (None, 0), "node a did not stop by itself, non-zero, after yielding"
        finish(last_hour, a.watch)  # node a resumes and catches up with its own writing
        a.start()
        await a.until_events("stream_standby")
        await writing[1]
        await b.worker.until(lambda: caught_up(b.worker, b.watch), "the new active's catch-up")
        await asyncio.sleep(6.0)  # longer than the yield's 5 s: node a is not handed the stream back
        assert (role(a), role(b)) == ("standby", "active") and committed(a) == 0
        assert len(a.events("stream_elected")) == 1
        report = await asyncio.to_thread(
            stream_report, kafka_bootstrap, data_topics(a.env), corpus_of(earlier, last_hour, tmp_path / "all")
        )
        assert report.ok, report.summary()
        assert report.records == report.expected
    finally:
        for future in writing:
            future.cancel()
        for sidecar in (a, b):
            if sidecar.worker is not None:
                await asyncio.to_thread(sidecar.worker.stop)


def append_live(root, watch, seed: int) -> asyncio.Future:
    """A node writing ``root``'s files into ``watch`` over about REPLAY_S, in ragged chunks."""
    lines = {
        spec.dir_name: sum(len(p.read_bytes().splitlines()) for p in (root / spec.dir_name).rglob("*") if p.is_file())
        for spec in TABLES
    }
    rates = {table: max(1.0, count / REPLAY_S) for table, count in lines.items()}
    return asyncio.ensure_future(
        replay(root, watch, chunk_bytes=8 * 1024, cadence_s=0.1, lines_per_s=rates, progress=False, seed=seed)
    )


def corpus_of(earlier, last_hour, target):
    for part in (earlier, last_hour):
        shutil.copytree(part, target, dirs_exist_ok=True)
    return target
