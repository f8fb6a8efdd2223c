"""The topic check (core/topic_check.py): when a topic may be written, its epochs and floors, and
where a table's records may have landed."""

from __future__ import annotations

from hyperdata_sidecar.core.topic_check import (
    OFFSETS_WENT_BACK,
    PARTITION_COUNT,
    TOPIC_MISSING,
    TOPIC_UNCHECKED,
    Change,
    Landings,
    Moved,
    TopicGuard,
    TopicRefused,
)

T = "hyperliquid.order-statuses"


def checked_guard(floors: dict[int, int] | None = None) -> TopicGuard:
    guard = TopicGuard({T: 6})
    assert guard.checked(T, 6, floors if floors is not None else dict.fromkeys(range(6), 0)) is None  # the first check is quiet
    return guard


def test_a_topic_is_not_written_before_it_was_checked_nor_is_a_topic_with_another_count():
    guard = TopicGuard({T: 6})
    assert guard.refusal(T).name() == TOPIC_UNCHECKED
    change = guard.checked(T, 1, None)
    assert change == Change(T, 1, 6, "broker", False, 0, was_writable=False)  # never writable yet
    refusal = guard.refusal(T)
    assert refusal.name() == PARTITION_COUNT and not refusal.fatal()
    assert refusal.str() == "1 partition(s), the contract says 6: nothing is written to it until it has 6"
    assert guard.checked(T, 1, None) is None  # nothing new: no second log line


def test_the_contracts_count_with_its_end_offsets_makes_a_topic_writable_in_a_new_epoch():
    guard = checked_guard({0: 10, 5: 3})
    assert guard.refusal(T) is None and guard.epoch(T) == 1
    assert (guard.floor(T, 0, 1), guard.floor(T, 5, 1), guard.floor(T, 0, 2)) == (10, 3, None)
    assert guard.checked(T, 6, {0: 99}) is None  # already writable: the epoch and floors stay
    assert guard.floor(T, 0, 1) == 10 and guard.epoch(T) == 1


def test_a_missing_topic_and_one_back_with_the_contracts_count():
    guard = checked_guard()
    assert guard.checked(T, 0, None) == Change(T, 0, 6, "broker", False, 1, was_writable=True)
    assert guard.refusal(T).name() == TOPIC_MISSING
    assert guard.checked(T, 6, None) is None  # the count is right but the end offsets are unknown: not yet
    assert guard.refusal(T).name() == TOPIC_MISSING
    assert guard.checked(T, 6, {0: 0}) == Change(T, 6, 6, "broker", True, 2)
    assert guard.refusal(T) is None and guard.floor(T, 0, 2) == 0


def test_the_producers_view_makes_a_topic_unwritable_on_a_change_only_and_never_writable():
    guard = checked_guard()
    assert guard.producer_saw(T, 6) is None
    assert guard.producer_saw(T, 1) == Change(T, 1, 6, "producer", False, 1, was_writable=True)
    assert guard.refusal(T).name() == PARTITION_COUNT
    assert guard.producer_saw(T, 0) == Change(T, 0, 6, "producer", False, 1, was_writable=False)  # refused already
    assert guard.producer_saw(T, 1).was_writable is False
    assert guard.producer_saw(T, 6) is None and guard.refusal(T) is not None  # only the broker's check lets it go
    assert guard.checked(T, 6, {0: 0}) is not None and guard.refusal(T) is None
    # A statistics line still showing the old count (emitted before the check) changes nothing...
    guard = checked_guard()
    guard.producer_saw(T, 1)
    guard.checked(T, 6, {0: 0})
    assert guard.producer_saw(T, 1) is None and guard.refusal(T) is None
    # ... a new change does.
    assert guard.producer_saw(T, 0) == Change(T, 0, 6, "producer", False, 2, was_writable=True)
    assert guard.refusal(T).name() == TOPIC_MISSING
    assert guard.producer_saw("not.in.the.contract", 3) is None


def test_a_suspicion_holds_the_topic_until_it_is_checked_again():
    guard = checked_guard()
    assert guard.suspect(T, "went back") == Change(T, 6, 6, "offsets", False, 1, was_writable=True)
    assert guard.refusal(T).name() == OFFSETS_WENT_BACK
    assert guard.suspect(T, "again") is None  # already held
    assert guard.checked(T, 6, {0: 4}) == Change(T, 6, 6, "broker", True, 2)


def test_old_epochs_floors_are_forgotten_after_a_while():
    guard = checked_guard()
    for _ in range(20):
        guard.suspect(T, "x")
        guard.checked(T, 6, {0: guard.epoch(T)})
    assert guard.floor(T, 0, guard.epoch(T)) == guard.epoch(T) - 1
    assert guard.floor(T, 0, 2) is None


def test_a_refusal_names_the_topic_and_is_judged_like_a_clients():
    guard = TopicGuard({T: 6})
    guard.checked(T, 1, None)
    refused = TopicRefused(T, guard.refusal(T))
    assert refused.args[0].name() == PARTITION_COUNT
    assert (
        refused.reason() == f"{T}: PARTITION_COUNT (1 partition(s), the contract says 6: nothing is written to it until it has 6)"
    )
    assert str(refused) == guard.refusal(T).str()


# -- landings ---------------------------------------------------------------------------------


def test_records_at_or_above_the_floor_and_above_the_last_commit_landed_where_they_were_sent():
    landings = Landings(checked_guard({0: 10, 1: 0}))
    assert landings.moved(T, {0: (10, 12), 1: (0, 0)}, (1, 1)) is None
    landings.landed(T, {0: (10, 12), 1: (0, 0)}, 1)
    assert landings.moved(T, {0: (13, 20)}, (1, 1)) is None


def test_a_record_below_the_floor_landed_in_another_incarnation():
    landings = Landings(checked_guard({0: 10}))
    moved = landings.moved(T, {0: (0, 3)}, (1, 1))
    assert moved == Moved(T, 0, 0, 10)
    assert "offset 0, below 10" in moved.detail()


def test_a_record_at_or_below_the_tables_last_commit_landed_in_another_incarnation():
    landings = Landings(checked_guard({0: 0}))
    landings.landed(T, {0: (0, 40)}, 1)
    assert landings.moved(T, {0: (5, 9)}, (1, 1)) == Moved(T, 0, 5, 41)
    assert landings.moved(T, {0: (40, 41)}, (1, 1)) == Moved(T, 0, 40, 41)


def test_a_partitions_records_of_one_cycle_going_down_went_to_another_incarnation():
    landings = Landings(checked_guard({0: 0}))
    assert landings.moved(T, {0: (30, 2)}, (1, 1)) == Moved(T, 0, 2, 30)


def test_a_cycle_handed_over_across_a_check_is_compared_with_the_new_epoch_only():
    guard = checked_guard({0: 50})
    landings = Landings(guard)
    landings.landed(T, {0: (50, 60)}, 1)
    guard.checked(T, 0, None)
    guard.checked(T, 6, {0: 0})  # deleted and created again: epoch 2, empty
    # First records went to the old incarnation (61), the last ones to the new one (0): fine.
    assert landings.moved(T, {0: (61, 0)}, (1, 2)) is None
    landings.landed(T, {0: (61, 0)}, 2)
    # In epoch 2 the table's last commit (0) and the new floor count, not epoch 1's 60.
    assert landings.moved(T, {0: (1, 5)}, (2, 2)) is None
    assert landings.moved(T, {0: (0, 5)}, (2, 2)) == Moved(T, 0, 0, 1)


def test_a_cycle_handed_over_across_a_check_whose_last_records_are_below_the_new_floor_moved():
    guard = checked_guard({0: 0})
    guard.suspect(T, "x")
    guard.checked(T, 6, {0: 20})
    assert Landings(guard).moved(T, {0: (3, 7)}, (1, 2)) == Moved(T, 0, 7, 20)


def test_without_a_floor_or_a_commit_only_the_order_within_the_cycle_is_known():
    landings = Landings(TopicGuard({T: 6}))
    assert landings.moved(T, {0: (0, 3)}, (0, 0)) is None
    assert landings.moved(T, {0: (3, 0)}, (0, 0)) is not None


def test_once_the_topic_is_found_created_again_right_the_earlier_offsets_no_longer_count():
    guard = checked_guard({0: 50})
    landings = Landings(guard)
    landings.landed(T, {0: (50, 60)}, 1)
    assert landings.moved(T, {0: (0, 3)}, (1, 1)) is not None
    guard.suspect(T, "went back")
    guard.checked(T, 6, {0: 4})  # checked: the contract's count, epoch 2
    landings.trusted(T, 2)
    # Cycles handed over in epoch 1 before the check are compared with the table's offsets from now on only.
    assert landings.moved(T, {0: (0, 3)}, (1, 1)) is None
    landings.landed(T, {0: (0, 3)}, 1)
    assert landings.moved(T, {0: (2, 5)}, (1, 1)) == Moved(T, 0, 2, 4)
    assert landings.moved(T, {0: (4, 9)}, (2, 2)) is None
