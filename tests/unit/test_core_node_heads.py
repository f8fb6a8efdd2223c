"""Nodes' heads and the active's reason to yield: ahead by more than the lag, long enough, fresh."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.node_heads import AHEAD_FOR_S, STALE_S, Heads, YieldWatch, node_head

T0 = 1_781_100_000.0
BOOK, ORDERS, FILLS = "node_raw_book_diffs_streaming", "node_order_statuses_streaming", "node_fills_streaming"


def heads(node: str, head: float, at: float, **tables: float) -> Heads:
    return Heads(node, {BOOK: head, ORDERS: head, FILLS: head, **tables}, at)


def test_a_nodes_head_is_its_slowest_tables():
    assert node_head({BOOK: 10.0, ORDERS: 7.0, FILLS: 9.0}) == 7.0
    assert node_head({}) is None


def test_the_active_yields_once_a_peer_is_ahead_by_more_than_the_lag_for_long_enough():
    watch = YieldWatch(lag_s=30.0)
    own = T0
    for second in range(int(AHEAD_FOR_S)):
        now = T0 + 100 + second
        assert watch.observe(own, {"b": heads("b", own + 31, now)}, now) is None
    now = T0 + 100 + AHEAD_FOR_S
    reason = watch.observe(own, {"b": heads("b", own + 31, now)}, now)
    assert reason == "node b's blocks are 31 s ahead of this node's (more than STREAM_YIELD_LAG_S=30) for 5 s"


def test_a_break_in_being_ahead_starts_the_wait_again():
    watch = YieldWatch(lag_s=30.0)
    for second in range(int(AHEAD_FOR_S) - 1):
        assert watch.observe(T0, {"b": heads("b", T0 + 40, T0 + second)}, T0 + second) is None
    assert watch.observe(T0 + 20, {"b": heads("b", T0 + 40, T0 + 4)}, T0 + 4) is None  # caught up for a moment
    for second in range(5, 5 + int(AHEAD_FOR_S)):
        assert watch.observe(T0, {"b": heads("b", T0 + 40, T0 + second)}, T0 + second) is None
    assert watch.observe(T0, {"b": heads("b", T0 + 40, T0 + 10)}, T0 + 10) is not None


def test_a_stale_announcement_never_makes_the_active_yield():
    watch = YieldWatch(lag_s=30.0)
    for second in range(20):
        now = T0 + 100 + second
        assert watch.observe(T0, {"b": heads("b", T0 + 60, now - STALE_S - 1)}, now) is None


def test_a_node_that_wrote_nothing_yields_to_one_that_did_and_nobody_yields_to_it():
    watch = YieldWatch(lag_s=30.0)
    assert watch.furthest_ahead(None, {"b": heads("b", T0, T0)}, T0) == ("b", float("inf"))
    assert watch.furthest_ahead(T0, {"b": Heads("b", {}, T0)}, T0) is None


def test_one_stalled_table_is_enough_to_fall_behind():
    watch = YieldWatch(lag_s=30.0)
    own = node_head({BOOK: T0 + 100, ORDERS: T0 + 100, FILLS: T0})  # fills stopped 100 s ago
    assert watch.furthest_ahead(own, {"b": heads("b", T0 + 100, T0 + 100)}, T0 + 100) == ("b", 100.0)


@given(st.lists(st.floats(-5.0, 5.0), min_size=1, max_size=200))
def test_two_healthy_nodes_a_few_seconds_apart_never_yield(jitter):
    watch = YieldWatch(lag_s=30.0)
    for second, apart in enumerate(jitter):
        now = T0 + second
        assert watch.observe(now, {"b": heads("b", now + apart, now)}, now) is None


def test_announcements_survive_their_encoding_and_garbage_is_none():
    announced = heads("b", T0, T0 + 1, extra=T0 - 3)
    assert Heads.decode(announced.encode()) == announced
    for garbage in (
        b"",
        b"[]",
        b'{"node": "b", "tables": [], "at": 1}',
        b'{"node": "b", "tables": {"t": "x"}, "at": 1}',
        b'{"node": "b", "tables": {}, "at": true}',
    ):
        assert Heads.decode(garbage) is None


def test_both_nodes_stalled_nobody_yields_and_the_stream_goes_to_the_one_that_resumes():
    active, successor = YieldWatch(lag_s=30.0), YieldWatch(lag_s=30.0)
    stalled_at = T0
    for second in range(120):  # both nodes stopped writing at stalled_at
        now = T0 + second
        assert active.observe(stalled_at, {"b": heads("b", stalled_at, now)}, now) is None
    # node b resumes and catches up at 10 s of blocks a second; node a stays stalled.
    reasons = []
    for second in range(120, 140):
        now = T0 + second
        reasons.append(active.observe(stalled_at, {"b": heads("b", stalled_at + 10 * (second - 119), now)}, now))
    first = next(i for i, reason in enumerate(reasons) if reason is not None)
    assert first == 3 + int(AHEAD_FOR_S)  # ahead by more than 30 s from the 4th second, for 5 s
    # Once node b is active, node a (still stalled, or resuming behind it) never gets it back.
    for second in range(140, 300):
        now = T0 + second
        b_head = stalled_at + 10 * (second - 119)
        a_head = min(b_head, stalled_at + 5 * max(0, second - 200))
        assert successor.observe(b_head, {"a": heads("a", a_head, now)}, now) is None
