"""The no-loss verifier: reads a watch tree and the sidecar's topics, and reports what differs.

The shell around ``expected`` (what the files owe) and ``reconcile`` (the comparison): it waits for
the topics to converge, reads the data, DLQ and seal topics from the beginning to the end offsets
captured at that moment with a plain aiokafka consumer (no group, no commits), digests values as
it goes, and checks backups on disk.

Run it on a tree that has stopped growing: expectations are read at the start (and once more
after reading the seal topic when a file grew after its seal, since its earlier revisions decide
its late lines' ids). The topics should be dedicated to the sidecars being checked (records for
files outside the tree fail the run, unless ``node`` says several sidecars share them).

With a snapshot topic it also checks the node snapshots of the tree and their events
(``snapshot_events``), and in any case the offset ranges of the seals that carry them
(``seal_ranges``). Both only compare what was read: the ``Collector`` is the seam where consumed
messages become records, so everything after the consumer runs without a broker in the unit tests.

Topics written in transactions (``DELIVERY=exactly_once``) are checked as a ``read_committed``
reader has them (``isolation``; see ``isolation`` for how both views come from one read). Either
way a partition is read to its end when the consumer's position reaches the end offset, not when a
record at the offset before it arrives: the consumer moves past transaction markers and, reading
committed, past aborted records without returning them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.tools.expected import (
    MAX_LINE_BYTES,
    ExpectedFile,
    read_tree,
    value_digest,
)
from hyperdata_sidecar.tools.isolation import ISOLATION_LEVELS, READ_COMMITTED, READ_UNCOMMITTED, OffsetRuns, committed_view
from hyperdata_sidecar.tools.reconcile import (
    DataRecord,
    DlqRecord,
    Observed,
    SealRecord,
    SnapshotRecord,
    parse_reference,
    reconcile,
)
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.seal_ranges import check_seal_ranges
from hyperdata_sidecar.tools.snapshot_events import event_paths, reconcile_snapshots
from hyperdata_sidecar.tools.snapshot_files import ExpectedSnapshot, SnapshotCopy, read_copy, read_snapshots

DLQ = "dlq"
SEALS = "seals"
SNAPSHOTS = "snapshots"
_POLL_S = 0.5
_FETCH_BYTES = 9 * 1024 * 1024  # above the largest record: an 8 MiB line plus framing
_BATCH_RECORDS = 10_000


def default_topics(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Topic names by role — each table dir name, ``"dlq"``, ``"seals"`` and ``"snapshots"`` — from
    the same environment variables the sidecar reads (TOPIC_BOOK_DIFFS, ..., TOPIC_DLQ, TOPIC_SEALS,
    TOPIC_SNAPSHOTS)."""
    env = os.environ if env is None else env
    topics = {spec.dir_name: env.get(spec.topic_env, spec.default_topic) for spec in TABLES}
    topics[DLQ] = env.get("TOPIC_DLQ", "hyperliquid.sidecar-dlq")
    topics[SEALS] = env.get("TOPIC_SEALS", "hyperliquid.node-files")
    topics[SNAPSHOTS] = env.get("TOPIC_SNAPSHOTS", "hyperliquid.node-snapshots")
    return topics


@dataclass(frozen=True)
class _Owed:
    """Minimum record counts per topic that a complete publication of the tree implies.

    A good line the broker refuses is on the DLQ instead of its data topic: the data topics and the
    DLQ owe their records together (``lines``); the seal and snapshot topics each on their own
    (``records``). The topics of ``lines`` must exist, the others once they owe something.
    """

    lines: dict[str, int]
    records: dict[str, int]
    backups: list[tuple[Path, int]]  # (backup path, size) that must exist

    @property
    def topics(self) -> set[str]:
        return set(self.lines) | set(self.records)

    def met_by(self, held: Mapping[str, int]) -> bool:
        lines_held = sum(held.get(topic, 0) for topic in self.lines)
        return (
            lines_held >= sum(self.lines.values())
            and all(held.get(topic, 0) >= n for topic, n in self.records.items())
            and all(topic in held for topic in self.lines)
        )


async def verify(
    watch_dir: Path,
    bootstrap: str,
    *,
    topics: Mapping[str, str] | None = None,
    node: str | None = None,
    backup_dir: Path | None = None,
    allowed_duplicates: int = 0,
    isolation: str = READ_UNCOMMITTED,
    timeout_s: float = 60.0,
    settle_s: float = 2.0,
    max_line_bytes: int = MAX_LINE_BYTES,
    client_kwargs: Mapping[str, Any] | None = None,
    ignore: Collection[str] = (),
    snapshot_grace_s: float = 0.0,
) -> VerifyReport:
    """Verify that the sidecar published ``watch_dir`` completely and correctly.

    ``topics``: role → topic name (see :func:`default_topics`, the default). Without a
    ``"snapshots"`` role the node snapshots and their events are not checked (a note says so).
    Waits up to ``timeout_s`` for the topics to hold at least what the tree owes, with end offsets
    still for ``settle_s`` (and for the backups to exist, if ``backup_dir`` is given), then reads
    them to the end offsets of that moment. ``client_kwargs`` go to the aiokafka clients (security).
    ``ignore``: relpaths left out of the check, with their records (files a test damaged).
    ``snapshot_grace_s``: a snapshot is owed an event once it has not changed for that long (the
    sidecar's SNAPSHOT_GRACE_MS).

    ``isolation``: the consumer isolation level whose view the verdict (and ``allowed_duplicates``)
    is taken on. ``"read_uncommitted"`` reads every record, as an at-least-once sidecar's consumers
    may; ``"read_committed"``, for a sidecar publishing in transactions, reads the committed records
    up to the last stable offsets, waits for those to converge, and also reports the duplicates a
    ``read_uncommitted`` reader sees (``VerifyReport.uncommitted_duplicates``, not failing).

    Raises ValueError if ``topics`` lacks a role or ``isolation`` is not a level, aiokafka's
    KafkaError if the broker cannot be reached.
    """
    topics = dict(default_topics() if topics is None else topics)
    missing_roles = ({spec.dir_name for spec in TABLES} | {DLQ, SEALS}) - set(topics)
    if missing_roles:
        raise ValueError(f"topics has no name for {sorted(missing_roles)}")
    if isolation not in ISOLATION_LEVELS:
        raise ValueError(f"isolation {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}")
    files = await asyncio.to_thread(lambda: list(read_tree(watch_dir, max_line_bytes=max_line_bytes, ignore=ignore)))
    snapshots = await asyncio.to_thread(read_snapshots, watch_dir, grace_s=snapshot_grace_s) if SNAPSHOTS in topics else []
    owed = _owed(files, snapshots, topics, backup_dir)
    kwargs = dict(client_kwargs or {})
    async with contextlib.AsyncExitStack() as stack:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **kwargs)
        await admin.start()
        stack.push_async_callback(admin.close)
        everything = await _reader(stack, bootstrap, READ_UNCOMMITTED, kwargs)
        committed = await _reader(stack, bootstrap, READ_COMMITTED, kwargs) if isolation == READ_COMMITTED else None
        # A read_committed verdict waits for the committed records: a transaction still open holds
        # its partitions' last stable offsets back.
        partitions, converged = await _await_convergence(admin, committed or everything, owed, timeout_s, settle_s)
        views, complete = await _read_views(everything, committed, partitions, topics, timeout_s)
    observed = views.committed if views.committed is not None else views.everything
    sealed = _sealed_sizes(observed, node)
    if any(size != f.size for f in files for size in sealed.get(f.relpath, ())):
        files = await asyncio.to_thread(
            lambda: list(read_tree(watch_dir, max_line_bytes=max_line_bytes, sealed_sizes=sealed, ignore=ignore))
        )
    backups = await asyncio.to_thread(_backup_digests, files, backup_dir) if backup_dir is not None else None
    report = reconcile(files, observed, node=node, backups=backups, allowed_duplicates=allowed_duplicates, ignore=ignore)
    report.isolation = isolation
    if views.committed is not None:
        # The same comparison on what a read_uncommitted reader is given, for its figures only.
        uncommitted = reconcile(files, views.everything, node=node, allowed_duplicates=allowed_duplicates, ignore=ignore)
        report.take_uncommitted(uncommitted)
    check_seal_ranges(report, observed, node=node, ignore=ignore)
    if SNAPSHOTS in topics:
        copies = await asyncio.to_thread(_snapshot_backups, snapshots, observed, backup_dir) if backup_dir is not None else None
        reconcile_snapshots(report, snapshots, observed, node=node, backups=copies)
    else:
        report.notes.append("node snapshots not checked: no snapshot topic given")
    report.notes.extend(f"topic {name} does not exist" for name in sorted(set(topics.values()) - set(partitions)))
    if not converged:
        report.notes.append(f"gave up waiting for the topics (and backups) to converge after {timeout_s:g}s")
    if not complete:
        report.notes.append(f"stopped reading: a consumer's position did not move for {timeout_s:g}s before the end offsets")
    return report


async def _reader(
    stack: contextlib.AsyncExitStack, bootstrap: str, isolation: str, kwargs: Mapping[str, Any]
) -> AIOKafkaConsumer:
    """A started consumer of ``isolation`` with no group and no commits, stopped when ``stack`` closes."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
        max_partition_fetch_bytes=_FETCH_BYTES,
        fetch_max_bytes=2 * _FETCH_BYTES,
        client_id="hyperdata-verify" if isolation == READ_UNCOMMITTED else f"hyperdata-verify-{isolation}",
        **kwargs,
    )
    # Registered before start: stop is safe after a failed start and closes what it opened.
    stack.push_async_callback(consumer.stop)
    await consumer.start()
    return consumer


def _sealed_sizes(observed: Observed, node: str | None) -> dict[str, list[int]]:
    """relpath → the sizes its seals (of ``node``, if given) gave."""
    sizes: dict[str, list[int]] = {}
    for record in observed.seals:
        try:
            seal = SealManifest.from_json(record.value)
        except ValueError:
            continue  # reconcile reports it
        if node is None or seal.node == node:
            sizes.setdefault(seal.path, []).append(seal.size)
    return sizes


def _owed(
    files: list[ExpectedFile], snapshots: list[ExpectedSnapshot], topics: Mapping[str, str], backup_dir: Path | None
) -> _Owed:
    lines = {topics[role]: 0 for role in [spec.dir_name for spec in TABLES] + [DLQ]}
    records = {topics[role]: 0 for role in (SEALS, SNAPSHOTS) if role in topics}
    backups = []
    for f in files:
        lines[topics[f.table]] += len(f.lines)
        lines[topics[DLQ]] += len(f.dlq)
        if f.finalized:
            records[topics[SEALS]] += 1
            if backup_dir is not None:
                backups.append((backup_dir / f.relpath, f.size))
    for snapshot in snapshots:
        if snapshot.complete:
            records[topics[SNAPSHOTS]] += 1
            if backup_dir is not None:
                backups.append((backup_dir / snapshot.relpath, snapshot.size))
    return _Owed(lines, records, backups)


def _snapshot_backups(snapshots: list[ExpectedSnapshot], observed: Observed, backup_dir: Path) -> dict[str, SnapshotCopy | None]:
    """Blocking: the backup copies of the complete snapshots and of those the events name that are
    no longer in the tree (relpath → copy, None when there is none)."""
    in_tree = {s.relpath for s in snapshots}
    wanted = {s.relpath for s in snapshots if s.complete} | (event_paths(observed.snapshots) - in_tree)
    return {relpath: read_copy(backup_dir, relpath) for relpath in sorted(wanted) if SnapshotFile.parse(relpath) is not None}


async def _partition_counts(admin: AIOKafkaAdminClient, names: set[str]) -> dict[str, int]:
    """Partition counts of the topics among ``names`` that exist and have a leader for every partition."""
    # Listing all topics, not describing named ones: a broker with auto.create.topics.enable
    # would create a named topic that does not exist.
    existing = names & set(await admin.list_topics())
    described = await admin.describe_topics(sorted(existing)) if existing else []
    return {
        t["topic"]: len(t["partitions"])
        for t in described
        if not t["error_code"] and t["partitions"] and all(p["leader"] >= 0 for p in t["partitions"])
    }


def _partitions_of(partitions: Mapping[str, int]) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for topic, n in sorted(partitions.items()) for p in range(n)]


async def _await_convergence(
    admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer, owed: _Owed, timeout_s: float, settle_s: float
) -> tuple[dict[str, int], bool]:
    """Wait until every topic exists and holds what the tree owes, nothing moved for ``settle_s``,
    and the backups exist. Returns (partition count per existing topic, converged in time).

    A topic holds what its offsets span, up to ``consumer``'s end offsets (a read_committed one's
    are the last stable offsets). Written in transactions, that span also counts markers and
    aborted records, so it may look enough early; the ends standing still for ``settle_s`` is what
    tells that the sidecar has stopped publishing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    names = owed.topics
    partitions: dict[str, int] = {}
    last_ends: dict[TopicPartition, int] | None = None
    still_since = loop.time()
    while True:
        # The sidecar creates its topics when it starts, which may be after the verifier does.
        if set(partitions) != names:
            partitions = await _partition_counts(admin, names)
        tps = _partitions_of(partitions)
        beginnings = await consumer.beginning_offsets(tps) if tps else {}
        ends = await consumer.end_offsets(tps) if tps else {}
        now = loop.time()
        if ends != last_ends:
            last_ends, still_since = ends, now
        held: dict[str, int] = {}
        for tp, end in ends.items():
            held[tp.topic] = held.get(tp.topic, 0) + end - beginnings[tp]
        enough = owed.met_by(held)
        backed_up = all(_size(path) == size for path, size in owed.backups)
        if enough and backed_up and now - still_since >= settle_s:
            return partitions, True
        if now >= deadline:
            return partitions, False
        await asyncio.sleep(_POLL_S)


@dataclass
class _Views:
    """What was read: every record (``everything``, as a read_uncommitted reader has them) and, when
    the verdict reads committed, the committed view of them (else None)."""

    everything: Observed
    committed: Observed | None


class _Sink(Protocol):
    def keep(self, message: Any) -> None: ...


async def _read_views(
    everything: AIOKafkaConsumer,
    committed: AIOKafkaConsumer | None,
    partitions: dict[str, int],
    topics: Mapping[str, str],
    timeout_s: float,
) -> tuple[_Views, bool]:
    """Every record from the beginning to the end offsets of now, through ``everything`` (a
    read_uncommitted consumer) and, given a read_committed consumer, the committed view of them:
    both read at once, the second noting only the offsets it is given. Returns (views, read to the
    end)."""
    collector = Collector(topics, partitions)
    tps = _partitions_of(partitions)
    if not tps:
        return _Views(collector.observed, collector.observed if committed is not None else None), True
    # The last stable offsets first: taken before the high watermarks, they never pass them, so
    # every record the committed read is given is also in the full read.
    stable = await committed.end_offsets(tps) if committed is not None else {}
    ends = await everything.end_offsets(tps)
    collector.observed.ends = _data_ends(ends, collector.observed)
    if committed is None:
        return _Views(collector.observed, None), await _consume(everything, tps, ends, collector, timeout_s)
    given = OffsetRuns()
    complete = all(
        await _together(_consume(everything, tps, ends, collector, timeout_s), _consume(committed, tps, stable, given, timeout_s))
    )
    view = committed_view(
        collector.observed,
        given,
        _data_ends(stable, collector.observed),
        dlq_topic=collector.dlq_topic,
        seal_topic=collector.seal_topic,
        snapshot_topic=collector.snapshot_topic,
    )
    return _Views(collector.observed, view), complete


async def _together(*reads: Awaitable[bool]) -> list[bool]:
    """The results of ``reads``, run at once; when one fails, the others are cancelled (their consumer
    is about to stop) and its error is raised."""
    tasks = [asyncio.ensure_future(read) for read in reads]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


def _data_ends(ends: Mapping[TopicPartition, int], observed: Observed) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): end for tp, end in ends.items() if tp.topic in observed.partitions}


async def _consume(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], ends: Mapping[TopicPartition, int], sink: _Sink, timeout_s: float
) -> bool:
    """Every record from the beginning to ``ends`` into ``sink``; True when read to the end.

    A partition is done when the consumer's position reaches its end. Positions, not the offsets of
    the records returned: the last offsets before an end may hold a transaction marker or (reading
    committed) aborted records, which aiokafka skips while moving the position past them (its
    fetcher's ``PartitionRecords``; a fetch of such batches alone returns no record but moves the
    position all the same). Gives up only when no position moved for ``timeout_s`` (reading
    millions takes minutes).
    """
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    remaining = set(tps)
    positions: dict[TopicPartition, int] = {}
    loop = asyncio.get_running_loop()
    progress_at = loop.time()
    while True:
        for tp in list(remaining):
            position = await consumer.position(tp)
            if position != positions.get(tp):
                positions[tp], progress_at = position, loop.time()
            if position >= ends[tp]:
                remaining.discard(tp)
        if not remaining or loop.time() - progress_at >= timeout_s:
            return not remaining
        batches = await consumer.getmany(*remaining, timeout_ms=1000, max_records=_BATCH_RECORDS)
        for tp, messages in batches.items():
            for message in messages:
                if message.offset < ends[tp]:
                    sink.keep(message)


class Collector:
    """Turns consumed messages into the compact records ``reconcile`` compares: the seam between the
    consumer and the checks. ``keep`` takes anything shaped like a consumed message (``topic``,
    ``partition``, ``offset``, ``key``, ``value``, ``headers``)."""

    def __init__(self, topics: Mapping[str, str], partitions: dict[str, int]) -> None:
        self.dlq_topic = topics[DLQ]
        self.seal_topic = topics[SEALS]
        self.snapshot_topic = topics.get(SNAPSHOTS)
        topic_tables = {topics[spec.dir_name]: spec.dir_name for spec in TABLES}
        self.observed = Observed(
            topic_tables=topic_tables,
            partitions={t: n for t, n in partitions.items() if t in topic_tables},
        )
        # Shared copies: a handful of distinct sources and a few hundred keys over millions of records.
        self.keys: dict[bytes, bytes] = {}

    def keep(self, message: Any) -> None:
        headers = dict(message.headers or ())
        value = message.value if message.value is not None else b""
        source = _text(headers.get("source"))
        source = sys.intern(source) if source is not None else None
        offset = _int(headers.get("offset"))
        if message.topic in self.observed.topic_tables:
            key = self.keys.setdefault(message.key, message.key) if message.key is not None else None
            self.observed.data.append(
                DataRecord(
                    message.topic,
                    message.partition,
                    message.offset,
                    key,
                    source,
                    offset,
                    headers.get("line_id"),
                    value_digest(value),
                )
            )
        elif message.topic == self.dlq_topic:
            self.observed.dlq.append(
                DlqRecord(
                    message.partition,
                    message.offset,
                    message.key,
                    source,
                    offset,
                    _text(headers.get("reason")),
                    value_digest(value),
                    parse_reference(value),
                )
            )
        elif message.topic == self.seal_topic:
            self.observed.seals.append(SealRecord(message.partition, message.offset, message.key, value))
        elif message.topic == self.snapshot_topic:
            self.observed.snapshots.append(SnapshotRecord(message.partition, message.offset, message.key, value))


def _text(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return None


def _int(raw: bytes | None) -> int | None:
    text = _text(raw)
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _backup_digests(files: list[ExpectedFile], backup_dir: Path) -> dict[str, str | None]:
    """relpath → sha256 of ``backup_dir/relpath`` (None if it is missing), for finalized files."""
    out: dict[str, str | None] = {}
    for f in files:
        if f.finalized:
            out[f.relpath] = _sha256(backup_dir / f.relpath)
    return out


def _sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as source:
            while block := source.read(8 * 1024 * 1024):
                digest.update(block)
    except FileNotFoundError:
        return None
    return digest.hexdigest()
