"""The tailer on the rare paths: a record refused when it is sent again, a held topic's metadata
asked for before each retry, a state store that takes no writes, and a fresh start with
INITIAL_POSITION=end over 0, 1 and several hour files. Every test runs on both line engines (the
``line_engine`` fixture of tests/unit/conftest.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hyperdata_sidecar.core.cursor import CursorStage
from hyperdata_sidecar.core.times import hour_start_epoch

from fake_broker import FakeBroker, FakeHost
from test_table_tailer import (
    DLQ,
    PARTITIONS,
    SPEC,
    TOPIC,
    append,
    hour_path,
    in_file_order_per_partition,
    line,
    new_tailer,
    run_ticks,
)

pytestmark = pytest.mark.usefixtures("line_engine")


@pytest.fixture
def watch(tmp_path: Path) -> Path:
    path = tmp_path / "watch"
    path.mkdir()
    return path


LINES = b"".join(line(n) + b"\n" for n in range(40))


class TopicWipedBroker(FakeBroker):
    """The data topic vanished under records in flight: their reports fail, and once the client has
    seen the topic's new metadata, ``produce()`` itself refuses the partitions for a while."""

    async def refresh_metadata(self, topic: str) -> str | None:
        if not self.metadata_refreshes:
            self.client_refusals = 3
        return await super().refresh_metadata(topic)


async def test_a_record_refused_by_the_client_when_sent_again_holds_the_table_and_arrives_once(watch: Path):
    append(hour_path(watch, 13), LINES)
    host, broker = FakeHost(), TopicWipedBroker(PARTITIONS)
    broker.refuse_topic[TOPIC] = 1
    await run_ticks(new_tailer(watch, host, broker))
    values = [r.value for r in broker.records(TOPIC)]
    assert sorted(values) == sorted(line(n) for n in range(40)) and len(values) == len(set(values))
    assert in_file_order_per_partition(broker)
    assert any("Unknown partition" in reason for reason in host.held_ever)
    assert host.holds == {}
    assert host.checkpoints[f"{SPEC.dir_name}/hourly/20260610/13"].lines == 40


async def test_every_retry_of_a_held_topic_first_asks_for_its_metadata(watch: Path):
    append(hour_path(watch, 13), LINES)
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.refuse_topic[TOPIC] = 3
    await run_ticks(new_tailer(watch, host, broker))
    assert broker.metadata_refreshes and set(broker.metadata_refreshes) == {TOPIC}
    assert len(broker.metadata_refreshes) == len(host.pauses)


async def test_a_record_the_client_refuses_on_first_send_refreshes_the_tables_topics_before_the_retry(watch: Path):
    append(hour_path(watch, 13), LINES)
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.client_refusals = 2
    await run_ticks(new_tailer(watch, host, broker))
    assert broker.metadata_refreshes[:2] == [TOPIC, DLQ]
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(line(n) for n in range(40))


class FillingStateHost(FakeHost):
    """A state store that fills at the first checkpoint (refuses writes) until a test gives it room."""

    async def checkpoint(self, cursor) -> None:
        await super().checkpoint(cursor)
        if not self.roomy:
            self.problem = "STATE_PATH /state: IO error: No space left on device"

    roomy = False


async def test_nothing_new_is_read_while_the_state_store_refuses_writes_and_all_follows_once_it_has_room(watch: Path):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(200)))
    host, broker = FillingStateHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await run_ticks(tailer, 5)
    stalled = len(broker.records(TOPIC))
    # Read while the window's 4 cycles were in flight and the one that overflowed it: 5 reads of 2048 bytes.
    assert 0 < stalled <= 5 * 2048 // min(len(line(n)) + 1 for n in range(200))
    assert len(tailer.window) == 0  # what was in flight settled and was handed to the host
    host.roomy = True
    host.problem = None
    await run_ticks(tailer, 3)
    values = [r.value for r in broker.records(TOPIC)]
    assert sorted(values) == sorted(line(n) for n in range(200)) and len(values) == 200


# -- INITIAL_POSITION=end ------------------------------------------------------------------------


async def test_end_with_no_files_yet_publishes_the_files_that_appear_from_their_first_byte(watch: Path):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker, INITIAL_POSITION="end")
    await run_ticks(tailer, 1)
    append(hour_path(watch, 13), LINES)
    await run_ticks(tailer)
    assert len(broker.records(TOPIC)) == 40


async def test_end_with_one_file_publishes_only_the_lines_completed_after_the_start(watch: Path):
    append(hour_path(watch, 13), LINES + line(40)[:50])
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker, INITIAL_POSITION="end")
    await run_ticks(tailer)
    assert broker.records(TOPIC) == []
    append(hour_path(watch, 13), line(40)[50:] + b"\n" + line(41) + b"\n")
    await run_ticks(tailer)
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted([line(40), line(41)])


async def test_end_with_several_files_skips_every_older_one_and_starts_the_newest_past_its_last_line(watch: Path):
    for hour in (12, 13, 14, 15):
        append(hour_path(watch, hour), LINES)
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker, INITIAL_POSITION="end")
    tailer.discovered()  # the startup summary's scan, before the first tick
    assert tailer.backlog == (0, 0)  # the files it will skip, or start at their end, are no backlog
    await run_ticks(tailer)
    stages = {path.rsplit("/", 1)[1]: (cursor.stage, cursor.byte_offset) for path, cursor in host.checkpoints.items()}
    skipped = (CursorStage.SKIPPED, 0)
    assert stages == {"12": skipped, "13": skipped, "14": skipped, "15": (CursorStage.TAILING, len(LINES))}
    assert broker.records(TOPIC) == [] and host.rotations == []
    append(hour_path(watch, 15), line(41) + b"\n")
    append(hour_path(watch, 16), line(42) + b"\n")
    await run_ticks(tailer)
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted([line(41), line(42)])
    assert [m.path.rsplit("/", 1)[1] for m in host.rotations] == ["15"]


async def test_at_the_beginning_the_startup_backlog_is_every_file_whole(watch: Path):
    for hour in (12, 13):
        append(hour_path(watch, hour), LINES)
    tailer = new_tailer(watch, FakeHost(), FakeBroker(PARTITIONS), INITIAL_POSITION="beginning")
    tailer.discovered()
    assert tailer.backlog == (2 * len(LINES), 2)


# -- the backlog and the newest hour file during a long catch-up ---------------------------------


class RotatingHost(FakeHost):
    """The node rotates while the tailer catches up: hour 15 appears at the first checkpoint."""

    watch: Path | None = None

    async def checkpoint(self, cursor) -> None:
        await super().checkpoint(cursor)
        if self.watch is not None and not hour_path(self.watch, 15).exists() and cursor.lines:
            append(hour_path(self.watch, 15), line(999) + b"\n")


async def test_a_long_catch_up_tick_follows_new_hour_files_for_the_gauge_and_the_backlog(watch: Path, monkeypatch):
    import hyperdata_sidecar.tailer as tailer_module

    monkeypatch.setattr(tailer_module, "RESCAN_EVERY_S", 0.0)
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(200)))
    append(hour_path(watch, 14), LINES)
    host, broker = RotatingHost(), FakeBroker(PARTITIONS)
    host.watch = watch
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()  # one tick: hour 15 appeared during it
    rendered = host.metrics.render()[0].decode().splitlines()
    [newest] = [
        x for x in rendered if x.startswith(f'hyperdata_sidecar_newest_hour_file_start_seconds{{table="{SPEC.dir_name}"}}')
    ]
    assert float(newest.rsplit(" ", 1)[1]) == hour_start_epoch("20260610", "15")
    assert tailer.backlog.files >= 1
    await run_ticks(tailer, 3)
    assert tailer.backlog.bytes == 0 and tailer.backlog.files == 0


async def test_the_backlog_counts_the_current_files_unpublished_bytes_and_later_files_whole(watch: Path):
    append(hour_path(watch, 13), LINES)
    append(hour_path(watch, 14), LINES)
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.down_for = 10**9  # nothing is delivered: nothing published
    tailer = new_tailer(watch, host, broker)
    task = asyncio.ensure_future(tailer.tick())
    for _ in range(50):
        await asyncio.sleep(0)
    assert tailer.backlog.bytes == 2 * len(LINES) and tailer.backlog.files == 2
    broker.down_for = 0
    await task
