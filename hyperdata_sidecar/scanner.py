"""The node's dated trees on disk: ``<root>/<YYYYMMDD>/<name>``, as the tailers and the snapshot watcher list them.

The node writes regular files into date directories. Anything else found there (a symlinked or
plain file where a date directory should be, a link or directory where a file should be, a name
that is not the node's) is passed over and logged once, never followed: a link could point anywhere,
even at a backup. A missing root is waited for (the node may not have written the table yet).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from hyperdata_sidecar.logs import EventLog


class DatedTree:
    """One dated tree: ``root`` on disk, ``relroot`` its path under WATCH_DIR (for log lines and file
    names). ``ignored_event`` names the log line of an entry passed over; ``missing_event``, when
    given, the line logged once while the root does not exist (with the fields ``context``)."""

    def __init__(
        self,
        root: Path,
        relroot: str,
        log: EventLog,
        *,
        ignored_event: str,
        missing_event: str | None = None,
        **context: str,
    ) -> None:
        self.root = root
        self.relroot = relroot
        self.log = log
        self.ignored_event = ignored_event
        self.missing_event = missing_event
        self.context = context
        self._missing_logged = False
        self._ignored: set[str] = set()

    def entries(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """``(relpath, entry)`` of every entry of every date directory, in no particular order."""
        try:
            dates = list(os.scandir(self.root))
        except FileNotFoundError:
            if self.missing_event is not None and not self._missing_logged:
                self.log.warning(self.missing_event, **self.context, path=str(self.root))
                self._missing_logged = True
            return
        self._missing_logged = False
        for date in dates:
            if not date.is_dir(follow_symlinks=False):
                why = "a symlinked date directory is not followed" if date.is_symlink() else "not a date directory"
                self.ignore(f"{self.relroot}/{date.name}", why)
                continue
            try:
                entries = list(os.scandir(date.path))
            except FileNotFoundError:
                continue  # removed between the two listings (the node prunes old dates)
            for entry in entries:
                yield f"{self.relroot}/{date.name}/{entry.name}", entry

    def ignore(self, relpath: str, reason: str) -> None:
        """Log once that ``relpath`` is passed over, and why."""
        if relpath not in self._ignored:
            self._ignored.add(relpath)
            self.log.warning(self.ignored_event, path=relpath, reason=reason)
