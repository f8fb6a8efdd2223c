"""What a table's tailer reports: every metric it moves and every log line it writes, in one place.

:class:`TailerEvents` names each event of a tailer's life once (a file adopted, read, committed,
finalized, restarted, deleted; a topic held and released; a record rejected) and turns it into the
metric, the log line and, for incidents the status page lists, the record of incidents. The tailer
and its parts call these methods and never touch the metrics or the log themselves.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.lineinfo import block_time_of
from hyperdata_sidecar.core.output_mode import STREAMING_FLAG, OtherOutput
from hyperdata_sidecar.core.records import Record, Regression, Tally
from hyperdata_sidecar.core.times import epoch_of, hour_start_epoch
from hyperdata_sidecar.core.topic_check import Moved
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics


class Incidents(Protocol):
    """The record of incidents the status page lists (:class:`~hyperdata_sidecar.incidents.IncidentHistory`);
    it also counts and logs them."""

    def file_lost(self, table: str, path: str, reason: str, published_to: int, size_seen: int) -> None:
        """``path`` was deleted before its lines were all published, or before its seal."""

    def block_regression(self, table: str, path: str, regression: Regression) -> None:
        """A line of ``path`` (delivered) has a lower block than the table's previous line."""

    def late_append(self, table: str, path: str, revision: int, sealed_size: int, size: int) -> None:
        """``path`` grew from ``sealed_size`` to ``size`` after its seal; ``revision`` will seal it again."""

    def sealed_file_rewritten(self, table: str, path: str, reason: str, sealed_size: int, size: int) -> None:
        """``path`` was ``"truncated"`` or ``"replaced"`` after its seal; it is no longer read."""


class Holds(Protocol):
    """Which tables cannot publish now, and why (:class:`~hyperdata_sidecar.readiness.Readiness`)."""

    def hold(self, table: str, reason: str | None) -> None:
        """The table cannot publish (``reason``) and keeps its position; None once it can again."""

    def node_output(self, table: str, reason: str | None) -> None:
        """The node writes the table in another output layout (``reason``); None once its tree is there."""


class TailerEvents:
    """The events of one table's tailer."""

    def __init__(
        self,
        table: str,
        metrics: SidecarMetrics,
        log: EventLog,
        incidents: Incidents,
        holds: Holds,
        *,
        lag_warn_bytes: int,
        lag_warn_s: float,
    ) -> None:
        self.table = table
        self.metrics = metrics
        self.log = log
        self.incidents = incidents
        self.holds = holds
        self._other_output: OtherOutput | None = None
        self.lag_warn_bytes = lag_warn_bytes
        self.lag_warn_s = lag_warn_s

    # -- ticks and files ------------------------------------------------------------------------

    def newest_hour_file(self, date: str, hour: str) -> None:
        self.metrics.set_newest_hour_file(self.table, hour_start_epoch(date, hour))

    def table_dir_missing(self, path: str) -> None:
        self.log.warning("table_dir_missing", table=self.table, path=path)

    def node_output(self, other: OtherOutput | None) -> None:
        """What the node writes instead of the table's tree (None: the tree is there, or nothing is):
        a finding is logged once (``node_output_mode``) and is a not-ready reason until it is gone."""
        if other == self._other_output:
            return
        self._other_output = other
        if other is None:
            self.holds.node_output(self.table, None)
            return
        reason = other.reason(self.table)
        self.holds.node_output(self.table, reason)
        self.log.error(
            "node_output_mode",
            table=self.table,
            found=other.dir_name,
            mode=other.mode.value,
            flag=other.mode.flag,
            fix=f"start hl-visor with {STREAMING_FLAG}",
        )

    def hour_file_ignored(self, relpath: str, reason: str) -> None:
        self.log.warning("hour_file_ignored", path=relpath, reason=reason)

    def tick_done(self, seconds: float, files: int) -> None:
        self.metrics.set_files_tailed(self.table, files)
        self.metrics.tick_done(self.table, seconds)

    def file_adopted(self, cursor: FileCursor) -> None:
        self.log.info("file_adopted", path=cursor.path, start_offset=cursor.byte_offset, stage=cursor.stage.value)

    def bytes_read(self, nbytes: int) -> None:
        self.metrics.bytes_read(self.table, nbytes)

    def tail_lag(self, path: str, lag: int, held_bytes: int) -> None:
        """Tail lag of the file being read, from the size just seen: gauges, and a warning (rate-limited)."""
        self.metrics.set_tail_lag(self.table, path, lag)
        self.metrics.set_partial_held(self.table, path, held_bytes)
        if lag > self.lag_warn_bytes:
            self.log.limited(logging.WARNING, "tail_lag", self.table, 30.0, table=self.table, path=path, lag_bytes=lag)

    def file_restarted(self, cursor: FileCursor, reason: str, size: int) -> None:
        self.metrics.file_truncated(self.table)
        self.log.error("file_restarted", path=cursor.path, reason=reason, size=size, published_to=cursor.byte_offset)

    def file_deleted(self, cursor: FileCursor, loss: str | None, size_seen: int) -> None:
        """``cursor``'s file is gone: ``loss`` says what was lost with it (None: pruned, nothing lost)."""
        if loss is None:
            self.metrics.file_deleted(self.table, "pruned")
            self.log.info("file_pruned", path=cursor.path)
            return
        self.metrics.file_deleted(self.table, "unsealed")
        self.incidents.file_lost(self.table, cursor.path, loss, cursor.byte_offset, size_seen)

    def late_append(self, cursor: FileCursor, size: int) -> None:
        self.incidents.late_append(self.table, cursor.path, cursor.revision + 1, cursor.size, size)

    def sealed_file_rewritten(self, cursor: FileCursor, reason: str, size: int) -> None:
        self.incidents.sealed_file_rewritten(self.table, cursor.path, reason, cursor.size, size)

    def file_finalized(self, cursor: FileCursor, *, first: bool) -> None:
        if first:
            self.metrics.set_tail_lag(self.table, cursor.path, 0)
        self.log.info(
            "file_finalized",
            path=cursor.path,
            size=cursor.size,
            lines=cursor.lines,
            dlq_lines=cursor.dlq_lines,
            revision=cursor.revision,
            block_regressions=cursor.block_regressions,
        )

    # -- commits --------------------------------------------------------------------------------

    def committed(self, path: str, tally: Tally) -> None:
        """A cycle of ``path`` was delivered and is being persisted: its lines, regressions and dead letters."""
        if tally.lines:
            block_time = block_time_of(tally.last_line) if tally.last_line is not None else None
            self.metrics.lines_published(self.table, tally.lines, block_time)
            self._warn_if_behind(block_time)
        for regression in tally.regressions:
            self.incidents.block_regression(self.table, path, regression)
        for reason, offset in tally.dead_letters:
            self.metrics.dlq(self.table, reason)
            self.log.limited(
                logging.WARNING,
                "dlq",
                f"{self.table}|{reason}",
                10.0,
                table=self.table,
                reason=reason,
                source=path,
                offset=offset,
            )

    def _warn_if_behind(self, block_time: str | None) -> None:
        epoch = epoch_of(block_time) if block_time else None
        lag = time.time() - epoch if epoch is not None else 0.0
        if lag > self.lag_warn_s:
            self.log.limited(
                logging.WARNING,
                "publish_lag",
                self.table,
                30.0,
                table=self.table,
                lag_seconds=round(lag, 1),
                block_time=block_time,
            )

    # -- the producer ---------------------------------------------------------------------------

    def held(self, reason: str, *, retry_in_s: float, records: int | None = None) -> None:
        """The table cannot publish: not ready (``reason``), counted, logged (rate-limited)."""
        self.holds.hold(self.table, reason)
        self.metrics.producer_error("hold")
        self.log.limited(
            logging.ERROR,
            "topic_not_writable",
            self.table,
            60.0,
            table=self.table,
            reason=reason,
            records=records,
            retry_in_s=retry_in_s,
        )

    def released(self) -> None:
        """The held table publishes again."""
        self.holds.hold(self.table, None)
        self.log.info("topic_writable_again", table=self.table)

    def metadata_refresh_failed(self, topic: str, error: str) -> None:
        self.log.limited(logging.WARNING, "topic_metadata_refresh_failed", topic, 60.0, topic=topic, error=error)

    def landed_elsewhere(self, moved: Moved) -> None:
        """A record of the table was delivered below where its topic stood: it landed in another
        incarnation of the topic; the cycle's records of that topic are sent again."""
        self.metrics.producer_error("offsets")
        self.log.warning(
            "topic_offsets_went_back",
            table=self.table,
            topic=moved.topic,
            partition=moved.partition,
            offset=moved.offset,
            floor=moved.floor,
        )

    def records_resent(self, count: int) -> None:
        self.metrics.producer_retry(count)

    def record_rejected(self, record: Record, source: str, error: str, detail: str) -> None:
        """``record`` was refused for good by the broker; its dead letter replaces it."""
        self.metrics.dlq(self.table, "rejected")
        self.log.error(
            "record_rejected",
            table=self.table,
            topic=record.topic,
            source=source,
            offset=_offset_of(record),
            error=error,
            detail=detail,
        )


def _offset_of(record: Record) -> int:
    return int(record.header("offset") or b"0")
