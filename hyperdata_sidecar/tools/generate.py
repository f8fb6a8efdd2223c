"""A seeded, deterministic generator of node-shaped hour files for the three tables.

The output is a tree like the node's: ``<out>/<table>/hourly/<YYYYMMDD>/<H>`` with unpadded hour
names. Each table is one continuous stream of blocks: ``block_number`` rises by one per block and
carries on across hours (a block may straddle an hour boundary, as on the node); a block holds
many lines (book diffs and order statuses hundreds, fills a few); ``block_time`` is constant within
a block and ``local_time`` advances line by line, staying inside the file's hour (the node
partitions files by local time). Now and then a line carries several events.

Optionally every ``bad_every``-th line of a table is followed by a line the sidecar must send to
the DLQ (blank, malformed, no_block, no_coin or oversize, in turn); the summary lists where each
one is, with its reason.

Optionally (``snapshot_every``) it also writes the node's snapshots,
``periodic_abci_states/<YYYYMMDD>/<height>.rmp``, at every height that is a multiple of
``snapshot_every`` (the node writes one every ~10,000 blocks, at round heights) and that every
table passes (has a block above it), so each has lines on both sides in every table. The date
directory is the UTC date of that block's ``block_time`` (the earliest among the tables: each
table's stream keeps its own block clock here). The content is ``snapshot_bytes`` of seeded
pseudo-random bytes, not msgpack: the sidecar only sizes and hashes a snapshot, it never parses
one. A real one is ~1.3 GB.
"""

from __future__ import annotations

import calendar
import datetime
import hashlib
import random
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.tools.shapes import (
    BOOK_DIFFS,
    FILLS,
    ORDER_STATUSES,
    EventPool,
    build_pool,
)

PRODUCTION_LINES_PER_S: dict[str, float] = {
    ORDER_STATUSES: 23_500.0,
    BOOK_DIFFS: 15_600.0,
    FILLS: 200.0,
}
"""Measured Jun-10 line rates per table; the default mix of a corpus and the replay's default pace."""

DEFAULT_LINES_PER_BLOCK: dict[str, int] = {
    ORDER_STATUSES: 1_500,
    BOOK_DIFFS: 1_000,
    FILLS: 13,
}
"""Mean lines per block: each table's line rate over the node's ~15.6 blocks/s."""

BAD_KINDS: tuple[str, ...] = ("blank", "malformed", "no_block", "no_coin")
"""The DLQ reasons ``bad_every`` cycles through by default; "oversize" can be added (8 MiB lines)."""

OVERSIZE_BYTES = 8 * 1024 * 1024 + 1024
"""Length of an injected oversize line: just past the sidecar's 8 MiB line limit."""

DEFAULT_SNAPSHOT_BYTES = 1024 * 1024
"""Size of a generated snapshot unless told otherwise; a real one is ~1.3 GB."""

FIRST_BLOCK = 1_030_140_001
_BLOCK_LAG_NS = 350_000_000  # block_time trails local_time: the node writes a block after it is produced
_MULTI_EVENT_RATE = 1 / 2_000
_FLUSH_BYTES = 4 * 1024 * 1024
_BATCH_LINES = 65_536
_SNAPSHOT_WRITE_BYTES = 4 * 1024 * 1024
_LINE = b'{"local_time":"%s.%09d","block_time":"%s","block_number":%d,"events":[%s]}\n'
_NS = 1_000_000_000


@dataclass(frozen=True)
class BadLine:
    """An injected line the sidecar must send to the DLQ: where it is and the reason it must carry."""

    relpath: str
    offset: int
    reason: str


@dataclass
class FileSummary:
    """One generated hour file: good lines, injected bad lines, size and block range of good lines."""

    relpath: str
    table: str
    lines: int = 0
    bad_lines: int = 0
    size: int = 0
    first_block: int | None = None
    last_block: int | None = None


@dataclass(frozen=True)
class SnapshotSummary:
    """One generated node snapshot: where, at which height, its size and sha256."""

    relpath: str
    height: int
    size: int
    sha256: str


@dataclass
class CorpusSummary:
    """What :func:`generate_corpus` wrote, and how fast."""

    root: str
    files: list[FileSummary] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)
    snapshots: list[SnapshotSummary] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def lines(self) -> int:
        return sum(f.lines for f in self.files)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "bytes": self.bytes,
            "lines": self.lines,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.mb_per_s, 1),
            "files": [asdict(f) for f in self.files],
            "bad_lines": [asdict(b) for b in self.bad_lines],
            "snapshots": [asdict(s) for s in self.snapshots],
        }


def split_lines_per_hour(total: int) -> dict[str, int]:
    """``total`` lines per hour split across the tables in the production mix (23.5k : 15.6k : 0.2k)."""
    rate_sum = sum(PRODUCTION_LINES_PER_S.values())
    out = {t: int(total * r / rate_sum) for t, r in PRODUCTION_LINES_PER_S.items()}
    out[ORDER_STATUSES] += total - sum(out.values())
    return out


def parse_start(text: str) -> datetime.datetime:
    """A start hour from ``YYYYMMDD/H``, ``YYYYMMDD:H`` or ISO ``YYYY-MM-DDTHH[:MM[:SS]]`` (UTC).

    Raises ValueError naming the accepted forms.
    """
    match = re.fullmatch(r"([0-9]{8})[/:]([0-9]{1,2})", text.strip())
    try:
        if match:
            day = datetime.datetime.strptime(match.group(1), "%Y%m%d")
            return day.replace(hour=int(match.group(2)))
        return datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    raise ValueError(f"start {text!r} is not YYYYMMDD/H, YYYYMMDD:H or YYYY-MM-DDTHH")


_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?)b?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """A byte count from ``"1048576"``, ``"1MiB"``, ``"64k"`` or ``"1.3GB"`` (k, M, G, T are powers of
    1000; Ki, Mi, Gi, Ti of 1024). Raises ValueError."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or (match.group(3) and not match.group(2)):
        raise ValueError(f"size {text!r} is not a byte count such as 1048576, 1MiB or 1.3GB")
    number, unit, binary = match.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** " kmgt".index(unit.lower() or " "))


def snapshot_heights(every: int, first_block: int, last_blocks: Iterable[int]) -> list[int]:
    """The heights of a corpus's snapshots: multiples of ``every`` from ``first_block`` on that every
    table passes, i.e. below each table's last block (``last_blocks``, one per table with lines)."""
    lasts = list(last_blocks)
    if not lasts:
        return []
    first = -(-first_block // every) * every
    return list(range(first, min(lasts), every))


def write_snapshot(root: Path, snapshot: SnapshotFile, size: int, seed: int) -> SnapshotSummary:
    """Write ``snapshot`` under ``root``: ``size`` seeded pseudo-random bytes (the same seed, height
    and size give the same bytes), a few MiB per write, to its final name as the node does."""
    path = root / snapshot.relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(f"{seed}:snapshot:{snapshot.height}")
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left > 0:
            block = rng.randbytes(min(_SNAPSHOT_WRITE_BYTES, left))
            out.write(block)
            digest.update(block)
            left -= len(block)
    return SnapshotSummary(snapshot.relpath, snapshot.height, size, digest.hexdigest())


def generate_corpus(
    out_dir: Path,
    *,
    hours: int,
    lines_per_hour: Mapping[str, int] | int,
    seed: int,
    start: datetime.datetime,
    lines_per_block: Mapping[str, int] | int | None = None,
    first_block: int = FIRST_BLOCK,
    multi_event_rate: float = _MULTI_EVENT_RATE,
    bad_every: int | None = None,
    bad_kinds: Sequence[str] = BAD_KINDS,
    snapshot_every: int | None = None,
    snapshot_bytes: int = DEFAULT_SNAPSHOT_BYTES,
) -> CorpusSummary:
    """Write ``hours`` hour files per table under ``out_dir``, starting at ``start``'s hour (UTC).

    ``lines_per_hour``: good lines per hour per table (dir name → count), or a total split in the
    production mix. ``lines_per_block``: mean lines per block per table, or one mean for all
    (default: production). ``snapshot_every``: also write a snapshot of ``snapshot_bytes`` at
    every height that is a multiple of it and that every table passes (module docstring). The
    same arguments always produce the same bytes. Existing files at the generated paths are
    replaced. Raises ValueError for an unknown table, a negative count, an unknown bad kind or a
    snapshot interval or size below 1.
    """
    per_hour = _per_table(lines_per_hour, split_lines_per_hour, "lines_per_hour")
    per_block = _per_table(
        DEFAULT_LINES_PER_BLOCK if lines_per_block is None else lines_per_block,
        lambda n: dict.fromkeys(PRODUCTION_LINES_PER_S, n),
        "lines_per_block",
    )
    unknown = set(bad_kinds) - {"blank", "malformed", "no_block", "no_coin", "oversize"}
    if unknown or (bad_every is not None and (bad_every < 1 or not bad_kinds)):
        raise ValueError(f"bad_every must be >= 1 with kinds from {BAD_KINDS + ('oversize',)}")
    if hours < 0:
        raise ValueError(f"hours must be >= 0, got {hours}")
    if (snapshot_every is not None and snapshot_every < 1) or snapshot_bytes < 1:
        raise ValueError(f"snapshot_every and snapshot_bytes must be >= 1, got {snapshot_every}, {snapshot_bytes}")
    first_hour_s = _epoch_hour(start)
    summary = CorpusSummary(root=str(out_dir))
    began = time.perf_counter()
    streams = []
    for table in PRODUCTION_LINES_PER_S:
        if per_hour[table] == 0:
            continue
        stream = _TableStream(
            table,
            random.Random(f"{seed}:{table}"),
            mean_lines_per_block=max(1, per_block[table]),
            first_block=first_block,
            multi_event_rate=multi_event_rate,
            bad_every=bad_every,
            bad_kinds=tuple(bad_kinds),
            snapshot_every=snapshot_every,
        )
        for h in range(hours):
            stream.write_hour(out_dir, first_hour_s + 3600 * h, per_hour[table], summary)
        streams.append(stream)
    if snapshot_every is not None:
        for height in snapshot_heights(snapshot_every, first_block, (s.block for s in streams)):
            block_ns = min(s.snapshot_times[height] for s in streams)
            date = time.strftime("%Y%m%d", time.gmtime(block_ns // _NS))
            summary.snapshots.append(write_snapshot(out_dir, SnapshotFile(height, date), snapshot_bytes, seed))
    summary.seconds = time.perf_counter() - began
    return summary


def _per_table(value: Mapping[str, int] | int, spread: Any, name: str) -> dict[str, int]:
    out = spread(value) if isinstance(value, int) else dict(value)
    unknown = set(out) - set(PRODUCTION_LINES_PER_S)
    if unknown:
        raise ValueError(f"{name}: unknown table(s) {sorted(unknown)}")
    full = {t: int(out.get(t, 0)) for t in PRODUCTION_LINES_PER_S}
    if any(n < 0 for n in full.values()):
        raise ValueError(f"{name} must not be negative: {full}")
    return full


def _epoch_hour(start: datetime.datetime) -> int:
    moment = start if start.tzinfo is None else start.astimezone(datetime.UTC)
    return calendar.timegm(moment.replace(minute=0, second=0, microsecond=0).timetuple())


def _iso_second(epoch_s: int) -> bytes:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s)).encode()


def _iso_ns(epoch_ns: int) -> bytes:
    sec, frac = divmod(epoch_ns, _NS)
    return b"%s.%09d" % (_iso_second(sec), frac)


class _TableStream:
    """One table's continuous stream of blocks and lines, written an hour file at a time."""

    def __init__(
        self,
        table: str,
        rng: random.Random,
        *,
        mean_lines_per_block: int,
        first_block: int,
        multi_event_rate: float,
        bad_every: int | None,
        bad_kinds: tuple[str, ...],
        snapshot_every: int | None = None,
    ) -> None:
        self.table = table
        self.rng = rng
        self.pool: EventPool = build_pool(table, rng)
        self.block_sizes = (max(1, mean_lines_per_block // 2), max(1, mean_lines_per_block * 3 // 2))
        self.multi_event_rate = multi_event_rate
        self.bad_every = bad_every
        self.bad_kinds = bad_kinds
        self.block = first_block - 1
        self.block_left = 0
        self.block_time = b""
        self.block_ms = 0
        self.oid = 464_679_247_366 + rng.randrange(10**9)
        self.tid = 812_345_678_901_234 + rng.randrange(10**12)
        self.good_lines = 0
        self.bad_lines = 0
        self.snapshot_every = snapshot_every
        self.snapshot_times: dict[int, int] = {}  # block_time (epoch ns) of each block at a snapshot height

    def write_hour(self, root: Path, hour_s: int, n_lines: int, summary: CorpusSummary) -> None:
        hour = time.gmtime(hour_s)
        relpath = HourFile(self.table, time.strftime("%Y%m%d", hour), str(hour.tm_hour)).relpath
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        info = FileSummary(relpath=relpath, table=self.table)
        step_ns = 3600 * _NS // n_lines
        with open(path, "wb") as out:
            for batch_start in range(0, n_lines, _BATCH_LINES):
                count = min(_BATCH_LINES, n_lines - batch_start)
                self._write_batch(out, hour_s * _NS + batch_start * step_ns, step_ns, count, info, summary)
            info.size = out.tell()
        summary.files.append(info)

    def _write_batch(
        self,
        out: BinaryIO,
        first_ns: int,
        step_ns: int,
        count: int,
        info: FileSummary,
        summary: CorpusSummary,
    ) -> None:
        rng = self.rng
        templates = rng.choices(self.pool.templates, k=count)
        render = self.pool.render
        random_ = rng.random
        multi_rate = self.multi_event_rate
        parts: list[bytes] = []
        pending = 0
        sec_cached = -1
        sec_text = b""
        first_block = None
        for i in range(count):
            t = first_ns + i * step_ns
            if self.block_left == 0:
                self._next_block(t)
            self.block_left -= 1
            sec, frac = divmod(t, _NS)
            if sec != sec_cached:
                sec_cached, sec_text = sec, _iso_second(sec)
            if random_() < multi_rate:
                extra = rng.choices(self.pool.templates, k=rng.randint(1, 2))
                events = b",".join(self._event(tpl, render) for tpl in [templates[i], *extra])
            else:
                events = self._event(templates[i], render)
            line = _LINE % (sec_text, frac, self.block_time, self.block, events)
            parts.append(line)
            pending += len(line)
            if first_block is None:
                first_block = self.block
            self.good_lines += 1
            if self.bad_every is not None and self.good_lines % self.bad_every == 0:
                reason = self.bad_kinds[self.bad_lines % len(self.bad_kinds)]
                bad = self._bad_line(reason, sec_text, frac, events)
                summary.bad_lines.append(BadLine(info.relpath, out.tell() + pending, reason))
                parts.append(bad)
                pending += len(bad)
                self.bad_lines += 1
                info.bad_lines += 1
            if pending >= _FLUSH_BYTES:
                out.write(b"".join(parts))
                parts, pending = [], 0
        out.write(b"".join(parts))
        info.lines += count
        if info.first_block is None:
            info.first_block = first_block
        info.last_block = self.block

    def _event(self, template: bytes, render: Any) -> bytes:
        self.oid += 1
        self.tid += 1
        return render(template, self.block_time, self.block_ms, self.oid, self.tid)

    def _next_block(self, first_line_ns: int) -> None:
        self.block += 1
        self.block_left = self.rng.randint(*self.block_sizes)
        block_ns = first_line_ns - _BLOCK_LAG_NS
        self.block_time = _iso_ns(block_ns)
        self.block_ms = block_ns // 1_000_000
        if self.snapshot_every is not None and self.block % self.snapshot_every == 0:
            self.snapshot_times[self.block] = block_ns

    def _bad_line(self, reason: str, sec_text: bytes, frac: int, events: bytes) -> bytes:
        """A line with exactly one defect, shaped like its neighbours otherwise."""
        if reason == "blank":
            return b"\n"
        envelope = b'{"local_time":"%s.%09d","block_time":"%s"' % (sec_text, frac, self.block_time)
        if reason == "malformed":
            return envelope + b',"block_number":\n'
        if reason == "no_block":
            return envelope + b',"events":[%s]}\n' % events
        if reason == "no_coin":
            # The first "coin" in the events is the first event's (in an order status it is the
            # order's: the fields before "order" hold no coin).
            coinless = re.sub(rb'"coin":"[^"]*",', b"", events, count=1)
            return envelope + b',"block_number":%d,"events":[%s]}\n' % (self.block, coinless)
        padding = b"0" * OVERSIZE_BYTES
        return envelope + b',"block_number":%d,"events":[%s],"padding":"%s"}\n' % (
            self.block,
            events,
            padding,
        )
