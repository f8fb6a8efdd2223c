"""Splitting appended file bytes into complete lines.

The node appends to its files in chunks that rarely end on a newline (nor on a UTF-8 character
boundary), so the tail of every chunk is held back until its newline arrives. Splitting works on
bytes only; decoding is the caller's concern.

:meth:`LineSplitter.feed` returns the lines as plain ``bytes`` in file order, without their
offsets: the hot path numbers them itself while it walks them (``offset += len(line) + 1``), which
costs less than building an object per line. :func:`numbered` attaches the offsets where they are
wanted as values (tests, slow paths).
"""

from __future__ import annotations

import hashlib
import io
from typing import NamedTuple, cast, final


class Line(NamedTuple):
    """A complete line: ``offset`` is the file offset of its first byte; ``data`` excludes the newline."""

    offset: int
    data: bytes


@final  # never subclassed: the hot path tells items apart with `type(item) is OversizeLine`
class OversizeLine(NamedTuple):
    """A line longer than the limit, reported by size and digest instead of its bytes.

    ``length`` and ``sha256`` (hex) cover the line's bytes without the newline.
    """

    offset: int
    length: int
    sha256: str


#: What :meth:`LineSplitter.feed` yields per line: its bytes with the newline, or an :class:`OversizeLine`.
Item = bytes | OversizeLine


def item_span(item: Item) -> int:
    """How many bytes of the file the item covers, its newline included."""
    return item.length + 1 if type(item) is OversizeLine else len(item)


def numbered(start: int, items: list[Item]) -> list[Line | OversizeLine]:
    """``items`` of one :meth:`LineSplitter.feed` call (which began at file offset ``start``) as
    :class:`Line` (offset, bytes without the newline) and :class:`OversizeLine` values."""
    out: list[Line | OversizeLine] = []
    offset = start
    for item in items:
        out.append(item if type(item) is OversizeLine else Line(offset, item[:-1]))
        offset += item_span(item)
    return out


class LineSplitter:
    """Turns a file's byte stream, fed in arbitrary chunks, into lines.

    The result never depends on how the stream is chunked. A partial last line is held until its
    newline arrives (or :meth:`flush_partial` is called once the file is finalized). Memory stays
    bounded: once a partial line grows past ``max_line_bytes`` its bytes are dropped and only a
    running sha256 and length are kept, and it is reported as an :class:`OversizeLine`. A line of
    exactly ``max_line_bytes`` bytes is a normal line.
    """

    def __init__(self, offset: int = 0, max_line_bytes: int = 8 * 1024 * 1024) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        if max_line_bytes < 0:
            raise ValueError(f"max_line_bytes must be >= 0, got {max_line_bytes}")
        self._offset = offset
        self._max = max_line_bytes
        self._held = bytearray()
        # Set while the held partial line is past the limit; its bytes are then no longer kept.
        self._oversize_hash: hashlib._Hash | None = None
        self._oversize_length = 0

    @property
    def offset(self) -> int:
        """The resume point: the offset just past the newline of the last complete line returned.

        It is also the file offset of the first line the next :meth:`feed` returns.
        """
        return self._offset

    @property
    def held_bytes(self) -> int:
        """Length of the partial line currently held back (counted, not stored, once oversize)."""
        if self._oversize_hash is not None:
            return self._oversize_length
        return len(self._held)

    def feed(self, chunk: bytes) -> list[Item]:
        """The lines completed by ``chunk``, in file order; the unterminated rest is held back."""
        if not chunk:
            return []
        if not isinstance(chunk, bytes):
            chunk = bytes(chunk)
        out: list[Item] = []
        start = self._complete_held(chunk, out)
        if start < 0:
            return out
        reader = io.BytesIO(chunk)
        reader.seek(start)
        lines = reader.readlines()
        tail = lines.pop() if lines and lines[-1][-1:] != b"\n" else b""
        if lines:
            first = len(out)
            out += lines
            self._offset += len(chunk) - start - len(tail)
            # One C-level pass over the lengths; per-line Python work only when a line is oversize.
            if max(map(len, lines)) > self._max + 1:
                self._replace_oversize(out, first)
        self._extend_held(tail)
        return out

    def flush_partial(self) -> Line | OversizeLine | None:
        """Emit the held unterminated tail (the file is finalized) and advance past it; None if empty."""
        if self._oversize_hash is None and not self._held:
            return None
        offset = self._offset
        item = self._release_held(newline_length=0)
        return item if type(item) is OversizeLine else Line(offset, item)

    def _replace_oversize(self, out: list[Item], first: int) -> None:
        """Replace the lines of ``out[first:]`` longer than the limit by :class:`OversizeLine`."""
        offset = self._offset - sum(map(len, out[first:]))
        for index in range(first, len(out)):
            data = cast(bytes, out[index])  # out[first:] are the lines just split, all bytes
            if len(data) > self._max + 1:
                out[index] = OversizeLine(offset, len(data) - 1, hashlib.sha256(memoryview(data)[:-1]).hexdigest())
            offset += len(data)

    def _complete_held(self, chunk: bytes, out: list[Item]) -> int:
        """Extend the held partial line with ``chunk`` up to its first newline.

        Returns the index in ``chunk`` just past that newline (the completed line is appended to
        ``out``), or -1 if ``chunk`` has no newline and was held whole. With nothing held, returns 0
        and leaves the whole chunk to the split in :meth:`feed`.
        """
        if self._oversize_hash is None and not self._held:
            return 0
        newline = chunk.find(b"\n")
        if newline < 0:
            self._extend_held(chunk)
            return -1
        self._extend_held(memoryview(chunk)[:newline])
        item = self._release_held(newline_length=1)
        out.append(item if type(item) is OversizeLine else item + b"\n")
        return newline + 1

    def _extend_held(self, piece: bytes | memoryview) -> None:
        if self._oversize_hash is not None:
            self._oversize_hash.update(piece)
            self._oversize_length += len(piece)
        elif len(self._held) + len(piece) > self._max:
            digest = hashlib.sha256(self._held)
            digest.update(piece)
            self._oversize_hash = digest
            self._oversize_length = len(self._held) + len(piece)
            self._held = bytearray()
        else:
            self._held += piece

    def _release_held(self, newline_length: int) -> Item:
        item: Item
        if self._oversize_hash is not None:
            item = OversizeLine(self._offset, self._oversize_length, self._oversize_hash.hexdigest())
            length = self._oversize_length
        else:
            item = bytes(self._held)
            length = len(self._held)
        self._offset += length + newline_length
        self._held = bytearray()
        self._oversize_hash = None
        self._oversize_length = 0
        return item
