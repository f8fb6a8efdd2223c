import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.lineinfo import REASONS, LineInfo, Rejection, _inspect_full, inspect_line
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES

BOOK = TABLE_BY_DIR["node_raw_book_diffs_streaming"]
ORDERS = TABLE_BY_DIR["node_order_statuses_streaming"]
FILLS = TABLE_BY_DIR["node_fills_streaming"]

BLOCK_TIME = "2026-06-10T12:56:15.035481067"


def book_event(coin="LIT"):
    return {
        "user": "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        "oid": 464679247366,
        "coin": coin,
        "side": "B",
        "px": "1.5047",
        "raw_book_diff": {"update": {"origSz": "7.0", "newSz": "0.0"}},
    }


def order_event(coin="BTC"):
    return {
        "time": "2026-06-10T12:56:15.035481067",
        "user": "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        "status": "open",
        "hash": None,
        "builder": None,
        "order": {
            "coin": coin,
            "side": "A",
            "limitPx": "105000.0",
            "sz": "0.01",
            "oid": 123,
            "timestamp": 1749560175035,
            "triggerCondition": "N/A",
            "isTrigger": False,
            "triggerPx": "0.0",
            "children": [],
            "isPositionTpsl": False,
            "reduceOnly": False,
            "orderType": "Limit",
            "origSz": "0.01",
            "tif": "Alo",
            "cloid": None,
        },
    }


def fill_event(coin="ETH"):
    return [
        "0x7a146ee9d212816c31a0a93531e23d4359aade10",
        {
            "coin": coin,
            "px": "2500.1",
            "sz": "0.5",
            "side": "B",
            "time": 1749560175035,
            "startPosition": "0.0",
            "dir": "Open Long",
            "closedPnl": "0.0",
            "hash": "0x" + "ab" * 32,
            "oid": 1,
            "crossed": True,
            "fee": "0.1",
            "tid": 123456789012345,
            "feeToken": "USDC",
        },
    ]


EVENT_OF = {BOOK: book_event, ORDERS: order_event, FILLS: fill_event}


def envelope(events, block_number=1030140001, **extra) -> bytes:
    obj = {
        "local_time": "2026-06-10T13:10:56.723695057",
        "block_time": BLOCK_TIME,
        "block_number": block_number,
        "events": events,
        **extra,
    }
    return orjson.dumps(obj)


def reason(spec, line: bytes) -> str:
    result = inspect_line(spec, line)
    assert isinstance(result, Rejection), result
    assert result.reason in REASONS
    assert result.detail
    return result.reason


# --- good lines ----------------------------------------------------------------------------------


def test_book_diff_line_from_the_node_yields_its_coin_block_and_block_time():
    line = (
        b'{"local_time":"2026-06-10T13:10:56.723695057","block_time":"2026-06-10T12:56:15.035481067",'
        b'"block_number":1030140001,"events":[{"user":"0x7a14","oid":464679247366,"coin":"LIT","side":"B",'
        b'"px":"1.5047","raw_book_diff":{"update":{"origSz":"7.0","newSz":"0.0"}}}]}'
    )
    assert inspect_line(BOOK, line) == LineInfo("LIT", 1030140001, 1, BLOCK_TIME)


def test_book_diff_with_a_bare_remove_string_is_a_good_line():
    event = dict(book_event("HYPE"), raw_book_diff="remove")
    assert inspect_line(BOOK, envelope([event])) == LineInfo("HYPE", 1030140001, 1, BLOCK_TIME)


def test_order_status_coin_comes_from_the_order_object():
    assert inspect_line(ORDERS, envelope([order_event("BTC")])) == LineInfo("BTC", 1030140001, 1, BLOCK_TIME)


def test_fill_coin_comes_from_the_second_element_of_the_tuple():
    assert inspect_line(FILLS, envelope([fill_event("ETH")])) == LineInfo("ETH", 1030140001, 1, BLOCK_TIME)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_namespaced_coin_is_kept_whole(spec):
    info = inspect_line(spec, envelope([EVENT_OF[spec]("xyz:TSLA")]))
    assert isinstance(info, LineInfo) and info.coin == "xyz:TSLA"


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_multi_event_line_counts_every_event_and_keys_on_the_first(spec):
    make = EVENT_OF[spec]
    info = inspect_line(spec, envelope([make("SOL"), make("BTC"), make("cash:USD")]))
    assert info == LineInfo("SOL", 1030140001, 3, BLOCK_TIME)


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_only_the_first_event_needs_a_coin(spec):
    info = inspect_line(spec, envelope([EVENT_OF[spec]("SOL"), {"junk": True}, None]))
    assert info == LineInfo("SOL", 1030140001, 3, BLOCK_TIME)


@pytest.mark.parametrize("block_time", [None, 1749560175035, ["x"], {"t": "x"}])
def test_block_time_that_is_not_a_string_is_none(block_time):
    info = inspect_line(BOOK, envelope([book_event()], block_time=block_time))
    assert isinstance(info, LineInfo) and info.block_time is None


def test_missing_block_time_is_none():
    line = orjson.dumps({"block_number": 7, "events": [book_event()]})
    assert inspect_line(BOOK, line) == LineInfo("LIT", 7, 1, None)


def test_surrounding_whitespace_and_crlf_remainder_do_not_reject_a_line():
    line = b"  " + envelope([book_event()]) + b"\r"
    assert inspect_line(BOOK, line) == LineInfo("LIT", 1030140001, 1, BLOCK_TIME)


def test_zero_and_negative_block_numbers_are_integers():
    assert inspect_line(BOOK, envelope([book_event()], block_number=0)).block_number == 0
    assert inspect_line(BOOK, envelope([book_event()], block_number=-5)).block_number == -5


def test_coin_with_escaped_unicode_is_decoded():
    line = b'{"block_number":1,"events":[{"coin":"\\u20ac\\ud83d\\udcb0"}]}'
    assert inspect_line(BOOK, line).coin == "€💰"


_COINS = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(TABLES),
    st.lists(_COINS, min_size=1, max_size=5),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.none(), st.text(max_size=30)),
)
def test_well_formed_lines_yield_first_coin_block_event_count_and_block_time(spec, coins, block, block_time):
    line = envelope([EVENT_OF[spec](c) for c in coins], block_number=block, block_time=block_time)
    assert inspect_line(spec, line) == LineInfo(coins[0], block, len(coins), block_time)


# --- rejections ----------------------------------------------------------------------------------


@pytest.mark.parametrize("line", [b"", b" ", b"\t", b"\r", b"\n", b"   \t\r\x0b\x0c"])
def test_empty_or_ascii_whitespace_line_is_blank(line):
    assert reason(BOOK, line) == "blank"


@pytest.mark.parametrize(
    "line",
    [
        b"\xc2\xa0",  # a no-break space is not ASCII whitespace
        b"{",
        b"not json",
        b'{"block_number":1,"events":[{"coin":"A"}]',
        b'{"block_number":1,"events":[{"coin":"\xff"}]}',
        b'{"block_number":1,"events":[{"coin":"A\x00"}]}',
        b'{"block_number":1,"events":[{"coin":"A"}]}\x00',
        b'{"block_number":1,"events":[{"coin":"A"}]} trailing',
        b'{"block_number":1,"events":[{"coin":"A"}]}{}',
        b'\xef\xbb\xbf{"block_number":1,"events":[{"coin":"A"}]}',
        b'{"block_number":NaN,"events":[{"coin":"A"}]}',
        b'{"block_number":1,"events":[{"coin":"\\ud800"}]}',
        b"{'block_number':1}",
        b"[" * 5000 + b"]" * 5000,
        b'{"block_number":1,"events":[{"coin":"A","x":' + b"[" * 2000 + b"]" * 2000 + b"}]}",
        b"[]",
        b'[{"block_number":1,"events":[{"coin":"A"}]}]',
        b'"string"',
        b"123",
        b"null",
        b"true",
    ],
)
def test_anything_but_one_json_object_is_malformed(line):
    assert reason(BOOK, line) == "malformed"


@pytest.mark.parametrize("block_number", ["1030140001", 1030140001.0, 1.5, True, False, None, [1], {"n": 1}], ids=repr)
def test_block_number_that_is_not_an_integer_is_no_block(block_number):
    assert reason(BOOK, envelope([book_event()], block_number=block_number)) == "no_block"


@pytest.mark.parametrize("literal", [b"18446744073709551616", b"-9223372036854775809", b"1e3", b"1.0", b"1e400", b"-1e400"])
def test_block_number_literal_that_does_not_parse_to_a_64_bit_integer_is_no_block(literal):
    line = b'{"block_number":' + literal + b',"events":[{"coin":"BTC"}]}'
    assert reason(BOOK, line) == "no_block"


@pytest.mark.parametrize("number", [b"1e400", b"-1e49560175035", b"9" * 400 + b".5", b"9" * 400])
def test_a_number_beyond_a_double_elsewhere_in_the_line_is_still_json(number):
    # orjson refuses such numbers ("number is infinity when parsed as double"); they are JSON, and
    # the fast path, which skips the values it does not read, takes the line: so does the full one.
    line = b'{"block_number":7,"x":' + number + b',"events":[{"coin":"BTC","y":[' + number + b"]}]}"

    assert _inspect_full(BOOK, line) == LineInfo("BTC", 7, 1, None) == inspect_line(BOOK, line)


def test_missing_block_number_is_no_block():
    assert reason(BOOK, orjson.dumps({"block_time": BLOCK_TIME, "events": [book_event()]})) == "no_block"


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
@pytest.mark.parametrize("events", [None, [], {}, "events", 3, {"coin": "BTC"}], ids=repr)
def test_events_that_are_not_a_non_empty_array_are_no_coin(spec, events):
    assert reason(spec, envelope(events)) == "no_coin"


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
def test_missing_events_are_no_coin(spec):
    assert reason(spec, orjson.dumps({"block_number": 1})) == "no_coin"


_BAD_COINS = [None, "", 5, 1.5, True, [], ["BTC"], {"coin": "BTC"}]


@pytest.mark.parametrize("coin", _BAD_COINS, ids=repr)
def test_book_diff_without_a_non_empty_string_coin_is_no_coin(coin):
    assert reason(BOOK, envelope([dict(book_event(), coin=coin)])) == "no_coin"


@pytest.mark.parametrize(
    "event",
    [None, "BTC", 7, [], ["x", {"coin": "BTC"}], {"user": "0x1"}],
    ids=repr,
)
def test_book_diff_whose_first_event_is_not_an_object_with_a_coin_is_no_coin(event):
    assert reason(BOOK, envelope([event, book_event()])) == "no_coin"


@pytest.mark.parametrize("coin", _BAD_COINS, ids=repr)
def test_order_status_without_a_non_empty_string_order_coin_is_no_coin(coin):
    event = order_event()
    event["order"]["coin"] = coin
    assert reason(ORDERS, envelope([event])) == "no_coin"


@pytest.mark.parametrize("order", [None, "BTC", 3, [], [{"coin": "BTC"}], {}], ids=repr)
def test_order_status_whose_order_is_not_an_object_with_a_coin_is_no_coin(order):
    assert reason(ORDERS, envelope([dict(order_event(), order=order)])) == "no_coin"


def test_order_status_with_the_coin_only_at_the_top_of_the_event_is_no_coin():
    event = order_event()
    del event["order"]
    event["coin"] = "BTC"
    assert reason(ORDERS, envelope([event])) == "no_coin"


@pytest.mark.parametrize("coin", _BAD_COINS, ids=repr)
def test_fill_without_a_non_empty_string_coin_is_no_coin(coin):
    user, fill = fill_event()
    assert reason(FILLS, envelope([[user, dict(fill, coin=coin)]])) == "no_coin"


@pytest.mark.parametrize(
    "event",
    [
        None,
        {"coin": "ETH"},
        [],
        ["0xuser"],
        [{"coin": "ETH"}],
        ["0xuser", None],
        ["0xuser", "ETH"],
        ["0xuser", ["ETH"]],
        ["0xuser", {"px": "1"}],
    ],
    ids=repr,
)
def test_fill_whose_first_event_is_not_a_user_and_fill_pair_is_no_coin(event):
    assert reason(FILLS, envelope([event, fill_event()])) == "no_coin"


def test_fill_tuple_with_extra_elements_still_yields_its_coin():
    assert inspect_line(FILLS, envelope([fill_event("ETH") + ["extra"]])).coin == "ETH"


@pytest.mark.parametrize(
    ("spec", "other"),
    [(BOOK, ORDERS), (BOOK, FILLS), (ORDERS, BOOK), (ORDERS, FILLS), (FILLS, BOOK), (FILLS, ORDERS)],
    ids=lambda s: s.dir_name,
)
def test_a_line_of_another_table_has_no_coin_where_this_table_keeps_it(spec, other):
    assert reason(spec, envelope([EVENT_OF[other]("BTC")])) == "no_coin"


def test_the_first_failing_check_decides_the_reason():
    assert reason(BOOK, orjson.dumps({"block_number": "x", "events": []})) == "no_block"


def test_inspect_line_gives_only_the_line_level_reasons():
    assert REASONS[:4] == ("blank", "malformed", "no_block", "no_coin")
    assert set(REASONS[4:]) == {"oversize", "unterminated", "rejected"}


# --- never raises --------------------------------------------------------------------------------

_FUZZ = settings(max_examples=300, deadline=None)


def check_never_raises(spec, line: bytes) -> None:
    result = inspect_line(spec, line)
    if isinstance(result, Rejection):
        assert result.reason in REASONS[:4]
        assert isinstance(result.detail, str) and result.detail
    else:
        assert isinstance(result, LineInfo)
        assert type(result.coin) is str and result.coin
        assert type(result.block_number) is int
        assert result.n_events >= 1


@_FUZZ
@given(st.sampled_from(TABLES), st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(spec, line):
    check_never_raises(spec, line)


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["coin", "order", "x", "events"]), inner, max_size=4)
    ),
    max_leaves=20,
)
_COIN_HOLDER = st.fixed_dictionaries({"coin": st.one_of(st.text(max_size=8), _JSON)})
# Events built along each table's coin path, with any JSON at every step of it.
_EVENTS = st.one_of(
    _JSON,
    st.lists(
        st.one_of(
            _JSON,
            _COIN_HOLDER,
            st.fixed_dictionaries({"order": st.one_of(_JSON, _COIN_HOLDER)}),
            st.tuples(_JSON, st.one_of(_JSON, _COIN_HOLDER)).map(list),
        ),
        max_size=3,
    ),
)
_BLOCK_NUMBERS = st.one_of(st.integers(-(2**63), 2**63 - 1), _JSON)
_ENVELOPES = st.one_of(
    st.fixed_dictionaries({"block_number": _BLOCK_NUMBERS, "events": _EVENTS}, optional={"block_time": _JSON}),
    st.fixed_dictionaries(
        {},
        optional={"block_number": _BLOCK_NUMBERS, "block_time": _JSON, "local_time": _JSON, "events": _EVENTS},
    ),
)


_COIN_PATH_STEPS = ["block_number", "block_time", "events", 0, "coin", "order", 1]


def _replace_at(obj, path, value):
    """A copy of ``obj`` with the value at ``path`` replaced, as far as the path exists."""
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(obj, dict) and isinstance(step, str):
        return {**obj, step: _replace_at(obj.get(step), rest, value)}
    if isinstance(obj, list) and isinstance(step, int) and step < len(obj):
        return [*obj[:step], _replace_at(obj[step], rest, value), *obj[step + 1 :]]
    return obj


@_FUZZ
@given(
    st.sampled_from(TABLES),
    st.sampled_from(TABLES),
    st.lists(st.sampled_from(_COIN_PATH_STEPS), max_size=5),
    _JSON,
)
def test_a_real_line_with_any_value_swapped_in_along_a_coin_path_never_raises(spec, shape, path, value):
    obj = orjson.loads(envelope([EVENT_OF[shape]("BTC")]))
    check_never_raises(spec, orjson.dumps(_replace_at(obj, path, value)))


@_FUZZ
@given(st.sampled_from(TABLES), _ENVELOPES)
def test_json_with_the_right_keys_of_any_type_never_raises(spec, obj):
    check_never_raises(spec, orjson.dumps(obj))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TABLES), _ENVELOPES, st.data())
def test_json_damaged_anywhere_never_raises(spec, obj, data):
    line = bytearray(orjson.dumps(obj))
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(line)))
        line[position:position] = data.draw(st.binary(min_size=1, max_size=3))
    check_never_raises(spec, bytes(line))


@pytest.mark.parametrize("spec", TABLES, ids=lambda s: s.dir_name)
@pytest.mark.parametrize("depth", [1, 100, 1000, 100_000])
def test_deeply_nested_values_never_raise(spec, depth):
    nested = b"[" * depth + b"]" * depth
    check_never_raises(spec, nested)
    check_never_raises(spec, b'{"block_number":1,"events":' + nested + b"}")
    check_never_raises(spec, b'{"block_number":1,"events":[' + nested + b"]}")
