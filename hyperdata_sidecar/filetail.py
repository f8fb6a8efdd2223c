"""One hour file being tailed: its reader, splitter, record writer and persisted cursor.

:class:`FileTail` is everything the tailer keeps about one file between ticks; :class:`TailFactory`
makes them, and is the one place a :class:`~hyperdata_sidecar.core.records.RecordWriter` is built
(for the producer, or for a :class:`~hyperdata_sidecar.core.records.Collector` that rebuilds a
cycle's records).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.records import Produce, RecordWriter, Routes, Topics
from hyperdata_sidecar.core.splitter import LineSplitter
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.core.window import WriterState
from hyperdata_sidecar.publishing import Publisher
from hyperdata_sidecar.reader import HourFileReader


@dataclass
class FileTail:
    """A file the tailer knows: its persisted cursor (everything before ``cursor.byte_offset`` is
    delivered), the reader at the next byte to read, the splitter holding a partial line, the writer
    at the next line to hand over. ``watch_until``: a finalized file is stat'ed for late appends
    until then (epoch seconds)."""

    hour: HourFile
    cursor: FileCursor
    reader: HourFileReader
    splitter: LineSplitter
    writer: RecordWriter
    watch_until: float | None = None

    @property
    def path(self) -> str:
        return self.hour.relpath

    def writer_state(self) -> WriterState:
        writer = self.writer
        return WriterState(writer.offset, writer.seq_state, writer.first_block, writer.last_block)


class TailFactory:
    """Makes the tails and record writers of one node table."""

    def __init__(self, spec: TableSpec, settings: Settings, topics: Topics, publisher: Publisher) -> None:
        self.spec = spec
        self.settings = settings
        self.topics = topics
        self.routes = Routes(topics.data_partitions)
        self.publisher = publisher  # its produce is read when a writer is made (the producer exists once connected)

    def tail(self, hour: HourFile, cursor: FileCursor, reader: HourFileReader | None = None) -> FileTail:
        """Tail ``hour`` from ``cursor``; ``reader`` keeps the one already open (its digest), moved to the cursor."""
        if reader is None:
            reader = HourFileReader(self.settings.watch_dir / hour.relpath, cursor.byte_offset, cursor.head)
        else:
            reader.position = cursor.byte_offset
        state = WriterState(cursor.byte_offset, cursor.seq_state, cursor.first_block, cursor.last_block)
        return FileTail(
            hour=hour,
            cursor=cursor,
            reader=reader,
            splitter=self.splitter(cursor.byte_offset),
            writer=self.writer(hour, state, self.publisher.produce, late=cursor.stage is CursorStage.REOPENED),
            watch_until=self.watch_until(cursor),
        )

    def splitter(self, offset: int) -> LineSplitter:
        return LineSplitter(offset, self.settings.max_line_bytes)

    def writer(self, hour: HourFile, state: WriterState, produce: Produce, *, late: bool) -> RecordWriter:
        """The record writer of ``hour`` from ``state``; a reopened file's ids carry its late tag."""
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
