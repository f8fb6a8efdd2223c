"""The node's dated trees on disk: ``<root>/<YYYYMMDD>/<name>``, as the tailers and the snapshot watcher list them.

The node writes regular files into date directories. Anything else found there (a symlinked or
plain file where a date directory should be, a link or directory where a file should be, a name
that is not the node's) is passed over and logged once, never followed: a link could point anywhere,
even at a backup. A missing root is waited for (the node may not have written the table yet).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from hyperdata_sidecar.core.hourfile import HourFile


class DatedTree:
    """One dated tree: ``root`` on disk, ``relroot`` its path under WATCH_DIR (for file names).
    ``on_ignored(relpath, reason)`` is called once per entry passed over; ``on_missing(path)``, when
    given, once each time the root is found missing after it was there (or at the first look)."""

    def __init__(
        self,
        root: Path,
        relroot: str,
        *,
        on_ignored: Callable[[str, str], None],
        on_missing: Callable[[str], None] | None = None,
    ) -> None:
        self.root = root
        self.relroot = relroot
        self.on_ignored = on_ignored
        self.on_missing = on_missing
        self._missing_reported = False
        self.missing = False  # the root was not there at the last listing
        self._ignored: set[str] = set()

    def entries(self) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """``(relpath, entry)`` of every entry of every date directory, in no particular order."""
        try:
            dates = list(os.scandir(self.root))
        except FileNotFoundError:
            self.missing = True
            if self.on_missing is not None and not self._missing_reported:
                self.on_missing(str(self.root))
                self._missing_reported = True
            return
        self.missing = self._missing_reported = False
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
        """Report once that ``relpath`` is passed over, and why."""
        if relpath not in self._ignored:
            self._ignored.add(relpath)
            self.on_ignored(relpath, reason)


def newest_hour(root: Path) -> tuple[str, int] | None:
    """The newest hour file's (date, hour) under ``root`` (``<root>/<YYYYMMDD>/<H>``), from the newest
    date directory that holds one (a file named like a date is passed over); None when there is none
    or ``root`` cannot be listed."""
    try:
        dates = sorted((e.name for e in os.scandir(root) if e.name.isdigit() and len(e.name) == 8 and e.is_dir()), reverse=True)
        for date in dates:
            hours = [int(e.name) for e in os.scandir(root / date) if e.name.isdigit()]
            if hours:
                return date, max(hours)
    except OSError:
        return None
    return None


def table_hour_files(watch_dir: Path, table: str) -> list[str]:
    """The hour files of ``table`` on disk (paths under ``watch_dir``), oldest first. What is not an
    hour file is passed over without a word: the table's tailer reports it."""
    tree = DatedTree(watch_dir / table / "hourly", f"{table}/hourly", on_ignored=_passed_over)
    hours = [
        hour
        for relpath, entry in tree.entries()
        if (hour := HourFile.parse(relpath)) is not None and entry.is_file(follow_symlinks=False)
    ]
    return [hour.relpath for hour in sorted(hours)]


def _passed_over(_relpath: str, _reason: str) -> None:
    return None
