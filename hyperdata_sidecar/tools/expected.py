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
from collections.abc import Collection, Iterator, Mapping, Sequence
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
    block_regressions: int = 0
    late_from: int | None = None  # lines from this offset on were appended after the first seal
    prefixes: dict[int, str] = field(default_factory=dict)  # an earlier revision's size -> sha256 of that prefix
    tails: list[ExpectedDlq] = field(default_factory=list)  # lines an earlier revision ended unterminated

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
    """The hour files of ``table`` under ``watch_dir``, oldest first: regular files only, and no
    symlinked hour file or date directory (the contract: the sidecar follows neither)."""
    hourly = watch_dir / table / "hourly"
    if not hourly.is_dir():
        return []
    found = []
    for date in hourly.iterdir():
        if date.is_symlink() or not date.is_dir():
            continue
        for path in date.iterdir():
            parsed = HourFile.parse(path.relative_to(watch_dir).as_posix())
            if parsed is not None and not path.is_symlink() and path.is_file():
                found.append(parsed)
    return sorted(found, key=lambda f: (f.sort_key, f.hour))


def read_tree(
    watch_dir: Path,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    sealed_sizes: Mapping[str, Sequence[int]] | None = None,
    ignore: Collection[str] = (),
) -> Iterator[ExpectedFile]:
    """Every hour file of the three tables, table by table, oldest first, with what it owes.

    ``sealed_sizes``: relpath → the sizes the file's seals gave (see the module docstring); those
    below the file's size now are its earlier revisions. ``ignore``: relpaths of files left out
    altogether, neither yielded nor numbered (files a test damaged: what they hold now is not what
    the sidecar numbered); they still count as later files for finalization.
    """
    for spec in TABLES:
        files = hour_files(watch_dir, spec.dir_name)
        numbering = _BlockNumbering(spec.dir_name)
        for index, hour_file in enumerate(files):
            if hour_file.relpath in ignore:
                continue
            expected = ExpectedFile(hour_file, finalized=index < len(files) - 1)
            size = (watch_dir / hour_file.relpath).stat().st_size
            cuts = sorted({cut for cut in (sealed_sizes or {}).get(hour_file.relpath, ()) if cut < size})
            _read_file(watch_dir / hour_file.relpath, expected, _FileReading(expected, numbering, cuts, max_line_bytes))
            yield expected


class _BlockNumbering:
    """seq_in_block and the regression epoch over one table's stream of good lines (and the
    table's keys, shared: a few hundred coins make millions of keys). ``tag`` ends every id."""

    def __init__(self, table: str, tag: str = "") -> None:
        self.table = table
        self.tag = tag
        self.block: int | None = None
        self.next_seq = 0
        self.epoch = 0
        self.keys: dict[str, bytes] = {}

    def key(self, coin: str) -> bytes:
        key = self.keys.get(coin)
        if key is None:
            key = self.keys[coin] = coin.encode()
        return key

    def line_id(self, block: int, n_events: int) -> tuple[bytes, bool]:
        """The id of the next good line, and whether its block went back (a regression)."""
        regressed = self.block is not None and block < self.block
        if regressed:
            self.epoch += 1
        if block != self.block:
            self.block, self.next_seq = block, 0
        seq = self.next_seq
        self.next_seq += n_events
        epoch = f"|r{self.epoch}" if self.epoch else ""
        return f"{self.table}|{block}|{seq}{epoch}{self.tag}".encode(), regressed

    def forked(self, tag: str) -> _BlockNumbering:
        """A copy that goes on from here on its own, ending ids in ``tag`` (a file's late lines)."""
        fork = _BlockNumbering(self.table, tag)
        fork.block, fork.next_seq, fork.epoch, fork.keys = self.block, self.next_seq, self.epoch, self.keys
        return fork


class _FileReading:
    """One file's lines taken in order, with the earlier revisions' sizes (``cuts``) it passes."""

    def __init__(self, expected: ExpectedFile, stream: _BlockNumbering, cuts: list[int], max_line_bytes: int) -> None:
        self.expected = expected
        self.numbering = stream
        self.cuts = cuts
        self.first_cut = cuts[0] if cuts else None
        self.max_line_bytes = max_line_bytes

    def line(self, offset: int, line: bytes, terminated: bool) -> None:
        """The line at ``offset`` (``terminated``: followed by a newline), in file order."""
        end = offset + len(line)  # where its newline is (or the file ends)
        if self.first_cut is not None and self.first_cut <= end and self.expected.late_from is None:
            # The first revision ended before this line's newline: from here on the lines are late.
            self.expected.late_from = offset
            hour = self.expected.hour_file
            self.numbering = self.numbering.forked(f"|late-{hour.date}-{hour.hour}")
        for cut in self.cuts:
            if offset < cut <= end:  # that revision ended inside this line, before its newline
                tail = line[: cut - offset]
                reasons = frozenset({"unterminated", "oversize"} if len(tail) > self.max_line_bytes else {"unterminated"})
                self.expected.tails.append(_dlq_entry(self.expected.relpath, offset, tail, reasons, self.max_line_bytes))
        if terminated:
            _take_line(self.expected, self.numbering, offset, line, self.max_line_bytes)


def _read_file(path: Path, expected: ExpectedFile, reading: _FileReading) -> None:
    digest = hashlib.sha256()
    carry = b""
    position = 0  # file offset of carry's first byte
    read = 0  # bytes read so far
    with open(path, "rb") as source:
        while block := source.read(_READ_BYTES):
            for cut in reading.cuts:
                if read < cut <= read + len(block):
                    prefix = digest.copy()
                    prefix.update(block[: cut - read])
                    expected.prefixes[cut] = prefix.hexdigest()
            digest.update(block)
            read += len(block)
            data = carry + block
            start = 0
            while (end := data.find(b"\n", start)) >= 0:
                reading.line(position + start, data[start:end], terminated=True)
                start = end + 1
            carry = data[start:]
            position += start
    expected.size = position + len(carry)
    expected.sha256 = digest.hexdigest()
    if carry:
        reading.line(position, carry, terminated=False)
    if carry and expected.finalized:
        reasons = frozenset({"unterminated", "oversize"} if len(carry) > reading.max_line_bytes else {"unterminated"})
        expected.dlq.append(_dlq_entry(expected.relpath, position, carry, reasons, reading.max_line_bytes))


def _take_line(expected: ExpectedFile, numbering: _BlockNumbering, offset: int, line: bytes, max_line_bytes: int) -> None:
    verdict = classify(expected.table, line, max_line_bytes)
    if isinstance(verdict, str):
        expected.dlq.append(_dlq_entry(expected.relpath, offset, line, frozenset({verdict}), max_line_bytes))
        return
    coin, block, n_events = verdict
    line_id, regressed = numbering.line_id(block, n_events)
    expected.lines.append(ExpectedLine(offset, numbering.key(coin), line_id, value_digest(line)))
    expected.block_regressions += regressed
    if expected.first_block is None:
        expected.first_block = block
    expected.last_block = block


def _dlq_entry(source: str, offset: int, line: bytes, reasons: frozenset[str], max_line_bytes: int) -> ExpectedDlq:
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
