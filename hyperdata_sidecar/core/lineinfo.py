"""What the sidecar needs to know about one line: its coin, block and event count, or why it is rejected.

A line is ``{"local_time", "block_time", "block_number", "events": [...]}``. The coin of the first
event is the Kafka key; where it sits inside an event depends on the table (see ``CoinLocation``).
Rejected lines go to the DLQ with the reason; :func:`inspect_line` never raises on any bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from hyperdata_sidecar.core.tables import CoinLocation, TableSpec

REASONS = ("blank", "malformed", "no_block", "no_coin", "oversize", "unterminated")
"""Every DLQ reason. ``inspect_line`` returns the first four; the splitter's results give the last two."""


@dataclass(frozen=True, slots=True)
class LineInfo:
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

    - ``blank``: empty or only ASCII whitespace.
    - ``malformed``: not one JSON object (invalid JSON or UTF-8, trailing content, too deep, not an object).
    - ``no_block``: ``block_number`` missing or not an integer (booleans and floats are not).
    - ``no_coin``: ``events`` missing, not an array or empty, or its first event has no non-empty
      string coin where ``spec.coin_location`` says it is.
    """
    if not line or line.isspace():
        return Rejection("blank", f"{len(line)} bytes, all whitespace" if line else "empty line")
    try:
        envelope = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
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
