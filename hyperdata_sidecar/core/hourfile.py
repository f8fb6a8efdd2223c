"""Hour files of the node's output tree: ``<table>/hourly/<YYYYMMDD>/<H>``, ordered by time.

The node names hours without padding ("9", "10"), so names must be compared as numbers: as strings,
"10" sorts before "9" and a day's "23" after the next day's "0".
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from hyperdata_sidecar.core.tables import TABLE_BY_DIR

_DATE = re.compile(r"[0-9]{8}")
_HOUR = re.compile(r"[0-9]{1,2}")


@dataclass(frozen=True)
class HourFile:
    """One hour file of one table, as named on disk (``hour`` keeps the node's spelling, padded or not).

    Build instances from untrusted paths with :meth:`parse`; the constructor does not validate.
    Instances order by table, then by (date, hour) as numbers; two spellings of the same hour
    ("09" and "9") are distinct files and tie-break on the spelling so the order stays total.
    """

    table: str
    date: str
    hour: str

    @property
    def relpath(self) -> str:
        """The path relative to WATCH_DIR, with ``/`` separators."""
        return f"{self.table}/hourly/{self.date}/{self.hour}"

    @property
    def sort_key(self) -> tuple[int, int]:
        """(date, hour) as numbers: the file's position in time within its table."""
        return int(self.date), int(self.hour)

    @classmethod
    def parse(cls, relpath: str) -> HourFile | None:
        """The hour file named by ``relpath`` (relative to WATCH_DIR, ``/``-separated), or None.

        None for anything that is not exactly ``<known table>/hourly/<YYYYMMDD>/<H>`` with a real
        calendar date and an hour 0..23 written in one or two ASCII digits. Never raises.
        """
        if not isinstance(relpath, str):
            return None
        parts = relpath.split("/")
        if len(parts) != 4:
            return None
        table, hourly, date, hour = parts
        if table not in TABLE_BY_DIR or hourly != "hourly":
            return None
        if not _is_calendar_date(date) or not _is_hour(hour):
            return None
        return cls(table, date, hour)

    def _order_key(self) -> tuple[str, int, int, str]:
        return (self.table, *self.sort_key, self.hour)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, HourFile):
            return NotImplemented
        return self._order_key() < other._order_key()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, HourFile):
            return NotImplemented
        return self._order_key() <= other._order_key()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, HourFile):
            return NotImplemented
        return self._order_key() > other._order_key()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, HourFile):
            return NotImplemented
        return self._order_key() >= other._order_key()


def _is_calendar_date(text: str) -> bool:
    # fullmatch, not match: "$" would accept a trailing newline.
    if _DATE.fullmatch(text) is None:
        return False
    try:
        datetime.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return False
    return True


def _is_hour(text: str) -> bool:
    return _HOUR.fullmatch(text) is not None and int(text) <= 23
