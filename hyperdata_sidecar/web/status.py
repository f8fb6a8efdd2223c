"""One picture of the sidecar: per-table progress, recent seals and backups, and what needs attention.

:class:`SidecarStatus` is plain data, built by :mod:`hyperdata_sidecar.web.snapshot` from the running
sidecar and rendered by the status page; the functions here are pure so the picture can be tested
without a worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from hyperdata_sidecar.web.files import FileState, FileStatus, current_file


@dataclass(frozen=True)
class TableStatus:
    """Progress of one node table. ``publish_lag_s`` and ``lines_per_s`` are None until known."""

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


@dataclass(frozen=True)
class Thresholds:
    """When a lag becomes a problem (the sidecar's LAG_WARN_SECONDS and LAG_WARN_BYTES)."""

    lag_seconds: float
    lag_bytes: int


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
    problems: list[str]
    config: dict[str, Any] = field(default_factory=dict)

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
    )


def problems(
    *,
    not_ready: list[str],
    tables: list[TableStatus],
    files: list[FileStatus],
    thresholds: Thresholds,
    now: float,
) -> list[str]:
    """What an operator should look at, most urgent first, one short sentence each."""
    found = list(not_ready)
    for t in tables:
        if t.publish_lag_s is not None and t.publish_lag_s > thresholds.lag_seconds:
            found.append(f"{t.table}: publish lag {t.publish_lag_s:.0f} s (warn above {thresholds.lag_seconds:.0f} s)")
        if t.lag_bytes > thresholds.lag_bytes:
            found.append(f"{t.table}: tail lag {t.lag_bytes} bytes (warn above {thresholds.lag_bytes})")
    for f in files:
        if f.state == FileState.BACKUP_FAILED.value:
            backup = f.backup or {}
            found.append(
                f"{f.path}: backup failed ({backup.get('reason', '?')}, attempt {backup.get('attempts', '?')})"
            )
        elif f.state == FileState.FINALIZED.value:
            age = _age(f.finalized_at, now)
            if age is not None and age > thresholds.lag_seconds:
                found.append(f"{f.path}: finalized {age:.0f} s ago, no seal recorded")
    for t in tables:
        for reason, count in sorted(t.dlq.items()):
            if count:
                found.append(f"{t.table}: {count} line(s) sent to the DLQ as {reason}")
    return found


def _age(iso: str | None, now: float) -> float | None:
    if not iso:
        return None
    try:
        return now - datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
