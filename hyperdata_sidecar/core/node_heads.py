"""How far each node of a stream has written, and when the active yields to a standby's node ahead.

Every sidecar of a stream announces its node's *head* about twice a second: per table, the
``block_time`` of the newest complete line on disk (:class:`Heads`). A node's head is the oldest of
its tables' (:func:`node_head`): a table whose writer stalls holds it back. The active compares its
node's head with the standbys' (:class:`YieldWatch`) and yields when one is ahead by more than
``STREAM_YIELD_LAG_S`` of blocks, without a break, for :data:`AHEAD_FOR_S`. That threshold is the
hysteresis: two healthy nodes are a few milliseconds apart, and after a handover the new active's
node is the one ahead, so the stalled node, once it resumes, catches up without being handed the
stream back. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import orjson

from hyperdata_sidecar.core.leadership import json_object

#: How long a standby's node must stay ahead by more than the lag setting before the active yields.
AHEAD_FOR_S = 5.0
#: A peer's announcement older than this is not trusted (a sidecar that stopped announcing).
STALE_S = 10.0


class Heads(NamedTuple):
    """One node's announcement: per table, the epoch seconds of its newest complete line's
    ``block_time`` (a table without one is absent), and when it looked (epoch seconds)."""

    node: str
    tables: dict[str, float]
    at: float

    @property
    def head(self) -> float | None:
        return node_head(self.tables)

    def encode(self) -> bytes:
        return orjson.dumps({"node": self.node, "tables": self.tables, "at": self.at})

    @classmethod
    def decode(cls, data: bytes | None) -> Heads | None:
        """The announcement in ``data``, or None for a record this version cannot read."""
        value = json_object(data)
        if value is None:
            return None
        node, tables, at = value.get("node"), value.get("tables"), value.get("at")
        if not isinstance(node, str) or not isinstance(tables, dict) or not isinstance(at, int | float) or isinstance(at, bool):
            return None
        if not all(isinstance(t, str) and _number(v) for t, v in tables.items()):
            return None
        return cls(node, {t: float(v) for t, v in tables.items()}, float(at))


def node_head(tables: Mapping[str, float]) -> float | None:
    """A node's head: the oldest of its tables' newest block times (None before any)."""
    return min(tables.values(), default=None)


class YieldWatch:
    """The active's reason to yield the stream: a peer's node ahead of its own by more than ``lag_s``
    seconds of blocks, in every look for :data:`AHEAD_FOR_S`."""

    def __init__(self, lag_s: float) -> None:
        self.lag_s = lag_s
        self._ahead_since: float | None = None

    def observe(self, own: float | None, peers: Mapping[str, Heads], now: float) -> str | None:
        """One look (``now``: epoch seconds): the reason to yield, or None. A peer's announcement older
        than :data:`STALE_S` does not count; a node that has written nothing is behind every node
        that has."""
        leader = self.furthest_ahead(own, peers, now)
        if leader is None:
            self._ahead_since = None
            return None
        node, by = leader
        if self._ahead_since is None:
            self._ahead_since = now
        if now - self._ahead_since < AHEAD_FOR_S:
            return None
        return f"node {node}'s blocks are {by:.0f} s ahead of this node's (more than STREAM_YIELD_LAG_S={self.lag_s:g}) for {now - self._ahead_since:.0f} s"

    def furthest_ahead(self, own: float | None, peers: Mapping[str, Heads], now: float) -> tuple[str, float] | None:
        """The peer furthest ahead of ``own`` by more than ``lag_s``, and by how much (None: none is)."""
        ahead = []
        for node, heads in peers.items():
            head = heads.head
            if head is None or now - heads.at > STALE_S:
                continue
            by = head - own if own is not None else float("inf")
            if by > self.lag_s:
                ahead.append((by, node))
        if not ahead:
            return None
        by, node = max(ahead)
        return node, by


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
