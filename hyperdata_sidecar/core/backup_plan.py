"""When a failed backup is tried again: the retry policy and the schedule of tries that are due.

A failed attempt is never waited out where it failed: it is scheduled, and every other file's
backup goes on meanwhile. A file gets up to BACKUP_MAX_TRIES tries in a row (a *series*), spaced
1 s, 2 s, 4 s, ... up to a minute apart; then it is *parked* until the worker starts again or an
operator asks for a new series. A source that no longer exists is given up at once.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from hyperdata_sidecar.core.cursor import CursorStage, FileCursor

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0
HOPELESS_REASONS = frozenset({"source_missing"})  # the file is gone: no try can succeed


class BackupSubject(Protocol):
    """What is backed up: a finalized revision of an hour file (a ``SealManifest``) or a node
    snapshot (a ``SnapshotBackup``)."""

    @property
    def path(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def revision(self) -> int: ...

    def to_json(self) -> bytes: ...


class Outcome(enum.Enum):
    """What follows a failed attempt."""

    RETRY = "retry"  # try again after ``delay_s``
    PARK = "park"  # BACKUP_MAX_TRIES failed in a row: wait for a restart or a backup-retry request
    GIVE_UP = "give_up"  # the failure cannot go away (the source file is gone)


class Step(NamedTuple):
    outcome: Outcome
    delay_s: float = 0.0


def after_failure(tries: int, reason: str, max_tries: int) -> Step:
    """The step after the ``tries``-th failed attempt in a row (reason: a ``BackupError`` reason)."""
    if reason in HOPELESS_REASONS:
        return Step(Outcome.GIVE_UP)
    if tries >= max_tries:
        return Step(Outcome.PARK)
    return Step(Outcome.RETRY, min(FIRST_DELAY_S * 2 ** (tries - 1), MAX_DELAY_S))


def superseded(cursor: FileCursor, manifest: BackupSubject) -> bool:
    """True when the file (at ``cursor``) has grown past ``manifest``: a later revision is sealed or
    on its way, so backing ``manifest`` up is pointless."""
    return cursor.revision > manifest.revision or (cursor.stage is CursorStage.REOPENED and cursor.revision >= manifest.revision)


class RetrySchedule:
    """The tries of each file's current series and the retries that are due, in memory.

    Keyed by path: a file has one series at a time, of one revision; a newer revision starts a new
    series and replaces a retry of the older one. Times are whatever clock the caller passes.
    """

    def __init__(self) -> None:
        self._tries: dict[str, tuple[int, int]] = {}  # path -> (revision, failed tries in the series)
        self._due: dict[str, tuple[float, BackupSubject]] = {}

    def tries(self, path: str, revision: int) -> int:
        """Failed tries so far in the series of ``path`` at ``revision``."""
        held = self._tries.get(path)
        return held[1] if held is not None and held[0] == revision else 0

    def failed(self, manifest: BackupSubject) -> int:
        """Count a failed try of ``manifest``'s file; returns the tries of its series so far."""
        tries = self.tries(manifest.path, manifest.revision) + 1
        self._tries[manifest.path] = (manifest.revision, tries)
        return tries

    def retry(self, manifest: BackupSubject, at: float) -> None:
        """Try ``manifest`` again at ``at`` (replacing a retry of the same file)."""
        self._due[manifest.path] = (at, manifest)

    def end(self, path: str) -> None:
        """The series of ``path`` is over (it succeeded, was parked or given up, or starts anew)."""
        self._tries.pop(path, None)
        self._due.pop(path, None)

    def due(self, now: float) -> list[BackupSubject]:
        """The retries due at ``now``, taken off the schedule, oldest due first."""
        ready = sorted((at, path) for path, (at, _manifest) in self._due.items() if at <= now)
        return [self._due.pop(path)[1] for _at, path in ready]
