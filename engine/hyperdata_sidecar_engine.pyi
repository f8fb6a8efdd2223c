"""The sidecar's compiled line engine: split, inspect, sequence and build the records of a read.

The reference is the Python engine (``hyperdata_sidecar.core``: ``LineSplitter``, ``inspect_line``,
``RecordWriter``); for the same bytes and start state this one gives the same records, byte for byte.
A line the native inspection cannot vouch for is returned as ``Batch.undecided``: the read stops
there until Python's verdict (``accept`` or ``reject``) resumes it.

Each call hands its records to a ``sink``: a cycle's :class:`Deliveries` on a :class:`Producer` (each
record queued on librdkafka as it is built, the GIL released, its delivery report counted in Rust);
or None, the records kept in the batch (``Batch.records``: rebuilding a cycle's records to find the
one behind a failed report, the differential tests, ``bench``). A record the sink refuses stops the
read there (``Batch.refusal``), every state as if its line had not been seen; ``proceed`` carries on.
For tests only, ``testing.PythonProducer`` is a third sink: each record handed to a Python
``produce`` callable as ``RecordWriter`` hands it, the GIL held (the tailer's unit tests' fake broker).
"""

import os
from collections.abc import Callable, Sequence
from typing import Any, final

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
    @property
    def refusal(self) -> str | BaseException | None:
        """Why the read stopped early: ``"full"`` (the producer's queue), or the exception of the
        client's refusal: the very one a :class:`PythonProducer`'s ``produce`` raised, a
        :class:`ProduceError` from the engine's :class:`Producer`; None when it did not."""

@final
class ClientError:
    """An error as confluent-kafka's ``KafkaError`` shows it."""

    def name(self) -> str:
        """librdkafka's name (``MSG_SIZE_TOO_LARGE``, ``_UNKNOWN_PARTITION``, ``_FENCED``, ...)."""
    def str(self) -> str: ...
    def fatal(self) -> bool: ...
    def retriable(self) -> bool:
        """A transactional call's: the call may be made again (it timed out). False for any other error."""
    def txn_requires_abort(self) -> bool:
        """A transactional call's: abort the transaction before beginning another. False for any other error."""

class ProduceError(Exception):
    """The producer refused a record; ``args[0]`` is its :class:`ClientError`."""

class TransactionError(Exception):
    """A transactional call of the :class:`Producer` failed; ``args[0]`` is its :class:`ClientError`,
    whose ``fatal()``, ``retriable()`` and ``txn_requires_abort()`` say what may follow."""

@final
class Delivered:
    """A delivered record, as confluent-kafka's ``Message`` shows it to a delivery callback."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...

@final
class Producer:
    """librdkafka's producer (statically linked), behind the calls of confluent-kafka's the data plane uses."""

    def __init__(self, config: dict[str, Any]) -> None:
        """librdkafka properties, plus ``error_cb(error)``, ``stats_cb(json)`` and ``logger``.
        Raises ValueError for a configuration librdkafka refuses."""
    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        partition: int = -1,
        on_delivery: Callable[[ClientError | None, Delivered], object] | None = None,
        callback: Callable[[ClientError | None, Delivered], object] | None = None,
        timestamp: int = 0,
        headers: list[Header] | None = None,
    ) -> None:
        """Queue one record; ``on_delivery`` is called by :meth:`poll`. Raises BufferError when the
        queue is full, :class:`ProduceError` when the client refuses the record."""
    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks, client errors, logs and statistics on this thread; how many
        events there were (reports counted in Rust included)."""
    def __len__(self) -> int:
        """Records queued, in flight, or with a report not yet served."""
    def flush(self, timeout: float = -1.0) -> int:
        """Wait for every record's report (``timeout`` < 0: no limit); how many are left."""
    def purge(self) -> None:
        """Drop every record not yet delivered (their reports fail with a purge error); returns once
        their reports are in, so the next ``poll()`` serves them (at most 5 s)."""
    def refresh_metadata(self, topic: str, timeout: float = 10.0) -> str | None:
        """Ask the broker for ``topic``'s metadata now; the error as text, or None."""
    def init_transactions(self, timeout: float = -1.0) -> None:
        """With a ``transactional.id``, once before any record: register it with the coordinator,
        fencing older producers of that id (``timeout`` < 0: twice ``transaction.timeout.ms``).
        Raises :class:`TransactionError` (retriable on a timeout: call again)."""
    def begin_transaction(self) -> None:
        """The records produced from now on belong to a new transaction; a record produced outside
        one is refused (``ProduceError``, ``_STATE``). Raises :class:`TransactionError`."""
    def commit_transaction(self, timeout: float = -1.0) -> None:
        """Wait for the transaction's records to be reported, then commit it; ``timeout`` in all
        (< 0: what is left of ``transaction.timeout.ms``). Raises :class:`TransactionError`:
        retriable on a timeout, ``txn_requires_abort()`` when a record failed, fatal when fenced."""
    def abort_transaction(self, timeout: float = -1.0) -> None:
        """Drop the records not yet delivered (reports fail with a purge error) and abort the
        transaction. Raises :class:`TransactionError` (retriable on a timeout, fatal when fenced)."""

@final
class Deliveries:
    """The delivery reports of one cycle's records, per (topic, partition), counted in Rust."""

    def __init__(self, producer: Producer, data_topic: str, data_partitions: int, dlq_topic: str, dlq_partition: int) -> None: ...
    def reported(self) -> int:
        """Records reported so far (delivered or failed)."""
    def failures(self) -> list[tuple[str, int, int, ClientError]]:
        """(topic, partition, position in the group, error) of each failed record."""
    def offset_ranges(self, topic: str) -> dict[int, tuple[int, int]]:
        """Per partition of ``topic``: the offsets of the first and last record delivered there."""

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
    def feed(self, chunk: bytes | Chunk, sink: Sink | None = None) -> Batch:
        """Split ``chunk`` (``bytes``, or a :func:`read_chunk`'s, taken without a copy) and hand over its complete lines, up to the first undecided one or a
        refusal (the GIL is released meanwhile, except for a :class:`PythonProducer`). Raises
        RuntimeError while a line waits for its verdict or lines of the last read wait after a
        refusal, ValueError when a :class:`PythonProducer` has not one data callback per partition."""
    def proceed(self, sink: Sink | None = None) -> Batch:
        """Hand over the rest of the read after ``Batch.refusal``."""
    def accept(self, coin: str, block_number: int, n_events: int, sink: Sink | None = None) -> Batch:
        """Verdict on ``Batch.undecided``: a good line (``inspect_line``'s ``LineInfo``); the read
        goes on. Raises RuntimeError when no line waits for a verdict."""
    def reject(self, reason: str, detail: str, sink: Sink | None = None) -> Batch:
        """Verdict on ``Batch.undecided``: a dead letter (``inspect_line``'s ``Rejection``); the read
        goes on. Raises RuntimeError when no line waits for a verdict."""
    def write_unterminated(
        self, offset: int, length: int, data: bytes | None = None, sha256: str | None = None, sink: Sink | None = None
    ) -> Batch:
        """The dead letter (reason ``unterminated``) of the tail :meth:`flush_partial` gave: its
        ``data`` (of ``length`` bytes), or an oversize line's ``length`` and ``sha256`` (its value is
        then a reference). The offset is not moved; after a refusal the same call sends it. Raises
        ValueError unless exactly one of ``data`` (of ``length`` bytes) and ``sha256`` is given."""
    def rejection(self, offset: int, value: bytes, error: str, detail: str) -> RecordTuple:
        """The ``rejected`` dead letter standing for the data record of the line at ``offset``
        (``value``) that the broker refused for good with ``error`` (``detail``: its words)."""
    def flush_partial(self) -> HeldLine | None:
        """The held unterminated tail (the file is finalized), the offset moved past it; None if
        nothing is held. Raises RuntimeError while a line waits for its verdict or lines wait."""
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
    @property
    def waiting(self) -> int:
        """Lines of the current read not handed over yet (after a refusal)."""

def partition_for(key: bytes, partitions: int) -> int:
    """Kafka's default partition of ``key``: ``(murmur2(key) & 0x7fffffff) % partitions``."""

class Sha256:
    """A running sha256 with hashlib's ``update``/``hexdigest``; :func:`read_chunk` updates it
    without the GIL."""

    def __init__(self) -> None: ...
    def update(self, data: bytes, /) -> None:
        """Hash ``data`` (the GIL released)."""
    def hexdigest(self) -> str:
        """The sha256 of everything hashed so far, lower-case hex; hashing may go on."""

class Chunk:
    """The bytes of one :func:`read_chunk`, kept on the engine's side: ``LineEngine.feed`` takes it
    as it is."""

    def __len__(self) -> int: ...
    def to_bytes(self) -> bytes:
        """A copy as ``bytes`` (tests)."""

def read_chunk(path: str | os.PathLike[str], offset: int, length: int, digest: Sha256 | None = None) -> Chunk:
    """Up to ``length`` bytes of ``path`` at ``offset`` (fewer at the end of the file), read in
    256 KiB pieces with the GIL released, each hashed into ``digest`` (when given) right after it
    was read. Only a regular file: a symlink is not followed, a pipe not waited on; either, or a
    directory, raises ``OSError(EINVAL, "not a regular file")`` or the open's own error (``ELOOP``
    for a link), as ``digest.open_regular`` does; other failures raise the ``OSError`` subclass of
    their errno."""

class _Testing:
    """``hyperdata_sidecar_engine.testing``: what only the tests use."""

    PythonProducer: type[PythonProducer]

testing: _Testing

@final
class PythonProducer:
    """For tests only (``testing.PythonProducer``): a Python ``produce`` callable and one cycle's delivery callbacks (``CycleAcks``), as a sink."""

    def __init__(
        self,
        produce: Callable[..., object],
        data: Sequence[Callable[[Any, Any], object]],
        dlq: Callable[[Any, Any], object],
    ) -> None:
        """The engine calls ``produce(topic, value, key, partition, on_delivery, None, 0, headers)``
        for each record, with the GIL held: ``on_delivery`` is ``data[partition]`` for a data record,
        ``dlq`` for a dead letter. ``BufferError`` from it is the queue being full; any other
        ``Exception`` the client's refusal (``Batch.refusal``); anything else (``KeyboardInterrupt``)
        is raised by the engine's call, as the reference writer lets it through."""

Sink = Deliveries | PythonProducer
