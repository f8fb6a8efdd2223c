"""One picture of the sidecar: per-table progress, recent seals and backups, and what needs attention.

:class:`SidecarStatus` is plain data, built by :mod:`hyperdata_sidecar.web.snapshot` from the running
sidecar and rendered by the status page; the functions here are pure so the picture can be tested
without a worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from hyperdata_sidecar.core.backlog import Estimate
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.core.transfer import TransferEstimate
from hyperdata_sidecar.engines import Engine
from hyperdata_sidecar.web.files import FileState, FileStatus, current_file
from hyperdata_sidecar.web.history import Point
from hyperdata_sidecar.web.units import duration, size, table_label


@dataclass(frozen=True)
class BacklogStatus:
    """What of a table is on disk and not yet published, and when it will be live: ``drain_bytes_per_s``
    is the last minute's rate (negative while the backlog grows, None until measured), ``eta_s`` the
    seconds to live at that rate (0 when live, None while the backlog does not shrink)."""

    bytes: int
    files: int
    drain_bytes_per_s: float | None
    eta_s: float | None
    falling_behind: bool

    @classmethod
    def of(cls, estimate: Estimate) -> BacklogStatus:
        return cls(
            estimate.backlog.bytes, estimate.backlog.files, estimate.drain_bytes_per_s, estimate.eta_s, estimate.falling_behind
        )

    def live_in(self) -> str:
        """When the table will be live, in a few words."""
        if self.eta_s == 0:
            return "live"
        if self.falling_behind:
            return "falling behind"
        if self.drain_bytes_per_s is None:
            return "measuring the rate"
        if self.eta_s is None:
            return "not shrinking"
        return f"live in {duration(self.eta_s)}"


@dataclass(frozen=True)
class TableStatus:
    """Progress of one node table. ``publish_lag_s`` and ``lines_per_s`` are None until known; the
    ``*_history`` fields are the last hour of them as (epoch seconds, value) points, oldest first."""

    table: str
    topic: str
    current_file: str | None
    current_state: str | None
    lag_bytes: int
    held_bytes: int
    publish_lag_s: float | None
    lines_per_s: float | None
    lines_published: int
    files: int
    dlq: dict[str, int]
    lines_per_s_history: list[Point] = field(default_factory=list)
    publish_lag_history: list[Point] = field(default_factory=list)
    backlog: BacklogStatus | None = None  # None until the table's backlog is first sampled


@dataclass(frozen=True)
class Thresholds:
    """When a lag becomes a problem (the sidecar's LAG_WARN_SECONDS and LAG_WARN_BYTES)."""

    lag_seconds: float
    lag_bytes: int


@dataclass(frozen=True)
class Problem:
    """One thing to look at: ``level`` is ``error`` (something failed or was rejected, or a sealed
    file changed) or ``warning`` (behind, or the chain went back to a lower block)."""

    level: str
    text: str


@dataclass(frozen=True)
class EngineInfo:
    """The line engine in use, as the page and ``/sidecar/status/`` name it."""

    name: str
    version: str
    fallback_reason: str | None = None

    @classmethod
    def of(cls, engine: Engine) -> EngineInfo:
        return cls(engine.name, engine.version, engine.fallback_reason)

    def label(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class RunningBackup:
    """The backup attempt running now: its file, the sink, bytes done of the file (and their
    fraction), the average rate since the attempt began (bytes per second) and the seconds left at
    that rate (None while unknown), and how the sink moves the bytes when it says (``via``, "" else)."""

    path: str
    sink: str
    done_bytes: int
    total_bytes: int
    fraction: float
    elapsed_s: float
    rate_bytes_per_s: float | None
    eta_s: float | None
    via: str

    @classmethod
    def of(cls, path: str, sink: str, estimate: TransferEstimate, via: str) -> RunningBackup:
        done, total, elapsed, rate, eta = estimate
        return cls(path, sink, done, total, estimate.fraction, elapsed, rate, eta, via)

    def line(self) -> str:
        """How far it is, in a few words: ``1.2 GiB of 3.0 GiB (40%) at 95.0 MiB/s, 19 s left``."""
        done = f"{size(self.done_bytes)} of {size(self.total_bytes)} ({100 * self.fraction:.0f}%)"
        if self.rate_bytes_per_s is None:
            return f"{done}, just started"
        left = "time left unknown" if self.eta_s is None else f"{duration(self.eta_s)} left"
        return f"{done} at {size(self.rate_bytes_per_s)}/s, {left}"


@dataclass(frozen=True)
class SidecarStatus:
    """Everything the status page shows. ``problems`` is empty when nothing needs attention."""

    node: str
    app_id: str
    now: float
    started_at: float
    ready: bool
    not_ready: list[str]
    broker_connected: bool
    tables: list[TableStatus]
    seals: list[dict[str, Any]]
    backups: list[dict[str, Any]]
    problems: list[Problem]
    engine: EngineInfo
    snapshots: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    catch_up: str | None = None  # one line while a table is catching up (see catch_up_line)
    backup_running: RunningBackup | None = None  # None between backup attempts
    backups_parked: list[dict[str, Any]] = field(default_factory=list)  # every parked backup, oldest first
    role: str = "active"  # a sidecar alone publishes; with STREAM_ID, "active" or "standby"
    stream: dict[str, Any] | None = None  # STREAM_ID: the stream, the term, the active's node, the members

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def table_status(
    table: str,
    topic: str,
    files: list[FileStatus],
    *,
    lines_published: int,
    publish_lag_s: float | None,
    lines_per_s: float | None,
    dlq: Mapping[str, int],
    lines_per_s_history: Sequence[Point] = (),
    publish_lag_history: Sequence[Point] = (),
    backlog: Estimate | None = None,
) -> TableStatus:
    """The status of ``table`` from the statuses of all tracked files (of every table)."""
    current = current_file(files, table)
    return TableStatus(
        table=table,
        topic=topic,
        current_file=current.path if current is not None else None,
        current_state=current.state if current is not None else None,
        lag_bytes=current.lag_bytes if current is not None else 0,
        held_bytes=current.held_bytes if current is not None else 0,
        publish_lag_s=publish_lag_s,
        lines_per_s=lines_per_s,
        lines_published=lines_published,
        files=sum(1 for f in files if f.table == table),
        dlq=dict(dlq),
        lines_per_s_history=list(lines_per_s_history),
        publish_lag_history=list(publish_lag_history),
        backlog=BacklogStatus.of(backlog) if backlog is not None else None,
    )


def catch_up_line(tables: Sequence[TableStatus]) -> str | None:
    """What is left to publish over all tables and when the last of them will be live; None when
    every table sampled is live (or none was sampled yet)."""
    behind = [t for t in tables if t.backlog is not None and t.backlog.eta_s != 0]
    if not behind:
        return None
    backlogs = [t.backlog for t in behind if t.backlog is not None]
    total, files = sum(b.bytes for b in backlogs), sum(b.files for b in backlogs)
    line = f"{size(total)} in {files} hour file(s) not yet published"
    falling = [table_label(t.table) for t in behind if t.backlog is not None and t.backlog.falling_behind]
    if falling:
        return f"{line}; falling behind: {', '.join(falling)} (the backlog does not shrink)"
    etas = [b.eta_s for b in backlogs]
    if any(eta is None for eta in etas):
        return f"{line}; {', '.join(f'{table_label(t.table)} {t.backlog.live_in()}' for t in behind if t.backlog is not None)}"
    return f"{line}; live in {duration(max(eta for eta in etas if eta is not None))} at the last minute's rate"


def problems(
    *,
    not_ready: list[str],
    tables: list[TableStatus],
    files: list[FileStatus],
    thresholds: Thresholds,
    now: float,
    lost: Sequence[Mapping[str, Any]] = (),
    late_appends: Sequence[Mapping[str, Any]] = (),
    rewritten: Sequence[Mapping[str, Any]] = (),
    regressions: Mapping[str, Mapping[str, Any]] | None = None,
    engine_fallback: str | None = None,
) -> list[Problem]:
    """What an operator should look at: errors first (not ready, files lost, sealed files that grew
    or were rewritten, parked and failed backups, seals not recorded, DLQ lines per table), then
    warnings (an installed native engine that does not load, block regressions, lags above their
    thresholds). One short sentence each."""
    errors = list(not_ready)
    errors += [f"{f['path']}: {f['reason']} (published up to byte {f['published_to']} of {f['size_seen']})" for f in lost]
    errors += [
        f"{f['path']}: grew from {f['sealed_size']} to {f['size']} bytes after its seal; the late lines are published"
        f" (line ids tagged |late-…) and sealed again as revision {f['revision']}"
        for f in late_appends
    ]
    errors += [
        f"{f['path']}: {'shrank' if f['reason'] == 'truncated' else 'its first bytes changed'} after its seal"
        f" ({f['sealed_size']} → {f['size']} bytes); it is no longer read, and Kafka and its seal keep what was sealed"
        for f in rewritten
    ]
    warnings = [f"line engine: {engine_fallback}; the Python engine runs instead"] if engine_fallback else []
    warnings += [
        f"{table}: {r['count']} block regression(s) since start, the last in {r['path']} at byte {r['offset']}"
        f" (block {r['block']} after {r['previous']}); line ids now end in |r{r['epoch']}"
        for table, r in sorted((regressions or {}).items())
    ]
    for f in files:
        backup = f.backup or {}
        if f.state == FileState.BACKUP_PARKED.value:
            errors.append(
                f"{f.path}: backup parked after {backup.get('attempts', '?')} failed tries ({backup.get('reason', '?')});"
                f" it is tried again on the next start, or now with: faust -A hyperdata_sidecar backup-retry {f.path}"
            )
        elif f.state == FileState.BACKUP_FAILED.value:
            errors.append(f"{f.path}: backup failed ({backup.get('reason', '?')}, attempt {backup.get('attempts', '?')})")
        elif f.state == FileState.FINALIZED.value:
            age = _age(f.finalized_at, now)
            if age is not None and age > thresholds.lag_seconds:
                errors.append(f"{f.path}: finalized {duration(age)} ago, no seal recorded")
    for t in tables:
        reasons = {reason: count for reason, count in sorted(t.dlq.items()) if count}
        if reasons:
            detail = ", ".join(f"{reason} {count}" for reason, count in reasons.items())
            errors.append(f"{t.table}: {sum(reasons.values())} line(s) sent to the DLQ ({detail})")
        if t.publish_lag_s is not None and t.publish_lag_s > thresholds.lag_seconds:
            warnings.append(f"{t.table}: publish lag {duration(t.publish_lag_s)} (warn above {duration(thresholds.lag_seconds)})")
        if t.backlog is not None and t.backlog.falling_behind:
            warnings.append(
                f"{t.table}: falling behind: {size(t.backlog.bytes)} in {t.backlog.files} hour file(s) not yet published,"
                " and the backlog has not shrunk for the last half minute"
            )
        if t.lag_bytes > thresholds.lag_bytes:
            warnings.append(f"{t.table}: tail lag {size(t.lag_bytes)} (warn above {size(thresholds.lag_bytes)})")
    return [Problem("error", text) for text in errors] + [Problem("warning", text) for text in warnings]


def _age(iso: str | None, now: float) -> float | None:
    epoch = epoch_of(iso)
    return None if epoch is None else now - epoch
