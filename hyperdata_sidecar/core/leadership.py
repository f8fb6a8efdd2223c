"""Which sidecar of a stream is active: the election a Kafka group runs, without I/O.

Every sidecar of a stream (``STREAM_ID``) joins one consumer group on the stream's one-partition
topic (:mod:`hyperdata_sidecar.leadership`). At every rebalance the group's leader member runs the
assignor, which calls :func:`elect` with what each member said when it joined (its :class:`Claim`);
the member given the partition is the stream's active, and every member learns the outcome
(:class:`Verdict`) with its assignment. The election is sticky: an active that is still a member
keeps the stream, so a standby that starts, restarts or rejoins never takes it over.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeGuard

import orjson


class Role(str, enum.Enum):
    """A sidecar's part in its stream."""

    ACTIVE = "active"  # publishes the stream's data, dead letters, seals and snapshot events
    STANDBY = "standby"  # publishes nothing; takes over when the group elects it


class Claim(NamedTuple):
    """What a member says when it joins: its node, the term it is active in (0: not active) and
    since when (epoch seconds, its own clock), and the highest term it has learned of (so a new term
    is higher than every one it knows)."""

    node: str
    term: int = 0
    seen: int = 0
    since: float = 0.0

    def encode(self) -> bytes:
        return orjson.dumps({"node": self.node, "term": self.term, "seen": self.seen, "since": self.since})

    @classmethod
    def decode(cls, data: bytes | None) -> Claim | None:
        """The claim in ``data``, or None for a member that said nothing this version reads (it is
        never elected)."""
        value = json_object(data)
        if value is None:
            return None
        node, term, seen, since = value.get("node"), value.get("term"), value.get("seen", 0), value.get("since", 0.0)
        if not isinstance(node, str) or not node or not _count(term) or not _count(seen):
            return None
        if not isinstance(since, int | float) or isinstance(since, bool):
            return None
        return cls(node, term, seen, float(since))


class Verdict(NamedTuple):
    """An election's outcome, sent to every member with its assignment: the active's node and term,
    and every member's node (sorted)."""

    active: str | None
    term: int
    members: tuple[str, ...]

    def encode(self) -> bytes:
        return orjson.dumps({"active": self.active, "term": self.term, "members": list(self.members)})

    @classmethod
    def decode(cls, data: bytes | None) -> Verdict | None:
        value = json_object(data)
        if value is None:
            return None
        active, term, members = value.get("active"), value.get("term"), value.get("members")
        if not (active is None or isinstance(active, str)) or not isinstance(term, int) or not isinstance(members, list):
            return None
        return cls(active, term, tuple(str(m) for m in members))


class Election(NamedTuple):
    """Who :func:`elect` chose (a member id, None when no member can be) and what every member is told."""

    member: str | None
    verdict: Verdict


def elect(claims: Mapping[str, Claim | None]) -> Election:
    """Choose the active among the group's members (member id -> its claim).

    A member that claims to be active keeps the stream: the active stays active through every
    rebalance it is part of. Two claim it when a former active missed its demotion (frozen, cut off
    from the broker while the group elected another): the one active since the latest time wins. A
    successor is elected at least the group's session timeout (6 s) after its predecessor last
    heartbeated, so the sidecars' clocks must agree within that. Terms, which a restarted member
    cannot know, only number the elections. Without a claim, the member whose node sorts first (its
    member id breaks a tie) begins the term after the highest any member claims or has seen. A member
    whose claim cannot be read is never chosen.
    """
    valid = {member: claim for member, claim in claims.items() if claim is not None}
    members = tuple(sorted({claim.node for claim in valid.values()}))
    if not valid:
        return Election(None, Verdict(None, 0, members))
    holder = max(valid, key=lambda member: (valid[member].term > 0, valid[member].since, valid[member].term, member))
    if valid[holder].term > 0:
        return Election(holder, Verdict(valid[holder].node, valid[holder].term, members))
    chosen = min(valid, key=lambda member: (valid[member].node, member))
    term = max(max(claim.term, claim.seen) for claim in valid.values()) + 1
    return Election(chosen, Verdict(valid[chosen].node, term, members))


def json_object(data: bytes | None) -> dict[str, Any] | None:
    """The JSON object ``data`` holds (a member's claim, an assignment's verdict, a node's heads), or
    None for anything else: what another version of the sidecar wrote is read, never trusted."""
    try:
        value = orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _count(value: object) -> TypeGuard[int]:
    """A term: a non-negative integer (JSON's true is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
