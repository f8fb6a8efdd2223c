"""The Python line engine: the reference.

:class:`~hyperdata_sidecar.core.splitter.LineSplitter` and
:class:`~hyperdata_sidecar.core.records.RecordWriter` on confluent-kafka's producer: one
``produce`` per record, on the event loop, its delivery report a Python callback of the cycle's
:class:`~hyperdata_sidecar.core.delivery.Deliveries` (served by the data plane's ``poll``). The
files are read with the standard library and hashed with hashlib (:class:`~hyperdata_sidecar.digest.PythonReads`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException, Producer

from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import (
    Collector,
    CycleAcks,
    Produce,
    Record,
    RecordWriter,
    Routes,
    Tally,
    dead_letter_partition,
)
from hyperdata_sidecar.core.splitter import Item, Line, LineSplitter, OversizeLine
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.digest import PYTHON_READS, ChunkReads, ReadChunk
from hyperdata_sidecar.engines import FileLines, Handover, LineEngine, TxnError


class ConfluentProducer(Producer):
    """confluent-kafka's producer, with the metadata call the data plane makes of either engine's."""

    def refresh_metadata(self, topic: str, timeout: float) -> str | None:
        try:
            metadata = self.list_topics(topic, timeout)
        except KafkaException as exc:
            return exc.args[0].str() if exc.args else str(exc)
        found = metadata.topics.get(topic)
        if found is not None and found.error is not None:
            return str(found.error.str())
        return None


@dataclass(frozen=True)
class PythonEngine:
    """The reference engine. ``version`` is the sidecar's own."""

    version: str
    fallback_reason: str | None = None
    name: Literal["python"] = "python"
    # The key and partition of each coin, one cache per data topic (a table has a few hundred coins).
    _routes: dict[str, Routes] = field(default_factory=dict, compare=False, repr=False)

    def label(self) -> str:
        return f"{self.name} {self.version}"

    def producer(self, config: dict[str, Any]) -> ConfluentProducer:
        return ConfluentProducer(config)

    def reads(self) -> ChunkReads:
        return PYTHON_READS

    def lines(self, producer: Any, file: FileLines) -> LineEngine:
        topics = file.topics
        routes = self._routes.get(topics.data)
        if routes is None or routes.partitions != topics.data_partitions:
            routes = self._routes[topics.data] = Routes(topics.data_partitions)
        return PythonLines(file, producer.produce, routes)

    def txn_error(self, exc: BaseException) -> TxnError | None:
        """confluent-kafka raises ``KafkaException(KafkaError)`` from its transactional calls and
        from a refused ``produce`` alike."""
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            return TxnError.of(exc.args[0])
        return None


class PythonLines:
    """One file's reference line engine: its splitter and its record writer, handing records to
    ``produce`` (``routes``: the data topic's coin routes, a new cache when None)."""

    def __init__(self, file: FileLines, produce: Produce, routes: Routes | None = None) -> None:
        self.file = file
        self.routes = routes if routes is not None else Routes(file.topics.data_partitions)
        self.splitter = LineSplitter(file.state.offset, file.max_line_bytes)
        self.writer = writer_of(file, file.state, produce, self.routes)
        self.dlq_partition = dead_letter_partition(file.spec, file.topics)

    @property
    def held_bytes(self) -> int:
        return self.splitter.held_bytes

    def state(self) -> WriterState:
        writer = self.writer
        return WriterState(writer.offset, writer.seq_state, writer.first_block, writer.last_block)

    def deliveries(self) -> Deliveries:
        return Deliveries()

    def handover(self, chunk: ReadChunk, cycle: Cycle) -> Handover:
        assert isinstance(chunk, bytes), "a Python line engine reads with the Python engine's reads"
        return _Handover(self.writer, self.splitter.feed(chunk), self._acks(cycle), cycle.tally)

    def flush_partial(self) -> Line | OversizeLine | None:
        return self.splitter.flush_partial()

    def unterminated(self, item: Line | OversizeLine, cycle: Cycle) -> Handover:
        return _UnterminatedHandover(self.writer, item, self._acks(cycle), cycle.tally)

    def rebuild(self, cycle: Cycle, data: bytes) -> Mapping[tuple[str, int], list[Record]]:
        collector = Collector()
        writer = writer_of(self.file, cycle.start, collector, self.routes)
        acks = collector.acks(self.file.topics.data_partitions)
        if cycle.partial is not None:
            writer.write_unterminated(cycle.partial, acks, Tally())
        else:
            writer.write(LineSplitter(cycle.start.offset, self.file.max_line_bytes).feed(data), acks, Tally())
        return collector.groups

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        return self.writer.rejection(record, error, detail)

    def _acks(self, cycle: Cycle) -> CycleAcks:
        return cycle.deliveries.cycle_acks(self.file.topics, self.dlq_partition)


def writer_of(file: FileLines, state: WriterState, produce: Produce, routes: Routes) -> RecordWriter:
    """The record writer of ``file`` from ``state``, handing its records to ``produce``."""
    return RecordWriter(
        file.spec,
        file.topics,
        routes,
        file.source,
        produce,
        offset=state.offset,
        seq_state=state.seq,
        first_block=state.first_block,
        last_block=state.last_block,
        late_tag=file.late_tag,
    )


class _Handover:
    """A read's lines through the record writer, on the event loop (one ``produce`` per record)."""

    def __init__(self, writer: RecordWriter, items: list[Item], acks: CycleAcks, tally: Tally) -> None:
        self.writer, self.items, self.acks, self.tally = writer, items, acks, tally
        self.index = 0
        self.refusal: BaseException | None = None

    async def step(self) -> bool:
        self.index = self.writer.write(self.items, self.acks, self.tally, self.index)
        self.refusal = self.writer.refusal
        return self.index == len(self.items)


class _UnterminatedHandover:
    """The dead letter of a finalized file's unterminated last line, through the record writer."""

    def __init__(self, writer: RecordWriter, item: Line | OversizeLine, acks: CycleAcks, tally: Tally) -> None:
        self.writer, self.item, self.acks, self.tally = writer, item, acks, tally
        self.refusal: BaseException | None = None

    async def step(self) -> bool:
        try:
            self.writer.write_unterminated(self.item, self.acks, self.tally)
        except BufferError:
            self.refusal = None
            return False
        except Exception as exc:  # noqa: BLE001 - produce's refusal, judged by the tailer like a write's
            self.refusal = exc
            return False
        return True
