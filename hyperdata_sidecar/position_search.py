"""Finding the stream's position in this node's hour files (blocking: run it in a worker thread).

A table's files hold its lines in block order (a block regression aside), so the first line of the
position's block is found by a binary search over byte offsets: a probe reads the first line that
starts at or after an offset, about log2(file size) probes of one line each. The walk of
:func:`~hyperdata_sidecar.core.stream_position.find` starts there (in the file before, when the
block began in it) and reads on, line by line, until it decides. When that finds no agreement, the
walk is done once more from the start of those files, which holds even where this node's own
blocks went down.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.stream_position import Disagreement, Found, StreamPosition, WalkedLine, find
from hyperdata_sidecar.core.tables import TableSpec

CHUNK = 1 << 16


def locate(watch_dir: Path, spec: TableSpec, files: Sequence[str], position: StreamPosition) -> Found | Disagreement | None:
    """Where the stream's line of ``position`` is in ``files`` (the table's hour files, paths under
    ``watch_dir``, in order): Found, a Disagreement, or None when this node has not written it yet."""
    firsts = [_next_good_block(watch_dir / path, spec, 0) for path in files]  # each file's first good block
    before = [i for i, block in enumerate(firsts) if block is not None and block < position.block]
    if before:
        index = before[-1]
    else:
        starting = [i for i, block in enumerate(firsts) if block is not None]
        if not starting:
            return None  # no good line on disk yet
        if firsts[starting[0]] != position.block:
            first = files[starting[0]]
            return Disagreement(
                first, 0, f"this node's oldest line is in block {firsts[starting[0]]}, after the stream's line {position.line_id}"
            )
        index = starting[0]
    start = _first_line_of_block(watch_dir / files[index], spec, position.block)
    found = find(position, _walk(watch_dir, spec, files[index:], start))
    if isinstance(found, Disagreement) and start > 0:
        again = find(position, _walk(watch_dir, spec, files[index:], 0))
        return found if again is None else again
    return found


def _walk(watch_dir: Path, spec: TableSpec, files: Sequence[str], start: int) -> Iterator[WalkedLine]:
    """Every complete line of ``files`` from ``start`` of the first one, inspected."""
    for number, path in enumerate(files):
        for line, begin, end in _lines_from(watch_dir / path, start if number == 0 else 0):
            yield WalkedLine(path, begin, end, inspect_line(spec, line), line)


def _first_line_of_block(path: Path, spec: TableSpec, block: int) -> int:
    """The offset of the first line whose good line block is ``block`` or later (a lower bound: the
    smallest offset from which the next good line is in ``block`` or later)."""
    low, high = 0, os.path.getsize(path)
    while low < high:
        middle = (low + high) // 2
        probe = _next_good_block(path, spec, middle)
        if probe is None or probe >= block:
            high = middle
        else:
            low = middle + 1
    return _line_start_at_or_after(path, low)


def _next_good_block(path: Path, spec: TableSpec, offset: int) -> int | None:
    """The block of the first good line that starts at or after ``offset`` (None: none complete yet)."""
    for line, _start, _end in _lines_from(path, _line_start_at_or_after(path, offset)):
        info = inspect_line(spec, line)
        if isinstance(info, LineInfo):
            return info.block_number
    return None


def _line_start_at_or_after(path: Path, offset: int) -> int:
    """The offset of the first line that starts at or after ``offset`` (the file's size if none)."""
    if offset == 0:
        return 0
    with open(path, "rb") as handle:
        handle.seek(offset - 1)
        position = offset - 1
        while chunk := handle.read(CHUNK):
            newline = chunk.find(b"\n")
            if newline >= 0:
                return position + newline + 1
            position += len(chunk)
        return position


def _lines_from(path: Path, start: int) -> Iterator[tuple[bytes, int, int]]:
    """The complete lines of the file from ``start`` (a line's start): (line, start, end)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        held, offset = b"", start
        while chunk := handle.read(CHUNK):
            pieces = (held + chunk).split(b"\n")
            held = pieces.pop()
            for line in pieces:
                end = offset + len(line) + 1
                yield line, offset, end
                offset = end
