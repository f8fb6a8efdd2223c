"""One hour file being tailed: its reader, line engine and persisted cursor.

:class:`FileTail` is everything the tailer keeps about one file between ticks; :class:`TailFactory`
makes them. A file's reader comes from the engine (``Engine.reads``: how the file is read and
hashed), its line engine from the data plane (``Publisher.lines``: the engine's line engine of the
file, handing its records to the producer only the data plane holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.records import Topics
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.core.window import WriterState
from hyperdata_sidecar.engines import Engine, FileLines, LineEngine
from hyperdata_sidecar.publishing import Publisher
from hyperdata_sidecar.reader import HourFileReader


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


class TailFactory:
    """Makes the tails of one node table: each file's reader (the engine's reads) and line engine
    (the engine's, on the data plane's producer)."""

    def __init__(self, spec: TableSpec, settings: Settings, topics: Topics, engine: Engine, publisher: Publisher) -> None:
        self.spec = spec
        self.settings = settings
        self.topics = topics
        self.reads = engine.reads()
        self.publisher = publisher

    def tail(self, hour: HourFile, cursor: FileCursor, reader: HourFileReader | None = None) -> FileTail:
        """Tail ``hour`` from ``cursor``; ``reader`` keeps the one already open (its digest), moved to the cursor."""
        if reader is None:
            reader = HourFileReader(self.settings.watch_dir / hour.relpath, cursor.byte_offset, cursor.head, self.reads)
        else:
            reader.position = cursor.byte_offset
        state = WriterState(cursor.byte_offset, cursor.seq_state, cursor.first_block, cursor.last_block)
        late = cursor.stage is CursorStage.REOPENED
        file = FileLines(
            self.spec, self.topics, hour.relpath, state, late_tag(hour) if late else b"", self.settings.max_line_bytes
        )
        return FileTail(
            hour=hour,
            cursor=cursor,
            reader=reader,
            engine=self.publisher.lines(file),
            late=late,
            watch_until=self.watch_until(cursor),
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
