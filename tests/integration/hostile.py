"""Hostile lines for the fuzz drill: what a broken or malicious writer could put in an hour file.

Hypothesis draws them (:func:`hostile_line`); :func:`collect_hostile_lines` runs the strategy for a
number of examples and keeps what it drew, because the check itself is one worker run over all of
them, not one run per example. Lines at and around the line limit are added explicitly: drawing
megabytes through Hypothesis is slow and says nothing more.
"""

from __future__ import annotations

import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.tables import TABLES, CoinLocation

NOT_A_NEWLINE = st.binary(max_size=300).map(lambda b: b.replace(b"\n", b""))
COINS = st.one_of(st.sampled_from(["BTC", "xyz:TSLA", "cash:USDT", "@107", "kPEPE"]), st.text(min_size=1, max_size=12))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
BLOCKS = st.one_of(st.integers(min_value=0, max_value=2**63 - 1), st.integers(min_value=-(2**70), max_value=2**70), ANY_JSON)


def _event(location: CoinLocation) -> st.SearchStrategy:
    coin = st.one_of(COINS, ANY_JSON)
    if location is CoinLocation.EVENT:
        shaped = st.fixed_dictionaries({"coin": coin, "side": st.sampled_from(["A", "B"]), "px": st.just("1.5")})
    elif location is CoinLocation.ORDER:
        shaped = st.fixed_dictionaries(
            {"status": st.just("open"), "order": st.one_of(st.fixed_dictionaries({"coin": coin}), ANY_JSON)}
        )
    else:
        shaped = st.tuples(
            st.just("0x" + "ab" * 20), st.one_of(st.fixed_dictionaries({"coin": coin, "px": st.just("2")}), ANY_JSON)
        ).map(list)
    return st.one_of(shaped, ANY_JSON)


def _envelope(location: CoinLocation) -> st.SearchStrategy[bytes]:
    """The right keys, any of them missing or of the wrong type, serialized in varied ways."""
    fields = st.fixed_dictionaries(
        {},
        optional={
            "local_time": st.one_of(st.just("2026-06-10T22:00:00.000000001"), ANY_JSON),
            "block_time": st.one_of(st.just("2026-06-10T22:00:00.1"), ANY_JSON),
            "block_number": BLOCKS,
            "events": st.one_of(st.lists(_event(location), max_size=4), ANY_JSON),
        },
    )
    return st.tuples(fields, st.booleans(), st.sampled_from([None, 1])).map(
        lambda t: json.dumps(t[0], ensure_ascii=t[1], indent=t[2]).replace("\n", " ").encode()
    )


def _damaged(location: CoinLocation) -> st.SearchStrategy[bytes]:
    """A plausible line with bytes overwritten or inserted: NULs, invalid UTF-8, stray quotes."""
    return st.tuples(
        _envelope(location), st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=4), st.booleans()
    ).map(lambda t: _splice(*t))


def _splice(line: bytes, at: int, junk: bytes, overwrite: bool) -> bytes:
    at = min(at, len(line))
    tail = line[at + len(junk) :] if overwrite else line[at:]
    return (line[:at] + junk + tail).replace(b"\n", b"")


# Events nested far deeper than a JSON parser's recursion limit, or just under it.
NESTED = st.integers(min_value=100, max_value=50_000).map(
    lambda depth: b'{"block_number":1030140001,"events":' + b"[" * depth + b"]" * depth + b"}"
)
# Which of two block numbers counts is up to the parser: both readers of the contract must agree.
DUPLICATE_KEYS = st.tuples(BLOCKS, BLOCKS).map(
    lambda t: (
        b'{"block_number":%s,"block_number":%s,"events":[{"coin":"BTC","order":{"coin":"BTC"}}]}'
        % (json.dumps(t[0]).encode(), json.dumps(t[1]).encode())
    )
)


def hostile_line(location: CoinLocation) -> st.SearchStrategy[bytes]:
    """One hostile line for a table whose coin sits at ``location`` (may contain newlines: then it is several)."""
    return st.one_of(
        NOT_A_NEWLINE,
        st.sampled_from([b"", b" ", b"\t\r", b"\x00", b"\xef\xbb\xbf{}", b"\r"]),
        _envelope(location),
        _damaged(location),
        NESTED,
        DUPLICATE_KEYS,
        st.text(alphabet=string.whitespace + "\u00a0\u2028", max_size=5).map(str.encode),
    )


def collect_hostile_lines(examples: int, max_line_bytes: int) -> list[tuple[str, list[bytes]]]:
    """(table dir name, lines) batches: ``examples`` drawn by Hypothesis plus the line-limit cases."""
    found: list[tuple[str, list[bytes]]] = []
    batches = st.sampled_from(TABLES).flatmap(
        lambda spec: st.tuples(st.just(spec.dir_name), st.lists(hostile_line(spec.coin_location), min_size=1, max_size=4))
    )

    @settings(max_examples=examples, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batches)
    def draw(batch: tuple[str, list[bytes]]) -> None:
        found.append(batch)

    draw()
    return found + [(spec.dir_name, _at_the_limit(spec.coin_location, max_line_bytes)) for spec in TABLES]


def _at_the_limit(location: CoinLocation, max_line_bytes: int) -> list[bytes]:
    """A good line of exactly ``max_line_bytes`` bytes, and lines one byte and twice over the limit."""
    event = {
        CoinLocation.EVENT: b'{"coin":"BTC","pad":"%s"}',
        CoinLocation.ORDER: b'{"order":{"coin":"BTC"},"pad":"%s"}',
        CoinLocation.FILL_TUPLE: b'["0xab",{"coin":"BTC","pad":"%s"}]',
    }[location]
    frame = b'{"local_time":"2026-06-10T22:00:00.000000001","block_time":"2026-06-10T22:00:00.1","block_number":1030140001,"events":[%s]}'
    bare = len(frame % (event % b""))
    return [frame % (event % (b"x" * (size - bare))) for size in (max_line_bytes, max_line_bytes + 1, 2 * max_line_bytes)]
