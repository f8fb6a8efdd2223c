"""The progress topic: what the tailers send (a checkpoint, a forget, a barrier), a failed checkpoint
counted and logged rather than raised, and each record applied to the tables through a real
StateWriter on plain dicts. A recorder stands in for the Faust topic; the test applies what it
holds, as the progress agent would."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NamedTuple

import orjson
import pytest
from aiokafka.errors import KafkaTimeoutError
from faust.types import TP

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.logs import EventLog, _JsonFormatter
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.progress_topic import ProgressTopic
from hyperdata_sidecar.state_writer import StateWriter

LOGGER = "tests.progress_topic"
PATH = "node_fills_streaming/hourly/20260610/22"


class Topic:
    """The internal progress topic: keeps what is sent as (key, value); raises ``refusal`` on each send while set."""

    def __init__(self) -> None:
        self.sent: list[tuple[str | None, dict[str, Any]]] = []
        self.refusal: Exception | None = None

    async def send(self, *, key: str | None, value: dict[str, Any]) -> asyncio.Future[Written]:
        if self.refusal is not None:
            raise self.refusal
        self.sent.append((key, value))
        written: asyncio.Future[Written] = asyncio.get_running_loop().create_future()
        written.set_result(Written(0, len(self.sent) - 1))
        return written


class Written(NamedTuple):
    """The broker's answer to a send (aiokafka's RecordMetadata, as much as is read of it)."""

    partition: int
    offset: int


class RefusingTable(dict[str, Any]):
    """A table whose store refuses its next ``refusals`` writes (a full disk), as rocksdict does."""

    def __init__(self, *args: Any, refusals: int = 1 << 30) -> None:
        super().__init__(*args)
        self.refusals = refusals

    def _refuse(self) -> None:
        if self.refusals:
            self.refusals -= 1
            raise Exception("IO error: No space left on device")

    def __setitem__(self, key: str, value: Any) -> None:
        self._refuse()
        super().__setitem__(key, value)

    def pop(self, key: str, default: Any = None) -> Any:
        self._refuse()
        return super().pop(key, default)


class Parts:
    def __init__(
        self, stopping: bool = False, offsets: dict[str, Any] | None = None, seals: dict[str, Any] | None = None
    ) -> None:
        self.topic = Topic()
        self.metrics = SidecarMetrics()
        self.offsets: dict[str, Any] = offsets if offsets is not None else {}
        self.seals: dict[str, Any] = seals if seals is not None else {}
        self.backups: dict[str, Any] = {}
        log = EventLog(logging.getLogger(LOGGER))

        async def pause(_seconds: float) -> bool:
            return not stopping

        writer = StateWriter(self.metrics, log, "/state", pause, lambda _table: None)
        self.progress = ProgressTopic(
            self.topic,  # type: ignore[arg-type]
            self.offsets,
            [self.offsets, self.seals, self.backups],
            writer,
            self.metrics,
            log,
        )

    def persist_failures(self) -> float | None:
        return self.metrics.registry.get_sample_value("hyperdata_sidecar_state_persist_failures_total")

    async def apply_sent(self) -> None:
        """Apply every record sent so far, as the progress agent does."""
        for _key, value in self.topic.sent:
            await self.progress.apply(value)


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


CURSOR = FileCursor(path=PATH, byte_offset=4096, lines=12)


# -- sending --------------------------------------------------------------------------------------


async def test_a_checkpoint_is_sent_keyed_by_its_path():
    p = Parts()
    await p.progress.checkpoint(CURSOR)
    assert p.topic.sent == [(PATH, {"kind": "checkpoint", "cursor": CURSOR.to_record()})]


@pytest.mark.parametrize("refusal", [KafkaTimeoutError(), TimeoutError(), OSError("connection reset")])
async def test_a_checkpoint_the_topic_refuses_is_counted_and_logged_not_raised(refusal, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = Parts()
    p.topic.refusal = refusal
    await p.progress.checkpoint(CURSOR)
    await p.progress.checkpoint(CURSOR)
    assert p.persist_failures() == 2
    assert events(caplog) == [("ERROR", "checkpoint_failed", {"path": PATH, "error": str(refusal)})]  # rate-limited


async def test_a_forget_is_sent_keyed_by_its_path():
    p = Parts()
    await p.progress.forget(PATH)
    assert p.topic.sent == [(PATH, {"kind": "forget", "path": PATH})]


async def test_a_barrier_returns_once_its_own_record_is_applied_not_before():
    p = Parts()
    waiting = asyncio.ensure_future(p.progress.barrier())
    await asyncio.sleep(0)
    [(key, record)] = p.topic.sent
    assert key is None and record["kind"] == "barrier"
    await p.progress.apply({"kind": "barrier", "token": "another process's"})
    await asyncio.sleep(0)
    assert not waiting.done()
    await p.progress.apply(record)
    await asyncio.wait_for(waiting, timeout=5)


async def test_the_records_sent_before_a_barrier_are_applied_when_it_returns():
    p = Parts()
    await p.progress.checkpoint(CURSOR)
    waiting = asyncio.ensure_future(p.progress.barrier())
    await asyncio.sleep(0)
    await p.apply_sent()
    await asyncio.wait_for(waiting, timeout=5)
    assert p.offsets == {PATH: CURSOR.to_record()}


# -- applying -------------------------------------------------------------------------------------


async def test_a_checkpoint_applied_sets_the_files_cursor_in_the_offsets_table():
    p = Parts()
    await p.progress.checkpoint(CURSOR)
    moved = CURSOR.with_changes(byte_offset=8192)
    await p.progress.checkpoint(moved)
    await p.apply_sent()
    assert p.offsets == {PATH: moved.to_record()}


async def test_a_checkpoint_the_store_refuses_is_written_once_it_takes_it():
    p = Parts(offsets=RefusingTable(refusals=2))
    await p.progress.apply({"kind": "checkpoint", "cursor": CURSOR.to_record()})
    assert p.offsets == {PATH: CURSOR.to_record()} and p.persist_failures() == 2


async def test_a_forget_applied_removes_the_path_from_every_table_it_names():
    p = Parts(seals={PATH: {"revision": 1}, "other": {"revision": 1}})
    p.offsets[PATH] = CURSOR.to_record()
    p.backups[PATH] = {"status": "ok"}
    await p.progress.forget(PATH)
    await p.apply_sent()
    assert p.offsets == {} and p.seals == {"other": {"revision": 1}} and p.backups == {}


async def test_a_forget_the_worker_stops_during_leaves_the_later_tables_alone():
    p = Parts(stopping=True, seals=RefusingTable({PATH: {"revision": 1}}))
    p.offsets[PATH] = CURSOR.to_record()
    p.backups[PATH] = {"status": "ok"}
    await p.progress.apply({"kind": "forget", "path": PATH})
    assert p.offsets == {} and PATH in p.seals and p.backups == {PATH: {"status": "ok"}}


async def test_an_unknown_record_changes_nothing_and_is_a_warning(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    p = Parts()
    await p.progress.apply({"kind": "rewind", "path": PATH})
    assert p.offsets == {}
    assert events(caplog) == [("WARNING", "unknown_progress_record", {"record": str({"kind": "rewind", "path": PATH})})]


class Assigned:
    """A Faust app whose consumer holds ``partitions`` (topic names)."""

    def __init__(self, *topics: str) -> None:
        self.conf = type("Conf", (), {"id": "hyperdata-sidecar-a"})()
        self.consumer = type("Consumer", (), {"assignment": lambda _self: {type("TP", (), {"topic": t})() for t in topics}})()


def test_the_progress_topic_held_by_another_worker_is_named() -> None:
    host = Parts()
    host.topic.app = Assigned("other-topic")  # type: ignore[attr-defined]
    host.topic.get_topic_name = lambda: "hyperdata-sidecar-a-sidecar-progress"  # type: ignore[attr-defined]
    reason = host.progress.held_elsewhere()
    assert reason is not None and "another worker of app hyperdata-sidecar-a" in reason and "same NODE_ID" in reason
    host.topic.app = Assigned("hyperdata-sidecar-a-sidecar-progress")  # type: ignore[attr-defined]
    assert host.progress.held_elsewhere() is None
    host.topic.app = None  # type: ignore[attr-defined]  # no app (not installed): nothing to name
    assert host.progress.held_elsewhere() is None


async def test_what_the_consumer_knows_is_written_as_a_json_log_line():
    """The slow barrier's line: a JSON object's keys are strings (orjson refuses others, and the
    line was lost to a logging error once)."""
    p = Parts()
    assert p.progress.consumer_view() == {"applied": {}}  # no app: nothing more to say
    await p.progress.apply({"kind": "checkpoint", "cursor": CURSOR.to_record()}, partition=3, offset=7)
    record = logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, "progress_barrier_slow", (), None)
    record.fields = {"consumer": p.progress.consumer_view()}
    assert orjson.loads(_JsonFormatter().format(record))["consumer"] == {"applied": {"3": 7}}


class Consumer:
    """Faust's consumer, as much as a rewind uses of it: ``committed`` the offset it started from."""

    def __init__(self, committed: int | None = None) -> None:
        self.seeks: list[tuple[Any, int]] = []
        self._committed_offset = {} if committed is None else {TP("progress", 0): committed}

    async def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


async def test_a_barrier_record_the_consumer_fetched_but_never_applied_is_fetched_again():
    """After a frozen worker's consumer rejoined, Faust dropped records it had fetched: position 94
    (the high watermark), the agent at 90, the barrier at 93, waiting for good. The rewind seeks back
    to the first record not applied; it does nothing while the barrier may still come."""
    p = Parts()
    consumer = Consumer()
    p.topic.app = type("App", (), {"consumer": consumer})()  # type: ignore[attr-defined]
    p.topic.get_topic_name = lambda: "progress"  # type: ignore[attr-defined]
    position = [94]
    p.progress.consumer_view = lambda: {"partitions": {"0": {"position": position[0]}}}  # type: ignore[method-assign]
    for _ in range(93):
        await p.topic.send(key=PATH, value={"kind": "checkpoint", "cursor": CURSOR.to_record()})
    waiting = asyncio.ensure_future(p.progress.barrier())
    await asyncio.sleep(0)
    assert p.progress.barrier_at == (0, 93)
    await p.progress.apply(p.topic.sent[90][1], partition=0, offset=90)
    position[0] = 93
    assert await p.progress.rewind_if_skipped() is None  # not fetched yet: it may still come
    position[0] = 94
    assert await p.progress.rewind_if_skipped() == {
        "partition": 0,
        "barrier_offset": 93,
        "applied": 90,
        "position": 94,
        "seek_to": 91,
    }
    assert [(tp.topic, tp.partition, offset) for tp, offset in consumer.seeks] == [("progress", 0, 91)]
    for offset in (91, 92, 93):
        await p.progress.apply(p.topic.sent[offset][1], partition=0, offset=offset)
    await waiting
    assert p.progress.barrier_at is None and await p.progress.rewind_if_skipped() is None


@pytest.mark.parametrize("started, seek_to", [(94, 93), (80, 80), (None, 93)], ids=["past it", "before it", "unknown"])
async def test_a_barrier_record_another_worker_of_the_app_applied_is_fetched_again(started, seek_to):
    """Drill 17: a second worker with the same NODE_ID sent its barrier (93) while the first still
    held the partition; the first applied it and committed 94 before it was fenced, so the second,
    given the partition, starts at 94 and applies nothing. The rewind seeks back to where it
    started, or to its barrier record if it started past it."""
    p = Parts()
    consumer = Consumer(committed=started)
    p.topic.app = type("App", (), {"consumer": consumer})()  # type: ignore[attr-defined]
    p.topic.get_topic_name = lambda: "progress"  # type: ignore[attr-defined]
    p.progress.consumer_view = lambda: {"partitions": {"0": {"position": 94}}}  # type: ignore[method-assign]
    for _ in range(93):
        await p.topic.send(key=PATH, value={"kind": "checkpoint", "cursor": CURSOR.to_record()})
    waiting = asyncio.ensure_future(p.progress.barrier())
    await asyncio.sleep(0)
    assert await p.progress.rewind_if_skipped() == {
        "partition": 0,
        "barrier_offset": 93,
        "applied": None,
        "position": 94,
        "seek_to": seek_to,
    }
    assert [(tp.topic, tp.partition, offset) for tp, offset in consumer.seeks] == [("progress", 0, seek_to)]
    await p.progress.apply(p.topic.sent[93][1], partition=0, offset=93)
    await waiting
