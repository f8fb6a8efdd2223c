"""A standby following the stream's position without a broker: the positions it is handed (and the
committed ones it reads first), this node's files on disk, what each look says, its metrics and log."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hyperdata_sidecar import position_search, stream_follow
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.stream_position import StreamPosition
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.stream_follow import StandbyFollow
from hyperdata_sidecar.stream_positions import PositionsUnavailable

from test_stream_handover import FILLS, NEW, OLD, Positions, line, position_of

LOGGER = "tests.stream_follow"


@pytest.fixture
def watch(tmp_path: Path) -> Path:
    for path, lines in ((OLD, [line(7, 1)]), (NEW, [line(8, 2), line(9, 3)])):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes(b"".join(item + b"\n" for item in lines))
    return tmp_path


@pytest.fixture(autouse=True)
def _every_tick(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(stream_follow, "FOLLOW_EVERY_S", 0.0)
    caplog.set_level(logging.INFO, logger=LOGGER)


class Heads:
    """What StreamHeads gives a standby: the newest position per table it met, the stream's status."""

    def __init__(self) -> None:
        self.positions: dict[str, StreamPosition] = {}
        self.role = "standby"

    def status(self) -> dict[str, object]:
        return {"stream": "s", "role": self.role}


def follower(watch: Path, committed: dict[str, StreamPosition] | Exception | None = None) -> StandbyFollow:
    settings = load_settings({"WATCH_DIR": str(watch), "NODE_ID": "node-b"})
    positions = Positions({} if committed is None else committed)
    log = EventLog(logging.getLogger(LOGGER))
    return StandbyFollow(settings, positions, Heads(), SidecarMetrics(), log)  # type: ignore[arg-type]


def looks(follow: StandbyFollow) -> dict[str, dict[str, object]]:
    return follow.status()["follow"]


def ready_gauge(follow: StandbyFollow) -> float | None:
    return follow.metrics.registry.get_sample_value("hyperdata_sidecar_stream_standby_ready", {"table": FILLS})


def disagreements(follow: StandbyFollow) -> float | None:
    return follow.metrics.registry.get_sample_value("hyperdata_sidecar_stream_disagreements_total", {"table": FILLS})


def events(caplog: pytest.LogCaptureFixture, name: str) -> list[dict[str, object]]:
    return [r.fields for r in caplog.records if r.getMessage() == name]  # type: ignore[attr-defined]


async def test_the_first_look_reads_the_committed_positions_and_finds_the_line_here(watch, caplog):
    follow = follower(watch, {FILLS: position_of(line(8, 2, local_time="a"))})
    await follow.tick()
    look = looks(follow)[FILLS]
    assert (look["state"], look["line_id"], look["published_by"]) == ("ready", f"{FILLS}|8|0", "node-a")
    assert (look["path"], look["offset"], look["reason"]) == (NEW, len(line(8, 2)) + 1, None)
    assert ready_gauge(follow) == 1.0
    assert events(caplog, "standby_following") == [
        {"table": FILLS, "state": "ready", "line_id": f"{FILLS}|8|0", "path": NEW, "offset": len(line(8, 2)) + 1}
    ]


async def test_a_position_this_node_has_not_written_yet_is_not_ready_until_it_is(watch):
    follow = follower(watch)
    follow.heads.positions[FILLS] = position_of(line(10, 4, local_time="a"))  # type: ignore[attr-defined]
    await follow.tick()
    assert looks(follow)[FILLS]["state"] == "not_written"
    assert ready_gauge(follow) == 0.0
    with open(watch / NEW, "ab") as f:
        f.write(line(10, 4) + b"\n")
    await follow.tick()
    assert looks(follow)[FILLS]["state"] == "ready"
    assert ready_gauge(follow) == 1.0


async def test_another_event_at_the_streams_line_is_named_while_standing_by(watch, caplog):
    follow = follower(watch)
    follow.saw(position_of(line(8, 99, local_time="a")))
    await follow.tick()
    await follow.tick()
    look = looks(follow)[FILLS]
    assert (look["state"], look["path"], look["offset"]) == ("disagree", NEW, 0)
    assert look["reason"] == f"another event than the stream's line {FILLS}|8|0"
    assert ready_gauge(follow) == 0.0
    assert disagreements(follow) == 2.0  # every look counts, as at a handover
    [named] = events(caplog, "stream_disagreement")  # once a minute
    assert (named["role"], named["line_id"], named["path"]) == ("standby", f"{FILLS}|8|0", NEW)
    assert [e["state"] for e in events(caplog, "standby_following")] == ["disagree"]


async def test_only_the_newest_position_is_followed_and_a_found_line_is_not_searched_again(watch, monkeypatch):
    follow = follower(watch)
    newer, older = position_of(line(9, 3, local_time="a")), position_of(line(8, 2, local_time="a"))
    follow.saw(newer)
    follow.saw(older)
    assert follow.newest == {FILLS: newer}
    searches = []
    real = position_search.locate

    def counting(*args):
        searches.append(args[-1].line_id)
        return real(*args)

    monkeypatch.setattr(stream_follow, "locate", counting)
    for _ in range(3):
        await follow.tick()
    assert searches == [f"{FILLS}|9|0"]
    assert looks(follow)[FILLS]["state"] == "ready"


async def test_unreadable_committed_positions_are_read_again_at_the_next_look(watch, caplog):
    follow = follower(watch, PositionsUnavailable("no answer"))
    await follow.tick()
    assert looks(follow) == {}
    assert [e["error"] for e in events(caplog, "stream_positions_unavailable")] == ["no answer"]
    follow.positions.answers = {FILLS: position_of(line(9, 3, local_time="a"))}  # type: ignore[attr-defined]
    await follow.tick()
    assert looks(follow)[FILLS]["state"] == "ready"


async def test_unreadable_files_are_said_and_looked_at_again(watch, monkeypatch):
    follow = follower(watch)
    follow.saw(position_of(line(9, 3, local_time="a")))

    def refused(*_args):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(stream_follow, "locate", refused)
    await follow.tick()
    assert looks(follow)[FILLS]["state"] == "unreadable"
    assert "Permission denied" in looks(follow)[FILLS]["reason"]
    monkeypatch.setattr(stream_follow, "locate", position_search.locate)
    await follow.tick()
    assert looks(follow)[FILLS]["state"] == "ready"


async def test_once_elected_its_looks_and_their_series_go(watch):
    follow = follower(watch)
    follow.saw(position_of(line(9, 3, local_time="a")))
    await follow.tick()
    follow.elected()
    follow.heads.role = "active"  # type: ignore[attr-defined]
    assert follow.status() == {"stream": "s", "role": "active"}
    assert follow.looks == {} and ready_gauge(follow) is None
    follow._record(FILLS, follow._look(FILLS, follow.newest[FILLS]), None)  # a look that was under way
    await follow.tick()
    assert follow.looks == {} and ready_gauge(follow) is None


def test_a_position_of_a_table_this_version_does_not_know_is_not_kept(watch):
    follow = follower(watch)
    follow.saw(position_of(line(9, 3))._replace(table="node_other_streaming"))
    assert follow.newest == {}
