"""The compiled line engine (``native``: the module ``hyperdata_sidecar_engine``, built from engine/).

It makes the worker's producer (librdkafka through rust-rdkafka, the same configuration and calls
as confluent-kafka's), reads the hour files (:class:`NativeReads`: the bytes and the file's sha256
in one call, handed to the line engine without a copy), and splits, inspects, numbers and produces
a whole read with the GIL released, in a worker thread, counting the delivery reports in Rust
(:class:`NativeDeliveries`). Its rare paths are its own too: the dead letter of an unterminated last
line, the records of a cycle made again after a failed delivery (the engine in collect mode), the
``rejected`` dead letter that replaces a record the broker refused for good.

One thing it asks Python: a line its scanner cannot vouch for comes back ``undecided``, and
:class:`ReferenceInspector` gives the reference's verdict (:func:`~hyperdata_sidecar.core.lineinfo.inspect_line`),
so a dead letter's reason and detail are the Python engine's, word for word.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hyperdata_sidecar.core.delivery import Deliveries, Failure
from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.records import DeadLetter, Record, Regression, Tally, dead_letter_partition
from hyperdata_sidecar.core.splitter import Line, OversizeLine
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.digest import ChunkReads, ReadChunk, RunningDigest
from hyperdata_sidecar.engines import FileLines, Handover, LineEngine, Producer, TxnError


@dataclass(frozen=True)
class NativeEngine:
    """The compiled engine; ``version`` is its crate's."""

    module: Any
    name: Literal["native"] = "native"
    fallback_reason: str | None = None

    @property
    def version(self) -> str:
        return str(self.module.__version__)

    def label(self) -> str:
        return f"{self.name} {self.version}"

    def producer(self, config: dict[str, Any]) -> Producer:
        producer: Producer = self.module.Producer(config)
        return producer

    def reads(self) -> ChunkReads:
        return NativeReads(self.module)

    def lines(self, producer: Producer, file: FileLines) -> LineEngine:
        if not isinstance(producer, self.module.Producer):
            raise TypeError(f"the native line engine produces on its own Producer, not on {type(producer).__name__}")
        return NativeLines(self.module, producer, file)

    def txn_error(self, exc: BaseException) -> TxnError | None:
        """The engine's producer raises ``TransactionError(ClientError)`` from its transactional
        calls and ``ProduceError(ClientError)`` from a refused ``produce``: both are read, as
        confluent-kafka's one exception for both is."""
        errors = (self.module.TransactionError, self.module.ProduceError)
        if isinstance(exc, errors) and exc.args and isinstance(exc.args[0], self.module.ClientError):
            return TxnError.of(exc.args[0])
        return None


class NativeReads:
    """The compiled engine's reads: one call with the GIL released reads the file in cache-sized
    pieces and hashes each right after it was read, into a buffer the engine's ``LineEngine.feed``
    takes without a copy. A regular file only, as ``digest.open_regular`` has it; the same
    ``OSError`` otherwise."""

    def __init__(self, module: Any) -> None:
        self.module = module

    def digest(self) -> RunningDigest:
        return RunningDigest(self.module.Sha256())

    def read(self, path: Path, offset: int, length: int, digest: RunningDigest) -> ReadChunk:
        hasher = digest.hasher_at(offset)
        chunk: ReadChunk = self.module.read_chunk(path, offset, length, hasher)
        if hasher is not None:
            digest.hashed(len(chunk))
        return chunk


class NativeDeliveries(Deliveries):
    """The delivery reports of a cycle the compiled engine produced, counted in Rust (``native``:
    its ``Deliveries``, which the engine's producer reports into with no Python call per record).
    Records sent again from Python are counted by :meth:`widen`, as for :class:`Deliveries`."""

    def __init__(self, native: Any) -> None:
        super().__init__()
        self.native = native

    def callback(self, topic: str, partition: int) -> Callable[[Any, Any], None]:
        raise TypeError("the compiled engine's cycles take no Python delivery callbacks")

    def reported(self) -> int:
        return int(self.native.reported())

    def failures(self) -> list[Failure]:
        return [Failure(topic, partition, position, error) for topic, partition, position, error in self.native.failures()]

    def _delivered_ranges(self, topic: str) -> dict[int, tuple[int, int]]:
        return dict(self.native.offset_ranges(topic))


class ReferenceInspector:
    """The one place the compiled engine asks Python: a line its scanner could not vouch for gets
    the reference inspection's verdict (:func:`inspect_line`), so dead-letter reasons and details
    are the Python engine's, byte for byte. Returns the engine's batch after the verdict."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec

    def decide(self, engine: Any, line: bytes, sink: Any) -> Any:
        info = inspect_line(self.spec, line)
        if type(info) is LineInfo:
            return engine.accept(info.coin, info.block_number, info.n_events, sink)
        return engine.reject(info.reason, info.detail, sink)


class NativeLines:
    """One file's compiled line engine, handing its records to the engine's ``producer``."""

    def __init__(self, module: Any, producer: Any, file: FileLines) -> None:
        self.module = module
        self.producer = producer
        self.file = file
        self.inspector = ReferenceInspector(file.spec)
        self.dlq_partition = dead_letter_partition(file.spec, file.topics)
        self.engine = self.engine_at(file.state)
        self._held = 0
        self._state = file.state

    def engine_at(self, state: WriterState) -> Any:
        """A ``hyperdata_sidecar_engine.LineEngine`` of this file starting at ``state``."""
        file, topics = self.file, self.file.topics
        return self.module.LineEngine(
            table=file.spec.dir_name,
            coin_location=file.spec.coin_location.value,
            data_topic=topics.data,
            data_partitions=topics.data_partitions,
            dlq_topic=topics.dlq,
            dlq_partition=self.dlq_partition,
            source=file.source,
            offset=state.offset,
            seq=state.seq,
            first_block=state.first_block,
            last_block=state.last_block,
            late_tag=file.late_tag,
            max_line_bytes=file.max_line_bytes,
        )

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
        topics = self.file.topics
        return NativeDeliveries(
            self.module.Deliveries(self.producer, topics.data, topics.data_partitions, topics.dlq, self.dlq_partition)
        )

    def sink(self, cycle: Cycle) -> Any:
        """Where the engine hands ``cycle``'s records: the cycle's accounting on the engine's producer."""
        deliveries = cycle.deliveries
        assert isinstance(deliveries, NativeDeliveries), "a native cycle's deliveries are counted in Rust"
        return deliveries.native

    async def run(self, step: Callable[[], bool]) -> bool:
        """Run one step of a handover: in a worker thread, since the engine releases the GIL for it
        (so the tables' reads run side by side)."""
        return await asyncio.to_thread(step)

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        return _ReadHandover(self, chunk, cycle)

    def flush_partial(self) -> Line | OversizeLine | None:
        held = self.engine.flush_partial()
        self.noted()
        if held is None:
            return None
        if held.data is None:
            return OversizeLine(held.offset, held.length, held.sha256)
        return Line(held.offset, held.data)

    def unterminated(self, item: Line | OversizeLine, cycle: Cycle) -> Handover:
        return _UnterminatedHandover(self, item, cycle)

    def write_unterminated(self, item: Line | OversizeLine, sink: Any) -> Any:
        """The engine's batch of ``item``'s dead letter, handed to ``sink`` (kept in the batch when None)."""
        if type(item) is OversizeLine:
            return self.engine.write_unterminated(item.offset, item.length, sha256=item.sha256, sink=sink)
        return self.engine.write_unterminated(item.offset, len(item.data), data=item.data, sink=sink)

    def rebuild(self, cycle: Cycle, data: bytes) -> Mapping[tuple[str, int], list[Record]]:
        """The engine from the cycle's start state, in collect mode, over the same bytes."""
        engine = self.engine_at(cycle.start)
        if cycle.partial is not None:
            batches = [self.write_unterminated(cycle.partial, None)]
        else:
            batches = [engine.feed(data)]
            while batches[-1].undecided is not None:
                batches.append(self.inspector.decide(engine, batches[-1].undecided[1], None))
        groups: dict[tuple[str, int], list[Record]] = {}
        for batch in batches:
            for record in batch.records():
                groups.setdefault((record[0], record[1]), []).append(Record(*record))
        return groups

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        offset = int(record.header("offset") or b"0")
        return Record(*self.engine.rejection(offset, record.value, error, detail))


def count(batch: Any, tally: Tally) -> None:
    """Add what the engine's ``batch`` handed over to ``tally``."""
    tally.lines += batch.lines
    tally.dlq += batch.dlq
    tally.produced += batch.produced
    if batch.lines:
        tally.last_line = batch.last_line
    if batch.dlq:
        tally.dead_letters += [DeadLetter(reason, offset) for reason, offset in batch.dead_letters]
    if batch.regressions:
        tally.regressions += [Regression(*regression) for regression in batch.regressions]


def refusal_of(batch: Any) -> tuple[bool, BaseException | None]:
    """(stopped, refusal): whether ``batch`` stopped at a refused record, and the refusal (None
    when the producer's queue was full)."""
    refusal = batch.refusal
    if refusal is None:
        return False, None
    return True, None if isinstance(refusal, str) else refusal


class _ReadHandover:
    """One read through the compiled engine: one call for the read, one more per line the engine
    could not decide (the reference's verdict) and per refusal (after the tailer waited)."""

    def __init__(self, lines: NativeLines, chunk: ReadChunk, cycle: Cycle) -> None:
        self.lines = lines
        self.chunk: ReadChunk | None = chunk
        self.tally = cycle.tally
        self.sink = lines.sink(cycle)
        self.refusal: BaseException | None = None

    async def step(self) -> bool:
        return await self.lines.run(self._step)

    def _step(self) -> bool:
        lines = self.lines
        try:
            engine, sink = lines.engine, self.sink
            if self.chunk is not None:
                batch, self.chunk = engine.feed(self.chunk, sink), None
            else:
                batch = engine.proceed(sink)
            while True:
                count(batch, self.tally)
                stopped, self.refusal = refusal_of(batch)
                if stopped:
                    return False
                if batch.undecided is None:
                    return True
                batch = lines.inspector.decide(engine, batch.undecided[1], sink)
        finally:
            lines.noted()


class _UnterminatedHandover:
    """The dead letter of a finalized file's unterminated last line, made and produced by the engine."""

    def __init__(self, lines: NativeLines, item: Line | OversizeLine, cycle: Cycle) -> None:
        self.lines, self.item, self.tally = lines, item, cycle.tally
        self.sink = lines.sink(cycle)
        self.refusal: BaseException | None = None

    async def step(self) -> bool:
        batch = self.lines.write_unterminated(self.item, self.sink)
        count(batch, self.tally)
        stopped, self.refusal = refusal_of(batch)
        return not stopped
