"""The leadership room without a broker: the assignor's election as aiokafka runs it, the role it
gives, the claims at the next join, the demotion that stops the worker, readiness and status."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata

from hyperdata_sidecar.config import ConfigError, load_settings
from hyperdata_sidecar.core.leadership import Claim, Role, Verdict
from hyperdata_sidecar.leadership import Leadership, StreamAssignor, stream_topic_name
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

LOGGER = "test.leadership"


def sidecar(node: str, demotions: list[str] | None = None) -> Leadership:
    settings = load_settings({"NODE_ID": node, "STREAM_ID": "mainnet", "DELIVERY": "exactly_once"})
    sink = demotions if demotions is not None else []
    return Leadership(settings, SidecarMetrics(), EventLog(logging.getLogger(LOGGER)), client_id=node, on_demoted=sink.append)


def join(*members: Leadership) -> dict[str, ConsumerProtocolMemberAssignment]:
    """One rebalance: every member's metadata, the first member's assignor, each member told."""
    topic = members[0].topic
    metadata = {f"member-{m.node}": StreamAssignor(m).metadata([topic]) for m in members}
    assignments = StreamAssignor(members[0]).assign(None, metadata)  # type: ignore[arg-type]
    for member in members:
        StreamAssignor(member).on_assignment(assignments[f"member-{member.node}"])
    return assignments


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, Any]]]:
    return [(r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


def test_one_member_of_the_group_is_given_the_stream_s_partition_and_becomes_active():
    a, b = sidecar("node-a"), sidecar("node-b")
    assignments = join(b, a)
    assert [m for m, given in assignments.items() if given.partitions()] == ["member-node-a"]
    assert (a.role, b.role) == (Role.ACTIVE, Role.STANDBY)
    assert a.status() == {
        "stream": "mainnet",
        "role": "active",
        "term": 1,
        "active": "node-a",
        "members": ["node-a", "node-b"],
        "elected_at": a.elected_at,
    }
    assert b.status()["role"] == "standby" and b.status()["active"] == "node-a"


def test_the_active_claims_its_term_and_keeps_the_stream_when_a_standby_rejoins():
    a, b = sidecar("node-a"), sidecar("node-b")
    join(a, b)
    assert a.claim() == Claim("node-a", 1, 1, a.elected_at) and b.claim() == Claim("node-b", 0, 1)
    c = sidecar("node-0")  # sorts first, but joins a group with an active
    join(c, b, a)
    assert (a.role, b.role, c.role) == (Role.ACTIVE, Role.STANDBY, Role.STANDBY)


def test_a_standby_elected_after_the_active_left_begins_a_higher_term(caplog):
    demoted: list[str] = []
    a, b = sidecar("node-a", demoted), sidecar("node-b")
    join(a, b)
    join(b)  # a's session expired: b alone
    assert (b.role, b.term) == (Role.ACTIVE, 2)
    assert b.elected_at is not None and a.elected_at is not None and b.elected_at >= a.elected_at
    join(a, b)  # a is back, still claiming term 1, active since earlier: it loses, and stops its worker
    assert b.role is Role.ACTIVE and a.role is Role.STANDBY
    assert demoted == ["the stream's group elected node-b (term 2)"]
    assert ("stream_demoted", {"stream": "mainnet", "term": 1, "reason": demoted[0]}) in events(caplog)


async def test_elected_returns_once_the_group_gave_this_sidecar_the_stream():
    a = sidecar("node-a")
    join(a)
    await a.elected()
    assert a.not_ready_reason() is None


def test_a_sidecar_not_in_the_group_yet_is_not_ready_to_take_over():
    assert sidecar("node-a").not_ready_reason() == "stream mainnet: not in the stream's group yet"


def test_an_assignment_without_a_readable_verdict_still_sets_the_role():
    a = sidecar("node-a")
    a.assigned(Verdict.decode(b"garbage"), holds=True)
    assert a.role is Role.ACTIVE and a.status()["members"] == []
    claim = Claim("node-a", 0, 0, a.elected_at).encode()
    assert StreamAssignor(a).metadata(["t"]) == ConsumerProtocolMemberMetadata(0, ["t"], claim)


def test_the_stream_s_topic_is_named_for_it():
    assert stream_topic_name("mainnet") == "mainnet-sidecar-stream"


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"STREAM_ID": "main net", "DELIVERY": "exactly_once"}, "may only contain"),
        ({"STREAM_ID": "mainnet"}, "needs DELIVERY=exactly_once"),
    ],
)
def test_a_stream_id_needs_a_plain_name_and_exactly_once(env, problem):
    with pytest.raises(ConfigError, match=problem) as raised:
        load_settings(env)
    assert raised.value.setting == "STREAM_ID"
