"""The order of one node table's hour files, without I/O: which file is worked, where each new file's
line ids start, and what a fresh start with ``INITIAL_POSITION=end`` skips.

A table's files are worked strictly in (date, hour) order: the next hour file is not read before
the previous one is finalized, so ``seq_in_block`` stays exact when a block straddles two files.
:class:`TableOrder` owns the one piece of state that links the files: the sequencer state a new
file starts from (``carry``). A file's start state is a function of the previous file's final
state only: the state at the end of its first revision (kept in its cursor as ``carry_*``), or,
for a file deleted before it was finished, where its publishing stopped.
"""

from __future__ import annotations

import enum

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor
from hyperdata_sidecar.core.records import SEQ_START, SeqState


class Role(enum.Enum):
    """What a tick does with a file, from its cursor's stage."""

    CURRENT = "current"  # tailing: published as far as it has grown; files after it wait until it is finalized
    REOPENED = "reopened"  # sealed, then grew: its late lines are published (later files do not wait)
    SEALED = "sealed"  # finalized: watched for late appends for a while
    PASSED = "passed"  # skipped or rewritten: never read again


class Adoption(enum.Enum):
    """Where publishing of a file seen for the first time starts."""

    FROM_START = "from_start"  # at byte 0
    AT_END = "at_end"  # at its last complete line (INITIAL_POSITION=end, the newest file of a fresh start)
    SKIP = "skip"  # never (INITIAL_POSITION=end, the older files of a fresh start)


class TableOrder:
    """The table's file order and the sequencer state carried from file to file.

    ``fresh`` is true when nothing is stored for the table: the files of the first scan then start
    as ``INITIAL_POSITION`` says (``beginning``: every file from byte 0; ``end``: the newest at its
    last complete line, every older one skipped). Files that appear after the first scan are always
    published from byte 0.
    """

    def __init__(self, *, initial_position: str, fresh: bool, carry: SeqState = SEQ_START) -> None:
        if initial_position not in ("beginning", "end"):
            raise ValueError(f"INITIAL_POSITION must be beginning or end, not {initial_position!r}")
        self.initial_position = initial_position
        self.fresh = fresh
        self.carry = carry

    def adopt(self, *, is_newest: bool) -> Adoption:
        """Where a file seen for the first time starts (``is_newest``: the newest file on disk)."""
        if self.publishes_unadopted():
            return Adoption.FROM_START
        return Adoption.AT_END if is_newest else Adoption.SKIP

    def publishes_unadopted(self) -> bool:
        """Whether a file seen but not adopted yet will be published whole (what the backlog counts
        of it): not on a fresh start at the end, where the first scan's files are skipped or start
        at their last complete line."""
        return not (self.fresh and self.initial_position == "end")

    def scanned(self) -> None:
        """A tick has looked at the table's files once: a fresh start is over."""
        self.fresh = False

    def role(self, cursor: FileCursor) -> Role:
        """The role of the file at ``cursor`` in this tick. Passing a file that was finalized once
        (sealed, reopened or rewritten since) sets where the next new file starts: at the end of
        that file's first revision."""
        stage = cursor.stage
        if stage is CursorStage.TAILING:
            return Role.CURRENT
        if stage is CursorStage.SKIPPED:
            return Role.PASSED
        self.carry = cursor.carry_state
        if stage is CursorStage.FINALIZED:
            return Role.SEALED
        if stage is CursorStage.REOPENED:
            return Role.REOPENED
        return Role.PASSED

    def finished(self, carry: SeqState) -> None:
        """The current file was finalized (its first revision) with the sequencer at ``carry``."""
        self.carry = carry

    def lost(self, seq_state: SeqState) -> None:
        """The current file was deleted before it was finished: the next file continues from where
        its publishing stopped (the lines it never published have no ids)."""
        self.carry = seq_state
