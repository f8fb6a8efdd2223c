"""The persisted tail state of one hour file (one value of the ``offsets`` table)."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace
from typing import Any

from hyperdata_sidecar.core.backup_status import BackupStatus
from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.seal import OffsetRanges, SealManifest


class CursorStage(str, enum.Enum):
    """Where a file is in its life; :data:`MOVES` lists the allowed moves."""

    TAILING = "tailing"  # being published; may still grow
    FINALIZED = "finalized"  # every byte accounted for; rotation record sent (watched for late appends)
    SKIPPED = "skipped"  # older than the start point under INITIAL_POSITION=end; never published
    REOPENED = "reopened"  # sealed, then it grew: the late lines are being published; a new revision follows
    REWRITTEN = "rewritten"  # sealed, then it shrank or its first bytes changed: no longer read


MOVES: dict[CursorStage, frozenset[CursorStage]] = {
    CursorStage.TAILING: frozenset({CursorStage.FINALIZED, CursorStage.SKIPPED}),
    CursorStage.FINALIZED: frozenset({CursorStage.REOPENED, CursorStage.REWRITTEN}),
    CursorStage.REOPENED: frozenset({CursorStage.FINALIZED, CursorStage.REWRITTEN}),
    CursorStage.SKIPPED: frozenset(),
    CursorStage.REWRITTEN: frozenset(),
}
"""Allowed stage moves. A tailing file that is truncated or replaced starts over as a new cursor
(:meth:`FileCursor.restarted`), still tailing."""


GROWING = (CursorStage.TAILING, CursorStage.REOPENED)
"""Stages whose file may be larger on disk than its offset (lines still to publish)."""


class FileState(str, enum.Enum):
    """Where a file is, as an operator sees it (derived, never stored): its :class:`CursorStage`,
    with ``finalized`` told apart by what the seal and backup agents recorded. The one vocabulary of
    file states: the views, the status page and the docs use these names."""

    TAILING = "tailing"  # being published; may still grow
    SKIPPED = "skipped"  # before the start point under INITIAL_POSITION=end; never published
    FINALIZED = "finalized"  # read to its end and handed to the sealer; no seal of this revision recorded yet
    SEALED = "sealed"  # seal published; backup not done (pending, or backups disabled)
    BACKED_UP = "backed_up"  # sealed and its backup verified
    BACKUP_FAILED = "backup_failed"  # the last backup attempt failed (the agent tries again)
    BACKUP_PARKED = "backup_parked"  # BACKUP_MAX_TRIES attempts failed: waits for a restart or backup-retry
    REOPENED = "reopened"  # grew after its seal: the late lines are being published, a new seal follows
    REWRITTEN = "rewritten"  # shrank or changed its first bytes after its seal: no longer read


def file_state(stage: CursorStage, *, sealed: bool, backup_status: str | None) -> FileState:
    """The state of a file whose cursor is at ``stage``; ``sealed`` and ``backup_status`` are about
    the revision the cursor is at.

    A failed or parked backup shows whether or not the seal is recorded (it needs attention either
    way); a verified backup counts only once the file is sealed, because sealing is the contract's
    "finished" signal and the two agents finish in either order.
    """
    direct = {
        CursorStage.TAILING: FileState.TAILING,
        CursorStage.SKIPPED: FileState.SKIPPED,
        CursorStage.REOPENED: FileState.REOPENED,
        CursorStage.REWRITTEN: FileState.REWRITTEN,
    }
    if stage in direct:
        return direct[stage]
    if backup_status == BackupStatus.PARKED:
        return FileState.BACKUP_PARKED
    if backup_status == BackupStatus.FAILED:
        return FileState.BACKUP_FAILED
    if not sealed:
        return FileState.FINALIZED
    if backup_status == BackupStatus.OK:
        return FileState.BACKED_UP
    return FileState.SEALED


@dataclass(frozen=True)
class FileCursor:
    """Resume point and running totals of one hour file.

    ``byte_offset`` is just past the newline of the last line that the broker acked (or sent to the
    DLQ); everything before it is published. The sequencer state (block, next seq, regression
    epoch) and the totals describe exactly the bytes before ``byte_offset``, so a restart reproduces
    the same line ids and seal figures. ``seq0`` is the sequencer state at byte 0, kept so that a
    truncated or replaced file is re-read from the start with the same line ids; ``carry`` the state
    at the end of the file's first revision, where the next hour file of the table starts (lines
    appended after the seal do not move it).

    ``revision`` counts the file's finalizations (its seals): 1 once finalized, 2 after a late
    append was published and the file finalized again, and so on. ``unterminated_at`` is where the
    unterminated last line dead-lettered at the latest finalization starts (None if the file ended
    in a newline): a late append completes that line, so it is read again from there. ``offsets``
    are the Kafka offsets of the delivered lines (see :class:`SealManifest`); None for a file whose
    cursor was first stored by a version that did not keep them.
    """

    path: str
    byte_offset: int = 0
    last_line_complete: bool = True
    seq_block: int | None = None
    seq_next: int = 0
    seq_epoch: int = 0
    seq0_block: int | None = None
    seq0_next: int = 0
    seq0_epoch: int = 0
    carry_block: int | None = None
    carry_next: int = 0
    carry_epoch: int = 0
    lines: int = 0
    dlq_lines: int = 0
    block_regressions: int = 0
    first_block: int | None = None
    last_block: int | None = None
    head: str = ""  # hex of the file's first bytes (the tailer keeps up to 64), to spot a replaced file
    stage: CursorStage = CursorStage.TAILING
    size: int = 0  # file size when this cursor was written
    finalized_at: str | None = None
    sha256: str | None = None
    revision: int = 0
    unterminated_at: int | None = None
    offsets: OffsetRanges | None = None

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["stage"] = self.stage.value
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> FileCursor:
        """The cursor of a stored record; records written before a field existed get its default
        (a finalized file of such a record is at revision 1 and hands its final state on)."""
        fields = {k: v for k, v in record.items() if k in cls.__dataclass_fields__}
        fields["stage"] = CursorStage(fields.get("stage", CursorStage.TAILING.value))
        if fields["stage"] is CursorStage.FINALIZED and "revision" not in fields:
            fields["revision"] = 1
            fields["carry_block"], fields["carry_next"] = fields.get("seq_block"), fields.get("seq_next", 0)
        return cls(**fields)

    @property
    def seq_state(self) -> tuple[int | None, int, int]:
        return self.seq_block, self.seq_next, self.seq_epoch

    @property
    def carry_state(self) -> tuple[int | None, int, int]:
        return self.carry_block, self.carry_next, self.carry_epoch

    @classmethod
    def adopted(cls, path: str, seq_state: tuple[int | None, int, int]) -> FileCursor:
        """The cursor of a file seen for the first time, whose first line follows ``seq_state``."""
        block, next_seq, epoch = seq_state
        return cls(
            path=path,
            seq_block=block,
            seq_next=next_seq,
            seq_epoch=epoch,
            seq0_block=block,
            seq0_next=next_seq,
            seq0_epoch=epoch,
            offsets={},
        )

    def restarted(self) -> FileCursor:
        """The cursor for re-reading the same path from byte 0 (truncated or replaced file)."""
        return FileCursor.adopted(self.path, (self.seq0_block, self.seq0_next, self.seq0_epoch))

    def with_changes(self, **changes: Any) -> FileCursor:
        return replace(self, **changes)

    def moved_to(self, stage: CursorStage, **changes: Any) -> FileCursor:
        """This cursor at ``stage`` (with ``changes``); raises ValueError for a move :data:`MOVES` does not allow."""
        if stage not in MOVES[self.stage]:
            raise ValueError(f"{self.path}: a {self.stage.value} file cannot become {stage.value}")
        return replace(self, stage=stage, **changes)

    def finalized(
        self,
        *,
        size: int,
        finalized_at: str,
        sha256: str,
        head: str,
        unterminated_at: int | None,
        writer_seq: tuple[int | None, int, int],
    ) -> FileCursor:
        """This cursor (tailing or reopened, everything before it delivered) as the file's next
        revision, finalized at ``size``. The first revision fixes where the next hour file of the
        table starts (``carry``: the writer's sequencer state ``writer_seq``); a later revision
        (lines appended after the seal) leaves it where it was."""
        carry = writer_seq if self.stage is CursorStage.TAILING else self.carry_state
        return self.moved_to(
            CursorStage.FINALIZED,
            size=size,
            finalized_at=finalized_at,
            sha256=sha256,
            head=head,
            revision=self.revision + 1,
            unterminated_at=unterminated_at,
            carry_block=carry[0],
            carry_next=carry[1],
            carry_epoch=carry[2],
        )

    def reopened(self) -> FileCursor:
        """The cursor of a sealed file that grew: publishing resumes where its last line starts if
        that line was unterminated (the late bytes complete it), else at its end."""
        start = self.byte_offset if self.unterminated_at is None else self.unterminated_at
        return self.moved_to(CursorStage.REOPENED, byte_offset=start, last_line_complete=True, unterminated_at=None)

    def advanced(
        self,
        *,
        byte_offset: int,
        last_line_complete: bool,
        seq_state: tuple[int | None, int, int],
        lines: int,
        dlq_lines: int,
        regressions: int,
        first_block: int | None,
        last_block: int | None,
        size: int,
    ) -> FileCursor:
        """The cursor once more lines are published: ``lines``, ``dlq_lines`` and ``regressions``
        are added, the rest (the writer's state after them) replaces what was."""
        return replace(
            self,
            byte_offset=byte_offset,
            last_line_complete=last_line_complete,
            seq_block=seq_state[0],
            seq_next=seq_state[1],
            seq_epoch=seq_state[2],
            lines=self.lines + lines,
            dlq_lines=self.dlq_lines + dlq_lines,
            block_regressions=self.block_regressions + regressions,
            first_block=first_block,
            last_block=last_block,
            size=size,
        )


def manifest_from_cursor(cursor: FileCursor, node: str) -> SealManifest | None:
    """The seal manifest of the file's latest revision, rebuilt from its cursor (None unless finalized)."""
    hour = HourFile.parse(cursor.path)
    if cursor.stage is not CursorStage.FINALIZED or hour is None or cursor.sha256 is None or cursor.finalized_at is None:
        return None
    return SealManifest(
        table=hour.table,
        path=cursor.path,
        date=hour.date,
        hour=hour.hour,
        block_range=(cursor.first_block, cursor.last_block)
        if cursor.first_block is not None and cursor.last_block is not None
        else None,
        size=cursor.size,
        sha256=cursor.sha256,
        finalized_at=cursor.finalized_at,
        lines=cursor.lines,
        dlq_lines=cursor.dlq_lines,
        node=node,
        revision=cursor.revision,
        block_regressions=cursor.block_regressions,
        offsets=cursor.offsets,
    )
