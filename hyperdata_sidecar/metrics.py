"""The sidecar's Prometheus metrics, behind one small interface named for domain events.

Every installed sidecar owns a ``SidecarMetrics`` with its own ``CollectorRegistry``, so two
sidecars in one process never collide and nothing lands in prometheus_client's global registry.
Names carry the ``hyperdata_sidecar_`` prefix, counters end in ``_total``, units are seconds
and bytes. Per-file series exist only for a table's current file: moving a table to a new file
removes the previous file's series, so label cardinality stays bounded by the number of tables.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hyperdata_sidecar.core.lineinfo import REASONS as DLQ_REASONS
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.core.times import epoch_of

PREFIX = "hyperdata_sidecar_"

#: Every metric family /metrics exports, by its name there (with ``_total`` on counters) and its
#: Prometheus type: the one list the tests check the registry and every name written in the
#: repository (alerts, dashboard, docs, tests) against.
EXPORTED: dict[str, str] = {
    "hyperdata_sidecar_stream_active": "gauge",
    "hyperdata_sidecar_stream_members": "gauge",
    "hyperdata_sidecar_stream_behind_seconds": "gauge",
    "hyperdata_sidecar_stream_elections_total": "counter",
    "hyperdata_sidecar_stream_disagreements_total": "counter",
    "hyperdata_sidecar_stream_standby_ready": "gauge",
    "hyperdata_sidecar_standby_seals_total": "counter",
    "hyperdata_sidecar_lines_published_total": "counter",
    "hyperdata_sidecar_bytes_read_total": "counter",
    "hyperdata_sidecar_publish_lag_seconds": "gauge",
    "hyperdata_sidecar_tail_offset_lag_bytes": "gauge",
    "hyperdata_sidecar_partial_line_held_bytes": "gauge",
    "hyperdata_sidecar_seals_emitted_total": "counter",
    "hyperdata_sidecar_seal_latency_seconds": "histogram",
    "hyperdata_sidecar_state_persist_failures_total": "counter",
    "hyperdata_sidecar_dlq_lines_total": "counter",
    "hyperdata_sidecar_backups_total": "counter",
    "hyperdata_sidecar_backup_bytes_total": "counter",
    "hyperdata_sidecar_backup_seconds": "histogram",
    "hyperdata_sidecar_producer_errors_total": "counter",
    "hyperdata_sidecar_producer_retries_total": "counter",
    "hyperdata_sidecar_transactions_committed_total": "counter",
    "hyperdata_sidecar_transactions_aborted_total": "counter",
    "hyperdata_sidecar_transaction_retries_total": "counter",
    "hyperdata_sidecar_transaction_bytes_total": "counter",
    "hyperdata_sidecar_transaction_close_seconds": "histogram",
    "hyperdata_sidecar_poll_cycle_seconds": "histogram",
    "hyperdata_sidecar_files_tailed": "gauge",
    "hyperdata_sidecar_oldest_unsealed_finalized_age_seconds": "gauge",
    "hyperdata_sidecar_broker_connected": "gauge",
    "hyperdata_sidecar_deleted_files_total": "counter",
    "hyperdata_sidecar_truncated_files_total": "counter",
    "hyperdata_sidecar_ready": "gauge",
    "hyperdata_sidecar_read_failures_total": "counter",
    "hyperdata_sidecar_late_appends_total": "counter",
    "hyperdata_sidecar_sealed_files_rewritten_total": "counter",
    "hyperdata_sidecar_block_regressions_total": "counter",
    "hyperdata_sidecar_backups_parked": "gauge",
    "hyperdata_sidecar_snapshots_emitted_total": "counter",
    "hyperdata_sidecar_snapshot_age_seconds": "gauge",
    "hyperdata_sidecar_engine_info": "gauge",
    # for alerts and the dashboard (deploy/)
    "hyperdata_sidecar_files_lost_total": "counter",
    "hyperdata_sidecar_newest_hour_file_start_seconds": "gauge",
    "hyperdata_sidecar_oldest_unsealed_hour_age_seconds": "gauge",
    "hyperdata_sidecar_lag_warn_bytes": "gauge",
    "hyperdata_sidecar_backlog_bytes": "gauge",
    "hyperdata_sidecar_backlog_files": "gauge",
}

BACKUP_RESULTS = ("ok", "noop", "failed")
REWRITE_REASONS = ("truncated", "replaced")
#: What a producer error was: a table holding on a topic it cannot write, a seal or a snapshot event
#: that failed, the broker unreachable (librdkafka's transport errors), the broker refusing the
#: worker's login (the data plane's producer, or the worker's own connection attempts at start),
#: another error librdkafka reported, or a fatal one; a topic found with another partition count than
#: the contract's (``partitions``), a table's records found delivered below where their topic stood
#: (``offsets``: another incarnation of the topic). The librdkafka error's own name is in the log line, not in a label.
PRODUCER_ERROR_KINDS = (
    "hold",
    "seal",
    "snapshot",
    "transport",
    "login_refused",
    "client",
    "fatal",
    "partitions",
    "offsets",
    "stuck",
)

POLL_CYCLE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
TXN_CLOSE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
# From a running digest (milliseconds) to a full re-hash of a 50 GB file after a restart (minutes).
SEAL_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0)
# From a no-op (a metadata look) to a 52 GB hour file over a slow link (hours).
BACKUP_SECONDS_BUCKETS = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)


class _CurrentFileGauge:
    """A ``{table, file}`` gauge that keeps one series per table: the one for its current file."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        self._current: dict[str, str] = {}

    def set(self, table: str, file: str, value: float) -> None:
        previous = self._current.get(table)
        if previous is not None and previous != file:
            self._gauge.remove(table, previous)
        self._current[table] = file
        self._gauge.labels(table, file).set(value)


class SidecarMetrics:
    """The metrics of one sidecar; the shell reports events here and serves ``render()`` at /metrics.

    ``tables`` are pre-initialised to zero so a scrape shows every table before its first line.
    ``clock`` returns the current epoch seconds; the lag gauges are computed from it at scrape
    time, so a table that stops publishing shows a growing lag rather than a frozen one.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        tables: Iterable[str] = tuple(TABLE_BY_DIR),  # the dir names (a generator here trips mypy issue 9346)
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._clock = clock
        self._tables: set[str] = set()
        self._newest_block_time: dict[str, float] = {}
        self._oldest_unsealed: dict[str, float | None] = {}
        self._oldest_unsealed_hour_end: dict[str, float | None] = {}
        self._newest_snapshot_mtime: float | None = None
        self._define()
        self._define_alerting()
        for table in tables:
            self._track(table)
        for result in BACKUP_RESULTS:
            self._backups.labels(result)
        for kind in PRODUCER_ERROR_KINDS:
            self._producer_errors.labels(kind)

    # -- definitions -----------------------------------------------------------------------

    def _define(self) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(PREFIX + name, doc, labels, registry=self.registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(PREFIX + name, doc, labels, registry=self.registry)

        table, table_file = ("table",), ("table", "file")
        self._lines = counter("lines_published_total", "Data lines acked by the broker.", table)
        self._bytes = counter("bytes_read_total", "Bytes read from the node's hour files.", table)
        self._publish_lag = gauge("publish_lag_seconds", "Now minus the newest published block_time (0 before any).", table)
        self._tail_lag = _CurrentFileGauge(
            gauge("tail_offset_lag_bytes", "File size minus persisted offset, current file only.", table_file)
        )
        self._partial = _CurrentFileGauge(
            gauge("partial_line_held_bytes", "Bytes of an incomplete last line held back.", table_file)
        )
        self._seals = counter("seals_emitted_total", "Seal events published.", table)
        self._seal_latency = Histogram(
            PREFIX + "seal_latency_seconds",
            "Time from an hour file's finalization to its seal being published.",
            buckets=SEAL_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._persist_failures = counter(
            "state_persist_failures_total", "Failed state writes (checkpoints not sent, table writes the state store refused)."
        )
        self._dlq = counter("dlq_lines_total", "Lines sent to the DLQ.", ("table", "reason"))
        self._backups = counter("backups_total", "Backup attempts by result (ok, noop, failed).", ("result",))
        self._backup_bytes = counter(
            "backup_bytes_total",
            "Bytes the backup sink moved to its target, counted when each attempt ends, by sink and result.",
            ("sink", "result"),
        )
        self._backup_seconds = Histogram(
            PREFIX + "backup_seconds",
            "Duration of each backup attempt (the look for a copy already there, the copy and its check), by sink and result.",
            ("sink", "result"),
            buckets=BACKUP_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self._producer_errors = counter("producer_errors_total", "Data-plane producer errors by kind.", ("kind",))
        self._producer_retries = counter("producer_retries_total", "Data-plane batches sent again.")
        self._txn_commits = counter("transactions_committed_total", "exactly_once: transactions of the data plane committed.")
        self._txn_aborts = counter(
            "transactions_aborted_total",
            "exactly_once: transactions aborted (their reads redone from the last committed progress).",
        )
        self._txn_retries = counter(
            "transaction_retries_total", "exactly_once: commits or aborts tried again (the coordinator did not answer in time)."
        )
        self._txn_bytes = counter(
            "transaction_bytes_total", "exactly_once: bytes of reads handed over in committed transactions."
        )
        self._txn_seconds = Histogram(
            PREFIX + "transaction_close_seconds",
            "exactly_once: from a transaction's close (no new read) to its commit: the tables settling, then the commit.",
            buckets=TXN_CLOSE_BUCKETS,
            registry=self.registry,
        )
        self._tick_seconds = Histogram(
            PREFIX + "poll_cycle_seconds",
            "Duration of one tick of a table's polling loop (its reads, publishing, reports and checkpoints; a catch-up tick lasts as long as the backlog).",
            table,
            buckets=POLL_CYCLE_BUCKETS,
            registry=self.registry,
        )
        self._files_tailed = gauge("files_tailed", "Hour files currently tracked.", table)
        self._oldest_unsealed_age = gauge(
            "oldest_unsealed_finalized_age_seconds",
            "Age of the oldest finalized hour file without a seal (0 when none).",
            table,
        )
        self._broker_connected = gauge("broker_connected", "1 while the data-plane producer is connected.")
        self._deleted = counter("deleted_files_total", "Hour files deleted under the tailer.", ("table", "reason"))
        self._truncated = counter("truncated_files_total", "Hour files found shorter than their offset.", table)
        self._ready = gauge("ready", "1 when tables are recovered, the producer connected and WATCH_DIR readable.")
        self._read_failures = counter(
            "read_failures_total", "Polls of a table that failed to read its hour files (the table keeps its position).", table
        )
        self._late_appends = counter(
            "late_appends_total", "Sealed hour files found grown (each gets a new seal revision).", table
        )
        self._rewritten = counter(
            "sealed_files_rewritten_total",
            "Sealed hour files found shorter or with other first bytes (no longer read).",
            ("table", "reason"),
        )
        self._regressions = counter(
            "block_regressions_total", "Lines whose block_number is lower than the previous line's of the table.", table
        )
        self._backups_parked = gauge(
            "backups_parked", "Files whose backup failed BACKUP_MAX_TRIES times and waits for a restart or backup-retry."
        )
        self._snapshots = counter("snapshots_emitted_total", "Node snapshot events published to the snapshot topic.")
        self._snapshot_age = gauge(
            "snapshot_age_seconds", "Seconds since the newest node snapshot seen was last modified (0 before any)."
        )
        self._snapshot_age.set_function(lambda: self._lag_since(self._newest_snapshot_mtime))
        self._stream_active = gauge(
            "stream_active",
            "STREAM_ID: 1 while this sidecar is its stream's active, 0 while it stands by (absent without STREAM_ID).",
        )
        self._stream_members = gauge(
            "stream_members", "STREAM_ID: sidecars in the stream's leadership group at its last election (this one included)."
        )
        self._stream_behind = gauge(
            "stream_behind_seconds",
            "STREAM_ID: how many seconds of blocks this node's head is behind the furthest peer's, when more than STREAM_YIELD_LAG_S (else 0).",
        )
        self._stream_elections = counter(
            "stream_elections_total", "STREAM_ID: times this sidecar was elected its stream's active."
        )
        self._stream_disagreements = counter(
            "stream_disagreements_total",
            "STREAM_ID: looks at a table's handover point, or as a standby at the stream's newest line, where this node's files hold another event than the stream's line.",
            table,
        )
        self._stream_standby_ready = gauge(
            "stream_standby_ready",
            "STREAM_ID, while standing by: 1 when the stream's newest line of the table is in this node's files, the same event (a takeover continues right after it), else 0.",
            table,
        )
        self._standby_seals = counter(
            "standby_seals_total",
            "STREAM_ID: hour files this sidecar sealed (kept in its state, not published) while it stood by.",
            table,
        )
        self._engine_info = gauge(
            "engine_info",
            "1 for the line engine in use (native or python) and its version; absent until the worker chose.",
            ("engine", "version"),
        )

    def _track(self, table: str) -> None:
        """Create ``table``'s series, including the lag gauges computed at scrape time."""
        if table in self._tables:
            return
        self._tables.add(table)
        for metric in (
            self._lines,
            self._bytes,
            self._seals,
            self._truncated,
            self._files_tailed,
            self._read_failures,
            self._late_appends,
            self._regressions,
        ):
            metric.labels(table)
        for reason in REWRITE_REASONS:
            self._rewritten.labels(table, reason)
        self._tick_seconds.labels(table)
        self._publish_lag.labels(table).set_function(lambda: self._lag_since(self._newest_block_time.get(table)))
        self._oldest_unsealed_age.labels(table).set_function(lambda: self._lag_since(self._oldest_unsealed.get(table)))
        self._track_alerting(table)

    def _lag_since(self, epoch: float | None) -> float:
        return 0.0 if epoch is None else max(0.0, self._clock() - epoch)

    # -- tailing ---------------------------------------------------------------------------

    def bytes_read(self, table: str, nbytes: int) -> None:
        self._bytes.labels(table).inc(nbytes)

    def lines_published(self, table: str, count: int, newest_block_time: str | None = None) -> None:
        """``count`` lines acked; ``newest_block_time`` is the block_time of the last of them."""
        self._track(table)
        self._lines.labels(table).inc(count)
        if newest_block_time is not None:
            epoch = epoch_of(newest_block_time)
            if epoch is not None:
                self._newest_block_time[table] = epoch

    def set_tail_lag(self, table: str, file: str, nbytes: int) -> None:
        """Tail lag of ``table``'s current ``file``; the previous file's series is removed."""
        self._tail_lag.set(table, file, nbytes)

    def set_partial_held(self, table: str, file: str, nbytes: int) -> None:
        """Bytes of an incomplete line held for ``table``'s current ``file``; previous file removed."""
        self._partial.set(table, file, nbytes)

    def set_files_tailed(self, table: str, count: int) -> None:
        self._files_tailed.labels(table).set(count)

    def tick_done(self, table: str, seconds: float) -> None:
        self._tick_seconds.labels(table).observe(seconds)

    def dlq(self, table: str, reason: str, count: int = 1) -> None:
        self._dlq.labels(table, reason).inc(count)

    def file_deleted(self, table: str, reason: str) -> None:
        self._deleted.labels(table, reason).inc()

    def file_truncated(self, table: str) -> None:
        self._truncated.labels(table).inc()

    def state_persist_failed(self) -> None:
        self._persist_failures.inc()

    def read_failed(self, table: str) -> None:
        self._read_failures.labels(table).inc()

    def block_regression(self, table: str) -> None:
        self._regressions.labels(table).inc()

    def late_append(self, table: str) -> None:
        self._late_appends.labels(table).inc()

    def sealed_file_rewritten(self, table: str, reason: str) -> None:
        if reason not in REWRITE_REASONS:
            raise ValueError(f"rewrite reason must be one of {REWRITE_REASONS}, not {reason!r}")
        self._rewritten.labels(table, reason).inc()

    # -- producer and health ---------------------------------------------------------------

    def producer_error(self, kind: str) -> None:
        if kind not in PRODUCER_ERROR_KINDS:
            raise ValueError(f"producer error kind must be one of {PRODUCER_ERROR_KINDS}, not {kind!r}")
        self._producer_errors.labels(kind).inc()

    def txn_committed(self, nbytes: int, close_s: float) -> None:
        self._txn_commits.inc()
        self._txn_bytes.inc(nbytes)
        self._txn_seconds.observe(close_s)

    def txn_aborted(self) -> None:
        self._txn_aborts.inc()

    def txn_retried(self) -> None:
        self._txn_retries.inc()

    def producer_retry(self, count: int = 1) -> None:
        self._producer_retries.inc(count)

    def set_broker_connected(self, connected: bool) -> None:
        self._broker_connected.set(1 if connected else 0)

    def set_ready(self, ready: bool) -> None:
        self._ready.set(1 if ready else 0)

    def engine_chosen(self, engine: str, version: str) -> None:
        """The worker runs the line engine ``engine`` (native or python) at ``version``."""
        self._engine_info.labels(engine, version).set(1)

    # -- seals and backups -----------------------------------------------------------------

    def stream_role(self, active: bool, members: int) -> None:
        self._stream_active.set(1 if active else 0)
        self._stream_members.set(members)

    def stream_behind(self, seconds: float) -> None:
        self._stream_behind.set(seconds)

    def stream_elected(self) -> None:
        self._stream_elections.inc()

    def stream_disagreement(self, table: str) -> None:
        self._stream_disagreements.labels(table).inc()

    def standby_ready(self, table: str, ready: bool | None) -> None:
        """STREAM_ID: whether this standby found the stream's newest line of ``table`` in its files
        (None: it no longer stands by, the series goes)."""
        if ready is None:
            with contextlib.suppress(KeyError):
                self._stream_standby_ready.remove(table)
        else:
            self._stream_standby_ready.labels(table).set(1 if ready else 0)

    def standby_sealed(self, table: str) -> None:
        """STREAM_ID: one file sealed as its stream's standby (kept, not published)."""
        self._standby_seals.labels(table).inc()

    def seal_emitted(self, table: str, latency_seconds: float) -> None:
        """One seal published, ``latency_seconds`` after its file was finalized."""
        self._seals.labels(table).inc()
        self._seal_latency.observe(latency_seconds)

    def set_oldest_unsealed(self, table: str, finalized_at: float | None) -> None:
        """Epoch seconds at which ``table``'s oldest unsealed finalized file was finalized, or None."""
        self._track(table)
        self._oldest_unsealed[table] = finalized_at

    def backup_sink(self, sink: str) -> None:
        """Backups go to ``sink``: its byte and time series start at zero for every result."""
        for result in BACKUP_RESULTS:
            self._backup_bytes.labels(sink, result)
            self._backup_seconds.labels(sink, result)

    def backup_attempt_ended(self, result: str, *, sink: str, nbytes: int, seconds: float) -> None:
        """A backup attempt on ``sink`` ended with ``result`` (ok, noop, failed), after moving
        ``nbytes`` to the target in ``seconds``."""
        if result not in BACKUP_RESULTS:
            raise ValueError(f"backup result must be one of {BACKUP_RESULTS}, not {result!r}")
        self._backups.labels(result).inc()
        self._backup_bytes.labels(sink, result).inc(nbytes)
        self._backup_seconds.labels(sink, result).observe(seconds)

    def snapshot_emitted(self) -> None:
        self._snapshots.inc()

    def set_newest_snapshot(self, mtime_epoch: float) -> None:
        """The newest node snapshot seen was last modified at ``mtime_epoch``."""
        if self._newest_snapshot_mtime is None or mtime_epoch > self._newest_snapshot_mtime:
            self._newest_snapshot_mtime = mtime_epoch

    def set_backups_parked(self, count: int) -> None:
        self._backups_parked.set(count)

    # -- reading back (for the status page and JSON views) --------------------------------

    def lines_published_totals(self) -> dict[str, int]:
        """Lines published per table since this process started (every known table, zeros included)."""
        return {labels["table"]: int(count) for labels, count in _totals(self._lines)}

    def dlq_counts(self) -> dict[str, dict[str, int]]:
        """Lines sent to the DLQ since this process started: table → reason → count."""
        counts: dict[str, dict[str, int]] = {}
        for labels, count in _totals(self._dlq):
            if not count:
                continue  # the series every (table, reason) starts with
            counts.setdefault(labels["table"], {})[labels["reason"]] = int(count)
        return counts

    def publish_lag_seconds(self, table: str) -> float | None:
        """Now minus the newest published block_time of ``table``; None before its first line."""
        epoch = self._newest_block_time.get(table)
        return None if epoch is None else self._lag_since(epoch)

    # -- for alerts and the dashboard (deploy/) --------------------------------------------
    # What deploy/prometheus/alerts.yml needs beyond the contract's metrics. DLQ series start
    # at zero for every (table, reason) so that increase() sees a table's first DLQ line.

    def _define_alerting(self) -> None:
        table = ("table",)
        self._files_lost = Counter(
            PREFIX + "files_lost_total",
            "Hour files deleted before they were fully published or before their seal.",
            table,
            registry=self.registry,
        )
        self._newest_hour_file = Gauge(
            PREFIX + "newest_hour_file_start_seconds",
            "Epoch seconds of the start of the UTC hour the table's newest hour file is named for.",
            table,
            registry=self.registry,
        )
        self._oldest_unsealed_hour_age = Gauge(
            PREFIX + "oldest_unsealed_hour_age_seconds",
            "Seconds since the end of the hour named by the table's oldest hour file without a seal "
            "(0 while that hour is still running, or when every file is sealed).",
            table,
            registry=self.registry,
        )
        self._lag_warn_bytes = Gauge(
            PREFIX + "lag_warn_bytes", "LAG_WARN_BYTES: the tail lag above which the sidecar warns.", registry=self.registry
        )
        self._backlog_bytes = Gauge(
            PREFIX + "backlog_bytes",
            "Bytes on disk not yet published: the rest of the file being read and every later hour file, whole.",
            table,
            registry=self.registry,
        )
        self._backlog_files = Gauge(
            PREFIX + "backlog_files", "Hour files with bytes on disk not yet published.", table, registry=self.registry
        )

    def _track_alerting(self, table: str) -> None:
        self._files_lost.labels(table)
        self._backlog_bytes.labels(table)
        self._backlog_files.labels(table)
        for reason in DLQ_REASONS:
            self._dlq.labels(table, reason)
        self._oldest_unsealed_hour_age.labels(table).set_function(
            lambda: self._lag_since(self._oldest_unsealed_hour_end.get(table))
        )

    def file_lost(self, table: str) -> None:
        """A file of ``table`` was deleted before it was fully published or before its seal."""
        self._files_lost.labels(table).inc()

    def set_newest_hour_file(self, table: str, hour_start_epoch: float) -> None:
        """``table``'s newest hour file on disk is named for the UTC hour starting at ``hour_start_epoch``."""
        self._newest_hour_file.labels(table).set(hour_start_epoch)

    def set_oldest_unsealed_hour_end(self, table: str, hour_end_epoch: float | None) -> None:
        """End of the hour named by ``table``'s oldest file without a seal, or None when all are sealed."""
        self._track(table)
        self._oldest_unsealed_hour_end[table] = hour_end_epoch

    def set_lag_warn_bytes(self, nbytes: int) -> None:
        self._lag_warn_bytes.set(nbytes)

    def set_backlog(self, table: str, nbytes: int, files: int) -> None:
        """``table`` has ``nbytes`` in ``files`` hour files on disk not yet published."""
        self._backlog_bytes.labels(table).set(nbytes)
        self._backlog_files.labels(table).set(files)

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> tuple[bytes, str]:
        """The body and content type of a /metrics response."""
        return prometheus_client.generate_latest(self.registry), prometheus_client.CONTENT_TYPE_LATEST


def _totals(counter: Counter) -> list[tuple[dict[str, str], float]]:
    """The ``_total`` samples of a labelled counter as (labels, value) pairs."""
    return [
        (sample.labels, sample.value)
        for family in counter.collect()
        for sample in family.samples
        if sample.name.endswith("_total")
    ]
