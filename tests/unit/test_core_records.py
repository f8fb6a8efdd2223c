"""RecordWriter: one data record per good line (key, partition, headers, line ids), dead letters
otherwise, in file order, whatever the chunking, the producer's back-pressure or a restart."""

from __future__ import annotations

import hashlib
import itertools

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.records import Collector, Record, RecordWriter, Regression, Routes, Tally, Topics, reference
from hyperdata_sidecar.core.splitter import Line, LineSplitter, OversizeLine
from hyperdata_sidecar.core.tables import TABLES

from test_core_lineinfo import BOOK, EVENT_OF, envelope

TOPICS = Topics("data", 6, "dlq", 3)
SOURCE = "node_raw_book_diffs_streaming/hourly/20260610/13"


def writer(spec=BOOK, produce=None, **state) -> RecordWriter:
    return RecordWriter(spec, TOPICS, Routes(TOPICS.data_partitions), SOURCE, produce or Collector(), **state)


def write_all(w: RecordWriter, data: bytes, cuts=()) -> Tally:
    """Feed ``data`` through a splitter in the pieces ``cuts`` makes, writing each read."""
    splitter = LineSplitter(w.offset, 1 << 20)
    tally = Tally()
    bounds = [0, *sorted(cuts), len(data)]
    for a, b in itertools.pairwise(bounds):
        items = splitter.feed(data[a:b])
        assert w.write(items, Collector().acks(TOPICS.data_partitions), tally) == len(items)
    return tally


def records(collector: Collector) -> list[Record]:
    return [r for group in collector.groups.values() for r in group]


def by_offset(collector: Collector) -> dict[int, Record]:
    return {int(r.header("offset")): r for r in records(collector)}


# --- the reference model ----------------------------------------------------------------------


def model(spec, data: bytes, start_state=(None, 0, 0), late_tag=""):
    """What the writer must produce for ``data`` (complete lines only): per offset, the record."""
    out: dict[int, tuple] = {}
    block, seq, epoch = start_state
    offset = 0
    for line in data.split(b"\n")[:-1]:
        info = inspect_line(spec, line)
        if isinstance(info, LineInfo):
            if block is not None and info.block_number < block:
                epoch += 1
            line_seq = seq if info.block_number == block else 0
            block, seq = info.block_number, line_seq + info.n_events
            key = info.coin.encode()
            suffix = (f"|r{epoch}" if epoch else "") + late_tag
            line_id = f"{spec.dir_name}|{info.block_number}|{line_seq}{suffix}".encode()
            out[offset] = ("data", partition_for(key, 6), key, line, line_id)
        else:
            out[offset] = ("dlq", partition_for(spec.dir_name.encode(), 3), spec.dir_name.encode(), line, info.reason)
        offset += len(line) + 1
    return out, (block, seq, epoch)


def as_model(collector: Collector):
    out = {}
    for offset, r in by_offset(collector).items():
        last = r.header("line_id") if r.topic == "data" else r.header("reason").decode()
        out[offset] = (r.topic, r.partition, r.key, r.value, last)
    return out


_LINES = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["LIT", "BTC", "ETH", "xyz:TSLA", "€💰"]), st.integers(7, 9), st.integers(1, 3)).map(
            lambda t: envelope([EVENT_OF[BOOK](t[0])] * t[2], block_number=t[1])
        ),
        st.sampled_from([b"", b"   ", b"not json", b"{}", b'{"block_number": 8, "events": []}', b"[1]", b"\xff\xfe"]),
    ),
    max_size=30,
)


# --- data records -------------------------------------------------------------------------------


def test_a_good_line_is_one_record_keyed_by_its_coin_with_the_three_headers():
    collector = Collector()
    line = envelope([EVENT_OF[BOOK]("LIT")])
    tally = write_all(writer(produce=collector), line + b"\n")
    [record] = records(collector)
    assert record == Record(
        "data",
        partition_for(b"LIT", 6),
        b"LIT",
        line,
        [("line_id", b"node_raw_book_diffs_streaming|1030140001|0"), ("source", SOURCE.encode()), ("offset", b"0")],
    )
    assert (tally.lines, tally.dlq, tally.produced, tally.last_line) == (1, 0, 1, line)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_the_key_is_where_each_table_keeps_the_coin(spec):
    collector = Collector()
    write_all(writer(spec, collector), envelope([EVENT_OF[spec]("SOL")]) + b"\n")
    assert [r.key for r in records(collector)] == [b"SOL"]


def test_seq_in_block_counts_the_events_of_earlier_lines_of_the_block_and_restarts_on_a_new_block():
    collector = Collector()
    lines = [envelope([EVENT_OF[BOOK]()] * n, block_number=b) for b, n in [(7, 2), (7, 1), (8, 1), (8, 4), (9, 1)]]
    write_all(writer(produce=collector), b"\n".join(lines) + b"\n")
    ids = [by_offset(collector)[o].header("line_id") for o in sorted(by_offset(collector))]
    assert [i.rsplit(b"|", 2)[1:] for i in ids] == [[b"7", b"0"], [b"7", b"2"], [b"8", b"0"], [b"8", b"1"], [b"9", b"0"]]


def test_a_block_continued_from_the_previous_file_continues_its_seq():
    w = writer(seq_state=(7, 5, 0))
    collector = w.produce
    write_all(w, envelope([EVENT_OF[BOOK]()], block_number=7) + b"\n")
    assert records(collector)[0].header("line_id") == b"node_raw_book_diffs_streaming|7|5"
    assert w.seq_state == (7, 6, 0)


# --- block regressions and late lines -----------------------------------------------------------


def ids_of(collector: Collector) -> list[bytes]:
    return [
        by_offset(collector)[o].header("line_id") for o in sorted(by_offset(collector)) if by_offset(collector)[o].topic == "data"
    ]


def test_a_lower_block_starts_a_regression_epoch_that_every_later_id_carries():
    w = writer()
    blocks = [7, 8, 5, 5, 9, 3]
    tally = write_all(w, b"".join(envelope([EVENT_OF[BOOK]()], block_number=b) + b"\n" for b in blocks))
    assert [i.split(b"|", 2)[2] for i in ids_of(w.produce)] == [b"0", b"0", b"0|r1", b"1|r1", b"0|r1", b"0|r2"]
    line = len(envelope([EVENT_OF[BOOK]()], block_number=7)) + 1
    assert tally.regressions == [Regression(2 * line, 8, 5, 1), Regression(5 * line, 9, 3, 2)]
    assert w.seq_state == (3, 1, 2)


def test_the_same_block_again_is_not_a_regression():
    w = writer(seq_state=(7, 3, 0))
    tally = write_all(w, envelope([EVENT_OF[BOOK]()], block_number=7) + b"\n")
    assert (ids_of(w.produce), tally.regressions, w.seq_state) == ([b"node_raw_book_diffs_streaming|7|3"], [], (7, 4, 0))


def test_a_regression_against_the_previous_file_counts_from_the_carried_state():
    w = writer(seq_state=(9, 2, 1))
    tally = write_all(w, envelope([EVENT_OF[BOOK]()], block_number=8) + b"\n")
    assert ids_of(w.produce) == [b"node_raw_book_diffs_streaming|8|0|r2"]
    assert tally.regressions == [Regression(0, 9, 8, 2)]


def test_a_late_tag_ends_every_id_after_the_epoch():
    w = writer(seq_state=(7, 1, 0), late_tag=b"|late-20260610-13")
    write_all(w, b"".join(envelope([EVENT_OF[BOOK]()], block_number=b) + b"\n" for b in (7, 6)))
    assert ids_of(w.produce) == [
        b"node_raw_book_diffs_streaming|7|1|late-20260610-13",
        b"node_raw_book_diffs_streaming|6|0|r1|late-20260610-13",
    ]


def test_a_seq_beyond_the_cached_texts_carries_the_suffix_too():
    w = writer(seq_state=(7, 5000, 1), late_tag=b"|late-x")
    write_all(w, envelope([EVENT_OF[BOOK]()], block_number=7) + b"\n")
    assert ids_of(w.produce) == [b"node_raw_book_diffs_streaming|7|5000|r1|late-x"]


_BLOCKS = st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_BLOCKS, st.data())
def test_ids_never_repeat_whatever_the_blocks_do_and_wherever_a_restart_falls(blocks, data):
    lines = [envelope([EVENT_OF[BOOK]()] * n, block_number=b) + b"\n" for b, n in blocks]
    cut = data.draw(st.integers(0, len(lines)))
    first = writer()
    write_all(first, b"".join(lines[:cut]))
    second = writer(offset=first.offset, seq_state=first.seq_state)
    write_all(second, b"".join(lines[cut:]))
    ids = ids_of(first.produce) + ids_of(second.produce)
    assert len(ids) == len(set(ids)) == len(lines)
    assert second.epoch == sum(1 for (a, _), (b, _) in itertools.pairwise(blocks) if b < a)


def test_dead_letters_do_not_take_a_seq():
    collector = Collector()
    lines = [envelope([EVENT_OF[BOOK]()], block_number=7), b"garbage", envelope([EVENT_OF[BOOK]()], block_number=7)]
    write_all(writer(produce=collector), b"\n".join(lines) + b"\n")
    assert [r.header("line_id") for r in records(collector) if r.topic == "data"][-1].endswith(b"|7|1")


def test_the_block_range_is_the_first_and_last_good_line():
    w = writer()
    lines = [b"garbage", envelope([EVENT_OF[BOOK]()], block_number=7), envelope([EVENT_OF[BOOK]()], block_number=9), b"x"]
    write_all(w, b"\n".join(lines) + b"\n")
    assert (w.first_block, w.last_block, w.offset) == (7, 9, sum(len(line) + 1 for line in lines))


# --- dead letters ----------------------------------------------------------------------------


def test_a_bad_line_is_a_dead_letter_with_its_reason_and_detail_and_its_bytes():
    collector = Collector()
    tally = write_all(writer(produce=collector), b'{"block_number": "x", "events": []}\n')
    [record] = records(collector)
    assert (record.topic, record.partition, record.key) == (
        "dlq",
        partition_for(b"node_raw_book_diffs_streaming", 3),
        BOOK.dir_name.encode(),
    )
    assert record.value == b'{"block_number": "x", "events": []}'
    assert (record.header("reason"), record.header("offset"), record.header("source")) == (b"no_block", b"0", SOURCE.encode())
    assert record.header("detail") == b"block_number is a string"
    assert (tally.lines, tally.dlq, tally.produced) == (0, 1, 1)


def test_an_oversize_line_is_a_dead_letter_that_references_it():
    collector = Collector()
    w = RecordWriter(BOOK, TOPICS, Routes(6), SOURCE, collector)
    long_line = b"x" * 50
    items = LineSplitter(0, 10).feed(b"ok\n" + long_line + b"\n")
    w.write(items, Collector().acks(6), Tally())
    oversize = by_offset(collector)[3]
    assert oversize.header("reason") == b"oversize"
    assert orjson.loads(oversize.value) == {
        "source": SOURCE,
        "offset": 3,
        "length": 50,
        "sha256": hashlib.sha256(long_line).hexdigest(),
    }
    assert w.offset == 3 + 51


def test_the_unterminated_tail_is_a_dead_letter_and_ends_the_file():
    collector = Collector()
    w = writer(produce=collector, offset=10)
    tally = Tally()
    w.write_unterminated(Line(10, b'{"partial'), Collector().acks(6), tally)
    [record] = records(collector)
    assert (record.value, record.header("reason"), record.header("offset")) == (b'{"partial', b"unterminated", b"10")
    assert (w.offset, tally.produced, tally.dlq) == (19, 1, 1)
    w.write_unterminated(OversizeLine(19, 100, "ab" * 32), Collector().acks(6), Tally())
    assert orjson.loads(records(collector)[-1].value)["length"] == 100 and w.offset == 119


def test_a_rejection_references_the_refused_record_and_names_the_error():
    w = writer()
    line = envelope([EVENT_OF[BOOK]()])
    refused = Record("data", 1, b"LIT", line, [("line_id", b"x"), ("source", SOURCE.encode()), ("offset", b"4242")])
    rejection = w.rejection(refused, "MSG_SIZE_TOO_LARGE", "Broker: Message size too large")
    assert (rejection.topic, rejection.header("reason"), rejection.header("error")) == ("dlq", b"rejected", b"MSG_SIZE_TOO_LARGE")
    assert rejection.value == reference(SOURCE, 4242, len(line), hashlib.sha256(line).hexdigest())
    assert orjson.loads(rejection.value)["offset"] == 4242


# --- the same records under any chunking, back-pressure, restart --------------------------------


@settings(max_examples=300, deadline=None)
@given(_LINES, st.data())
def test_any_chunking_gives_the_model_records(lines, data):
    stream = b"\n".join(lines) + b"\n" if lines else b""
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    collector = Collector()
    w = writer(produce=collector)
    write_all(w, stream, cuts)
    expected, state = model(BOOK, stream)
    assert as_model(collector) == expected
    assert w.seq_state == state


@settings(max_examples=200, deadline=None)
@given(_LINES, st.data())
def test_a_restart_from_the_writer_state_after_any_line_reproduces_the_same_records(lines, data):
    stream = b"\n".join(lines) + b"\n" if lines else b""
    cut = data.draw(st.integers(0, len(lines)))
    head = b"".join(line + b"\n" for line in lines[:cut])
    first = writer()
    write_all(first, head)
    second = writer(offset=first.offset, seq_state=first.seq_state, first_block=first.first_block, last_block=first.last_block)
    write_all(second, stream[len(head) :])
    whole = Collector()
    write_all(writer(produce=whole), stream)
    restarted = {**by_offset(first.produce), **by_offset(second.produce)}
    assert restarted == by_offset(whole)


class FlakyProducer(Collector):
    """Refuses some calls: ``BufferError`` (queue full) or a client error, chosen by hypothesis."""

    def __init__(self, refusals):
        super().__init__()
        self.refusals = list(refusals)

    def __call__(self, *args):
        if self.refusals and self.refusals.pop(0):
            raise BufferError("Local: Queue full") if len(self.refusals) % 2 else KeyError("unknown partition")
        super().__call__(*args)


@settings(max_examples=300, deadline=None)
@given(_LINES, st.lists(st.booleans(), max_size=60))
def test_refusals_stop_the_write_and_resuming_gives_the_same_records(lines, refusals):
    stream = b"\n".join(lines) + b"\n" if lines else b""
    flaky = FlakyProducer(refusals)
    w = writer(produce=flaky)
    items = LineSplitter(0, 1 << 20).feed(stream)
    tally, index, stops = Tally(), 0, 0
    while True:
        index = w.write(items, Collector().acks(6), tally, index)
        if index == len(items):
            break
        stops += 1
        assert w.refusal is None or isinstance(w.refusal, KeyError)
    plain = Collector()
    plain_tally = write_all(writer(produce=plain), stream)
    assert flaky.groups == plain.groups
    assert (tally.produced, tally.lines, tally.dlq) == (plain_tally.produced, plain_tally.lines, plain_tally.dlq)
    assert tally.regressions == plain_tally.regressions
    assert stops == sum(refusals[: len(refusals) - len(flaky.refusals)])


@settings(max_examples=200, deadline=None)
@given(spec=st.sampled_from(TABLES), coins=st.lists(st.text(min_size=0, max_size=4), min_size=1, max_size=3))
def test_the_fast_path_and_the_full_inspection_agree_on_any_coins(spec, coins):
    line = envelope([EVENT_OF[spec](coin) for coin in coins])
    collector = Collector()
    write_all(writer(spec, collector), line + b"\n")
    [record] = records(collector)
    info = inspect_line(spec, line)
    if isinstance(info, LineInfo):
        assert (record.topic, record.key) == ("data", info.coin.encode())
    else:
        assert (record.topic, record.header("reason")) == ("dlq", info.reason.encode())
