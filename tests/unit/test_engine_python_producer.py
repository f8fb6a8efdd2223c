"""A line engine handing a read to a Python ``produce`` callable (the tailer's unit tests' producer:
the Python engine's own way, the native engine's test-only adapter hyperdata_sidecar/engines/testing.py),
on both engines: the calls
``RecordWriter`` makes, each with its partition's delivery callback of the cycle; a full queue and a
client's refusal stop the read with nothing of the refused record counted, the refusal being the
very exception ``produce`` raised; an exception that is not an ``Exception`` is no refusal."""

from __future__ import annotations

from typing import Any

import pytest

from hyperdata_sidecar.core.records import SEQ_START, Topics
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.engines import Engine, FileLines, LineEngine
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonLines
from hyperdata_sidecar.engines.testing import NativeLinesOnPython

from test_core_lineinfo import EVENT_OF, envelope

SPEC = TABLE_BY_DIR["node_raw_book_diffs_streaming"]
TOPICS = Topics("data", 6, "dlq", 3)
SOURCE = "node_raw_book_diffs_streaming/hourly/20260610/13"
# Good lines of several coins and blocks (a regression among them), and one dead letter.
LINES = [
    envelope([EVENT_OF[SPEC](coin)], block_number=block) for coin, block in zip("ABCDEFG", [5, 5, 6, 4, 4, 7, 7], strict=True)
]
LINES.insert(3, b"not json")
READ = b"".join(line + b"\n" for line in LINES)


class Produce:
    """A ``produce`` that keeps every call it takes and raises ``raises[n]`` at its n-th attempt."""

    def __init__(self, raises: dict[int, BaseException] | None = None) -> None:
        self.raises = raises or {}
        self.attempts = 0
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any) -> None:
        self.attempts += 1
        refusal = self.raises.get(self.attempts)
        if refusal is not None:
            raise refusal
        self.calls.append(args)


FILE = FileLines(SPEC, TOPICS, SOURCE, WriterState(0, SEQ_START, None, None), b"", 1 << 20)


def engine_of(engine: Engine | None, produce: Produce) -> LineEngine:
    """A file's line engine producing through ``produce``: the compiled one (``engine``), else Python's."""
    if isinstance(engine, NativeEngine):
        return NativeLinesOnPython(engine.module, produce, FILE)
    return PythonLines(FILE, produce)


def routed(call: tuple[Any, ...]) -> tuple[Any, ...]:
    """A call with its delivery callback as the (topic, partition) of the group it reports to."""
    group = call[4].__self__
    return (*call[:4], (group.topic, group.partition), *call[5:])


async def reference_calls() -> list[tuple[Any, ...]]:
    produce = Produce()
    engine = engine_of(None, produce)
    assert await engine.handover(READ, Cycle(engine.state(), None, engine.deliveries())).step()
    return [routed(call) for call in produce.calls]


async def test_each_record_is_the_reference_writers_call_with_its_groups_callback_in_the_cycle(line_engine: Engine) -> None:
    produce = Produce()
    engine = engine_of(line_engine, produce)
    cycle = Cycle(engine.state(), None, engine.deliveries())
    assert await engine.handover(READ, cycle).step()
    assert [routed(call) for call in produce.calls] == await reference_calls()
    assert all(routed(call)[4] == (call[0], call[3]) for call in produce.calls)
    for call in produce.calls:
        call[4](None, None)
    assert cycle.deliveries.reported() == cycle.tally.produced == len(LINES)


@pytest.mark.parametrize("attempt", [1, 4, 5])  # a good line, the dead letter, the regressed line
async def test_a_full_queue_stops_the_read_counting_nothing_of_the_refused_record(line_engine: Engine, attempt: int) -> None:
    produce = Produce({attempt: BufferError("Local: Queue full")})
    engine = engine_of(line_engine, produce)
    cycle = Cycle(engine.state(), None, engine.deliveries())
    handover = engine.handover(READ, cycle)
    assert not await handover.step()
    assert handover.refusal is None
    assert cycle.tally.produced == attempt - 1
    assert engine.state().offset == sum(len(line) + 1 for line in LINES[: attempt - 1])
    assert await handover.step()
    assert [routed(call) for call in produce.calls] == await reference_calls()
    assert (cycle.tally.produced, cycle.tally.lines, cycle.tally.dlq, len(cycle.tally.regressions)) == (len(LINES), 7, 1, 1)


@pytest.mark.parametrize("attempt", [2, 4])  # a good line, the dead letter
async def test_a_client_refusal_is_the_exception_produce_raised_and_nothing_of_its_record_is_counted(
    line_engine: Engine, attempt: int
) -> None:
    refusal = ValueError("Local: Unknown partition")
    produce = Produce({attempt: refusal})
    engine = engine_of(line_engine, produce)
    cycle = Cycle(engine.state(), None, engine.deliveries())
    handover = engine.handover(READ, cycle)
    assert not await handover.step()
    assert handover.refusal is refusal
    assert (cycle.tally.produced, cycle.tally.dead_letters) == (attempt - 1, [])
    assert await handover.step()
    assert [routed(call) for call in produce.calls] == await reference_calls()


async def test_an_exception_that_is_not_an_exception_is_no_refusal_and_leaves_the_step(line_engine: Engine) -> None:
    produce = Produce({2: KeyboardInterrupt()})
    engine = engine_of(line_engine, produce)
    handover = engine.handover(READ, Cycle(engine.state(), None, engine.deliveries()))
    with pytest.raises(KeyboardInterrupt):
        await handover.step()


def test_a_python_producer_without_a_callback_for_every_data_partition_is_refused(native: Any) -> None:
    engine = engine_of(NativeEngine(native), Produce())
    assert isinstance(engine, NativeLinesOnPython)
    with pytest.raises(ValueError, match="5 data delivery callbacks for 6 partitions"):
        engine.engine.feed(READ, native.testing.PythonProducer(Produce(), [print] * 5, print))
