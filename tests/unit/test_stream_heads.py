"""How far this node has written, per table, as the stream's heads announce it: the block_time of
the newest complete line of the newest hour file (the one before while the newest has none)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import orjson

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.leadership import Role
from hyperdata_sidecar.core.node_heads import Heads
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.stream_heads import StreamHeads, look

from test_core_stream_position import fill_line, position_of

BOOK, FILLS = "node_raw_book_diffs_streaming", "node_fills_streaming"


def line(block_time: str) -> bytes:
    return orjson.dumps({"local_time": "x", "block_time": block_time, "block_number": 1, "events": []}) + b"\n"


def write(root: Path, table: str, hour: int, content: bytes) -> None:
    path = root / table / "hourly" / "20260610" / str(hour)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


def test_each_table_s_head_is_its_newest_complete_line_s_block_time(tmp_path):
    write(tmp_path, BOOK, 9, line("2026-06-10T09:59:59"))
    write(tmp_path, BOOK, 10, line("2026-06-10T10:00:01") + line("2026-06-10T10:00:02") + b'{"block_time":"2026-06-10T10:59')
    assert look(tmp_path) == {BOOK: epoch_of("2026-06-10T10:00:02")}


def test_a_newest_file_without_a_complete_line_yet_gives_the_one_before(tmp_path):
    write(tmp_path, FILLS, 9, line("2026-06-10T09:59:59") + b"not json\n")
    write(tmp_path, FILLS, 10, b'{"local_time":')
    assert look(tmp_path) == {FILLS: epoch_of("2026-06-10T09:59:59")}


def test_a_table_with_nothing_written_has_no_head(tmp_path):
    assert look(tmp_path) == {}


class Record(NamedTuple):
    key: bytes | None
    value: bytes | None


class Topic:
    """The stream's topic as the heads' clients see it: what is sent, what a round reads."""

    def __init__(self, records: list[Record]) -> None:
        self.sent: list[bytes] = []
        self.records = records

    async def send_and_wait(self, _topic: str, value: bytes, key: bytes, partition: int) -> None:
        self.sent.append(key)

    async def getmany(self, timeout_ms: int) -> dict[str, list[Record]]:
        records, self.records = self.records, []
        return {"partition 0": records}


async def test_a_round_keeps_the_newest_position_the_active_wrote_per_table_and_the_peers_heads(tmp_path):
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "node-b"})
    leadership = SimpleNamespace(topic="s-sidecar-stream", role=Role.STANDBY)
    heads = StreamHeads(settings, leadership, SidecarMetrics(), EventLog(), on_yield=lambda _reason: None)  # type: ignore[arg-type]
    published = [fill_line(101, 2), fill_line(101, 3), fill_line(102, 4)]
    newest, older = position_of(published, 2), position_of(published, 0)
    topic = Topic(
        [
            Record(b'"node_fills_streaming"', orjson.dumps(newest.to_record())),
            Record(b'"node_fills_streaming"', orjson.dumps(older.to_record())),  # a compacted topic's older copy
            Record(b"head|node-a", Heads("node-a", {FILLS: 5.0}, 9.0).encode()),
            Record(b'"node_fills_streaming"', b"not a position"),
        ]
    )
    await heads._round(topic, topic)  # type: ignore[arg-type]
    assert heads.positions == {FILLS: newest}
    assert set(heads.peers) == {"node-a"} and topic.sent == [b"head|node-b"]
