"""The line engines and the choice between them (``SIDECAR_ENGINE``).

Two implementations of one job: split, inspect, number and publish the lines of a read, and make
the records again when a delivery fails. The ``python`` engine (:mod:`.python`) is part of this
package and the reference; the ``native`` one (:mod:`.native`) runs the separate distribution
``hyperdata-sidecar-engine`` (module ``hyperdata_sidecar_engine``, built from engine/). As with
psycopg's ``PSYCOPG_IMPL``, :func:`select` returns one :class:`Engine` object that the sidecar uses
as it is: ``auto`` takes the native engine when it imports and the Python one otherwise, ``native``
refuses to go on without it. Nobody asks afterwards which engine runs: the engine makes the data
plane's producer, the reads of the hour files and each file's :class:`LineEngine`, and each runs its
own paths, the rare ones (a failed delivery, an unterminated last line) included.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any, Literal, NamedTuple, Protocol

from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import Record, Topics
from hyperdata_sidecar.core.splitter import Line, OversizeLine
from hyperdata_sidecar.core.tables import TableSpec
from hyperdata_sidecar.core.window import Cycle, WriterState
from hyperdata_sidecar.digest import ChunkReads, ReadChunk

ENGINE_CHOICES = ("auto", "native", "python")
NATIVE_MODULE = "hyperdata_sidecar_engine"
SIDECAR_DISTRIBUTION = "hyperdata-sidecar"
HOW_TO_GET_NATIVE = "build it with `make engine`, or `pip install ./engine` with a Rust toolchain; or set SIDECAR_ENGINE=python"


class EngineUnavailable(RuntimeError):
    """The native engine was asked for and does not import; ``str(err)`` is one line saying what is
    missing and how to get it."""


class Producer(Protocol):
    """The worker's librdkafka producer as the data plane runs it: confluent-kafka's calls, and
    :meth:`refresh_metadata`. Only ``dataplane.py`` holds one (it hands it to the engine's line
    engines, never to a tailer or an agent).

    Made with a ``transactional.id`` (``enable.idempotence``, ``acks=all``, ``message.timeout.ms`` at
    most ``transaction.timeout.ms``), it is a transactional producer: :meth:`init_transactions` once,
    then every record produced (by either kind of caller) belongs to the transaction opened by
    :meth:`begin_transaction` and closed by :meth:`commit_transaction` or :meth:`abort_transaction`;
    a record produced outside one is refused (``_STATE``). Delivery reports come as before: a record
    reported delivered is written, and seen by a ``read_committed`` consumer only once its
    transaction is committed. The transactional calls block (but :meth:`begin_transaction`) and may
    run in a worker thread while :meth:`poll` serves reports on another; but confluent-kafka's
    commit and abort serve its callbacks (delivery reports, ``error_cb``, ``stats_cb``, ``logger``)
    on their own thread while they wait, as its ``flush`` does, where the compiled engine's leave
    every callback to :meth:`poll`: a caller that keeps callbacks on one thread lets :meth:`poll`
    serve every report first (``len(producer) == 0``). A failed call raises the engine's
    exception, which :meth:`Engine.txn_error` reads; timeouts are in seconds, negative meaning
    librdkafka's own limit (the transaction's time, not forever)."""

    def produce(self, *args: Any) -> None: ...

    def poll(self, timeout: float = ...) -> int: ...

    def __len__(self) -> int: ...

    def purge(self) -> None: ...

    def refresh_metadata(self, topic: str, timeout: float) -> str | None:
        """Blocking: ask the broker for ``topic``'s metadata now; the error as text, or None."""

    def init_transactions(self, timeout: float = -1.0) -> None:
        """Blocking, once before anything else: register the ``transactional.id`` with its
        coordinator, which fences every older producer of that id and ends the transaction it left
        open. Raises (retriable) when the coordinator did not answer in ``timeout``: call again."""

    def begin_transaction(self) -> None:
        """Open a transaction: the records produced from now on belong to it. Raises (``_STATE``)
        while one is open, before :meth:`init_transactions`, or (fatal) once the producer is fenced."""

    def commit_transaction(self, timeout: float = -1.0) -> None:
        """Blocking: wait for every record of the transaction to be delivered, then commit it. Raises:
        retriable on a timeout (call again; the commit goes on meanwhile), requiring an abort when a
        record failed for good, fatal when the producer was fenced."""

    def abort_transaction(self, timeout: float = -1.0) -> None:
        """Blocking: drop the transaction's records not yet delivered (their reports fail with
        ``_PURGE_QUEUE`` or ``_PURGE_INFLIGHT``) and abort it: no ``read_committed`` consumer sees any
        of its records. The way out of an error that requires an abort. Raises: retriable on a
        timeout (call again), fatal when the producer was fenced."""


class TxnError(NamedTuple):
    """What a failed call of either engine's producer says, read the same from both engines
    (:meth:`Engine.txn_error`): librdkafka's ``name`` (``_FENCED``, ``_STATE``, ``_TIMED_OUT``, ...)
    and ``detail`` (its words), and what may follow. ``fatal``: the producer is done for (fenced by
    a newer one of its ``transactional.id``): make a new one. ``requires_abort``: abort the
    transaction, then begin another. ``retriable``: make the same call again. None of the three:
    the call was out of turn (``_STATE``), the configuration lacks something (``_NOT_CONFIGURED``)
    or a record was refused for itself (``_UNKNOWN_PARTITION``, ...)."""

    name: str
    detail: str
    fatal: bool
    retriable: bool
    requires_abort: bool

    @classmethod
    def of(cls, error: Any) -> TxnError:
        """The view of ``error``, an object with confluent-kafka's ``KafkaError`` methods. A record
        refused with ``_FATAL`` (the producer failed before) is fatal, though confluent-kafka's
        refusal does not say so."""
        name = error.name()
        fatal = bool(error.fatal()) or name == "_FATAL"
        return cls(name, error.str(), fatal, bool(error.retriable()), bool(error.txn_requires_abort()))


class FileLines(NamedTuple):
    """What a file's line engine is made from: the table, where its records go, the file (its path
    under WATCH_DIR), the writer's state to start from, the tag of a sealed file's late lines (empty
    otherwise) and the longest line carried."""

    spec: TableSpec
    topics: Topics
    source: str
    state: WriterState
    late_tag: bytes
    max_line_bytes: int


class Handover(Protocol):
    """One read (or one dead letter) being handed to the producer."""

    refusal: BaseException | None
    """Why the last :meth:`step` stopped early: None when the producer's queue was full, else the client's refusal."""

    async def step(self) -> bool:
        """Hand over as much as the producer takes; True once everything was. The engine decides
        where the work runs (the compiled one in a worker thread, with the GIL released)."""


class LineEngine(Protocol):
    """One hour file's line engine, fed read after read."""

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

    def unterminated(self, item: Line | OversizeLine, cycle: Cycle) -> Handover:
        """The dead letter of the unterminated tail ``item`` (``unterminated``), to be handed over as ``cycle``."""

    def rebuild(self, cycle: Cycle, data: bytes) -> Mapping[tuple[str, int], list[Record]]:
        """The records ``cycle`` produced, by (topic, partition) in order, made again from the file's
        bytes of the cycle (``data``; unused for the cycle of an unterminated tail)."""

    def rejection(self, record: Record, error: str, detail: str) -> Record:
        """The ``rejected`` dead letter standing for ``record`` (one of this file's), which the broker
        refused for good with ``error``."""


class Engine(Protocol):
    """The line engine in use: its name and version, the three things it makes, and how it reads its
    producer's errors."""

    @property
    def name(self) -> Literal["native", "python"]: ...

    @property
    def version(self) -> str:
        """The native module's ``__version__`` (the crate's), or the sidecar's own."""

    @property
    def fallback_reason(self) -> str | None:
        """Why ``auto`` did not get an installed native engine (None: it did, or none is installed)."""

    def label(self) -> str:
        """``native 0.1.0``: how the startup line and the status page name it."""

    def producer(self, config: dict[str, Any]) -> Producer:
        """The worker's producer, made from librdkafka properties (plus ``error_cb``, ``stats_cb``, ``logger``)."""

    def reads(self) -> ChunkReads:
        """How hour files are read and hashed."""

    def lines(self, producer: Producer, file: FileLines) -> LineEngine:
        """The line engine of one file, handing its records to ``producer`` (one this engine made)."""

    def txn_error(self, exc: BaseException) -> TxnError | None:
        """What ``exc`` says, if a call of this engine's :class:`Producer` raised it with the
        client's error (a transactional call's, or a refused ``produce``'s: confluent-kafka does not
        tell them apart); None for anything else (``BufferError`` included)."""


def select(wanted: str) -> Engine:
    """The engine ``wanted`` (one of :data:`ENGINE_CHOICES`) asks for.

    ``auto``: native when ``hyperdata_sidecar_engine`` imports; python when it is not installed; python
    with a ``fallback_reason`` when it is installed but fails to import. ``native``: native, or raises
    :class:`EngineUnavailable`. ``python``: python, without looking for the native one.
    """
    from hyperdata_sidecar.engines.native import NativeEngine
    from hyperdata_sidecar.engines.python import PythonEngine

    if wanted not in ENGINE_CHOICES:
        raise ValueError(f"engine must be one of {', '.join(ENGINE_CHOICES)}, not {wanted!r}")
    if wanted == "python":
        return PythonEngine(version(SIDECAR_DISTRIBUTION))
    try:
        return NativeEngine(_native_module())
    except _NativeMissing as missing:
        if wanted == "native":
            raise EngineUnavailable(f"{missing}: {HOW_TO_GET_NATIVE}") from None
        # Not installed is the normal case of `pip install .`; installed and broken must be said.
        return PythonEngine(version(SIDECAR_DISTRIBUTION), fallback_reason=str(missing) if missing.installed else None)


class _NativeMissing(Exception):
    """Why the native engine cannot be used; ``installed``: a module of its name was found."""

    def __init__(self, reason: str, *, installed: bool) -> None:
        super().__init__(reason)
        self.installed = installed


def _native_module() -> Any:
    """Import the native engine and return it; raises :class:`_NativeMissing`."""
    try:
        module = importlib.import_module(NATIVE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name == NATIVE_MODULE:
            raise _NativeMissing(f"the native line engine (module {NATIVE_MODULE}) is not installed", installed=False) from None
        raise _broken(exc) from None
    # A .so that is not one (ImportError from dlopen), one built for another Python or platform, an
    # initialisation that failed: whatever it is, the engine is installed and cannot be used.
    except Exception as exc:  # noqa: BLE001 - anything a compiled module's loading can raise
        raise _broken(exc) from None
    if not isinstance(getattr(module, "__version__", None), str):
        # A directory without the compiled module in it imports as a namespace package: no __file__.
        where = getattr(module, "__file__", None) or ", ".join(getattr(module, "__path__", None) or ["?"])
        raise _NativeMissing(f"the module {NATIVE_MODULE} at {where} is not the line engine (no __version__)", installed=True)
    return module


def _broken(exc: BaseException) -> _NativeMissing:
    # One line: a loader's message may span several.
    error = " ".join(f"{type(exc).__name__}: {exc}".split())
    return _NativeMissing(
        f"the native line engine (module {NATIVE_MODULE}) is installed but does not import ({error})", installed=True
    )
