"""Which finalized hour files are handed to the seal and backup agents again, and when.

A rotation record can be lost for an agent without a crash: the seal and backup agents read one
topic through one consumer group, and across a rebalance Faust may commit a record's offset for
both while only one of them ran on it (docs/architecture.md, "Why rotations are handed over
again"). So the sidecar does not rely on the rotation topic alone: at start, and after every
rebalance, it hands over again every finalized file whose seal or backup of its latest revision is
not recorded. The agents skip what turns out to be done, so a handover too many costs a table read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from hyperdata_sidecar.core.backup_status import BackupStatus, status_of
from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.seal import published_revision_of, revision_of


class Occasion(str, enum.Enum):
    """When the finalized files are looked at again."""

    START = "start"  # a new process: also gives every failed or parked backup a new series of tries
    REBALANCE = "rebalance"  # the consumer group was rebalanced: a parked backup stays parked


def needs_handover(
    cursor: FileCursor, seal: Mapping[str, Any] | None, backup: Mapping[str, Any] | None, occasion: Occasion
) -> bool:
    """True when the finalized file of ``cursor`` is to be handed to the agents again: its latest
    revision has no published seal recorded (``seal``, its ``sidecar-seals`` record: a standby's
    seal is not one), or no backup done
    (``backup``, its ``sidecar-backups`` record). After a rebalance, a backup parked at this revision
    is left to the operator's ``backup-retry`` or the next start, as the parked state promises."""
    if cursor.stage is not CursorStage.FINALIZED:
        return False
    if published_revision_of(seal) < cursor.revision:
        return True
    if revision_of(backup) < cursor.revision:
        return True
    status = status_of(backup)
    if status.is_done:
        return False
    return not (occasion is Occasion.REBALANCE and status is BackupStatus.PARKED)
