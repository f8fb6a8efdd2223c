"""A backup's status read from its ``sidecar-backups`` record."""

from __future__ import annotations

from hyperdata_sidecar.core.backup_status import BackupStatus, status_of


def test_a_recorded_status_is_read_as_it_is_stored():
    assert [status_of({"status": text}) for text in ("ok", "failed", "parked", "disabled")] == [
        BackupStatus.OK,
        BackupStatus.FAILED,
        BackupStatus.PARKED,
        BackupStatus.DISABLED,
    ]


def test_no_record_or_an_unknown_status_is_pending():
    assert status_of(None) is BackupStatus.PENDING
    assert status_of({}) is BackupStatus.PENDING
    assert status_of({"status": "copying"}) is BackupStatus.PENDING


def test_only_a_made_or_disabled_backup_is_done():
    assert {s for s in BackupStatus if s.is_done} == {BackupStatus.OK, BackupStatus.DISABLED}


def test_the_stored_text_is_the_value():
    assert BackupStatus.PARKED.value == "parked" and BackupStatus.PARKED == "parked"
