"""When an hour file is finished: the node moved on, the sidecar read it all, and it stopped growing."""

from __future__ import annotations


def is_finalized(*, has_later_file: bool, last_growth_at: float, now: float, grace_s: float) -> bool:
    """Whether a file the sidecar has read to its end is finished: a later file of its table exists
    and it has not grown for ``grace_s`` seconds (``now - last_growth_at >= grace_s``). The newest
    file of a table is never finished, because the node may still append to it; the grace period
    covers a writer that rotated but still flushes the old file's last bytes.
    """
    return has_later_file and now - last_growth_at >= grace_s
