"""The sidecar's compiled line engine: split, inspect, sequence and build the records of a read.

The reference is the Python engine (``hyperdata_sidecar.core``: ``LineSplitter``, ``inspect_line``,
``RecordWriter``); for the same bytes and start state this one gives the same records, byte for byte.
A line the native inspection cannot vouch for is returned as ``Batch.undecided``: the read stops
there until Python's verdict (``accept`` or ``reject``) resumes it.
"""

from typing import final

__version__: str

Header = tuple[str, bytes]
#: (topic, partition, key, value, headers), as ``produce`` would receive it.
RecordTuple = tuple[str, int, bytes, bytes, list[Header]]

@final
class Batch:
    """What one call handed over, in file order."""

    def records(self) -> list[RecordTuple]:
        """Every record (data and dead letters) in file order; built as Python objects on request."""
    @property
    def lines(self) -> int:
        """Good lines handed over as data records."""
    @property
    def dlq(self) -> int:
        """Dead letters handed over."""
    @property
    def produced(self) -> int:
        """Every record handed over: ``lines + dlq``."""
    @property
    def regressions(self) -> list[tuple[int, int, int, int]]:
        """(offset, previous block, block, epoch) of each block regression."""
    @property
    def dead_letters(self) -> list[tuple[str, int]]:
        """(reason, offset) of each dead letter."""
    @property
    def last_line(self) -> bytes | None:
        """The last good line of this batch (its block_time is the newest), or None."""
    @property
    def undecided(self) -> tuple[int, bytes] | None:
        """(offset, line without its newline) of the line waiting for a verdict; None when the read is done."""

@final
class HeldLine:
    """The unterminated last line of a finalized file (``LineSplitter.flush_partial``'s result)."""

    @property
    def offset(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def data(self) -> bytes | None:
        """The line's bytes; None when it is oversize (only ``length`` and ``sha256`` were kept)."""
    @property
    def sha256(self) -> str | None:
        """Hex sha256 of an oversize line; None otherwise."""

@final
class LineEngine:
    """One hour file's engine, fed read after read; the state read back after each call is the cursor's."""

    def __init__(
        self,
        *,
        table: str,
        coin_location: str,
        data_topic: str,
        data_partitions: int,
        dlq_topic: str,
        dlq_partition: int,
        source: str,
        offset: int,
        seq: tuple[int | None, int, int],
        first_block: int | None,
        last_block: int | None,
        late_tag: bytes,
        max_line_bytes: int,
    ) -> None:
        """``coin_location`` is a ``CoinLocation`` value; ``dlq_partition`` is the table's dead-letter
        partition (``records.dead_letter_partition``); ``seq`` the sequencer state at ``offset``.
        Raises ValueError for an unknown ``coin_location`` or ``data_partitions < 1``."""
    def feed(self, chunk: bytes) -> Batch:
        """Split ``chunk`` and hand over its complete lines, up to the first undecided one (the GIL
        is released meanwhile). Raises RuntimeError while a line waits for its verdict."""
    def accept(self, coin: str, block_number: int, n_events: int) -> Batch:
        """Verdict on ``Batch.undecided``: a good line (``inspect_line``'s ``LineInfo``); the read
        goes on. Raises RuntimeError when no line waits for a verdict."""
    def reject(self, reason: str, detail: str) -> Batch:
        """Verdict on ``Batch.undecided``: a dead letter (``inspect_line``'s ``Rejection``); the read
        goes on. Raises RuntimeError when no line waits for a verdict."""
    def flush_partial(self) -> HeldLine | None:
        """The held unterminated tail (the file is finalized), the offset moved past it; None if
        nothing is held. Raises RuntimeError while a line waits for its verdict."""
    @property
    def offset(self) -> int:
        """Where the next line handed over starts (an undecided line's offset while it waits)."""
    @property
    def seq(self) -> tuple[int | None, int, int]:
        """The sequencer state: (block of the last good line, next seq_in_block, regression epoch)."""
    @property
    def first_block(self) -> int | None: ...
    @property
    def last_block(self) -> int | None: ...
    @property
    def held_bytes(self) -> int:
        """Length of the partial line held back."""

def partition_for(key: bytes, partitions: int) -> int:
    """Kafka's default partition of ``key``: ``(murmur2(key) & 0x7fffffff) % partitions``."""
