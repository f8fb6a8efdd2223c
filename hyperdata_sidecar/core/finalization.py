"""When an hour file is finished: the node moved on, the sidecar read it all, and it stopped growing."""

from __future__ import annotations

import enum


class FileStage(enum.Enum):
    """Where an hour file is in its life, as the sidecar sees it."""

    TAILING = "tailing"
    """The newest file of its table, or not yet read to its end."""
    SETTLING = "settling"
    """A later file exists and this one is read to its end, but it grew within the grace period."""
    FINALIZED = "finalized"
    """Complete: safe to flush its partial tail, seal it and back it up."""


def finalization_stage(
    *, has_later_file: bool, caught_up: bool, last_growth_at: float, now: float, grace_s: float
) -> FileStage:
    """The file's stage. FINALIZED only when a later file exists, it is read to its end, and it
    has not grown for ``grace_s`` seconds (``now - last_growth_at >= grace_s``); the newest file
    of a table is never finalized, because the node may still append to it.
    """
    if not has_later_file or not caught_up:
        return FileStage.TAILING
    # The grace period covers a writer that rotated but still flushes the old file's last bytes.
    if now - last_growth_at < grace_s:
        return FileStage.SETTLING
    return FileStage.FINALIZED
