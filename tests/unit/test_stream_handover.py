"""The new active's handover without a broker: the stream's positions (a fake of what Kafka holds),
this node's files on disk, the cursors the tailers start from, the tables held and the waits
readiness names."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar import stream_handover
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.lifecycle import Phase
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.records import SEQ_START
from hyperdata_sidecar.core.stream_position import StreamPosition, position_after
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.publishing import Abandoned
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.stream_handover import Resumed, StreamHandover
from hyperdata_sidecar.stream_positions import PositionsUnavailable

from test_readiness import make_readiness

FILLS = "node_fills_streaming"
LOGGER = "tests.stream_handover"
OLD, NEW = f"{FILLS}/hourly/20260610/22", f"{FILLS}/hourly/20260610/23"


def line(block: int, tid: int, local_time: str = "b") -> bytes:
    return orjson.dumps({"local_time": local_time, "block_number": block, "events": [["0xu", {"coin": "BTC", "tid": tid}]]})


class Positions:
    """What the stream's topic holds: the last position per table, or a broker that cannot be read."""

    def __init__(self, last: dict[str, StreamPosition] | Exception) -> None:
        self.answers = last

    async def last(self) -> dict[str, StreamPosition]:
        if isinstance(self.answers, Exception):
            raise self.answers
        return self.answers


def position_of(published: bytes) -> StreamPosition:
    info = inspect_line(TABLE_BY_DIR[FILLS], published)
    assert isinstance(info, LineInfo)
    return position_after(FILLS, (info.block_number, 1, 0), published, info, node="node-a", source=NEW, offset=0)


@pytest.fixture
def node(tmp_path: Path) -> Path:
    watch = tmp_path / "watch"
    for path, lines in ((OLD, [line(7, 1)]), (NEW, [line(8, 2), line(9, 3)])):
        (watch / path).parent.mkdir(parents=True, exist_ok=True)
        (watch / path).write_bytes(b"".join(item + b"\n" for item in lines))
    return watch


def handover(tmp_path: Path, positions: Positions, stop_after: int = 10**6) -> tuple[StreamHandover, object]:
    readiness = make_readiness(tmp_path)
    readiness.move_to(Phase.CONNECTING)
    readiness.move_to(Phase.SYNCING)
    looks = iter(range(stop_after))
    shutdown = Shutdown(lambda: next(looks, None) is None)
    room = StreamHandover(
        readiness._settings, positions, readiness, shutdown, SidecarMetrics(), EventLog(logging.getLogger(LOGGER))
    )  # type: ignore[arg-type]
    return room, readiness


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(stream_handover, "LOOK_AGAIN_S", 0.01)
    caplog.set_level(logging.INFO, logger=LOGGER)


async def test_the_tables_continue_right_after_the_streams_line_and_earlier_files_are_skipped(tmp_path, node, caplog):
    room, _ = handover(tmp_path, Positions({FILLS: position_of(line(8, 2, local_time="a"))}))
    cursors, held = await room.resume({FILLS: {}})
    assert held == {}
    assert cursors[FILLS][OLD].stage is CursorStage.SKIPPED
    resumed = cursors[FILLS][NEW]
    assert (resumed.stage, resumed.byte_offset, resumed.seq_state) == (CursorStage.TAILING, len(line(8, 2)) + 1, (8, 1, 0))
    [event] = [r for r in caplog.records if r.getMessage() == "stream_handover"]
    assert event.fields == {
        "table": FILLS,
        "line_id": f"{FILLS}|8|0",
        "published_by": "node-a",
        "path": NEW,
        "offset": resumed.byte_offset,
    }  # type: ignore[attr-defined]


async def test_a_table_the_stream_never_published_keeps_this_nodes_own_cursors(tmp_path, node):
    room, _ = handover(tmp_path, Positions({}))
    everything = {FILLS: {}, "node_raw_book_diffs_streaming": {}, "node_order_statuses_streaming": {}}
    assert await room.resume({FILLS: {}}) == Resumed(everything, {})


async def test_a_disagreeing_table_is_held_while_the_others_go_on_and_named_while_running_until_the_worker_stops(
    tmp_path, node, caplog
):
    own = {OLD: FileCursor.adopted(OLD, SEQ_START)}
    room, readiness = handover(tmp_path, Positions({FILLS: position_of(line(8, 99))}), stop_after=3)
    cursors, held = await room.resume({FILLS: own})
    assert held == {FILLS: own} and FILLS not in cursors
    assert set(cursors) == {"node_raw_book_diffs_streaming", "node_order_statuses_streaming"}  # never published: their own
    readiness.move_to(Phase.RUNNING)  # as TableSync does once the other tables' tailers are built
    with pytest.raises(Abandoned):
        await room.release(held)
    [reason] = readiness.not_ready_reasons()  # running, and not ready while a table is held
    assert reason.startswith(f"{FILLS}: the nodes disagree at the stream's line {FILLS}|8|0: {NEW} at offset 0: another event")
    assert [r.fields["table"] for r in caplog.records if r.getMessage() == "stream_disagreement"] == [FILLS]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("positions", "named"),
    [
        (Positions(PositionsUnavailable("no answer")), "stream: cannot read the stream's positions: no answer"),
        (Positions({FILLS: position_of(line(10, 4))}), f"{FILLS}: this node has not written the stream's line {FILLS}|10|0 yet"),
    ],
    ids=["positions unreadable: nothing starts", "line not written here yet: the table is held"],
)
async def test_a_handover_that_cannot_go_on_yet_waits_and_says_why(tmp_path, node, positions, named):
    room, readiness = handover(tmp_path, positions, stop_after=3)
    with pytest.raises(Abandoned):
        _cursors, held = await room.resume({FILLS: {}})
        await room.release(held)
    assert named in readiness.not_ready_reasons()


async def test_the_handover_goes_on_once_this_node_writes_the_line(tmp_path, node):
    room, readiness = handover(tmp_path, Positions({FILLS: position_of(line(10, 4))}))
    _cursors, held = await room.resume({FILLS: {}})
    releasing = asyncio.ensure_future(room.release(held))
    await asyncio.sleep(0.05)
    assert not releasing.done()
    with open(node / NEW, "ab") as out:
        out.write(line(10, 4) + b"\n")
    cursors = await asyncio.wait_for(releasing, 5.0)
    assert cursors[FILLS][NEW].byte_offset == (node / NEW).stat().st_size
    assert readiness.handover == {}
