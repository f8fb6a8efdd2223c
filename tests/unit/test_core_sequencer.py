import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.core.sequencer import BlockSequencer


def assign_all(sequencer: BlockSequencer, lines) -> list[int]:
    return [sequencer.assign(block, n_events) for block, n_events in lines]


def test_fresh_sequencer_has_no_block_and_starts_at_zero():
    sequencer = BlockSequencer()
    assert sequencer.state == (None, 0)
    assert sequencer.assign(1030140001, 1) == 0


def test_lines_of_one_block_count_the_events_before_them():
    sequencer = BlockSequencer()
    assert assign_all(sequencer, [(7, 1), (7, 1), (7, 3), (7, 1)]) == [0, 1, 2, 5]
    assert sequencer.state == (7, 6)


def test_a_new_block_restarts_at_zero():
    assert assign_all(BlockSequencer(), [(7, 2), (7, 1), (8, 1), (8, 4), (9, 1)]) == [0, 2, 0, 1, 0]


def test_returning_to_an_earlier_block_number_restarts_at_zero():
    assert assign_all(BlockSequencer(), [(7, 1), (8, 1), (7, 1), (7, 1)]) == [0, 0, 0, 1]


def test_a_block_split_across_an_hour_rotation_keeps_counting_in_the_next_file():
    sequencer = BlockSequencer()
    hour_13 = [(1030196120, 1), (1030196121, 1), (1030196121, 2)]
    hour_14 = [(1030196121, 1), (1030196122, 1)]
    assert assign_all(sequencer, hour_13) == [0, 0, 1]
    assert assign_all(sequencer, hour_14) == [3, 0]


def test_resuming_from_a_saved_state_continues_the_block():
    sequencer = BlockSequencer()
    assign_all(sequencer, [(7, 1), (7, 2)])
    resumed = BlockSequencer(*sequencer.state)
    assert resumed.assign(7, 1) == 3
    assert resumed.assign(8, 1) == 0


def test_a_line_without_events_takes_the_next_seq_and_does_not_advance_it():
    assert assign_all(BlockSequencer(), [(7, 1), (7, 0), (7, 1)]) == [0, 1, 1]


def test_negative_event_count_is_rejected():
    with pytest.raises(ValueError):
        BlockSequencer().assign(7, -1)


def test_negative_next_seq_is_rejected():
    with pytest.raises(ValueError):
        BlockSequencer(7, -1)


_LINES = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(_LINES, st.data())
def test_a_restart_from_state_at_any_line_reproduces_the_same_seqs(lines, data):
    uninterrupted = assign_all(BlockSequencer(), lines)
    cut = data.draw(st.integers(0, len(lines)))
    before = BlockSequencer()
    first = assign_all(before, lines[:cut])
    second = assign_all(BlockSequencer(*before.state), lines[cut:])
    assert first + second == uninterrupted


@settings(max_examples=200, deadline=None)
@given(_LINES)
def test_seq_is_the_event_count_of_the_earlier_lines_in_the_same_run_of_a_block(lines):
    seqs = assign_all(BlockSequencer(), lines)
    for i, (block, _) in enumerate(lines):
        run_start = i
        while run_start > 0 and lines[run_start - 1][0] == block:
            run_start -= 1
        assert seqs[i] == sum(n for _, n in lines[run_start:i])
