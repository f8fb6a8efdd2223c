"""The persisted tail state of one hour file (one value of the ``offsets`` table)."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace
from typing import Any

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.seal import SealManifest


class CursorStage(str, enum.Enum):
    """Where a file is in its life. Allowed moves: TAILING → FINALIZED, TAILING → SKIPPED."""

    TAILING = "tailing"  # being published; may still grow
    FINALIZED = "finalized"  # every byte accounted for; rotation record sent
    SKIPPED = "skipped"  # older than the start point under INITIAL_POSITION=end; never published


@dataclass(frozen=True)
class FileCursor:
    """Resume point and running totals of one hour file.

    ``byte_offset`` is just past the newline of the last line that the broker acked (or sent to the
    DLQ); everything before it is published. The sequencer state and the totals describe exactly the
    bytes before ``byte_offset``, so a restart reproduces the same line ids and seal figures.
    ``seq0`` is the sequencer state at byte 0, kept so that a truncated or replaced file is re-read
    from the start with the same line ids.
    """

    path: str
    byte_offset: int = 0
    last_line_complete: bool = True
    seq_block: int | None = None
    seq_next: int = 0
    seq0_block: int | None = None
    seq0_next: int = 0
    lines: int = 0
    dlq_lines: int = 0
    first_block: int | None = None
    last_block: int | None = None
    head: str = ""  # hex of the file's first bytes (the tailer keeps up to 64), to spot a replaced file
    stage: CursorStage = CursorStage.TAILING
    size: int = 0  # file size when this cursor was written
    finalized_at: str | None = None
    sha256: str | None = None

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        record["stage"] = self.stage.value
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> FileCursor:
        fields = {k: v for k, v in record.items() if k in cls.__dataclass_fields__}
        fields["stage"] = CursorStage(fields.get("stage", CursorStage.TAILING.value))
        return cls(**fields)

    def restarted(self) -> FileCursor:
        """The cursor for re-reading the same path from byte 0 (truncated or replaced file)."""
        return FileCursor(
            path=self.path,
            seq_block=self.seq0_block,
            seq_next=self.seq0_next,
            seq0_block=self.seq0_block,
            seq0_next=self.seq0_next,
        )

    def with_changes(self, **changes: Any) -> FileCursor:
        return replace(self, **changes)

    def advanced(
        self,
        *,
        byte_offset: int,
        last_line_complete: bool,
        seq_state: tuple[int | None, int],
        lines: int,
        dlq_lines: int,
        first_block: int | None,
        last_block: int | None,
        size: int,
    ) -> FileCursor:
        """The cursor once more lines are published: ``lines`` and ``dlq_lines`` are added, the rest
        (the writer's state after them) replaces what was."""
        return replace(
            self,
            byte_offset=byte_offset,
            last_line_complete=last_line_complete,
            seq_block=seq_state[0],
            seq_next=seq_state[1],
            lines=self.lines + lines,
            dlq_lines=self.dlq_lines + dlq_lines,
            first_block=first_block,
            last_block=last_block,
            size=size,
        )



def manifest_from_cursor(cursor: FileCursor, node: str) -> SealManifest | None:
    """The seal manifest of a finalized file, rebuilt from its cursor (None unless finalized)."""
    hour = HourFile.parse(cursor.path)
    if cursor.stage is not CursorStage.FINALIZED or hour is None or cursor.sha256 is None or cursor.finalized_at is None:
        return None
    return SealManifest(
        table=hour.table,
        path=cursor.path,
        date=hour.date,
        hour=hour.hour,
        block_range=(cursor.first_block, cursor.last_block) if cursor.first_block is not None and cursor.last_block is not None else None,
        size=cursor.size,
        sha256=cursor.sha256,
        finalized_at=cursor.finalized_at,
        lines=cursor.lines,
        dlq_lines=cursor.dlq_lines,
        node=node,
    )
