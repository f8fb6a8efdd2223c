"""The native line engine (``hyperdata_sidecar_engine``, built from engine/) against the Python one.

The Python engine (``LineSplitter`` + ``RecordWriter``, ``inspect_line`` deciding every line its
fast path refuses) is the reference: for any lines, any chunking of their bytes and any start state,
the native engine must hand over the same records byte for byte (topic, partition, key, value,
headers in order, in the same order), the same counts, dead letters and regressions, and end in the
same state (offset, sequencer, block range, held bytes, the unterminated tail and its dead letter).
The native engine leaves the lines it cannot vouch for to Python (``Batch.undecided``). Both run
through their engines' own line engines (:mod:`hyperdata_sidecar.engines`), handing their records
to one Python ``produce`` (the native one through hyperdata_sidecar/engines/testing.py). Each engine's
rare paths are held to the same: every cycle's records made again from the file (``rebuild``: the
native engine in collect mode) are the records the cycle produced, and the dead letter standing for
a refused record (``rejection``) is the reference's.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.records import Record, Topics, dead_letter_partition
from hyperdata_sidecar.core.splitter import OversizeLine
from hyperdata_sidecar.core.tables import TABLES, TableSpec
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.engines import FileLines, LineEngine
from hyperdata_sidecar.engines.python import PythonLines
from hyperdata_sidecar.engines.testing import CollectingNativeLines, NativeLinesOnPython

from test_core_lineinfo import _ENVELOPES, EVENT_OF, envelope

if os.environ.get("HYPERDATA_ENGINE_REQUIRED") == "1":  # make test builds it: a missing engine is a failure there
    import hyperdata_sidecar_engine as native
else:
    native = pytest.importorskip(
        "hyperdata_sidecar_engine",
        reason="the native engine is not installed (make engine builds it into .venv)",
    )

TOPICS = Topics("data", 6, "dlq", 3)
SOURCE = "node_raw_book_diffs_streaming/hourly/20260610/13"


@dataclass
class Run:
    """What one engine handed over for a file's chunks, and the state it ended in."""

    records: list[Record] = field(default_factory=list)
    lines: int = 0
    dlq: int = 0
    produced: int = 0
    regressions: list[tuple[int, int, int, int]] = field(default_factory=list)
    dead_letters: list[tuple[str, int]] = field(default_factory=list)
    last_lines: list[bytes | None] = field(default_factory=list)  # per read
    end: tuple[Any, ...] = ()
    unterminated: tuple[Any, ...] | None = None
    offset_after_flush: int = 0


@dataclass(frozen=True)
class Start:
    offset: int = 0
    seq: tuple[int | None, int, int] = (None, 0, 0)
    first_block: int | None = None
    last_block: int | None = None
    late_tag: bytes = b""
    max_line_bytes: int = 1 << 20

    def file(self, spec: TableSpec, source: str = SOURCE) -> FileLines:
        state = WriterState(self.offset, self.seq, self.first_block, self.last_block)
        return FileLines(spec, TOPICS, source, state, self.late_tag, self.max_line_bytes)


def grouped(records: list[Record]) -> dict[tuple[str, int], list[Record]]:
    groups: dict[tuple[str, int], list[Record]] = {}
    for record in records:
        groups.setdefault((record.topic, record.partition), []).append(record)
    return groups


async def run_engine(engine: LineEngine, chunks: list[bytes], start: Start, records: list[Record]) -> Run:
    """Drives a file's line engine through ``chunks``, then finalizes the file (its unterminated tail
    dead-lettered, as the tailer does). After each cycle, the engine makes the cycle's records again
    from the file's bytes (as redelivery does): they must be the records the cycle produced."""
    run = Run(records=records)
    data = b"".join(chunks)
    for chunk in chunks:
        cycle = Cycle(engine.state(), None, engine.deliveries())
        before = len(records)
        assert await engine.handover(chunk, cycle).step()
        cycle.end = engine.state().offset
        assert engine.rebuild(cycle, data[cycle.start.offset - start.offset : cycle.end - start.offset]) == grouped(
            records[before:]
        )
        tally = cycle.tally
        run.lines, run.dlq, run.produced = run.lines + tally.lines, run.dlq + tally.dlq, run.produced + tally.produced
        run.regressions += [tuple(r) for r in tally.regressions]
        run.dead_letters += [tuple(d) for d in tally.dead_letters]
        run.last_lines.append(tally.last_line)
    state = engine.state()
    run.end = (state.offset, state.seq, state.first_block, state.last_block, engine.held_bytes)
    held = engine.flush_partial()
    if held is not None:
        run.unterminated = (
            (held.offset, held.length, None, held.sha256)
            if type(held) is OversizeLine
            else (held.offset, len(held.data), held.data, None)
        )
        cycle = Cycle(state, held, engine.deliveries())
        before = len(records)
        assert await engine.unterminated(held, cycle).step()
        assert (cycle.tally.produced, cycle.tally.dlq, cycle.tally.dead_letters) == (1, 1, [("unterminated", held.offset)])
        assert engine.rebuild(cycle, b"") == grouped(records[before:])
    run.offset_after_flush = engine.state().offset
    return run


def run_python(spec: TableSpec, chunks: list[bytes], start: Start) -> Run:
    records: list[Record] = []
    return asyncio.run(run_engine(PythonLines(start.file(spec), collect(records)), chunks, start, records))


def run_native(spec: TableSpec, chunks: list[bytes], start: Start) -> Run:
    """The native engine handing its records to the same ``produce``, ``inspect_line`` deciding its undecided lines."""
    records: list[Record] = []
    return asyncio.run(run_engine(NativeLinesOnPython(native, collect(records), start.file(spec)), chunks, start, records))


def collect(records: list[Record]) -> Any:
    def produce(topic, value, key, partition, _on_delivery, _alias, _timestamp, headers) -> None:
        records.append(Record(topic, partition, key, value, headers))

    return produce


def assert_same(spec: TableSpec, chunks: list[bytes], start: Start) -> Run:
    expected = run_python(spec, chunks, start)
    actual = run_native(spec, chunks, start)
    assert actual.records == expected.records
    assert actual == expected
    return actual


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# --- what the lines are made of -----------------------------------------------------------------

_COINS = st.one_of(
    st.sampled_from(["BTC", "ETH", "LIT", "xyz:TSLA", "@107", "€💰"]),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6),
)
# Few blocks, so lines share blocks (seq_in_block) and go back (regressions).
_BLOCKS = st.one_of(st.integers(1030140000, 1030140004), st.integers(-2, 2), st.sampled_from([2**63 - 1, 2**63, 2**64 - 1]))


@st.composite
def _good_shape(draw) -> bytes:
    """A line of some table's shape (another table's shape has no coin where this one looks)."""
    shape = draw(st.sampled_from(TABLES))
    coins = draw(st.lists(_COINS, min_size=1, max_size=3))
    extra = draw(st.dictionaries(st.sampled_from(["block_time", "local_time", "x"]), st.one_of(st.none(), st.text(max_size=4))))
    line = envelope([EVENT_OF[shape](c) for c in coins], block_number=draw(_BLOCKS), **extra)
    if draw(st.booleans()):
        line = b" " + line + draw(st.sampled_from([b"", b" ", b"\r", b"\t\r"]))
    return line


@st.composite
def _damaged(draw) -> bytes:
    """A good or arbitrary JSON line with bytes inserted somewhere (invalid UTF-8 inside strings too)."""
    line = bytearray(draw(st.one_of(_good_shape(), _ENVELOPES.map(orjson.dumps))))
    position = draw(st.integers(0, len(line)))
    line[position:position] = draw(
        st.one_of(st.binary(min_size=1, max_size=3), st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\u", b"\\ud800"]))
    )
    return bytes(line).replace(b"\n", b"")


# Hand-made lines at the edge of what the native inspection may decide.
_EDGES = [
    b"",
    b"   ",
    b"\t\x0b\x0c",
    b"not json",
    b"{}",
    b"[1]",
    b"\xff\xfe",
    b'{"block_number":5,"events":[]}',
    b'{"block_number":5,"block_number":6,"events":[{"coin":"A"}]}',
    b'{"block_number":5,"events":[{"coin":"A"}],"events":[{"coin":"B"}]}',
    b'{"block_number":5,"events":[{"coin":"A","coin":"B"}]}',
    b'{"block_number":5,"events":[{"order":{"coin":"A"},"order":{"coin":"B"}}]}',
    b'{"block\\u005fnumber":5,"events":[{"coin":"A"}]}',
    b'{"block_number":5,"events":[{"coin":"\\u0041"}]}',
    b'{"block_number":5,"events":[{"coin":"A\\"B"}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":"\\ud83d\\udcb0"}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":"\\udc00"}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":"\\u0000\\n\\/"}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":1e400}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":1e99,"y":-0.5E-7,"z":123456789012345678901234567890}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":01}]}',
    b'{"block_number":-0,"events":[{"coin":"A"}]}',
    b'{"block_number":5.0,"events":[{"coin":"A"}]}',
    b'{"block_number":1e3,"events":[{"coin":"A"}]}',
    b'{"block_number":9223372036854775807,"events":[{"coin":"A"}]}',
    b'{"block_number":18446744073709551616,"events":[{"coin":"A"}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":' + b"[" * 70 + b"]" * 70 + b"}]}",
    b'{"block_number":5,"events":[{"coin":"A","x":' + b"[" * 2000 + b"]" * 2000 + b"}]}",
    b'{"block_number":5,"events":[{"coin":"A"}]} trailing',
    b'{"block_number":5,"events":[{"coin":"A"}]}{}',
    b'\xef\xbb\xbf{"block_number":5,"events":[{"coin":"A"}]}',
    b'{"block_number":5,"events":[{"coin":"A\x01"}]}',
    b'{"block_number":5,"events":[{"coin":"A"}],}',
    b'{"block_number":5,"events":[{"coin":"A"},]}',
    b'{"block_number":5,"events":[["0xu",{"coin":"F"},3]]}',
    b'{"block_number":5,"events":[["0xu"]]}',
    b'{"block_number":5,"events":[{"coin":"A","x":tru}]}',
    b'{"block_number":5,"events":[{"coin":"A","x":[true,false,null]}]}',
]

_LINES = st.lists(
    st.one_of(_good_shape(), _good_shape(), _damaged(), _ENVELOPES.map(orjson.dumps), st.sampled_from(_EDGES)),
    max_size=12,
)

_STARTS = st.builds(
    Start,
    offset=st.one_of(st.just(0), st.integers(0, 2**40)),
    seq=st.tuples(st.one_of(st.none(), _BLOCKS), st.integers(0, 5000), st.integers(0, 3)),
    first_block=st.one_of(st.none(), _BLOCKS),
    last_block=st.one_of(st.none(), _BLOCKS),
    late_tag=st.sampled_from([b"", b"|late1", b"|late2"]),
    max_line_bytes=st.sampled_from([0, 40, 300, 700, 1 << 20]),
)

_DIFFERENTIAL = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- the contract -------------------------------------------------------------------------------


@_DIFFERENTIAL
@given(st.sampled_from(TABLES), _LINES, st.binary(max_size=20), st.lists(st.integers(0, 10**6), max_size=8), _STARTS)
def test_any_lines_any_chunking_any_start_give_the_same_records_and_state(spec, lines, tail, cuts, start):
    data = b"".join(line + b"\n" for line in lines) + tail.replace(b"\n", b"")
    assert_same(spec, chunked(data, cuts), start)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TABLES), st.binary(max_size=400), st.lists(st.integers(0, 10**6), max_size=6), _STARTS)
def test_arbitrary_bytes_give_the_same_records_and_state(spec, data, cuts, start):
    assert_same(spec, chunked(data, cuts), start)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
@pytest.mark.parametrize("line", _EDGES, ids=repr)
def test_each_edge_line_gives_the_same_record(spec, line):
    assert_same(spec, [line + b"\n"], Start())


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_a_real_line_of_each_table_is_decided_natively(spec):
    run = assert_same(spec, [envelope([EVENT_OF[spec]("BTC")] * 3) + b"\n"], Start())
    assert run.lines == 1
    engine = _engine(spec)
    assert engine.feed(envelope([EVENT_OF[spec]("BTC")]) + b"\n").undecided is None


def test_blocks_that_go_back_start_epochs_and_a_late_tag_ends_every_id():
    lines = [envelope([EVENT_OF[TABLES[0]]("BTC")] * 2, block_number=b) for b in (9, 9, 7, 8, 3, 3)]
    run = assert_same(TABLES[0], [b"\n".join(lines) + b"\n"], Start(seq=(9, 4, 1), late_tag=b"|late1"))
    assert [r[3] for r in run.regressions] == [2, 3]
    assert run.records[-1].header("line_id").endswith(b"|3|2|r3|late1")


def test_an_oversize_line_is_a_dead_letter_referring_to_it():
    line = envelope([EVENT_OF[TABLES[0]]("BTC")])
    run = assert_same(TABLES[0], [line[:10], line[10:] + b"\nshort\n"], Start(max_line_bytes=40))
    assert run.dead_letters == [("oversize", 0), ("malformed", len(line) + 1)]
    assert orjson.loads(run.records[0].value)["length"] == len(line)


def test_the_reference_of_an_oversize_line_escapes_the_source_as_orjson_does():
    spec = TABLES[0]
    engine = _engine(spec, source='a"b\\c\x01\x1f\x7f\n\t\x08\x0c/é', max_line_bytes=2)
    [record] = engine.feed(b"long\n").records()
    assert record[3] == orjson.dumps(
        {"source": 'a"b\\c\x01\x1f\x7f\n\t\x08\x0c/é', "offset": 0, "length": 4, "sha256": record[3][-66:-2].decode()}
    )


def test_an_undecided_line_stops_the_read_until_its_verdict():
    engine = _engine(TABLES[0])
    good = envelope([EVENT_OF[TABLES[0]]("BTC")])
    batch = engine.feed(good + b"\nnot json\n" + good + b"\n")
    assert (batch.lines, batch.undecided, engine.offset) == (1, (len(good) + 1, b"not json"), len(good) + 1)
    with pytest.raises(RuntimeError, match="waiting for its verdict"):
        engine.feed(b"")
    with pytest.raises(RuntimeError, match="waiting for its verdict"):
        engine.flush_partial()
    batch = engine.reject("malformed", "unexpected character")
    assert (batch.dlq, batch.lines, batch.undecided, engine.offset) == (1, 1, None, 2 * (len(good) + 1) + len(b"not json\n"))
    with pytest.raises(RuntimeError, match="no line is waiting"):
        engine.accept("BTC", 1, 1)


def test_a_detail_longer_than_1024_bytes_is_cut_as_the_python_engine_cuts_it():
    engine = _engine(TABLES[0])
    engine.feed(b"x\n")
    [record] = engine.reject("malformed", "é" * 600).records()
    assert dict(record[4])["detail"] == ("é" * 600).encode()[:1024]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(1, 1000))
def test_murmur2_partition_is_the_python_partitioner(key, partitions):
    assert native.partition_for(key, partitions) == partition_for(key, partitions)


def _engine(spec: TableSpec, source: str = SOURCE, max_line_bytes: int = 1 << 20):
    return native.LineEngine(
        table=spec.dir_name,
        coin_location=spec.coin_location.value,
        data_topic=TOPICS.data,
        data_partitions=TOPICS.data_partitions,
        dlq_topic=TOPICS.dlq,
        dlq_partition=dead_letter_partition(spec, TOPICS),
        source=source,
        offset=0,
        seq=(None, 0, 0),
        first_block=None,
        last_block=None,
        late_tag=b"",
        max_line_bytes=max_line_bytes,
    )


def test_the_held_bytes_and_the_state_can_be_read_while_a_read_runs_in_a_worker_thread():
    """The status page asks for a file's held bytes while that file's read runs off the event loop
    with the engine borrowed by it: the answer is the state after the last call, never an error."""
    spec = TABLES[0]
    line = envelope([EVENT_OF[spec]("BTC")], block_number=7) + b"\n"
    engine = CollectingNativeLines(native, Start().file(spec))
    chunk = line * 200_000 + b'{"partial'
    cycle = Cycle(engine.state(), None, engine.deliveries())
    done = threading.Event()
    seen: set[int] = set()

    def read() -> None:
        try:
            assert asyncio.run(engine.handover(chunk, cycle).step())
        finally:
            done.set()

    worker = threading.Thread(target=read)
    worker.start()
    while not done.is_set():
        seen.add(engine.held_bytes)
        engine.state()
    worker.join()
    assert seen <= {0, len(b'{"partial')}
    assert (engine.held_bytes, engine.state().offset) == (len(b'{"partial'), len(line) * 200_000)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(TABLES),
    st.binary(max_size=300),
    st.integers(0, 2**40),
    st.sampled_from(["MSG_SIZE_TOO_LARGE", "INVALID_RECORD", '_x"\\']),
    st.text(max_size=1500),
    st.sampled_from([SOURCE, 'a"b\\c\x01/é']),
)
def test_the_dead_letter_standing_for_a_refused_record_is_the_references(spec, value, offset, error, detail, source):
    file = Start().file(spec, source)
    record = Record(
        TOPICS.data, 1, b"BTC", value, [("line_id", b"x|1|0"), ("source", source.encode()), ("offset", b"%d" % offset)]
    )
    expected = PythonLines(file, collect([])).rejection(record, error, detail)
    assert NativeLinesOnPython(native, collect([]), file).rejection(record, error, detail) == expected
    assert CollectingNativeLines(native, file).rejection(record, error, detail) == expected
    assert expected.header("reason") == b"rejected" and expected.header("error") == error.encode()


def test_an_unterminated_line_given_without_its_data_or_with_both_is_refused():
    engine = _engine(TABLES[0])
    with pytest.raises(ValueError, match="give the line's data"):
        engine.write_unterminated(0, 3)
    with pytest.raises(ValueError, match="give the line's data"):
        engine.write_unterminated(0, 3, data=b"abc", sha256="00")
    with pytest.raises(ValueError, match="give the line's data"):
        engine.write_unterminated(0, 4, data=b"abc")
