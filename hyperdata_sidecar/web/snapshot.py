"""Reads the sidecar's read model (:class:`~hyperdata_sidecar.ports.SidecarView`) into the plain
values the views serve.

Everything here but :func:`refresh_gauges` (run by a timer, never by a request) is read-only and
cheap enough for a request: a few ``stat`` calls (one per file being tailed) and one pass over the
seals and backups tables. It runs on the worker's event loop, between awaits, so it sees the tables
and tailers in a consistent state.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from hyperdata_sidecar.core.backup_status import BackupStatus, status_of
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.seal import revision_of
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.times import epoch_of, hour_start_epoch
from hyperdata_sidecar.core.transfer import estimate_transfer
from hyperdata_sidecar.ports import LiveFile, SidecarView
from hyperdata_sidecar.web.files import (
    FileState,
    FileStatus,
    file_statuses,
    parked_backups,
    recent_backups,
    recent_seals,
    recent_snapshots,
)
from hyperdata_sidecar.web.history import History
from hyperdata_sidecar.web.rates import LineRates
from hyperdata_sidecar.web.status import (
    BacklogStatus,
    EngineInfo,
    RunningBackup,
    SidecarStatus,
    Thresholds,
    catch_up_line,
    problems,
    table_status,
)

RECENT = 8  # seals and backups on the status page


def cursors(view: SidecarView) -> dict[str, FileCursor]:
    """Every tracked file's cursor."""
    return {path: tracked.cursor for files in view.files.tracked().values() for path, tracked in files.items()}


def live_files(view: SidecarView) -> dict[str, LiveFile]:
    """Size on disk now and held partial bytes of each file being tailed."""
    return {
        path: tracked.live
        for files in view.files.tracked().values()
        for path, tracked in files.items()
        if tracked.live is not None
    }


def files(
    view: SidecarView, seals: Mapping[str, Any] | None = None, backups: Mapping[str, Any] | None = None
) -> list[FileStatus]:
    """The status of every tracked file (``/sidecar/files/``); pass the tables' contents if already read."""
    return file_statuses(
        cursors(view),
        live_files(view),
        view.tables.records("seals") if seals is None else seals,
        view.tables.records("backups") if backups is None else backups,
    )


def seals(view: SidecarView, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` most recent seals (``/sidecar/seals/``)."""
    return recent_seals(view.tables.records("seals"), limit)


def snapshots(view: SidecarView, limit: int) -> dict[str, Any]:
    """The ``limit`` newest published snapshot events and the snapshots still waiting (``/sidecar/snapshots/``)."""
    return {
        "snapshots": recent_snapshots(view.tables.records("snapshots"), view.tables.records("backups"), limit),
        "waiting": view.snapshots.waiting(),
        "topic": view.settings.topic_snapshots,
    }


def dlq(view: SidecarView) -> dict[str, Any]:
    """DLQ counts (``/sidecar/dlq/``): by table and reason since this process started, and the
    per-table sum over the tracked files' cursors (which survives restarts)."""
    tracked: dict[str, int] = {spec.dir_name: 0 for spec in TABLES}
    for path, cursor in cursors(view).items():
        table = path.split("/", 1)[0]
        tracked[table] = tracked.get(table, 0) + cursor.dlq_lines
    counts = view.metrics.dlq_counts()
    return {
        "since_start": counts,
        "since_start_total": sum(n for reasons in counts.values() for n in reasons.values()),
        "tracked_files": tracked,
    }


def running_backup(view: SidecarView) -> RunningBackup | None:
    """The backup attempt running now and how far it is, or None between attempts."""
    progress = view.backups.running()
    if progress is None:
        return None
    estimate = estimate_transfer(progress.done_bytes, progress.total_bytes, time.monotonic() - progress.started_at)
    return RunningBackup.of(progress.relpath, view.settings.backup_sink, estimate, progress.via)


def status(view: SidecarView, rates: LineRates, history: History) -> SidecarStatus:
    """The whole picture for the status page."""
    now = time.time()
    sealed, backed_up = view.tables.records("seals"), view.tables.records("backups")
    statuses = files(view, sealed, backed_up)
    metrics = view.metrics
    totals = metrics.lines_published_totals()
    dlq_counts = metrics.dlq_counts()
    backlogs = view.backlogs.estimates()
    tables = [
        table_status(
            spec.dir_name,
            view.settings.topic_for(spec),
            statuses,
            lines_published=totals.get(spec.dir_name, 0),
            publish_lag_s=metrics.publish_lag_seconds(spec.dir_name),
            lines_per_s=rates.per_second(spec.dir_name),
            dlq=dlq_counts.get(spec.dir_name, {}),
            lines_per_s_history=history.lines_per_s(spec.dir_name),
            publish_lag_history=history.publish_lag(spec.dir_name),
            backlog=backlogs.get(spec.dir_name),
        )
        for spec in TABLES
    ]
    reasons = view.readiness.not_ready_reasons()
    thresholds = Thresholds(view.settings.lag_warn_seconds, view.settings.lag_warn_bytes)
    engine = view.engine
    stream = view.stream.status() if view.stream is not None else None
    return SidecarStatus(
        node=view.settings.node_id,
        app_id=view.app_id,
        now=now,
        started_at=view.started_at,
        ready=not reasons,
        not_ready=reasons,
        broker_connected=view.broker.connected,
        tables=tables,
        seals=recent_seals(sealed, RECENT),
        backups=recent_backups(backed_up, RECENT),
        snapshots=recent_snapshots(view.tables.records("snapshots"), backed_up, RECENT),
        problems=problems(
            not_ready=reasons,
            tables=tables,
            files=statuses,
            thresholds=thresholds,
            now=now,
            lost=list(view.incidents.lost),
            late_appends=list(view.incidents.late_appends),
            rewritten=list(view.incidents.rewritten),
            regressions=view.incidents.regressions,
            engine_fallback=engine.fallback_reason,
        ),
        config=view.settings.public_summary(),
        catch_up=catch_up_line(tables),
        engine=EngineInfo.of(engine),
        backup_running=running_backup(view),
        backups_parked=parked_backups(backed_up),
        role=stream["role"] if stream is not None else "active",
        stream=stream,
    )


def refresh_gauges(view: SidecarView) -> None:
    """Bring the gauges that describe state (not events) up to date (a timer calls it, every
    GAUGES_EVERY_S; a request never does).

    Files tailed, the current file's tail lag and held bytes (from a fresh ``stat``, so a tailer
    stuck on an unreachable broker still shows its lag growing), the oldest finalized file without
    a seal of its revision, the oldest hour without a seal, parked backups and the lag threshold the
    alerts compare with.
    """
    metrics = view.metrics
    metrics.set_lag_warn_bytes(view.settings.lag_warn_bytes)
    backups = view.tables.records("backups")
    metrics.set_backups_parked(sum(1 for record in backups.values() if status_of(record) is BackupStatus.PARKED))
    seals_table = view.tables.records("seals")
    for table, tracked_files in view.files.tracked().items():
        metrics.set_files_tailed(table, len(tracked_files))
        oldest: float | None = None
        oldest_hour_end: float | None = None
        current_set = False
        for path, tracked in sorted(tracked_files.items(), key=lambda item: item[1].hour):
            cursor = tracked.cursor
            if oldest_hour_end is None and cursor.stage is not CursorStage.SKIPPED and path not in seals_table:
                oldest_hour_end = hour_start_epoch(tracked.hour.date, tracked.hour.hour) + 3600
            if cursor.stage is CursorStage.TAILING and not current_set and tracked.live is not None:
                metrics.set_tail_lag(table, path, max(0, tracked.live.size - cursor.byte_offset))
                metrics.set_partial_held(table, path, tracked.live.held_bytes)
                current_set = True
            elif (
                cursor.stage is CursorStage.FINALIZED
                and cursor.finalized_at
                and revision_of(seals_table.get(path)) < max(cursor.revision, 1)
            ):
                finalized = epoch_of(cursor.finalized_at)
                if finalized is not None and (oldest is None or finalized < oldest):
                    oldest = finalized
        metrics.set_oldest_unsealed(table, oldest)
        metrics.set_oldest_unsealed_hour_end(table, oldest_hour_end)


def backlogs(view: SidecarView) -> dict[str, dict[str, Any]]:
    """Each sampled table's backlog as ``/sidecar/files/`` serves it (the ``files`` command prints it)."""
    return {table: asdict(BacklogStatus.of(estimate)) for table, estimate in sorted(view.backlogs.estimates().items())}


def file_state_counts(statuses: list[FileStatus]) -> dict[str, int]:
    """How many tracked files are in each state (every state listed, zeros included)."""
    counts = {state.value: 0 for state in FileState}
    for status in statuses:
        counts[status.state] += 1
    return counts
