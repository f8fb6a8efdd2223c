"""What to do next with one hour file: the tailer's per-file state machine, without I/O.

The shell looks at the file (its size now, whether its first bytes or its length say it was
rewritten) and asks :func:`tail_step` (a file being published: tailing, or reopened after its seal)
or :func:`sealed_step` (a finalized file still watched for late appends) what follows. Every branch
the tailer takes about one file is decided here; the shell only carries the step out.
"""

from __future__ import annotations

import enum

from hyperdata_sidecar.core.cursor import CursorStage
from hyperdata_sidecar.core.finalization import is_finalized


class Step(enum.Enum):
    """One step of a file."""

    READ = "read"  # new bytes past the position: read and publish them
    FINALIZE = "finalize"  # read to its end, a later file exists, quiet for the grace: seal it
    RESTART = "restart"  # a tailing file shrank or its first bytes changed: publish it again from byte 0
    REOPEN = "reopen"  # a sealed file grew: publish the late lines, then seal it again
    MARK_REWRITTEN = "mark_rewritten"  # a sealed (or reopened) file shrank or changed: report it, read it no more
    WAIT = "wait"  # nothing to do until the file changes or time passes
    GONE = "gone"  # the file is no longer on disk (the next scan reports it)


def tail_step(
    *,
    stage: CursorStage,
    size: int | None,
    position: int,
    rewrite: str | None,
    has_later_file: bool,
    last_growth_at: float,
    now: float,
    grace_s: float,
) -> Step:
    """The step of a file being published (``stage`` tailing or reopened) whose size is ``size``
        (None: gone) and whose reader stands at ``position``; ``rewrite`` is ``"truncated"`` or
        ``"replaced"`` when the file was rewritten, ``last_growth_at`` when its size last changed (on
    the clock of ``now``).

        A reopened file always has a later file (it was sealed once), and a rewrite of it is reported,
        never re-read: its lines were sealed already.
    """
    if stage not in (CursorStage.TAILING, CursorStage.REOPENED):
        raise ValueError(f"a {stage.value} file is not being published")
    if size is None:
        return Step.GONE
    if rewrite is not None:
        return Step.MARK_REWRITTEN if stage is CursorStage.REOPENED else Step.RESTART
    if size > position:
        return Step.READ
    if is_finalized(has_later_file=has_later_file, last_growth_at=last_growth_at, now=now, grace_s=grace_s):
        return Step.FINALIZE
    return Step.WAIT


def sealed_step(*, watched: bool, size: int | None, sealed_size: int, rewrite: str | None) -> Step:
    """The step of a finalized file: within its late-append watch (``watched``), a file that is
    larger than at its seal is reopened, one rewritten is reported; anything else waits."""
    if not watched or size is None or size == sealed_size:
        return Step.WAIT
    if rewrite is not None:
        return Step.MARK_REWRITTEN
    return Step.REOPEN


def loss_on_deletion(stage: CursorStage, *, sealed: bool) -> str | None:
    """Why the deletion of a file at ``stage`` lost data (its lines or its seal), or None when it
    was pruned after everything about it was done."""
    if stage is CursorStage.TAILING:
        return "deleted before it was fully published"
    if stage is CursorStage.REOPENED:
        return "deleted before the lines appended after its seal were published"
    if stage is CursorStage.FINALIZED and not sealed:
        return "deleted before its seal"
    return None
