"""The verifier's two isolation levels, without a broker: the offsets a read_committed reader is given,
the committed view of a full read, and a report whose verdict reads one level and names both."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest

from hyperdata_sidecar.tools.expected import read_tree
from hyperdata_sidecar.tools.isolation import READ_COMMITTED, READ_UNCOMMITTED, OffsetRuns, committed_view
from hyperdata_sidecar.tools.reconcile import DataRecord, DlqRecord, Observed, SealRecord, SnapshotRecord, reconcile
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS

from test_tools_reconcile import FIRST, NEWEST, book_line, published, write

DATA, DLQ, SEALS, SNAPSHOTS = "book", "dlq", "seals", "snapshots"


def given(*offsets: tuple[str, int, int]) -> OffsetRuns:
    runs = OffsetRuns()
    for topic, partition, offset in offsets:
        runs.keep(SimpleNamespace(topic=topic, partition=partition, offset=offset))
    return runs


def data(partition: int, offset: int) -> DataRecord:
    return DataRecord(DATA, partition, offset, b"BTC", FIRST, offset * 10, b"t|1|0", b"d")


# ---- OffsetRuns -----------------------------------------------------------------------------------


def test_consecutive_offsets_make_one_run_and_a_skipped_marker_starts_the_next():
    # A transaction at 0-2, its commit marker at 3, the next at 4-5, its marker at 6, then an aborted one.
    runs = given(*[(DATA, 0, offset) for offset in (0, 1, 2, 4, 5)])

    assert runs.runs(DATA, 0) == [(0, 3), (4, 6)]
    assert [offset for offset in range(9) if runs.holds(DATA, 0, offset)] == [0, 1, 2, 4, 5]


def test_offsets_are_held_per_topic_and_partition():
    runs = given((DATA, 0, 7), (DATA, 1, 3))

    assert runs.holds(DATA, 0, 7) and runs.holds(DATA, 1, 3)
    assert not runs.holds(DATA, 1, 7) and not runs.holds(DLQ, 0, 7) and not runs.holds(DATA, 2, 0)


def test_a_partitions_offsets_must_ascend():
    runs = given((DATA, 0, 5))

    with pytest.raises(ValueError, match="must ascend"):
        runs.add(DATA, 0, 5)
    with pytest.raises(ValueError, match="must ascend"):
        runs.add(DATA, 0, 2)
    runs.add(DATA, 1, 2)  # another partition's own order


# ---- the committed view ----------------------------------------------------------------------------


def test_the_committed_view_leaves_out_every_topics_records_the_committed_reader_was_not_given():
    observed = Observed(
        data=[data(0, 0), data(0, 1), data(1, 0), data(0, 3)],
        dlq=[DlqRecord(0, 0, b"t", FIRST, 1, "invalid_json", b"d"), DlqRecord(0, 1, b"t", FIRST, 1, "invalid_json", b"d")],
        seals=[SealRecord(0, 0, b"k", b"{}"), SealRecord(0, 2, b"k", b"{}")],
        snapshots=[SnapshotRecord(0, 4, b"1", b"{}")],
        topic_tables={DATA: BOOK_DIFFS},
        partitions={DATA: 2},
        ends={(DATA, 0): 5, (DATA, 1): 1},
    )
    runs = given((DATA, 0, 0), (DATA, 0, 3), (DATA, 1, 0), (DLQ, 0, 1), (SEALS, 0, 0), (SNAPSHOTS, 0, 4))

    view = committed_view(observed, runs, {(DATA, 0): 4, (DATA, 1): 1}, dlq_topic=DLQ, seal_topic=SEALS, snapshot_topic=SNAPSHOTS)

    assert [(r.partition, r.offset) for r in view.data] == [(0, 0), (1, 0), (0, 3)]
    assert [r.offset for r in view.dlq] == [1]
    assert [r.offset for r in view.seals] == [0]
    assert [r.offset for r in view.snapshots] == [4]
    assert view.ends == {(DATA, 0): 4, (DATA, 1): 1}
    assert (view.topic_tables, view.partitions) == (observed.topic_tables, observed.partitions)
    assert len(observed.data) == 4 and observed.ends[DATA, 0] == 5  # the full read stays as it was


def test_without_a_snapshot_topic_the_committed_view_has_no_snapshot_records():
    observed = Observed(snapshots=[SnapshotRecord(0, 0, b"1", b"{}")])

    view = committed_view(observed, given((SNAPSHOTS, 0, 0)), {}, dlq_topic=DLQ, seal_topic=SEALS, snapshot_topic=None)

    assert view.snapshots == []


def test_lines_published_again_in_an_aborted_transaction_are_duplicates_only_in_the_full_view(tmp_path):
    write(tmp_path, FIRST, [book_line(100, "BTC"), book_line(100, "ETH"), book_line(101, "BTC")])
    write(tmp_path, NEWEST, [book_line(102, "BTC")])
    files = list(read_tree(tmp_path))
    observed = published(files)
    committed = given(
        *[(r.topic, r.partition, r.offset) for r in observed.data],
        *[(DLQ, r.partition, r.offset) for r in observed.dlq],
        *[(SEALS, r.partition, r.offset) for r in observed.seals],
    )
    again = [r for r in observed.data if r.source == FIRST]
    # The same records after the committed ones and a marker, in a transaction that was aborted.
    aborted = [dataclasses.replace(r, offset=r.offset + 1000) for r in again]
    observed.data.extend(aborted)

    view = committed_view(observed, committed, {}, dlq_topic=DLQ, seal_topic=SEALS, snapshot_topic=None)

    verdict, everything = reconcile(files, view), reconcile(files, observed)
    assert verdict.ok and verdict.duplicates == 0, verdict.summary()
    assert everything.duplicates == len(again) == 3


# ---- the report --------------------------------------------------------------------------------------


def report_with(duplicates: int, *, isolation: str = READ_UNCOMMITTED, allowed: int = 0, **failing: int) -> VerifyReport:
    report = VerifyReport(allowed_duplicates=allowed, isolation=isolation)
    if duplicates:
        report.add("duplicate", BOOK_DIFFS, FIRST, 0, f"{duplicates + 1} copies", count=duplicates)
    for kind, n in failing.items():
        report.add(kind, BOOK_DIFFS, FIRST, None, "x", count=n)
    return report


def test_a_read_committed_verdict_carries_the_uncommitted_duplicates_without_failing_on_them():
    report = report_with(0, isolation=READ_COMMITTED)

    report.take_uncommitted(report_with(5, seal_duplicate=1))

    assert report.ok and (report.duplicates, report.uncommitted_duplicates) == (0, 5)
    assert report.duplicates_by_isolation == {READ_COMMITTED: 0, READ_UNCOMMITTED: 5}
    assert report.notes == [
        "a read_uncommitted reader also sees 1 seal_duplicate (not failing: the verdict reads read_committed)"
    ]
    *_, figure, verdict = report.summary().splitlines()
    assert figure == "read_uncommitted view: 5 duplicates (informative, not failing)"
    assert verdict == "OK: 0 lost, 0 failing findings, 0 duplicates (allowed 0), read_committed view"
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["isolation"] == READ_COMMITTED
    assert (as_json["duplicates"], as_json["duplicates_by_isolation"]) == (0, {READ_COMMITTED: 0, READ_UNCOMMITTED: 5})


def test_allowed_duplicates_apply_to_the_committed_view_a_read_committed_verdict_reads():
    within = report_with(1, isolation=READ_COMMITTED, allowed=1)
    beyond = report_with(2, isolation=READ_COMMITTED, allowed=1)
    within.take_uncommitted(report_with(50))
    beyond.take_uncommitted(report_with(2))

    assert within.ok and not beyond.ok


def test_findings_both_views_share_are_not_noted_again():
    report = report_with(0, isolation=READ_COMMITTED, seal_duplicate=1)

    report.take_uncommitted(report_with(0, seal_duplicate=1))

    assert report.notes == [] and not report.ok


def test_a_read_uncommitted_report_names_its_level_and_its_one_figure():
    report = report_with(3, allowed=3)

    assert report.ok and report.uncommitted_duplicates is None
    assert report.to_dict()["duplicates_by_isolation"] == {READ_UNCOMMITTED: 3}
    assert report.summary().splitlines()[-1] == "OK: 0 lost, 0 failing findings, 3 duplicates (allowed 3), read_uncommitted view"
    assert "read_uncommitted view:" not in report.summary()
