"""The replay tap: appends a recorded or generated corpus into a watched tree the way a live node does.

Each table's hour files are appended in ragged chunks (sizes drawn around ``chunk_bytes``, blind to
line boundaries, so partial lines are the norm), never copied whole; the three tables run
concurrently; an hour file is created only once the previous hour of its table is exhausted, so
the tailer sees rotations in the node's order. The pace is one of:

- ``lines_per_s``: a target line rate per table (default: the production rates);
- ``speed``: a real-time factor against the corpus's own hours (1.0 = an hour file takes an hour,
  60 = a minute), so all three tables rotate together, as on the node;
- ``speed=math.inf``: as fast as possible.

The corpus's node snapshots (``periodic_abci_states/<YYYYMMDD>/<height>.rmp``) are written too, in
height order, each once some table has appended a line of a block above its height (as the node
writes a snapshot once the chain is past it; or once every table is exhausted), to its final name
in pieces of a few MiB at ``snapshot_bytes_per_s``: the sidecar sees it grow, then stand still.

With ``rewrite_local_time`` the ``local_time`` value of each line is replaced at append time by
"now" (UTC, same format and length) so end-to-end latency can be measured downstream; every other
byte, and therefore every offset, stays the same.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR, SnapshotFile
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S

_READ_AHEAD_MIN = 64 * 1024
_LOCAL_TIME_PREFIX = b'{"local_time":"'
_PROGRESS_EVERY_S = 1.0
_BLOCK_NUMBER = re.compile(rb'"block_number":\s*([0-9]+)')
_BLOCK_KEY = b'"block_number":'
_SNAPSHOT_PIECE_BYTES = 4 * 1024 * 1024

SNAPSHOT_BYTES_PER_S = 256 * 1024 * 1024
"""Default pace of a snapshot's writes, a local disk's: a 1.3 GB snapshot takes about 5 s."""


class ReplayError(Exception):
    """The replay cannot start or continue (no corpus, a target file already exists, ...)."""


@dataclass
class TableReplay:
    """Progress of one table: what is appended so far, out of what."""

    table: str
    files_total: int
    bytes_total: int
    files: int = 0
    bytes: int = 0
    lines: int = 0
    chunks: int = 0
    partial_chunks: int = 0  # chunks that end inside a line
    seconds: float = 0.0

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ReplaySummary:
    """What :func:`replay` appended, per table, and how fast; and the snapshots it wrote."""

    tables: dict[str, TableReplay] = field(default_factory=dict)
    snapshots: list[str] = field(default_factory=list)
    snapshot_bytes: int = 0
    seconds: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables.values())

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.mb_per_s, 1),
            "tables": {
                name: {
                    "files": t.files,
                    "bytes": t.bytes,
                    "lines": t.lines,
                    "chunks": t.chunks,
                    "partial_chunks": t.partial_chunks,
                    "lines_per_s": round(t.lines_per_s, 1),
                }
                for name, t in self.tables.items()
            },
            "snapshots": {"files": len(self.snapshots), "bytes": self.snapshot_bytes},
        }


@dataclass(frozen=True)
class Pace:
    """How fast one table is appended: ``unit`` is "lines", "bytes" or "max" (unthrottled)."""

    unit: str
    rate: float = 0.0

    @classmethod
    def choose(cls, table: str, speed: float | None, lines_per_s: Mapping[str, float] | None) -> Pace:
        """``speed`` wins over ``lines_per_s``; with neither, the production line rate of ``table``."""
        if speed is not None:
            if speed <= 0:
                raise ReplayError(f"speed must be > 0 (or inf for as fast as possible), got {speed}")
            return cls("max") if math.isinf(speed) else cls("bytes", speed / 3600.0)
        rate = (lines_per_s or {}).get(table, PRODUCTION_LINES_PER_S[table])
        if rate <= 0:
            raise ReplayError(f"lines/s for {table} must be > 0, got {rate}")
        return cls("lines", rate)

    def rate_for(self, file_size: int) -> float:
        """Units per second while appending a file of ``file_size`` bytes (bytes pace is relative
        to the file: the whole file in 3600 / speed seconds)."""
        return self.rate * file_size if self.unit == "bytes" else self.rate

    def cost(self, chunk: bytes) -> int:
        return chunk.count(b"\n") if self.unit == "lines" else len(chunk)


def corpus_files(corpus: Path) -> dict[str, list[HourFile]]:
    """The hour files under ``corpus`` per table, in (date, hour) order; unrelated files are ignored."""
    out: dict[str, list[HourFile]] = {}
    for spec in TABLES:
        hourly = corpus / spec.dir_name / "hourly"
        found = []
        if hourly.is_dir():
            for path in hourly.glob("*/*"):
                parsed = HourFile.parse(path.relative_to(corpus).as_posix())
                if parsed is not None and path.is_file():
                    found.append(parsed)
        out[spec.dir_name] = sorted(found, key=lambda f: (f.sort_key, f.hour))
    return out


def corpus_snapshots(corpus: Path) -> list[SnapshotFile]:
    """The node snapshots under ``corpus``, lowest height first; other names are ignored."""
    root = corpus / SNAPSHOT_DIR
    found = []
    if root.is_dir():
        for path in root.glob("*/*"):
            parsed = SnapshotFile.parse(path.relative_to(corpus).as_posix())
            if parsed is not None and path.is_file():
                found.append(parsed)
    return sorted(found)


def last_block(chunk: bytes) -> int | None:
    """The ``block_number`` of the last line of ``chunk`` that ends in it and whose number is in it
    (a line begun in an earlier chunk counts; the unterminated tail does not), or None."""
    end = chunk.rfind(b"\n")
    while end > 0:
        at = chunk.rfind(_BLOCK_KEY, 0, end)
        if at < 0:
            return None
        match = _BLOCK_NUMBER.match(chunk, at, end)
        if match is not None:
            return int(match.group(1))
        end = at  # a line whose block_number is no number (a bad line): look further back
    return None


class BlockProgress:
    """How far the tables are appended, in blocks: a snapshot is due once one of them passed its height."""

    def __init__(self, tables: Iterable[str]) -> None:
        self.running = set(tables)
        self.blocks: dict[str, int] = {}
        self.moved = asyncio.Event()

    def appended(self, table: str, chunk: bytes) -> None:
        block = last_block(chunk)
        if block is not None and block > self.blocks.get(table, -1):
            self.blocks[table] = block
            self.moved.set()

    def finished(self, table: str) -> None:
        self.running.discard(table)
        self.moved.set()

    def passed(self, height: int) -> bool:
        """Has some table appended a line above ``height``, or is every table exhausted?"""
        return not self.running or any(block > height for block in self.blocks.values())

    async def wait_past(self, height: int) -> None:
        """Return once :meth:`passed` says so."""
        while not self.passed(height):
            self.moved.clear()
            await self.moved.wait()


def chunk_size(rng: random.Random, chunk_bytes: int, file_size: int) -> int:
    """A ragged chunk size around ``chunk_bytes`` (0.5x to 1.5x); never a whole file of 2+ bytes,
    so every file grows in at least two appends."""
    size = rng.randint(max(1, chunk_bytes // 2), max(1, chunk_bytes + chunk_bytes // 2))
    return min(size, max(1, file_size // 2))


def iso_now() -> bytes:
    """The current UTC time as the node writes ``local_time``: ``YYYY-MM-DDTHH:MM:SS.nnnnnnnnn``."""
    sec, frac = divmod(time.time_ns(), 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode() + b".%09d" % frac


def rewrite_local_time(lines: bytes, now: bytes) -> bytes:
    """``lines`` (complete, ``\\n``-separated) with each line's leading ``local_time`` value replaced
    by ``now`` cut to the old value's length. Lines that do not start with a ``local_time`` value
    of 19..29 characters are left as they are; the total length never changes."""
    out = []
    start = len(_LOCAL_TIME_PREFIX)
    for line in lines.split(b"\n"):
        end = line.find(b'"', start) if line.startswith(_LOCAL_TIME_PREFIX) else -1
        if 19 <= end - start <= len(now):
            line = line[:start] + now[: end - start] + line[end:]
        out.append(line)
    return b"\n".join(out)


class _ChunkSource:
    """One corpus file as a sequence of ragged chunks, rewritten at the moment they are taken."""

    def __init__(self, source: BinaryIO, size: int, rng: random.Random, chunk_bytes: int, rewrite: bool) -> None:
        self.source = source
        self.size = size
        self.rng = rng
        self.chunk_bytes = chunk_bytes
        self.rewrite = rewrite
        self.ready = bytearray()
        self.raw_tail = b""  # read but not yet rewritten: an incomplete line
        self.eof = False

    def next_chunk(self) -> bytes:
        """The next chunk to append, or b"" when the file is exhausted."""
        want = chunk_size(self.rng, self.chunk_bytes, self.size)
        while len(self.ready) < want and not self.eof:
            # Rewriting reads no further ahead than the chunk, so "now" is close to the append.
            self._pull(want if self.rewrite else max(want, _READ_AHEAD_MIN))
        chunk = bytes(self.ready[:want])
        del self.ready[:want]
        return chunk

    def _pull(self, size: int) -> None:
        data = self.source.read(size)
        if not data:
            self.eof = True
            self.ready += self.raw_tail
            self.raw_tail = b""
            return
        if not self.rewrite:
            self.ready += data
            return
        data = self.raw_tail + data
        cut = data.rfind(b"\n") + 1
        self.raw_tail = data[cut:]
        if cut:
            self.ready += rewrite_local_time(data[:cut], iso_now())


async def replay(
    corpus: Path,
    target: Path,
    *,
    chunk_bytes: int = 64 * 1024,
    cadence_s: float = 0.25,
    speed: float | None = None,
    lines_per_s: Mapping[str, float] | None = None,
    rewrite_local_time: bool = False,
    progress: bool | None = None,
    seed: int = 0,
    progress_stream: TextIO | None = None,
    snapshot_bytes_per_s: float = SNAPSHOT_BYTES_PER_S,
) -> ReplaySummary:
    """Append every hour file of ``corpus`` into ``target`` (same relative paths), progressively,
    and write its snapshots when the tables pass their heights.

    Every ``cadence_s`` each table appends as many ragged chunks as its pace allows (see the module
    docstring). ``progress`` None means: show progress only on a terminal outside CI.
    ``snapshot_bytes_per_s``: pace of a snapshot's writes (``math.inf``: as fast as possible).
    Returns when every table is exhausted and every snapshot written. Raises ReplayError if the
    corpus has no hour files, if the target would be the corpus, or if a target hour file or
    snapshot already exists (replay into an empty tree).
    """
    if chunk_bytes < 1 or cadence_s <= 0 or snapshot_bytes_per_s <= 0:
        raise ReplayError(
            f"chunk_bytes must be >= 1 and cadence and snapshot pace > 0, got {chunk_bytes}, {cadence_s}, {snapshot_bytes_per_s}"
        )
    if corpus.resolve() == target.resolve():
        raise ReplayError(f"target {target} is the corpus itself")
    files = corpus_files(corpus)
    if not any(files.values()):
        raise ReplayError(f"corpus {corpus} holds no <table>/hourly/<YYYYMMDD>/<H> files")
    snapshots = corpus_snapshots(corpus)
    relpaths = [f.relpath for table_files in files.values() for f in table_files] + [s.relpath for s in snapshots]
    for relpath in relpaths:
        if (target / relpath).exists():
            raise ReplayError(f"target file {target / relpath} already exists; replay into an empty tree")
    summary = ReplaySummary()
    blocks = BlockProgress(table for table, table_files in files.items() if table_files)
    jobs = []
    for index, (table, table_files) in enumerate(files.items()):
        if not table_files:
            continue
        stats = TableReplay(
            table,
            files_total=len(table_files),
            bytes_total=sum((corpus / f.relpath).stat().st_size for f in table_files),
        )
        summary.tables[table] = stats
        pace = Pace.choose(table, speed, lines_per_s)
        rng = random.Random(f"{seed}:{index}")
        jobs.append(
            _replay_table(corpus, target, table_files, pace, rng, chunk_bytes, cadence_s, rewrite_local_time, stats, blocks)
        )
    jobs.append(_replay_snapshots(corpus, target, snapshots, blocks, snapshot_bytes_per_s, summary))
    show = progress if progress is not None else _is_interactive()
    began = time.monotonic()
    reporter = asyncio.ensure_future(_report(summary, began, progress_stream or sys.stderr)) if show else None
    try:
        await asyncio.gather(*jobs)
    finally:
        summary.seconds = time.monotonic() - began
        if reporter is not None:
            reporter.cancel()
            _print_progress(summary, began, progress_stream or sys.stderr, final=True)
    return summary


async def _replay_table(
    corpus: Path,
    target: Path,
    files: list[HourFile],
    pace: Pace,
    rng: random.Random,
    chunk_bytes: int,
    cadence_s: float,
    rewrite: bool,
    stats: TableReplay,
    blocks: BlockProgress,
) -> None:
    began = last = time.monotonic()
    # Credit (in the pace's unit) carries across files, so the pace runs on through rotations.
    credit = 0.0
    for hour_file in files:
        source_path = corpus / hour_file.relpath
        target_path = target / hour_file.relpath
        target_path.parent.mkdir(parents=True, exist_ok=True)
        size = source_path.stat().st_size
        rate = pace.rate_for(size)
        # "xb" creates the file at rotation time and refuses to clobber one that appeared meanwhile.
        # Plain blocking I/O on purpose: each write is one chunk to a local file, and a write per
        # chunk (unbuffered) is exactly the growth pattern the tailer must see.
        with open(source_path, "rb") as source, open(target_path, "xb", buffering=0) as sink:
            chunks = _ChunkSource(source, size, rng, chunk_bytes, rewrite)
            while True:
                if pace.unit != "max":
                    now = time.monotonic()
                    credit += rate * (now - last)
                    last = now
                exhausted = False
                while pace.unit == "max" or credit > 0:
                    chunk = chunks.next_chunk()
                    if not chunk:
                        exhausted = True
                        break
                    sink.write(chunk)
                    _count(stats, chunk)
                    blocks.appended(stats.table, chunk)
                    credit -= pace.cost(chunk)
                    if pace.unit == "max":
                        await asyncio.sleep(0)
                stats.seconds = time.monotonic() - began
                if exhausted:
                    break
                await asyncio.sleep(cadence_s)
        stats.files += 1
    blocks.finished(stats.table)


async def _replay_snapshots(
    corpus: Path,
    target: Path,
    snapshots: list[SnapshotFile],
    blocks: BlockProgress,
    bytes_per_s: float,
    summary: ReplaySummary,
) -> None:
    for snapshot in snapshots:
        await blocks.wait_past(snapshot.height)
        summary.snapshot_bytes += await _write_snapshot(corpus / snapshot.relpath, target / snapshot.relpath, bytes_per_s)
        summary.snapshots.append(snapshot.relpath)


async def _write_snapshot(source_path: Path, target_path: Path, bytes_per_s: float) -> int:
    """Copy a snapshot to its final name at ``bytes_per_s``, in at least four pieces (as the node
    writes it: the name exists while the file grows). Returns the bytes written."""
    target_path.parent.mkdir(parents=True, exist_ok=True)
    piece = max(1, min(_SNAPSHOT_PIECE_BYTES, source_path.stat().st_size // 4))
    began = time.monotonic()
    written = 0
    with open(source_path, "rb") as source, open(target_path, "xb", buffering=0) as sink:
        while chunk := source.read(piece):
            sink.write(chunk)
            written += len(chunk)
            await asyncio.sleep(max(0.0, began + written / bytes_per_s - time.monotonic()))
    return written


def _count(stats: TableReplay, chunk: bytes) -> None:
    stats.bytes += len(chunk)
    stats.lines += chunk.count(b"\n")
    stats.chunks += 1
    if not chunk.endswith(b"\n"):
        stats.partial_chunks += 1


# ---- progress ---------------------------------------------------------------


def _is_interactive() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")


async def _report(summary: ReplaySummary, began: float, stream: TextIO) -> None:
    while True:
        await asyncio.sleep(_PROGRESS_EVERY_S)
        _print_progress(summary, began, stream, final=False)


def _print_progress(summary: ReplaySummary, began: float, stream: TextIO, *, final: bool) -> None:
    elapsed = max(time.monotonic() - began, 1e-9)
    parts = []
    for name, t in summary.tables.items():
        rate = t.bytes / elapsed
        remaining = t.bytes_total - t.bytes
        eta = "done" if remaining <= 0 else ("--:--" if rate <= 0 else _clock(remaining / rate))
        parts.append(
            f"{_short(name)} {t.bytes / 1e6:,.1f}/{t.bytes_total / 1e6:,.1f} MB {t.lines / elapsed:,.0f} lines/s ETA {eta}"
        )
    stream.write("\r" + " | ".join(parts) + ("\n" if final else ""))
    stream.flush()


def _short(table: str) -> str:
    return table.removeprefix("node_").removesuffix("_streaming")


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}"
