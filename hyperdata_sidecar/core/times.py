"""The sidecar's one way of writing and reading times: UTC ISO 8601 text and epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(ts: float) -> str:
    """``ts`` (seconds since the epoch) as UTC ISO 8601 with milliseconds (truncated) and a Z suffix,
    e.g. ``"2026-06-10T14:00:00.123Z"``."""
    moment = datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="milliseconds") + "Z"


def epoch_of(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO 8601 time: what :func:`iso_utc` writes, or a node timestamp
    such as ``2026-06-10T12:56:15.035481067`` (no zone: UTC, as the node writes; digits beyond
    microseconds are dropped). None for anything else."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def hour_start_epoch(date: str, hour: str) -> float:
    """Epoch seconds of the start of the UTC hour an hour file is named for (``<YYYYMMDD>/<H>``).
    Raises ValueError for a date that is not eight ASCII digits of a calendar day.

    From the digits, not ``strptime`` (which looks up the locale on every call): every table's
    polling loop asks on every tick, and ``strptime`` was two fifths of an idle tick.
    """
    if len(date) != 8 or not (date.isascii() and date.isdigit()):
        raise ValueError(f"not a YYYYMMDD date: {date!r}")
    day = datetime(int(date[:4]), int(date[4:6]), int(date[6:]), tzinfo=UTC)
    return day.timestamp() + int(hour) * 3600
