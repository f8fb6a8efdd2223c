"""Reads the running sidecar (tailers, tables, metrics) into the plain values the views serve.

Everything here is read-only and cheap enough for a request: a few ``stat`` calls (one per file
being tailed) and one pass over the seals and backups tables. It runs on the worker's event loop,
between awaits, so it sees the tables and tailers in a consistent state.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.seal import revision_of
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.times import epoch_of, hour_start_epoch
from hyperdata_sidecar.web.files import (
    GROWING,
    FileState,
    FileStatus,
    LiveFile,
    file_statuses,
    recent_backups,
    recent_seals,
    recent_snapshots,
)
from hyperdata_sidecar.web.history import History
from hyperdata_sidecar.web.rates import LineRates
from hyperdata_sidecar.web.status import (
    SidecarStatus,
    Thresholds,
    problems,
    table_status,
)

if TYPE_CHECKING:
    from hyperdata_sidecar.plugin import Sidecar

RECENT = 8  # seals and backups on the status page


def not_ready_reasons(sidecar: Sidecar) -> list[str]:
    """Why the sidecar is not ready; empty when it is (tables recovered, producer connected, WATCH_DIR readable)."""
    reasons = []
    if not sidecar.synced:
        reasons.append("tables not recovered yet")
    if sidecar.broker_wait is not None:
        reasons.append(sidecar.broker_wait)
    elif not sidecar.broker_connected:
        reasons.append(f"broker unreachable ({sidecar.settings.kafka_bootstrap})")
    reasons += [f"{table}: cannot publish, keeping its position: {reason}" for table, reason in sorted(sidecar.holds.items())]
    reasons += [f"{table}: cannot read the watched tree, keeping its position: {error}" for table, error in sorted(sidecar.unreadable.items())]
    watch = sidecar.settings.watch_dir
    if not (os.path.isdir(watch) and os.access(watch, os.R_OK | os.X_OK)):
        reasons.append(f"WATCH_DIR {watch} is not a readable directory")
    return reasons


def cursors(sidecar: Sidecar) -> dict[str, FileCursor]:
    """Every tracked file's cursor: the tailers' (fresher) once running, the offsets table before."""
    if sidecar.synced:
        return {path: tracked.cursor for tailer in sidecar.tailers.values() for path, tracked in tailer.files.items()}
    return {path: FileCursor.from_record(record) for path, record in sidecar.offsets.items()}


def live_files(sidecar: Sidecar) -> dict[str, LiveFile]:
    """Size on disk now and held partial bytes of each file being tailed."""
    live = {}
    for tailer in sidecar.tailers.values():
        for path, tracked in tailer.files.items():
            if tracked.cursor.stage not in GROWING:
                continue
            try:
                size = os.stat(tracked.reader.path).st_size
            except OSError:
                size = tracked.reader.last_size
            live[path] = LiveFile(size=size, held_bytes=tracked.splitter.held_bytes)
    return live


def files(sidecar: Sidecar, seals: Mapping[str, Any] | None = None, backups: Mapping[str, Any] | None = None) -> list[FileStatus]:
    """The status of every tracked file (``/sidecar/files/``); pass the tables' contents if already read."""
    return file_statuses(
        cursors(sidecar),
        live_files(sidecar),
        _table(sidecar.seals) if seals is None else seals,
        _table(sidecar.backups) if backups is None else backups,
    )


def seals(sidecar: Sidecar, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` most recent seals (``/sidecar/seals/``)."""
    return recent_seals(_table(sidecar.seals), limit)


def snapshots(sidecar: Sidecar, limit: int) -> dict[str, Any]:
    """The ``limit`` newest published snapshot events and the snapshots still waiting (``/sidecar/snapshots/``)."""
    watcher = sidecar.snapshot_watcher
    return {
        "snapshots": recent_snapshots(_table(sidecar.snapshots), _table(sidecar.backups), limit),
        "waiting": watcher.waiting() if watcher is not None else [],
        "topic": sidecar.settings.topic_snapshots,
    }


def dlq(sidecar: Sidecar) -> dict[str, Any]:
    """DLQ counts (``/sidecar/dlq/``): by table and reason since this process started, and the
    per-table sum over the tracked files' cursors (which survives restarts)."""
    tracked: dict[str, int] = {spec.dir_name: 0 for spec in TABLES}
    for path, cursor in cursors(sidecar).items():
        table = path.split("/", 1)[0]
        tracked[table] = tracked.get(table, 0) + cursor.dlq_lines
    counts = sidecar.metrics.dlq_counts()
    return {
        "since_start": counts,
        "since_start_total": sum(n for reasons in counts.values() for n in reasons.values()),
        "tracked_files": tracked,
    }


def status(sidecar: Sidecar, rates: LineRates, history: History) -> SidecarStatus:
    """The whole picture for the status page."""
    now = time.time()
    sealed, backed_up = _table(sidecar.seals), _table(sidecar.backups)
    statuses = files(sidecar, sealed, backed_up)
    metrics = sidecar.metrics
    totals = metrics.lines_published_totals()
    dlq_counts = metrics.dlq_counts()
    tables = [
        table_status(
            spec.dir_name,
            sidecar.settings.topic_for(spec),
            statuses,
            lines_published=totals.get(spec.dir_name, 0),
            publish_lag_s=metrics.publish_lag_seconds(spec.dir_name),
            lines_per_s=rates.per_second(spec.dir_name),
            dlq=dlq_counts.get(spec.dir_name, {}),
            lines_per_s_history=history.lines_per_s(spec.dir_name),
            publish_lag_history=history.publish_lag(spec.dir_name),
        )
        for spec in TABLES
    ]
    reasons = not_ready_reasons(sidecar)
    thresholds = Thresholds(sidecar.settings.lag_warn_seconds, sidecar.settings.lag_warn_bytes)
    return SidecarStatus(
        node=sidecar.settings.node_id,
        app_id=sidecar.app.conf.id,
        now=now,
        started_at=sidecar.started_at,
        ready=not reasons,
        not_ready=reasons,
        broker_connected=sidecar.broker_connected,
        tables=tables,
        seals=recent_seals(sealed, RECENT),
        backups=recent_backups(backed_up, RECENT),
        snapshots=recent_snapshots(_table(sidecar.snapshots), backed_up, RECENT),
        problems=problems(
            not_ready=reasons, tables=tables, files=statuses, thresholds=thresholds, now=now, lost=list(sidecar.lost),
            late_appends=list(sidecar.late_appends), rewritten=list(sidecar.rewritten), regressions=sidecar.regressions,
        ),
        config=sidecar.settings.public_summary(),
    )


def refresh_gauges(sidecar: Sidecar) -> None:
    """Bring the gauges that describe state (not events) up to date before a scrape.

    Readiness, files tailed, the current file's tail lag and held bytes (from a fresh ``stat``, so
    a tailer stuck on an unreachable broker still shows its lag growing), the oldest finalized
    file without a seal of its revision, the oldest hour without a seal, parked backups and the
    lag threshold the alerts compare with.
    """
    metrics = sidecar.metrics
    metrics.set_ready(not not_ready_reasons(sidecar))
    metrics.set_lag_warn_bytes(sidecar.settings.lag_warn_bytes)
    metrics.set_backups_parked(sum(1 for record in _table(sidecar.backups).values() if record.get("status") == "parked"))
    live = live_files(sidecar)
    seals_table = _table(sidecar.seals)
    for table, tailer in sidecar.tailers.items():
        metrics.set_files_tailed(table, len(tailer.files))
        oldest: float | None = None
        oldest_hour_end: float | None = None
        current_set = False
        for path in sorted(tailer.files, key=lambda p: tailer.files[p].hour):
            tracked = tailer.files[path]
            cursor = tracked.cursor
            if oldest_hour_end is None and cursor.stage is not CursorStage.SKIPPED and path not in seals_table:
                oldest_hour_end = hour_start_epoch(tracked.hour.date, tracked.hour.hour) + 3600
            if cursor.stage is CursorStage.TAILING and not current_set and path in live:
                metrics.set_tail_lag(table, path, max(0, live[path].size - cursor.byte_offset))
                metrics.set_partial_held(table, path, live[path].held_bytes)
                current_set = True
            elif cursor.stage is CursorStage.FINALIZED and cursor.finalized_at and revision_of(seals_table.get(path)) < max(cursor.revision, 1):
                finalized = epoch_of(cursor.finalized_at)  # the same ISO-8601 parse
                if finalized is not None and (oldest is None or finalized < oldest):
                    oldest = finalized
        metrics.set_oldest_unsealed(table, oldest)
        metrics.set_oldest_unsealed_hour_end(table, oldest_hour_end)


def file_state_counts(statuses: list[FileStatus]) -> dict[str, int]:
    """How many tracked files are in each state (every state listed, zeros included)."""
    counts = {state.value: 0 for state in FileState}
    for status in statuses:
        counts[status.state] += 1
    return counts


def _table(table: Any) -> Mapping[str, Mapping[str, Any]]:
    """A Faust table's contents as a dict (one pass over the local store)."""
    return dict(table.items())
