"""What the sidecar needs to know about one line: its coin, block and event count, or why it is rejected.

A line is ``{"local_time", "block_time", "block_number", "events": [...]}``. The coin of the first
event is the Kafka key; where it sits inside an event depends on the table (see ``CoinLocation``).
Rejected lines go to the DLQ with the reason; :func:`inspect_line` never raises on any bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from types import GenericAlias
from typing import Annotated, Any, NamedTuple, final

import msgspec
import orjson

from hyperdata_sidecar.core.tables import CoinLocation, TableSpec

REASONS = ("blank", "malformed", "no_block", "no_coin", "oversize", "unterminated", "rejected")
"""Every DLQ reason. ``inspect_line`` returns the first four; the splitter's results give
``oversize`` and ``unterminated``; ``rejected`` is a record the broker refused for good."""


@final  # never subclassed: the hot path tells results apart with `type(info) is LineInfo`
class LineInfo(NamedTuple):
    """A good line: the coin of its first event, its block, how many events it holds, its block_time."""

    coin: str
    block_number: int
    n_events: int
    block_time: str | None


@dataclass(frozen=True, slots=True)
class Rejection:
    """A line that cannot be published: ``reason`` is one of ``REASONS``; ``detail`` is for humans."""

    reason: str
    detail: str


_MISSING: Any = object()

_JSON_TYPE_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "an integer",
    float: "a float",
    bool: "a boolean",
    type(None): "null",
}

_COIN_PATH_TEXT = {
    CoinLocation.EVENT: 'events[0]["coin"]',
    CoinLocation.ORDER: 'events[0]["order"]["coin"]',
    CoinLocation.FILL_TUPLE: 'events[0][1]["coin"]',
}


def inspect_line(spec: TableSpec, line: bytes) -> LineInfo | Rejection:
    """The line's key facts, or the reason it goes to the DLQ. Never raises.

    Good lines take a fast path (:func:`_inspect_fast`); whatever it does not accept is decided by
    :func:`_inspect_full`, so the result is always the full inspection's.

    - ``blank``: empty or only ASCII whitespace.
    - ``malformed``: not one JSON object (invalid JSON or UTF-8, trailing content, too deep, not an object).
    - ``no_block``: ``block_number`` missing or not an integer (booleans and floats are not).
    - ``no_coin``: ``events`` missing, not an array or empty, or its first event has no non-empty
      string coin where ``spec.coin_location`` says it is.
    """
    fast = _INSPECTORS.get(spec.dir_name)
    if fast is None:
        fast = _INSPECTORS[spec.dir_name] = fast_inspector(spec)
    return fast(line) or _inspect_full(spec, line)


# ---------------------------------------------------------------------------- fast path
# msgspec validates the whole document but builds objects only for the fields declared here (the
# rest is checked and skipped), about 7x faster than a full orjson.loads of a 600-byte line. It
# does not check UTF-8 inside the strings it skips, so non-ASCII lines are decoded first.


_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class _Coin(msgspec.Struct, gc=False):
    coin: _NonEmpty


class _Order(msgspec.Struct, gc=False):
    order: _Coin


class _Fill(msgspec.Struct, array_like=True, gc=False):
    """A fill event ``["0x…", {"coin": …}]``; trailing elements are ignored, as the full inspection does."""

    user: msgspec.Raw
    fill: _Coin


# Per layout: the type every event must decode to (only the coin is kept; every other field is
# validated and skipped) and where its coin is. A line whose later events lack a coin is valid but
# fails this schema: the full inspection takes it.
_EVENT_LAYOUT: dict[CoinLocation, tuple[type, Callable[[Any], str]]] = {
    CoinLocation.EVENT: (_Coin, attrgetter("coin")),
    CoinLocation.ORDER: (_Order, attrgetter("order.coin")),
    CoinLocation.FILL_TUPLE: (_Fill, attrgetter("fill.coin")),
}
MAX_BLOCK = 2**63
"""Block numbers from 0 up to this bound take the fast path; others are left to the full inspection."""
_Block = Annotated[int, msgspec.Meta(ge=0, le=MAX_BLOCK - 1)]


class FastDecoder(NamedTuple):
    """The fast path's pieces for one table layout, for callers that inline them in a hot loop.

    ``decode(line)`` returns an envelope with ``block_number`` and ``events`` (and ``block_time``
    when asked for) or raises for anything it does not accept; ``coin_of(event)`` is the coin of
    one decoded event. A line is a good line on the fast path only if it is ASCII (or valid UTF-8)
    and decodes: at least one event, every event with a non-empty coin where the table keeps it,
    ``0 <= block_number < MAX_BLOCK`` (msgspec checks all of it); :func:`inspect_line` decides
    every other line.
    """

    decode: Callable[[bytes], Any]
    coin_of: Callable[[Any], str]


def fast_decoder(location: CoinLocation, *, block_time: bool = False) -> FastDecoder:
    """The :class:`FastDecoder` of a layout; ``block_time`` adds that field (it costs ~10% more)."""
    event_type, coin_of = _EVENT_LAYOUT[location]
    # list[event_type], built at run time (a type checker cannot take a variable for a type)
    events_type = GenericAlias(list, (event_type,))
    fields: list[Any] = [("block_number", _Block), ("events", Annotated[events_type, msgspec.Meta(min_length=1)])]
    if block_time:
        fields.append(("block_time", str | None, None))
    envelope_type = msgspec.defstruct("Envelope", fields, gc=False)
    return FastDecoder(msgspec.json.Decoder(envelope_type).decode, coin_of)


_INSPECTORS: dict[str, Callable[[bytes], LineInfo | None]] = {}


def _fast_inspector(location: CoinLocation) -> Callable[[bytes], LineInfo | None]:
    """For one table layout: a good line's facts, or None when the full inspection must decide."""
    decode, coin_of = fast_decoder(location, block_time=True)

    def inspect_fast(line: bytes) -> LineInfo | None:
        if not line.isascii():
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return None
        try:
            envelope = decode(line)
        except (msgspec.DecodeError, RecursionError):
            return None
        events = envelope.events
        return LineInfo(coin_of(events[0]), envelope.block_number, len(events), envelope.block_time)

    return inspect_fast


class _BlockTime(msgspec.Struct, gc=False):
    block_time: str | None = None


_decode_block_time = msgspec.json.Decoder(_BlockTime).decode


def block_time_of(line: bytes) -> str | None:
    """The ``block_time`` string of a good line (None if it has none); for the publish-lag figure,
    read from one line per cycle rather than on the hot path."""
    try:
        return _decode_block_time(line).block_time
    except (msgspec.DecodeError, RecursionError):
        return None


def fast_inspector(spec: TableSpec) -> Callable[[bytes], LineInfo | None]:
    """The fast path as a function: a good line's facts, or None when :func:`inspect_line` must
    decide (it always agrees where this one answers)."""
    return _fast_inspector(spec.coin_location)


# ---------------------------------------------------------------------------- full inspection


def _inspect_full(spec: TableSpec, line: bytes) -> LineInfo | Rejection:
    """Parse the whole line with orjson and name exactly what is wrong with it."""
    if not line or line.isspace():
        return Rejection("blank", f"{len(line)} bytes, all whitespace" if line else "empty line")
    try:
        envelope = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        envelope = _beyond_a_double(line, exc)
        if envelope is _MISSING:
            return Rejection("malformed", str(exc))
    if type(envelope) is not dict:
        return Rejection("malformed", f"top-level JSON value is {_type_name(envelope)}, not an object")
    block_number = envelope.get("block_number", _MISSING)
    # type() and not isinstance(): bool is a subclass of int but not a block number.
    if type(block_number) is not int:
        return Rejection("no_block", f"block_number is {_type_name(block_number)}")
    events = envelope.get("events", _MISSING)
    if type(events) is not list or not events:
        return Rejection("no_coin", f"events is {_describe_events(events)}")
    coin = _coin_of(spec.coin_location, events[0])
    if coin is None:
        return Rejection("no_coin", f"no non-empty string at {_COIN_PATH_TEXT[spec.coin_location]}")
    block_time = envelope.get("block_time")
    return LineInfo(
        coin=coin,
        block_number=block_number,
        n_events=len(events),
        block_time=block_time if type(block_time) is str else None,
    )


_ORJSON_INFINITY = "number is infinity when parsed as double"


def _beyond_a_double(line: bytes, error: orjson.JSONDecodeError) -> Any:
    """The line parsed by the standard library when orjson's complaint is only a number beyond a
    double's range (``1e400``): that is JSON all the same, and the fast path, which skips the values
    it does not read, takes such a line. ``_MISSING`` when the line is not JSON for another reason
    (``NaN``/``Infinity`` literals, which the standard library would take, are refused)."""
    if not str(error).startswith(_ORJSON_INFINITY):
        return _MISSING
    try:
        return json.loads(line, parse_constant=_refuse_constant, parse_int=_int_as_orjson)
    except (ValueError, RecursionError):
        return _MISSING


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int_as_orjson(text: str) -> int | float:
    """An integer as orjson reads it: exact within 64 bits (signed or not), a float beyond."""
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(text)


def _coin_of(location: CoinLocation, event: Any) -> str | None:
    if location is CoinLocation.ORDER:
        event = event.get("order") if type(event) is dict else None
    elif location is CoinLocation.FILL_TUPLE:
        event = event[1] if type(event) is list and len(event) >= 2 else None
    coin = event.get("coin") if type(event) is dict else None
    return coin if type(coin) is str and coin else None


def _describe_events(events: Any) -> str:
    return "an empty array" if type(events) is list else _type_name(events)


def _type_name(value: Any) -> str:
    if value is _MISSING:
        return "missing"
    return _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
