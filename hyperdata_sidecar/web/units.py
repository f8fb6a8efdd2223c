"""Human-readable sizes, durations and names for the status page and its problem list."""

from __future__ import annotations


def size(nbytes: float) -> str:
    """``nbytes`` in binary units: ``0 B``, ``512 B``, ``1.5 KiB``, ``3.2 GiB``."""
    value = float(nbytes)
    if abs(value) < 1024:
        return f"{value:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def duration(seconds: float) -> str:
    """A short human duration: ``0.4 s``, ``42 s``, ``3 m 05 s``, ``2 h 07 m``, ``3 d 04 h``."""
    s = max(0.0, seconds)
    if s < 10:
        return f"{s:.1f} s"
    whole = int(s)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} m {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} m"
    return f"{whole // 86400} d {whole % 86400 // 3600:02d} h"


def table_label(table: str) -> str:
    """The short name of a node table dir: ``node_fills_streaming`` → ``fills``."""
    return table.removeprefix("node_").removesuffix("_streaming")


def hour_label(path: str | None) -> str:
    """``<table>/hourly/<date>/<hour>`` → ``<date>/<hour>``; any other path unchanged."""
    if not path:
        return "—"
    parts = path.split("/")
    return f"{parts[2]}/{parts[3]}" if len(parts) == 4 and parts[1] == "hourly" else path
