"""The status of a backup, as the ``sidecar-backups`` table records it and the views show it."""

from __future__ import annotations

import enum


class BackupStatus(str, enum.Enum):
    """A file's backup: done (``ok``), ``failed`` (tried again when due), ``parked`` (tries used up,
    tried again on the next start or on request), ``disabled`` (no backup sink), or ``pending``
    (nothing recorded yet: only the read model says so, the table never holds it)."""

    OK = "ok"
    FAILED = "failed"
    PARKED = "parked"
    DISABLED = "disabled"
    PENDING = "pending"

    @property
    def is_done(self) -> bool:
        """Nothing more to copy: the backup is made, or backups are off."""
        return self in (BackupStatus.OK, BackupStatus.DISABLED)


def status_of(record: object) -> BackupStatus:
    """The status of a ``sidecar-backups`` record (``pending`` when there is none, or none readable)."""
    status = record.get("status") if isinstance(record, dict) else None
    try:
        return BackupStatus(status)
    except ValueError:
        return BackupStatus.PENDING
