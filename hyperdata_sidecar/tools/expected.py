"""What the sidecar must have published for a watch tree, worked out from the files alone.

This is the verifier's own reading of the contract, written apart from the tailer it checks: it
splits files on newlines, classifies lines, numbers events within blocks and digests files with
its own code. Only the table list and the hour-file naming come from ``hyperdata_sidecar.core``.

Contract, per table, over the hour files in (date, hour) order:

- a complete line (terminated by ``\\n``) is either *good* — published on the table's topic with
  key = coin of ``events[0]``, ``line_id`` = ``<table>|<block_number>|<seq_in_block>`` — or
  *bad* — sent to the DLQ with a reason: ``oversize`` (longer than the line limit; the value is
  a JSON reference {source, offset, length, sha256}), ``blank``, ``malformed``, ``no_block``,
  ``no_coin``;
- ``seq_in_block`` counts the events of earlier good lines of the same block; it restarts at 0
  when the block differs from the previous good line's, and carries across files;
- every file but the newest of its table is finalized: its unterminated tail (if any) goes to
  the DLQ as ``unterminated``, and it gets one seal with its size, sha256, block range of good
  lines, and good / DLQ line counts. The newest file's unterminated tail is not expected anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES, CoinLocation

MAX_LINE_BYTES = 8 * 1024 * 1024
_READ_BYTES = 8 * 1024 * 1024


def value_digest(value: bytes) -> bytes:
    """The digest the verifier compares message values by (full values are not kept in memory)."""
    return hashlib.blake2b(value, digest_size=16).digest()


@dataclass(frozen=True, slots=True)
class ExpectedLine:
    """A good line: where it is and the message it must become."""

    offset: int
    key: bytes
    line_id: bytes
    digest: bytes


@dataclass(frozen=True, slots=True)
class ExpectedDlq:
    """A bad line: where it is, the reasons it may carry, and its value (digest or oversize reference)."""

    offset: int
    reasons: frozenset[str]
    digest: bytes | None  # of the raw line; None when the value is the oversize reference
    ref: dict[str, Any] | None


@dataclass
class ExpectedFile:
    """One hour file and everything the sidecar owes for it."""

    hour_file: HourFile
    finalized: bool
    size: int = 0
    sha256: str = ""
    lines: list[ExpectedLine] = field(default_factory=list)
    dlq: list[ExpectedDlq] = field(default_factory=list)
    first_block: int | None = None
    last_block: int | None = None

    @property
    def relpath(self) -> str:
        return self.hour_file.relpath

    @property
    def table(self) -> str:
        return self.hour_file.table

    @property
    def block_range(self) -> list[int] | None:
        if self.first_block is None or self.last_block is None:
            return None
        return [self.first_block, self.last_block]


def hour_files(watch_dir: Path, table: str) -> list[HourFile]:
    """The hour files of ``table`` under ``watch_dir``, oldest first."""
    hourly = watch_dir / table / "hourly"
    if not hourly.is_dir():
        return []
    found = []
    for path in hourly.glob("*/*"):
        parsed = HourFile.parse(path.relative_to(watch_dir).as_posix())
        if parsed is not None and path.is_file():
            found.append(parsed)
    return sorted(found, key=lambda f: (f.sort_key, f.hour))


def read_tree(watch_dir: Path, *, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[ExpectedFile]:
    """Every hour file of the three tables, table by table, oldest first, with what it owes."""
    for spec in TABLES:
        files = hour_files(watch_dir, spec.dir_name)
        numbering = _BlockNumbering(spec.dir_name)
        for index, hour_file in enumerate(files):
            expected = ExpectedFile(hour_file, finalized=index < len(files) - 1)
            _read_file(watch_dir / hour_file.relpath, expected, numbering, max_line_bytes)
            yield expected


class _BlockNumbering:
    """seq_in_block over one table's stream of good lines (and the table's keys, shared: a few
    hundred coins make millions of keys)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.block: int | None = None
        self.next_seq = 0
        self.keys: dict[str, bytes] = {}

    def key(self, coin: str) -> bytes:
        key = self.keys.get(coin)
        if key is None:
            key = self.keys[coin] = coin.encode()
        return key

    def line_id(self, block: int, n_events: int) -> bytes:
        if block != self.block:
            self.block, self.next_seq = block, 0
        seq = self.next_seq
        self.next_seq += n_events
        return f"{self.table}|{block}|{seq}".encode()


def _read_file(path: Path, expected: ExpectedFile, numbering: _BlockNumbering, max_line_bytes: int) -> None:
    digest = hashlib.sha256()
    carry = b""
    position = 0  # file offset of carry's first byte
    with open(path, "rb") as source:
        while block := source.read(_READ_BYTES):
            digest.update(block)
            data = carry + block
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                _take_line(expected, numbering, position + start, data[start:end], max_line_bytes)
                start = end + 1
            carry = data[start:]
            position += start
    expected.size = position + len(carry)
    expected.sha256 = digest.hexdigest()
    if carry and expected.finalized:
        reasons = frozenset({"unterminated", "oversize"} if len(carry) > max_line_bytes else {"unterminated"})
        expected.dlq.append(_dlq_entry(expected.relpath, position, carry, reasons, max_line_bytes))


def _take_line(
    expected: ExpectedFile, numbering: _BlockNumbering, offset: int, line: bytes, max_line_bytes: int
) -> None:
    verdict = classify(expected.table, line, max_line_bytes)
    if isinstance(verdict, str):
        expected.dlq.append(_dlq_entry(expected.relpath, offset, line, frozenset({verdict}), max_line_bytes))
        return
    coin, block, n_events = verdict
    expected.lines.append(
        ExpectedLine(offset, numbering.key(coin), numbering.line_id(block, n_events), value_digest(line))
    )
    if expected.first_block is None:
        expected.first_block = block
    expected.last_block = block


def _dlq_entry(
    source: str, offset: int, line: bytes, reasons: frozenset[str], max_line_bytes: int
) -> ExpectedDlq:
    if len(line) > max_line_bytes:
        ref = {
            "source": source,
            "offset": offset,
            "length": len(line),
            "sha256": hashlib.sha256(line).hexdigest(),
        }
        return ExpectedDlq(offset, reasons, None, ref)
    return ExpectedDlq(offset, reasons, value_digest(line), None)


def classify(table: str, line: bytes, max_line_bytes: int = MAX_LINE_BYTES) -> tuple[str, int, int] | str:
    """(coin, block_number, number of events) of a good line, or the DLQ reason of a bad one."""
    if len(line) > max_line_bytes:
        return "oversize"
    if not line.strip(b" \t\r\n\x0b\x0c"):
        return "blank"
    try:
        envelope = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "malformed"
    if not isinstance(envelope, dict):
        return "malformed"
    block = envelope.get("block_number")
    if not isinstance(block, int) or isinstance(block, bool):
        return "no_block"
    events = envelope.get("events")
    if not isinstance(events, list) or not events:
        return "no_coin"
    coin = _first_coin(TABLE_BY_DIR[table].coin_location, events[0])
    if not isinstance(coin, str) or not coin:
        return "no_coin"
    return coin, block, len(events)


def _first_coin(location: CoinLocation, event: Any) -> Any:
    if location is CoinLocation.FILL_TUPLE:
        holder = event[1] if isinstance(event, list) and len(event) > 1 else None
    elif location is CoinLocation.ORDER:
        holder = event.get("order") if isinstance(event, dict) else None
    else:
        holder = event
    return holder.get("coin") if isinstance(holder, dict) else None
