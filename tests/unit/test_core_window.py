"""The window of cycles: one file at a time, cursors built from the previous cycle, commits in
order and only once settled, a rejected line moved to the DLQ counts in every later cursor."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.core.window import Window, WriterState

PATH = "node_fills_streaming/hourly/20260610/13"


class Landed:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


def written(window: Window, persisted: FileCursor, start: int, end: int, lines: int, *, report: list[int] | None = None):
    """A cycle of ``lines`` data records on partition 0, closed at ``end``, reported at offsets ``report``."""
    cycle = window.open(PATH, WriterState(start, (1, 0, 0), 1, 1))
    callback = cycle.deliveries.callback("fills", 0)
    cycle.tally.lines = cycle.tally.produced = lines
    window.close(cycle, persisted, WriterState(end, (2, lines, 0), 1, 2), size=end, complete=True)
    for offset in report or []:
        callback(None, Landed("fills", 0, offset))
    return cycle


def test_each_cycles_cursor_adds_to_the_one_before_it():
    persisted = FileCursor.adopted(PATH, (None, 0, 0)).with_changes(offsets={})
    window = Window()
    written(window, persisted, 0, 100, 3)
    second = written(window, persisted, 100, 250, 4)
    assert second.cursor is not None and (second.cursor.byte_offset, second.cursor.lines) == (250, 7)
    assert window.running(persisted) is second.cursor


def test_a_cycle_is_committed_only_once_every_record_was_reported_and_then_oldest_first():
    persisted = FileCursor.adopted(PATH, (None, 0, 0)).with_changes(offsets={})
    window = Window()
    first = written(window, persisted, 0, 100, 2, report=[10])
    with pytest.raises(ValueError):
        window.commit(persisted, head="ab", data_topic="fills")
    first.deliveries.callback("fills", 0)(None, Landed("fills", 0, 11))
    written(window, persisted, 100, 200, 1, report=[12])
    cycle, cursor = window.commit(persisted, head="ab", data_topic="fills")
    assert cycle is first and len(window) == 1
    assert (cursor.byte_offset, cursor.lines, cursor.head, cursor.offsets) == (100, 2, "ab", {"fills": {"0": [10, 11]}})


def test_a_cycle_with_an_unresolved_failure_is_not_committed():
    persisted = FileCursor.adopted(PATH, (None, 0, 0)).with_changes(offsets={})
    window = Window()
    cycle = written(window, persisted, 0, 100, 1)
    cycle.deliveries.callback("fills", 0)(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), None)
    with pytest.raises(ValueError):
        window.commit(persisted, head="", data_topic="fills")
    cycle.resolved = True
    assert window.commit(persisted, head="", data_topic="fills")[0] is cycle


def test_the_window_belongs_to_one_file_until_it_is_empty():
    persisted = FileCursor.adopted(PATH, (None, 0, 0))
    window = Window()
    written(window, persisted, 0, 100, 1, report=[0])
    with pytest.raises(ValueError):
        window.open("node_fills_streaming/hourly/20260610/14", WriterState(0, (None, 0, 0), None, None))
    window.commit(persisted, head="", data_topic="fills")
    window.open("node_fills_streaming/hourly/20260610/14", WriterState(0, (None, 0, 0), None, None))


def test_a_rejected_line_counts_as_a_dead_letter_in_its_cycle_and_every_later_cursor():
    persisted = FileCursor.adopted(PATH, (None, 0, 0))
    window = Window()
    first = written(window, persisted, 0, 100, 3)
    second = written(window, persisted, 100, 200, 2)
    window.rejected(first)
    assert (first.tally.lines, first.tally.dlq) == (2, 1)
    assert first.cursor is not None and second.cursor is not None
    assert (first.cursor.lines, first.cursor.dlq_lines) == (2, 1)
    assert (second.cursor.lines, second.cursor.dlq_lines) == (4, 1)


def test_the_window_is_over_its_limit_past_four_cycles():
    persisted = FileCursor.adopted(PATH, (None, 0, 0))
    window = Window()
    for n in range(4):
        written(window, persisted, n * 10, n * 10 + 10, 1)
        assert not window.over_limit()
    written(window, persisted, 40, 50, 1)
    assert window.over_limit()


def test_a_cycle_with_a_distrusted_topic_is_failed_until_redelivery_takes_it_even_when_resolved():
    persisted = FileCursor.adopted(PATH, (None, 0, 0)).with_changes(offsets={})
    window = Window()
    cycle = written(window, persisted, 0, 100, 1, report=[5])
    cycle.resolved = True
    cycle.deliveries.distrust("fills", "moved")
    assert cycle.failed()
    with pytest.raises(ValueError):
        window.commit(persisted, head="", data_topic="fills")
    cycle.deliveries.take_distrusted()
    cycle.deliveries.widen("fills", 0, 2)  # sent again, landed at 2 in the checked topic
    assert not cycle.failed()
    assert window.commit(persisted, head="", data_topic="fills")[1].offsets == {"fills": {"0": [2, 2]}}
