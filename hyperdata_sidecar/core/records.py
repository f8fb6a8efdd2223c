"""Kafka records for an hour file's lines: one data record per good line, a dead letter otherwise.

This is the sidecar's hot path. :class:`RecordWriter` turns the lines of one read (what
:meth:`LineSplitter.feed` returns) into records and hands each one to ``produce``, in file order:

- a good line: value = the line's bytes, key = the coin of its first event, partition = murmur2 of
  the key, headers ``line_id`` (``<table>|<block_number>|<seq_in_block>``), ``source`` (the file's
  path under WATCH_DIR) and ``offset`` (of the line's first byte, decimal ASCII);
- a line that cannot be published (``lineinfo.REASONS``): a dead letter on the DLQ topic, key = the
  table's dir name, headers ``source``, ``offset``, ``reason`` and ``detail`` (plus ``error``, the
  broker's error name, for ``rejected``); its value is the line, or a reference
  ``{"source", "offset", "length", "sha256"}`` for a line that is not carried (``oversize``,
  ``rejected``).

``seq_in_block`` is the number of events in the earlier good lines of the same block in the table's
stream (``log_index`` of the line's first event): 0 when the block differs from the previous good
line's, carried across hour files. The writer's :attr:`~RecordWriter.seq_state` is persisted with
every checkpoint, so a restart reproduces the same ids.

A good line whose block is lower than the previous good line's (the chain rewound: a *block
regression*) is published as any other, and starts a new *regression epoch*: from that line on,
every line id ends in ``|r<epoch>`` (``|r1``, then ``|r2``, ...). Within one epoch blocks never go
down, so (block, seq_in_block) cannot repeat in it, and the suffix keeps the epochs apart; before the
first regression ids carry no suffix. The epoch is part of the sequencer state. A writer made with
a ``late_tag`` (the lines appended to a sealed file) ends every id with that tag as well.

``produce`` is called with confluent-kafka's positional parameters
``(topic, value, key, partition, on_delivery, None, 0, headers)`` (positional: keyword parsing costs
a third of the call). When it raises (``BufferError``: the producer's queue is full; anything else:
the client refused the record, e.g. a partition it does not know), :meth:`RecordWriter.write` stops
and returns the index of the line it could not hand over, every state as if that line had not been
seen, with the exception in :attr:`RecordWriter.refusal` (None for ``BufferError``); the caller
resumes from there later. So every line is handed over exactly once, in file order, and
:class:`Collector` rebuilds exactly the records a cycle produced from the same bytes and start state.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, cast

import orjson

from hyperdata_sidecar.core.lineinfo import LineInfo, Rejection, fast_decoder, inspect_line
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.splitter import Item, Line, OversizeLine, item_span
from hyperdata_sidecar.core.tables import TableSpec

Header = tuple[str, bytes]
Produce = Callable[..., Any]
DeliveryCallback = Callable[[Any, Any], Any]

#: The sequencer state: (block of the last good line or None, seq_in_block of the next line of that
#: block, regression epoch).
SeqState = tuple[int | None, int, int]

#: Before anything was written: no block yet, epoch 0.
SEQ_START: SeqState = (None, 0, 0)


class Regression(NamedTuple):
    """A good line whose block is lower than the previous good line's: where, from which block to
    which, and the regression epoch its id (and every later one) carries."""

    offset: int
    previous: int
    block: int
    epoch: int


class DeadLetter(NamedTuple):
    """A line sent to the DLQ: why, and where it starts in its file."""

    reason: str
    offset: int


class Topics(NamedTuple):
    """Where one table's records go: its data topic and the DLQ, with their partition counts."""

    data: str
    data_partitions: int
    dlq: str
    dlq_partitions: int


class CycleAcks(NamedTuple):
    """The delivery callbacks of one cycle: one per data partition (indexed by partition) and one for the DLQ."""

    data: Sequence[DeliveryCallback]
    dlq: DeliveryCallback


class Tally:
    """What one cycle handed to the producer. ``produced`` counts every record (data and DLQ)."""

    __slots__ = ("produced", "lines", "dlq", "last_line", "dead_letters", "regressions")

    def __init__(self) -> None:
        self.produced = 0
        self.lines = 0
        self.dlq = 0
        self.last_line: bytes | None = None  # the last good line (its block_time is the newest)
        self.dead_letters: list[DeadLetter] = []  # for metrics and logs
        self.regressions: list[Regression] = []  # for metrics, logs and the seal


class Routes:
    """Key and partition of each coin for one data topic, cached (a table has a few hundred coins)."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._cache: dict[str, tuple[bytes, int]] = {}
        self.get = self._cache.get

    def add(self, coin: str) -> tuple[bytes, int]:
        key = coin.encode()
        route = self._cache[coin] = (key, partition_for(key, self.partitions))
        return route


def dead_letter_partition(spec: TableSpec, topics: Topics) -> int:
    """The DLQ partition of a table's dead letters (keyed by the table's dir name)."""
    return partition_for(spec.dir_name.encode(), topics.dlq_partitions)


_SEQ_CACHED = 4096  # a block has up to ~3,900 lines per table (Jun-10 census)


@functools.lru_cache(maxsize=16)
def _seq_texts(suffix: bytes) -> list[bytes]:
    """The tail of a line id for each seq below _SEQ_CACHED: ``b"<seq><suffix>"``."""
    return [b"%d%s" % (n, suffix) for n in range(_SEQ_CACHED)]


def id_suffix(epoch: int, late_tag: bytes = b"") -> bytes:
    """What follows ``seq_in_block`` in a line id: ``|r<epoch>`` once the stream regressed, then
    the late tag of a sealed file's late lines (both empty for a plain line)."""
    return (b"|r%d" % epoch if epoch else b"") + late_tag


def reference(source: str, offset: int, length: int, sha256: str) -> bytes:
    """The DLQ value that stands for a line not carried: where it is, how long, its digest."""
    return orjson.dumps({"source": source, "offset": offset, "length": length, "sha256": sha256})


def refusal_name(exc: BaseException) -> str:
    """The error name of an exception raised by ``produce`` (confluent-kafka's ``KafkaError`` name
    when it carries one, else the exception's type)."""
    first = exc.args[0] if exc.args else None
    name = getattr(first, "name", None)
    return name() if callable(name) else type(exc).__name__


class Record(NamedTuple):
    """One record as ``produce`` received it."""

    topic: str
    partition: int
    key: bytes
    value: bytes
    headers: list[Header]

    def header(self, name: str) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)


class Collector:
    """A ``produce`` that keeps the records, by (topic, partition) in order, instead of sending them.

    Rebuilds what a cycle produced (to find the record behind a failed delivery report) and lets
    ``bench/`` time record building alone.
    """

    def __init__(self) -> None:
        self.groups: dict[tuple[str, int], list[Record]] = {}

    def __call__(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        partition: int,
        _on_delivery: Any,
        _alias: Any,
        _timestamp: int,
        headers: list[Header],
    ) -> None:
        self.groups.setdefault((topic, partition), []).append(Record(topic, partition, key, value, headers))

    def acks(self, partitions: int) -> CycleAcks:
        """Callbacks to pass alongside (never called: nothing is sent)."""
        return CycleAcks([_never] * partitions, _never)


def _never(_error: Any, _message: Any) -> None:
    raise AssertionError("a collected record has no delivery report")


class RecordWriter:
    """Writes the lines of one hour file as records; one writer per file, fed read after read.

    ``offset`` is where the next line handed over starts (the resume point); ``seq_state`` is the
    table stream's sequencer state there (the previous file's final state, or the persisted one
    when resuming mid-file); ``first_block`` and ``last_block`` the file's block range so far.
    All four are read back after every :meth:`write` for the cursor. ``late_tag`` ends every line
    id this writer makes (the tailer gives one to the lines appended to a file after its seal).
    """

    def __init__(
        self,
        spec: TableSpec,
        topics: Topics,
        routes: Routes,
        source: str,
        produce: Produce,
        *,
        offset: int = 0,
        seq_state: SeqState = SEQ_START,
        first_block: int | None = None,
        last_block: int | None = None,
        late_tag: bytes = b"",
    ) -> None:
        self.spec = spec
        self.topics = topics
        self.routes = routes
        self.source = source
        self.produce = produce
        self.offset = offset
        self.block, self.next_seq, self.epoch = seq_state
        self.late_tag = late_tag
        self._suffix = id_suffix(self.epoch, late_tag)
        self._seqs = _seq_texts(self._suffix)
        self.first_block = first_block
        self.last_block = last_block
        self._decode, self._coin_of = fast_decoder(spec.coin_location)
        self._table = spec.dir_name.encode()
        self._source = source.encode()
        self._dlq_key = self._table
        self._dlq_partition = dead_letter_partition(spec, topics)
        self.refusal: BaseException | None = None

    @property
    def seq_state(self) -> SeqState:
        return self.block, self.next_seq, self.epoch

    def write(self, items: list[Item], acks: CycleAcks, tally: Tally, start: int = 0) -> int:
        """Hand ``items[start:]`` (the first of them at :attr:`offset`) to the producer.

        Returns ``len(items)``, or the index of the item ``produce`` refused (see :attr:`refusal`);
        then :attr:`offset` is that item's offset and nothing of it was counted or numbered.
        """
        produce, topic, decode, coin_of = self.produce, self.topics.data, self._decode, self._coin_of
        routes, add_route, callbacks = self.routes.get, self.routes.add, acks.data
        source, prefix_of, seqs, suffix = self._source, self._line_id_prefix, self._seqs, self._suffix
        block, seq, epoch, first, offset = self.block, self.next_seq, self.epoch, self.first_block, self.offset
        regressions = tally.regressions
        prefix_block, prefix = None, b""
        lines = produced = 0
        last_line = None
        self.refusal = None
        try:
            # Every item becomes exactly one record (data or dead letter): the index of the item a
            # refusal stops at is start + produced.
            # Typed as bytes for the fast path; an OversizeLine item fails at data.isascii() and is
            # dead-lettered by the slow path.
            for data in cast("list[bytes]", items if start == 0 else items[start:]):
                # ``data`` is the line with its newline (JSON allows the trailing whitespace).
                try:
                    if not data.isascii():
                        data.decode()
                    envelope = decode(data)
                    events = envelope.events
                    number = envelope.block_number
                    coin = coin_of(events[0])
                    n_events = len(events)
                except Exception:  # noqa: BLE001 - whatever the fast path refuses, the full inspection names
                    info = self._inspect_slow(data)
                    if type(info) is not LineInfo:
                        self._dead_letter_item(data, offset, info, acks, tally)
                        produced += 1
                        offset += item_span(data)
                        continue
                    coin, number, n_events = info.coin, info.block_number, info.n_events
                route = routes(coin) or add_route(coin)
                line_seq = seq if number == block else 0
                if number != prefix_block:
                    # Only when the block changes (or a write begins): the hot path pays nothing more.
                    if block is not None and number < block:
                        epoch += 1
                        suffix = id_suffix(epoch, self.late_tag)
                        seqs = _seq_texts(suffix)
                        regressions.append(Regression(offset, block, number, epoch))
                    prefix_block, prefix = number, prefix_of(number)
                headers = [
                    ("line_id", prefix + seqs[line_seq] if line_seq < _SEQ_CACHED else b"%s%d%s" % (prefix, line_seq, suffix)),
                    ("source", source),
                    ("offset", b"%d" % offset),
                ]
                value = data[:-1]
                produce(topic, value, route[0], route[1], callbacks[route[1]], None, 0, headers)
                block, seq = number, line_seq + n_events
                if first is None:
                    first = number
                last_line = value
                lines += 1
                produced += 1
                offset += len(data)
        except Exception as exc:  # noqa: BLE001 - raised by produce (nothing else in the loop raises)
            self.refusal = None if isinstance(exc, BufferError) else exc
            if regressions and regressions[-1].offset == offset:
                regressions.pop()  # the refused line regressed: it is written again later, and counted then
                epoch -= 1
        self.block, self.next_seq, self.first_block, self.offset = block, seq, first, offset
        if epoch != self.epoch:
            self.epoch = epoch
            self._suffix = id_suffix(epoch, self.late_tag)
            self._seqs = _seq_texts(self._suffix)
        if last_line is not None:
            self.last_block = block
            tally.last_line = last_line
        tally.lines += lines
        tally.produced += produced
        return start + produced

    def _line_id_prefix(self, block: int) -> bytes:
        return b"%s|%d|" % (self._table, block)

    def write_unterminated(self, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        """Send the file's unterminated last line (``item``, at :attr:`offset`) to the DLQ with
        reason ``unterminated``: the file was finalized without a newline after it. Raises what
        ``produce`` raises, with nothing counted."""
        if type(item) is OversizeLine:
            value, length = reference(self.source, item.offset, item.length, item.sha256), item.length
        else:
            value, length = item.data, len(item.data)
        self._send_dead_letter(self.dead_letter("unterminated", item.offset, value, UNTERMINATED), acks, tally)
        tally.produced += 1
        self.offset = item.offset + length

    def dead_letter(self, reason: str, offset: int, value: bytes, detail: str, error: str | None = None) -> Record:
        """The DLQ record for the line at ``offset`` of this file (``value``: the line or its reference)."""
        headers: list[Header] = [
            ("source", self._source),
            ("offset", b"%d" % offset),
            ("reason", reason.encode()),
            ("detail", detail.encode()[:1024]),
        ]
        if error is not None:
            headers.append(("error", error.encode()))
        return Record(self.topics.dlq, self._dlq_partition, self._dlq_key, value, headers)

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        """The DLQ record that stands for ``record`` (one of this file's), refused for good by the
        broker: reason ``rejected``, the broker's error name in the ``error`` header, and a
        reference to the line as its value."""
        offset = int(record.header("offset") or b"0")
        value = record.value
        ref = reference(self.source, offset, len(value), hashlib.sha256(value).hexdigest())
        return self.dead_letter("rejected", offset, ref, detail, error=error)

    # -- the slow path: lines the fast decoder does not accept --------------------------------

    def _inspect_slow(self, item: Item) -> LineInfo | Rejection | OversizeLine:
        if type(item) is OversizeLine:
            return item
        return inspect_line(self.spec, item[:-1])

    def _dead_letter_item(self, item: Item, offset: int, why: Rejection | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        if type(why) is OversizeLine:
            value = reference(self.source, why.offset, why.length, why.sha256)
            detail = f"line of {why.length} bytes is longer than MAX_LINE_BYTES"
            self._send_dead_letter(self.dead_letter("oversize", offset, value, detail), acks, tally)
        else:
            line = cast(bytes, item)  # a Rejection is always of a line's bytes (an OversizeLine is its own why)
            self._send_dead_letter(self.dead_letter(why.reason, offset, line[:-1], why.detail), acks, tally)

    def _send_dead_letter(self, record: Record, acks: CycleAcks, tally: Tally) -> None:
        self.produce(record.topic, record.value, record.key, record.partition, acks.dlq, None, 0, record.headers)
        tally.dlq += 1
        tally.dead_letters.append(DeadLetter((record.header("reason") or b"").decode(), int(record.header("offset") or b"0")))


UNTERMINATED = "the file was finalized without a newline after its last line"
