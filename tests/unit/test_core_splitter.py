import hashlib
import itertools
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.splitter import Line, LineSplitter, OversizeLine, numbered


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def feed(splitter: LineSplitter, chunk: bytes) -> list:
    """One ``feed`` with the offsets attached (the hot path numbers lines itself)."""
    return numbered(splitter.offset, splitter.feed(chunk))


def feed_all(splitter: LineSplitter, chunks) -> list:
    out = []
    for chunk in chunks:
        out.extend(feed(splitter, chunk))
    return out


def model(data: bytes, start: int, limit: int):
    """What any chunking must produce: complete lines of ``data``, the held tail, the resume offset."""
    *complete, tail = data.split(b"\n")
    lines, offset = [], start
    for part in complete:
        lines.append(OversizeLine(offset, len(part), sha(part)) if len(part) > limit else Line(offset, part))
        offset += len(part) + 1
    return lines, tail, offset


def chunked(data: bytes, cuts) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# --- complete lines and offsets -----------------------------------------------------------------


def test_complete_lines_come_out_with_the_offset_of_their_first_byte():
    splitter = LineSplitter()
    assert feed(splitter, b'{"a":1}\n{"b":22}\n') == [Line(0, b'{"a":1}'), Line(8, b'{"b":22}')]
    assert splitter.offset == 17
    assert splitter.held_bytes == 0


def test_offsets_start_at_the_resume_offset_given():
    splitter = LineSplitter(offset=1000)
    assert feed(splitter, b"ab\ncd\n") == [Line(1000, b"ab"), Line(1003, b"cd")]
    assert splitter.offset == 1006


def test_empty_lines_are_lines_with_empty_data():
    assert feed(LineSplitter(), b"\n\nx\n\n") == [Line(0, b""), Line(1, b""), Line(2, b"x"), Line(4, b"")]


def test_crlf_line_keeps_its_carriage_return_as_data():
    assert feed(LineSplitter(), b"ab\r\n\r\n") == [Line(0, b"ab\r"), Line(4, b"\r")]


def test_empty_chunk_changes_nothing():
    splitter = LineSplitter(offset=5)
    feed(splitter, b"part")
    assert feed(splitter, b"") == []
    assert (splitter.offset, splitter.held_bytes) == (5, 4)


def test_line_data_is_bytes_even_when_fed_a_bytearray_or_memoryview():
    splitter = LineSplitter()
    lines = feed(splitter, bytearray(b"ab\nc")) + feed(splitter, memoryview(b"d\n"))
    assert lines == [Line(0, b"ab"), Line(3, b"cd")]
    assert all(type(line.data) is bytes for line in lines)


@pytest.mark.parametrize(("offset", "limit"), [(-1, 10), (0, -1)])
def test_negative_offset_or_limit_is_rejected(offset, limit):
    with pytest.raises(ValueError):
        LineSplitter(offset=offset, max_line_bytes=limit)


# --- the held partial line --------------------------------------------------------------------


def test_partial_tail_is_held_and_the_offset_stays_at_its_start():
    splitter = LineSplitter()
    assert feed(splitter, b"ab\ncd") == [Line(0, b"ab")]
    assert (splitter.offset, splitter.held_bytes) == (3, 2)


def test_held_tail_completes_when_its_newline_arrives():
    splitter = LineSplitter()
    feed(splitter, b"ab\ncd")
    assert feed(splitter, b"ef") == []
    assert splitter.held_bytes == 4
    assert feed(splitter, b"g\nh") == [Line(3, b"cdefg")]
    assert (splitter.offset, splitter.held_bytes) == (9, 1)


def test_chunk_starting_with_the_newline_completes_the_held_line():
    splitter = LineSplitter()
    feed(splitter, b"abc")
    assert feed(splitter, b"\nd\n") == [Line(0, b"abc"), Line(4, b"d")]


def test_line_split_inside_a_multibyte_character_is_reassembled():
    data = '{"coin":"€💰"}\n'.encode()
    cut = data.index("€".encode()) + 1
    splitter = LineSplitter()
    assert feed(splitter, data[:cut]) == []
    assert feed(splitter, data[cut:]) == [Line(0, data[:-1])]


# --- any chunking gives the same result ---------------------------------------------------------

_PIECES = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b"\n", b"\r\n", b"\n\n", "€".encode(), "💰".encode(), b'{"coin":"BTC"}', b"\x00", b"\xff"]),
)
_STREAMS = st.lists(_PIECES, max_size=40).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(st.data(), _STREAMS, st.integers(0, 40), st.integers(0, 10**9))
def test_any_chunking_yields_the_model_lines_offsets_and_held_tail(data, stream, limit, start):
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    splitter = LineSplitter(offset=start, max_line_bytes=limit)
    lines, tail, offset = model(stream, start, limit)
    assert feed_all(splitter, chunked(stream, cuts)) == lines
    assert splitter.offset == offset
    assert splitter.held_bytes == len(tail)


@settings(max_examples=200, deadline=None)
@given(st.data(), _STREAMS, st.integers(0, 40))
def test_any_chunking_flushes_the_same_unterminated_tail(data, stream, limit):
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    splitter = LineSplitter(max_line_bytes=limit)
    feed_all(splitter, chunked(stream, cuts))
    tail = stream.rsplit(b"\n", 1)[-1]
    expected = None
    if tail:
        start = len(stream) - len(tail)
        expected = OversizeLine(start, len(tail), sha(tail)) if len(tail) > limit else Line(start, tail)
    assert splitter.flush_partial() == expected
    assert (splitter.offset, splitter.held_bytes) == (len(stream), 0)


@settings(max_examples=200, deadline=None)
@given(st.data(), _STREAMS, st.integers(0, 40))
def test_held_bytes_is_the_length_of_the_unterminated_rest_after_every_feed(data, stream, limit):
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    splitter = LineSplitter(max_line_bytes=limit)
    fed = b""
    for chunk in chunked(stream, cuts):
        feed(splitter, chunk)
        fed += chunk
        assert splitter.held_bytes == len(fed) - splitter.offset
        assert b"\n" not in fed[splitter.offset :]


# --- oversize lines ----------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [0, 1, 5, 9, 10, 11])
def test_line_of_exactly_the_limit_is_a_normal_line_under_any_split(cut):
    data = b"0123456789\n"
    splitter = LineSplitter(max_line_bytes=10)
    assert feed_all(splitter, [data[:cut], data[cut:]]) == [Line(0, b"0123456789")]


@pytest.mark.parametrize("cut", [0, 1, 5, 10, 11, 12])
def test_line_one_byte_over_the_limit_is_oversize_under_any_split(cut):
    data = b"0123456789A\nok\n"
    splitter = LineSplitter(max_line_bytes=10)
    assert feed_all(splitter, [data[:cut], data[cut:]]) == [
        OversizeLine(0, 11, sha(b"0123456789A")),
        Line(12, b"ok"),
    ]
    assert splitter.offset == 15


def test_oversize_line_spanning_chunks_is_reported_when_its_newline_arrives():
    splitter = LineSplitter(offset=100, max_line_bytes=4)
    assert feed(splitter, b"ab\n" + b"x" * 3) == [Line(100, b"ab")]
    assert feed(splitter, b"x" * 5) == []
    assert splitter.held_bytes == 8
    assert feed(splitter, b"x" * 2) == []
    assert splitter.held_bytes == 10
    assert feed(splitter, b"\nnext\n") == [OversizeLine(103, 10, sha(b"x" * 10)), Line(114, b"next")]
    assert (splitter.offset, splitter.held_bytes) == (119, 0)


def test_zero_limit_makes_every_non_empty_line_oversize():
    assert feed(LineSplitter(max_line_bytes=0), b"\na\n") == [Line(0, b""), OversizeLine(1, 1, sha(b"a"))]


def test_held_memory_stays_bounded_while_an_oversize_line_streams_in():
    limit, chunk = 1 << 20, b"y" * (256 << 10)
    splitter = LineSplitter(max_line_bytes=limit)
    tracemalloc.start()
    try:
        for _ in range(128):  # a 32 MiB line
            feed(splitter, chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert splitter.held_bytes == 128 * len(chunk)
    assert peak < 4 * limit
    assert feed(splitter, b"\n") == [OversizeLine(0, 128 * len(chunk), sha(chunk * 128))]


# --- flush_partial ----------------------------------------------------------------------------


def test_flush_emits_the_unterminated_tail_and_advances_past_it():
    splitter = LineSplitter(offset=10)
    feed(splitter, b"ab\ncd")
    assert splitter.flush_partial() == Line(13, b"cd")
    assert (splitter.offset, splitter.held_bytes) == (15, 0)
    assert splitter.flush_partial() is None
    assert splitter.offset == 15


def test_flush_with_nothing_held_returns_none():
    splitter = LineSplitter()
    feed(splitter, b"ab\n")
    assert splitter.flush_partial() is None
    assert splitter.offset == 3


def test_flush_of_an_oversize_tail_reports_its_length_and_digest():
    splitter = LineSplitter(max_line_bytes=3)
    feed(splitter, b"a\nbc")
    feed(splitter, b"defg")
    assert splitter.flush_partial() == OversizeLine(2, 6, sha(b"bcdefg"))
    assert (splitter.offset, splitter.held_bytes) == (8, 0)


def test_flush_keeps_a_lone_carriage_return_as_data():
    splitter = LineSplitter()
    feed(splitter, b"ab\r")
    assert splitter.flush_partial() == Line(0, b"ab\r")
