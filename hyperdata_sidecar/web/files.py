"""The state of each tracked hour file, combined from its cursor and the seals and backups tables.

Pure functions over plain values: the web shell gathers the cursors (persisted, overlaid with the
tailers' fresher in-memory ones), what only the tailer knows (current size, held partial bytes) and
the two tables' values, and these functions turn them into what the JSON views and the page show.
Only metadata is ever reported, never file contents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hyperdata_sidecar.core.backup_status import BackupStatus, status_of
from hyperdata_sidecar.core.cursor import GROWING, FileCursor, FileState, file_state
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.seal import revision_of
from hyperdata_sidecar.ports import LiveFile


@dataclass(frozen=True)
class FileStatus:
    """One row of ``/sidecar/files/``. ``lag_bytes`` = size − persisted offset."""

    path: str
    table: str
    date: str
    hour: str
    state: str
    offset: int
    size: int
    lag_bytes: int
    held_bytes: int
    lines: int
    dlq_lines: int
    first_block: int | None
    last_block: int | None
    finalized_at: str | None
    sealed_at: str | None
    backup: dict[str, Any] | None
    revision: int = 0
    block_regressions: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


BACKUP_FIELDS = ("status", "sink", "attempts", "reason", "error", "ref", "revision", "at")


def file_statuses(
    cursors: Mapping[str, FileCursor],
    live: Mapping[str, LiveFile],
    seals: Mapping[str, Mapping[str, Any]],
    backups: Mapping[str, Mapping[str, Any]],
) -> list[FileStatus]:
    """One status per cursor whose path names an hour file, in (table, date, hour) order.

    ``live`` overrides the cursor's recorded size for files the tailer is reading; a file without
    a live entry reports the size its cursor recorded and no held bytes. A seal or backup record
    of an earlier revision than the cursor's does not count for the file's state.
    """
    rows: list[tuple[HourFile, FileStatus]] = []
    for path, cursor in cursors.items():
        hour = HourFile.parse(path)
        if hour is None:
            continue
        seal = seals.get(path)
        backup = backups.get(path)
        now = live.get(path)
        size = now.size if now is not None and now.size >= 0 else cursor.size
        current = max(cursor.revision, 1)
        state = file_state(
            cursor.stage,
            sealed=seal is not None and revision_of(seal) >= current,
            backup_status=_status(backup) if backup is not None and revision_of(backup) >= current else None,
        )
        status = FileStatus(
            path=path,
            table=hour.table,
            date=hour.date,
            hour=hour.hour,
            state=state.value,
            offset=cursor.byte_offset,
            size=size,
            lag_bytes=max(0, size - cursor.byte_offset) if cursor.stage in GROWING else 0,
            held_bytes=now.held_bytes if now is not None else 0,
            lines=cursor.lines,
            dlq_lines=cursor.dlq_lines,
            first_block=cursor.first_block,
            last_block=cursor.last_block,
            finalized_at=cursor.finalized_at,
            sealed_at=seal.get("sealed_at") if seal is not None else None,
            backup={k: backup[k] for k in BACKUP_FIELDS if k in backup} if backup is not None else None,
            revision=cursor.revision,
            block_regressions=cursor.block_regressions,
        )
        rows.append((hour, status))
    rows.sort(key=lambda row: row[0])
    return [status for _hour, status in rows]


def current_file(statuses: list[FileStatus], table: str) -> FileStatus | None:
    """The file ``table`` is working on: its first tailing file (files are worked in order),
    else its newest file; None when the table has no files."""
    mine = [s for s in statuses if s.table == table]
    for status in mine:
        if status.state == FileState.TAILING.value:
            return status
    return mine[-1] if mine else None


def recent_seals(seals: Mapping[str, Mapping[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` seal records, newest ``sealed_at`` first."""
    records = [dict(value) for value in seals.values()]
    records.sort(key=lambda r: (r.get("sealed_at") or "", r.get("path") or ""), reverse=True)
    return records[:limit]


def recent_snapshots(
    snapshots: Mapping[str, Mapping[str, Any]], backups: Mapping[str, Mapping[str, Any]], limit: int
) -> list[dict[str, Any]]:
    """At most ``limit`` published snapshot events, highest height first, each with its backup's status."""
    records = [{**dict(event), "backup": status_of(backups.get(path)).value} for path, event in snapshots.items()]
    records.sort(key=lambda r: int(r.get("height", 0)), reverse=True)
    return records[:limit]


def recent_backups(backups: Mapping[str, Mapping[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` backup results (with their ``path``), most recent ``at`` first."""
    records = [{"path": path, **{k: v[k] for k in BACKUP_FIELDS if k in v}} for path, v in backups.items()]
    records.sort(key=lambda r: (r.get("at") or "", r["path"]), reverse=True)
    return records[:limit]


def parked_backups(backups: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every parked backup (with its ``path``, reason and error), parked longest ago first."""
    records = [
        {"path": path, **{k: v[k] for k in BACKUP_FIELDS if k in v}}
        for path, v in backups.items()
        if status_of(v) is BackupStatus.PARKED
    ]
    records.sort(key=lambda r: (r.get("at") or "", r["path"]))
    return records


def _status(backup: Mapping[str, Any] | None) -> str | None:
    return None if backup is None else backup.get("status")
