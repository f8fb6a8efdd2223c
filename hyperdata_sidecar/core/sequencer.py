"""``seq_in_block``: the position of a line's first event among the events of its block, per table stream."""

from __future__ import annotations


class BlockSequencer:
    """Numbers lines within a block for the ``line_id`` header ``<table>|<block_number>|<seq_in_block>``.

    ``seq_in_block`` is the number of events in the earlier lines of the same block; it restarts
    at 0 whenever a line's block differs from the previous assigned line's. One sequencer follows a
    table's stream across hour rotations (a block can span two files), and only good lines are
    assigned (DLQ lines do not count). :attr:`state` is persisted with each checkpoint;
    ``BlockSequencer(*state)`` resumes so that a restart reproduces the same ids.
    """

    def __init__(self, block: int | None = None, next_seq: int = 0) -> None:
        if next_seq < 0:
            raise ValueError(f"next_seq must be >= 0, got {next_seq}")
        self._block = block
        self._next_seq = next_seq

    def assign(self, block_number: int, n_events: int) -> int:
        """This line's ``seq_in_block``; then advance past its ``n_events`` events."""
        if n_events < 0:
            raise ValueError(f"n_events must be >= 0, got {n_events}")
        seq = self._next_seq if block_number == self._block else 0
        self._block = block_number
        self._next_seq = seq + n_events
        return seq

    @property
    def state(self) -> tuple[int | None, int]:
        """(block of the last assigned line or None, the seq the next line of that block gets)."""
        return self._block, self._next_seq
