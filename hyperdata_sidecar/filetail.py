"""One hour file being tailed: its reader, line engine and persisted cursor.

:class:`FileTail` is everything the tailer keeps about one file between ticks; :class:`TailFactory`
makes them. A file's *line engine* turns the bytes read into records handed to the producer, one
read at a time, and holds the partial line between reads. There are two, with one contract:

- :class:`PythonLines`: the reference, :class:`~hyperdata_sidecar.core.splitter.LineSplitter` and
  :class:`~hyperdata_sidecar.core.records.RecordWriter` calling confluent-kafka's ``produce`` per record;
- :class:`NativeLines`: the compiled engine (``hyperdata_sidecar_engine``), which splits, inspects,
  numbers and produces a whole read on its own librdkafka producer with the GIL released, and counts
  the delivery reports in Rust. A line its inspection cannot vouch for comes back for Python's
  :func:`~hyperdata_sidecar.core.lineinfo.inspect_line` (so dead-letter details are the reference's).
  Its file is read by the engine too (:class:`~hyperdata_sidecar.digest.NativeReads`: the bytes and
  the file's sha256 in one call, handed over without a copy). Given a Python ``produce`` callable
  instead of its producer (the tailer's unit tests' fake broker), it calls it per record as the
  reference writer does, with the cycle's Python :class:`Deliveries`.

Both hand a read over through a :class:`Handover` the tailer steps until done, waiting for room or
holding the table in between; the rare paths (the unterminated last line, a rejected record's dead
letter, rebuilding a cycle's records) go through the reference :class:`RecordWriter` in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.delivery import Deliveries, NativeDeliveries
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.records import (
    CycleAcks,
    DeadLetter,
    Produce,
    Record,
    RecordWriter,
    Regression,
    Routes,
    Tally,
    Topics,
    dead_letter_partition,
)
from hyperdata_sidecar.core.splitter import Item, Line, LineSplitter, OversizeLine
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.digest import PYTHON_READS, ChunkReads, NativeReads, ReadChunk
from hyperdata_sidecar.publishing import Publisher
from hyperdata_sidecar.reader import HourFileReader


class Handover(Protocol):
    """One read being handed to the producer."""

    refusal: BaseException | None
    """Why the last :meth:`step` stopped early: None when the producer's queue was full, else the client's refusal."""

    off_loop: bool
    """Steps release the GIL for most of their work: run them in a worker thread, so the tables'
    reads run side by side (the compiled engine) rather than on the event loop (the Python one, and
    the compiled one handing its records to a Python ``produce``, which holds the GIL for each and
    is no more thread-safe than what the reference writer calls)."""

    def step(self) -> bool:
        """Hand over as much as the producer takes; True once every line of the read was."""


class LineEngine(Protocol):
    """A file's line engine (see the module's docstring)."""

    reference: RecordWriter
    """The reference writer of this file, for the rare paths (unterminated line, rejections)."""

    @property
    def held_bytes(self) -> int:
        """Bytes of a partial line held back after the last read."""

    def state(self) -> WriterState:
        """Where the engine stands: the next line's offset, the sequencer, the block range so far."""

    def deliveries(self) -> Deliveries:
        """The delivery accounting of a new cycle."""

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        """The lines of ``chunk`` (and of the partial line held before it), to be handed over as ``cycle``."""

    def flush_partial(self) -> Line | OversizeLine | None:
        """The held unterminated tail (the file is finalized), the engine moved past it; None if nothing is held."""

    def write_unterminated(self, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        """Dead-letter the unterminated tail ``item``; raises what ``produce`` raises, nothing counted."""


@dataclass
class FileTail:
    """A file the tailer knows: its persisted cursor (everything before ``cursor.byte_offset`` is
    delivered), the reader at the next byte to read, the line engine at the next line to hand over.
    ``watch_until``: a finalized file is stat'ed for late appends until then (epoch seconds)."""

    hour: HourFile
    cursor: FileCursor
    reader: HourFileReader
    engine: LineEngine
    late: bool
    watch_until: float | None = None

    @property
    def path(self) -> str:
        return self.hour.relpath


class PythonLines:
    """The reference line engine: the splitter and the record writer, in Python."""

    def __init__(self, splitter: LineSplitter, writer: RecordWriter, topics: Topics, dlq_partition: int) -> None:
        self.splitter = splitter
        self.reference = writer
        self.topics = topics
        self.dlq_partition = dlq_partition

    @property
    def held_bytes(self) -> int:
        return self.splitter.held_bytes

    def state(self) -> WriterState:
        writer = self.reference
        return WriterState(writer.offset, writer.seq_state, writer.first_block, writer.last_block)

    def deliveries(self) -> Deliveries:
        return Deliveries()

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        assert isinstance(chunk, bytes), "the Python engine's file is read by Python (TailFactory pairs them)"
        acks = cycle.deliveries.cycle_acks(self.topics, self.dlq_partition)
        return _PythonHandover(self.reference, self.splitter.feed(chunk), acks, cycle.tally)

    def flush_partial(self) -> Line | OversizeLine | None:
        return self.splitter.flush_partial()

    def write_unterminated(self, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        self.reference.write_unterminated(item, acks, tally)


class _PythonHandover:
    def __init__(self, writer: RecordWriter, items: list[Item], acks: CycleAcks, tally: Tally) -> None:
        self.writer, self.items, self.acks, self.tally = writer, items, acks, tally
        self.index = 0
        self.refusal: BaseException | None = None
        self.off_loop = False

    def step(self) -> bool:
        self.index = self.writer.write(self.items, self.acks, self.tally, self.index)
        self.refusal = self.writer.refusal
        return self.index == len(self.items)


class NativeLines:
    """The compiled line engine of one file (``native``: the module ``hyperdata_sidecar_engine``).

    ``producer`` is where its records go:

    - the engine's own ``Producer`` (the sidecar): each read produced with the GIL released, in a
      worker thread, the delivery reports counted in Rust (:class:`NativeDeliveries`);
    - a Python ``produce`` callable with confluent-kafka's positional signature, as
      :class:`RecordWriter` calls it (the tailer's unit tests: their fake broker's): called once per
      record with the GIL held, on the event loop, the reports counted by the cycle's Python
      :class:`Deliveries`; what it raises is judged as the reference writer's refusal;
    - None: the records are kept in :attr:`collected` (the differential tests, ``bench``).
    """

    def __init__(
        self, native: Any, producer: Any, spec: TableSpec, topics: Topics, writer: RecordWriter, max_line_bytes: int
    ) -> None:
        self.native = native
        self.producer = producer
        self.python_produce: Produce | None = None if producer is None or isinstance(producer, native.Producer) else producer
        self.collected: list[Record] | None = [] if producer is None else None
        self.spec = spec
        self.topics = topics
        self.reference = writer
        self.dlq_partition = dead_letter_partition(spec, topics)
        self.engine = native.LineEngine(
            table=spec.dir_name,
            coin_location=spec.coin_location.value,
            data_topic=topics.data,
            data_partitions=topics.data_partitions,
            dlq_topic=topics.dlq,
            dlq_partition=self.dlq_partition,
            source=writer.source,
            offset=writer.offset,
            seq=writer.seq_state,
            first_block=writer.first_block,
            last_block=writer.last_block,
            late_tag=writer.late_tag,
            max_line_bytes=max_line_bytes,
        )
        self._held = 0
        self._state = WriterState(writer.offset, writer.seq_state, writer.first_block, writer.last_block)

    # The engine is borrowed by a read running in a worker thread; the status page asks for the held
    # bytes at any time. So both are copied after every call that changes them, and read from here.
    @property
    def held_bytes(self) -> int:
        return self._held

    def state(self) -> WriterState:
        return self._state

    def noted(self) -> None:
        """Copy the engine's state (called after every engine call, on the thread that made it)."""
        engine = self.engine
        self._held = engine.held_bytes
        self._state = WriterState(engine.offset, engine.seq, engine.first_block, engine.last_block)

    def deliveries(self) -> Deliveries:
        topics = self.topics
        if self.producer is None or self.python_produce is not None:
            return Deliveries()
        return NativeDeliveries(
            self.native.Deliveries(self.producer, topics.data, topics.data_partitions, topics.dlq, self.dlq_partition)
        )

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        return _NativeHandover(self, chunk, cycle)

    def sink(self, cycle: Cycle) -> Any:
        """Where the engine hands ``cycle``'s records: its producer's cycle accounting, the Python
        ``produce`` with the cycle's callbacks, or None (collected)."""
        deliveries = cycle.deliveries
        if isinstance(deliveries, NativeDeliveries):
            return deliveries.native
        if self.python_produce is None:
            return None
        acks = deliveries.cycle_acks(self.topics, self.dlq_partition)
        return self.native.PythonProducer(self.python_produce, acks.data, acks.dlq)

    def flush_partial(self) -> Line | OversizeLine | None:
        held = self.engine.flush_partial()
        self.noted()
        if held is None:
            return None
        if held.data is None:
            return OversizeLine(held.offset, held.length, held.sha256)
        return Line(held.offset, held.data)

    def write_unterminated(self, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        self.reference.write_unterminated(item, acks, tally)


class _NativeHandover:
    """One read through the compiled engine: one call for the read, one more per line the engine
    could not decide (Python's verdict) and per refusal (after the tailer waited). The refusal is
    what the producer raised (its ``ProduceError`` for the engine's own), as the reference writer
    keeps it. A Python ``produce`` is called on the event loop, as the reference writer calls it."""

    def __init__(self, lines: NativeLines, chunk: ReadChunk, cycle: Cycle) -> None:
        self.lines = lines
        self.chunk: ReadChunk | None = chunk
        self.tally = cycle.tally
        self.sink = lines.sink(cycle)
        self.refusal: BaseException | None = None
        self.off_loop = lines.python_produce is None

    def step(self) -> bool:
        try:
            return self._step()
        finally:
            self.lines.noted()

    def _step(self) -> bool:
        engine, sink, spec = self.lines.engine, self.sink, self.lines.spec
        if self.chunk is not None:
            batch, self.chunk = engine.feed(self.chunk, sink), None
        else:
            batch = engine.proceed(sink)
        while True:
            self._count(batch)
            refusal = batch.refusal
            if refusal is not None:
                self.refusal = None if isinstance(refusal, str) else refusal
                return False
            undecided = batch.undecided
            if undecided is None:
                return True
            info = inspect_line(spec, undecided[1])
            if type(info) is LineInfo:
                batch = engine.accept(info.coin, info.block_number, info.n_events, sink)
            else:
                batch = engine.reject(info.reason, info.detail, sink)

    def _count(self, batch: Any) -> None:
        if self.lines.collected is not None:
            self.lines.collected += [Record(*record) for record in batch.records()]
        tally = self.tally
        tally.lines += batch.lines
        tally.dlq += batch.dlq
        tally.produced += batch.produced
        if batch.lines:
            tally.last_line = batch.last_line
        if batch.dlq:
            tally.dead_letters += [DeadLetter(reason, offset) for reason, offset in batch.dead_letters]
        if batch.regressions:
            tally.regressions += [Regression(*regression) for regression in batch.regressions]


class UnterminatedHandover:
    """The dead letter of a finalized file's unterminated last line, handed over by the reference writer."""

    def __init__(self, engine: LineEngine, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        self.engine, self.item, self.acks, self.tally = engine, item, acks, tally
        self.refusal: BaseException | None = None
        self.off_loop = False

    def step(self) -> bool:
        try:
            self.engine.write_unterminated(self.item, self.acks, self.tally)
        except BufferError:
            self.refusal = None
            return False
        except Exception as exc:  # noqa: BLE001 - produce's refusal, judged by the tailer like a write's
            self.refusal = exc
            return False
        return True


class TailFactory:
    """Makes the tails and record writers of one node table. ``native``: the compiled engine's
    module when the worker uses it (its producer is the data plane's), else None."""

    def __init__(self, spec: TableSpec, settings: Settings, topics: Topics, publisher: Publisher) -> None:
        self.spec = spec
        self.settings = settings
        self.topics = topics
        self.routes = Routes(topics.data_partitions)
        self.publisher = publisher  # its produce is read when a writer is made (the producer exists once connected)

    def tail(self, hour: HourFile, cursor: FileCursor, reader: HourFileReader | None = None) -> FileTail:
        """Tail ``hour`` from ``cursor``; ``reader`` keeps the one already open (its digest), moved to the cursor."""
        if reader is None:
            reader = HourFileReader(self.settings.watch_dir / hour.relpath, cursor.byte_offset, cursor.head, self.reads())
        else:
            reader.position = cursor.byte_offset
        state = WriterState(cursor.byte_offset, cursor.seq_state, cursor.first_block, cursor.last_block)
        late = cursor.stage is CursorStage.REOPENED
        return FileTail(
            hour=hour,
            cursor=cursor,
            reader=reader,
            engine=self.engine(hour, state, late=late),
            late=late,
            watch_until=self.watch_until(cursor),
        )

    def reads(self) -> ChunkReads:
        """How a file is read: by the compiled engine when the data plane runs it (its line engine
        takes the engine's chunks), else by Python."""
        native = self.publisher.native
        return PYTHON_READS if native is None else NativeReads(native.module)

    def engine(self, hour: HourFile, state: WriterState, *, late: bool) -> LineEngine:
        """The line engine of ``hour`` from ``state``: the compiled one when the data plane runs it."""
        writer = self.writer(hour, state, self.publisher.produce, late=late)
        native = self.publisher.native
        if native is None:
            return PythonLines(self.splitter(state.offset), writer, self.topics, dead_letter_partition(self.spec, self.topics))
        return NativeLines(native.module, native.producer, self.spec, self.topics, writer, self.settings.max_line_bytes)

    def splitter(self, offset: int) -> LineSplitter:
        return LineSplitter(offset, self.settings.max_line_bytes)

    def writer(self, hour: HourFile, state: WriterState, produce: Produce, *, late: bool) -> RecordWriter:
        """The reference record writer of ``hour`` from ``state``; a reopened file's ids carry its late tag."""
        return RecordWriter(
            self.spec,
            self.topics,
            self.routes,
            hour.relpath,
            produce,
            offset=state.offset,
            seq_state=state.seq,
            first_block=state.first_block,
            last_block=state.last_block,
            late_tag=late_tag(hour) if late else b"",
        )

    def watch_until(self, cursor: FileCursor) -> float | None:
        """Until when a finalized file is watched for late appends (None: not watched)."""
        if cursor.stage is not CursorStage.FINALIZED or cursor.finalized_at is None or self.settings.late_append_watch_s <= 0:
            return None
        finalized = epoch_of(cursor.finalized_at)
        return None if finalized is None else finalized + self.settings.late_append_watch_s


def late_tag(hour: HourFile) -> bytes:
    """What ends the line id of every line appended to ``hour`` after its first seal: the file's
    own sequence continues there, and the tag keeps those ids apart from the next hour file's,
    which continued the table's stream from the file's first end."""
    return b"|late-%s-%s" % (hour.date.encode(), hour.hour.encode())
