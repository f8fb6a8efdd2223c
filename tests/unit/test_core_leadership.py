"""The stream's election: sticky to the active member, one active, terms that only grow."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.leadership import Claim, Verdict, elect

claims = st.dictionaries(
    st.text("abcdef", min_size=1, max_size=4),
    st.one_of(
        st.none(),
        st.builds(
            Claim, st.sampled_from(["node-a", "node-b", "node-c"]), st.integers(0, 9), st.integers(0, 9), st.floats(0, 1e9)
        ),
    ),
    max_size=5,
)


def test_a_group_of_standbys_elects_the_first_node_into_term_one():
    election = elect({"m2": Claim("node-b"), "m1": Claim("node-a")})
    assert election.member == "m1"
    assert election.verdict == Verdict("node-a", 1, ("node-a", "node-b"))


def test_the_active_keeps_the_stream_when_a_standby_joins():
    election = elect({"m1": Claim("node-a"), "m2": Claim("node-b", term=4)})
    assert (election.member, election.verdict.active, election.verdict.term) == ("m2", "node-b", 4)


def test_a_former_active_active_since_earlier_loses_to_its_successor():
    election = elect({"old": Claim("node-a", term=3, since=100.0), "new": Claim("node-b", term=4, since=107.0)})
    assert (election.member, election.verdict.term) == ("new", 4)


def test_a_successor_that_restarted_and_numbered_its_term_low_still_beats_the_thawed_former_active():
    # node-b restarted (it knew no term), was elected while node-a was frozen, and numbered its term 1.
    election = elect(
        {"thawed": Claim("node-a", term=3, seen=3, since=100.0), "new": Claim("node-b", term=1, seen=0, since=130.0)}
    )
    assert (election.member, election.verdict) == ("new", Verdict("node-b", 1, ("node-a", "node-b")))


def test_after_the_active_left_the_next_term_begins_above_every_term_a_member_has_seen():
    assert elect({"m1": Claim("node-b")}).verdict.term == 1
    successor = elect({"m1": Claim("node-b", seen=3), "m3": Claim("node-c", seen=2)})
    assert successor.verdict == Verdict("node-b", 4, ("node-b", "node-c"))
    # ... so the former active, back with its term, loses to the successor's.
    assert elect({"old": Claim("node-a", 3, 3, 100.0), "new": Claim("node-b", 4, 4, 107.0)}).member == "new"


def test_a_member_whose_claim_cannot_be_read_is_never_chosen():
    assert elect({"m0": None, "m1": Claim("node-z")}).member == "m1"
    assert elect({"m0": None}).member is None


@given(claims)
def test_exactly_one_member_is_chosen_when_any_claim_is_readable(group):
    election = elect(group)
    readable = {m for m, c in group.items() if c is not None}
    assert (election.member is None) == (not readable)
    if election.member is not None:
        chosen = group[election.member]
        assert chosen is not None and election.verdict.active == chosen.node
        claimed = [c for c in group.values() if c is not None]
        holders = [c for c in claimed if c.term > 0]
        if holders:
            assert chosen.term > 0 and chosen.since == max(c.since for c in holders)
        else:
            assert election.verdict.term > max(max(c.seen, c.term) for c in claimed)
        assert election.verdict.term >= 1
        assert election.verdict.members == tuple(sorted({c.node for c in group.values() if c is not None}))


@given(claims, st.text("ghij", min_size=1, max_size=3))
def test_a_standby_joining_never_moves_an_elected_active(group, newcomer):
    first = elect(group)
    if first.member is None or newcomer in group:
        return
    # The chosen member now claims its term, as it does at the next join.
    winner = group[first.member]
    assert winner is not None
    # ... since its election, which is later than every other claim's (those are former actives').
    latest = max((c.since for c in group.values() if c is not None), default=0.0) + 1
    rejoined = {**group, first.member: Claim(winner.node, first.verdict.term, since=latest), newcomer: Claim("node-a")}
    assert elect(rejoined).member == first.member


def test_claims_and_verdicts_survive_their_encoding():
    assert Claim.decode(Claim("node-a", 7, 9, 12.5).encode()) == Claim("node-a", 7, 9, 12.5)
    assert Claim.decode(b'{"node": "a", "term": 0}') == Claim("a", 0, 0)
    verdict = Verdict("node-a", 2, ("node-a", "node-b"))
    assert Verdict.decode(verdict.encode()) == verdict
    for garbage in (
        b"",
        b"[]",
        b'{"node": ""}',
        b'{"node": "a", "term": -1}',
        b'{"node": "a", "term": true}',
        b'{"node": "a", "term": 0, "seen": -2}',
        b'{"node": "a", "term": 0, "since": "x"}',
        b"\xff",
    ):
        assert Claim.decode(garbage) is None
