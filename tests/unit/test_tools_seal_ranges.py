"""The verifier's check of the offset ranges seals carry, without a broker."""

from __future__ import annotations

import orjson
import pytest

from hyperdata_sidecar.tools.reconcile import DataRecord, Observed, SealRecord
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.seal_ranges import check_seal_ranges
from hyperdata_sidecar.tools.shapes import FILLS

A = f"{FILLS}/hourly/20260610/22"
B = f"{FILLS}/hourly/20260610/23"
TOPIC = "fills"

# Partition 0: A@0 A@10 B@0 B@10; partition 1: A@20 A@30 B@20.
LAYOUT = {0: [(A, 0), (A, 10), (B, 0), (B, 10)], 1: [(A, 20), (A, 30), (B, 20)]}
RIGHT = {A: {TOPIC: {"0": [0, 1], "1": [0, 1]}}, B: {TOPIC: {"0": [2, 3], "1": [2, 2]}}}


def observed(layout=LAYOUT, seals=()) -> Observed:
    data = [
        DataRecord(TOPIC, p, offset, b"BTC", source, line_offset, f"{FILLS}|1|{line_offset}".encode(), b"")
        for p, lines in layout.items()
        for offset, (source, line_offset) in enumerate(lines)
    ]
    return Observed(data=data, seals=list(seals), topic_tables={TOPIC: FILLS}, partitions={TOPIC: 2})


def seal(path: str, offset: int = 0, **fields) -> SealRecord:
    _, _, date, hour = path.split("/")
    value = {"table": FILLS, "path": path, "date": date, "hour": hour, "node": "node-a", "revision": 1, **fields}
    return SealRecord(0, offset, f"{FILLS}|{date}|{hour}".encode(), orjson.dumps(value))


def check(*seals: SealRecord, layout=LAYOUT, node: str | None = None, ignore=()) -> VerifyReport:
    report = VerifyReport()
    check_seal_ranges(report, observed(layout, seals), node=node, ignore=ignore)
    return report


def test_ranges_from_each_files_first_to_last_record_pass():
    report = check(seal(A, 0, offsets=RIGHT[A]), seal(B, 1, offsets=RIGHT[B]))

    assert report.ok and report.failures == 0
    assert (report.tables[FILLS].seal_ranges, report.tables[FILLS].seal_ranges_ok) == (2, 2)
    assert "seal offset ranges ok: 2/2" in report.summary()


def test_seals_without_offsets_or_with_unknown_ones_are_not_checked():
    report = check(seal(A), seal(B, offsets=None))

    assert report.ok and report.tables == {}
    assert "seal offset ranges" not in report.summary()


@pytest.mark.parametrize(
    ("offsets", "detail"),
    [
        ({TOPIC: {"0": [0, 2], "1": [0, 1]}}, f"fills[0]: last offset 2 holds a line of {B}@0, not of this file"),
        (
            {TOPIC: {"0": [1, 1], "1": [0, 1]}},
            "fills[0]: 1 record(s) of the file outside [1, 1] with no copy inside, e.g. offset 0 (line @0)",
        ),
        ({TOPIC: {"0": [0, 1]}}, "no range for fills[1], which holds lines of the file"),
        ({TOPIC: {"0": [0, 1], "1": [0, 1], "2": [0, 0]}}, "fills[2] is not a partition of a data topic"),
        ({TOPIC: {"0": [0, 1], "1": [0, 1]}, "other": {"0": [0, 1]}}, "other[0] is not a partition of a data topic"),
        ({TOPIC: {"0": [0], "1": [0, 1]}}, "fills[0] range [0] is not [first, last]"),
        ({TOPIC: {"0": [0, 9], "1": [0, 1]}}, "fills[0]: last offset 9 holds no record"),
        ([], "offsets is not an object"),
        ({}, "no range for fills[0], which holds lines of the file"),
    ],
)
def test_a_range_that_does_not_hold_its_file_fails(offsets, detail):
    report = check(seal(A, 3, offsets=offsets))

    assert report.count("seal_offsets") == 1 and not report.ok
    [problem] = report.problems
    assert (problem.table, problem.source) == (FILLS, A)
    assert problem.detail.startswith("revision 1 (0:3): ") and detail in problem.detail
    assert report.tables[FILLS].seal_ranges_ok == 0


def test_a_copy_published_again_outside_the_range_is_allowed():
    layout = {0: [*LAYOUT[0], (A, 10)], 1: LAYOUT[1]}

    assert check(seal(A, offsets=RIGHT[A]), layout=layout).ok


def test_an_earlier_revisions_range_need_not_hold_the_lines_appended_after_it():
    layout = {0: [*LAYOUT[0], (A, 40)], 1: LAYOUT[1]}  # A grew after its first seal
    first = seal(A, 0, offsets=RIGHT[A])
    second = seal(A, 1, offsets={TOPIC: {"0": [0, 4], "1": [0, 1]}}, revision=2)
    second_too_short = seal(A, 1, offsets=RIGHT[A], revision=2)

    assert check(first, second, layout=layout).ok
    report = check(first, second_too_short, layout=layout)
    assert report.count("seal_offsets") == 1 and report.problems[0].detail.startswith("revision 2")


def test_other_nodes_seals_and_ignored_files_are_left_out():
    wrong = {TOPIC: {"0": [3, 3]}}

    assert check(seal(A, offsets=wrong, node="node-b"), node="node-a").ok
    assert check(seal(A, offsets=wrong), ignore={A}).ok
    assert not check(seal(A, offsets=wrong, node="node-b")).ok
