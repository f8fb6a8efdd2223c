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
from typing import BinaryIO

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.stream_position import Disagreement, Found, StreamPosition, WalkedLine, find
from hyperdata_sidecar.core.tables import TableSpec

CHUNK = 1 << 16  # read at a time by a walk
PROBE_CHUNK = 1 << 13  # read at a time by a probe of the binary search (a streaming line is ~0.5-4 KiB)


def locate(watch_dir: Path, spec: TableSpec, files: Sequence[str], position: StreamPosition) -> Found | Disagreement | None:
    """Where the stream's line of ``position`` is in ``files`` (the table's hour files, paths under
    ``watch_dir``, in order): Found, a Disagreement, or None when this node has not written it yet."""
    firsts = [_first_good_block(watch_dir / path, spec) for path in files]
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
        with open(watch_dir / path, "rb") as handle:
            for line, begin, end in _lines_from(handle, start if number == 0 else 0):
                yield WalkedLine(path, begin, end, inspect_line(spec, line), line)


def _first_good_block(path: Path, spec: TableSpec) -> int | None:
    """The block of the file's first good line (None: none complete yet)."""
    with open(path, "rb") as handle:
        return _next_good_block(handle, spec, 0)


def _first_line_of_block(path: Path, spec: TableSpec, block: int) -> int:
    """The offset of the first line whose good line block is ``block`` or later (a lower bound: the
    smallest offset from which the next good line is in ``block`` or later). The file is opened
    once for all its probes."""
    with open(path, "rb") as handle:
        low, high = 0, os.fstat(handle.fileno()).st_size
        while low < high:
            middle = (low + high) // 2
            probe = _next_good_block(handle, spec, middle)
            if probe is None or probe >= block:
                high = middle
            else:
                low = middle + 1
        return _line_start_at_or_after(handle, low)


def _next_good_block(handle: BinaryIO, spec: TableSpec, offset: int) -> int | None:
    """The block of the first good line that starts at or after ``offset`` (None: none complete yet)."""
    for line, _start, _end in _lines_from(handle, _line_start_at_or_after(handle, offset), PROBE_CHUNK):
        info = inspect_line(spec, line)
        if isinstance(info, LineInfo):
            return info.block_number
    return None


def _line_start_at_or_after(handle: BinaryIO, offset: int) -> int:
    """The offset of the first line that starts at or after ``offset`` (the file's size if none)."""
    if offset == 0:
        return 0
    handle.seek(offset - 1)
    position = offset - 1
    while chunk := handle.read(PROBE_CHUNK):
        newline = chunk.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(chunk)
    return position


def _lines_from(handle: BinaryIO, start: int, chunk_size: int = CHUNK) -> Iterator[tuple[bytes, int, int]]:
    """The complete lines of the open file from ``start`` (a line's start): (line, start, end), cut
    one at a time (a probe takes one or two lines of a chunk)."""
    handle.seek(start)
    held, offset = b"", start
    while chunk := handle.read(chunk_size):
        buffer, begin = held + chunk, 0
        while (newline := buffer.find(b"\n", begin)) >= 0:
            yield buffer[begin:newline], offset + begin, offset + newline + 1
            begin = newline + 1
        held, offset = buffer[begin:], offset + begin
