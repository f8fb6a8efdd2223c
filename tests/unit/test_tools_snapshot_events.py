"""The verifier's snapshot checks, without a broker: consumed messages go through the verifier's
``Collector`` (the seam after the consumer) and the checks run on what it keeps."""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar.tools.reconcile import Observed
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES
from hyperdata_sidecar.tools.snapshot_events import event_paths, reconcile_snapshots
from hyperdata_sidecar.tools.snapshot_files import SnapshotCopy, read_copy, read_snapshots, snapshot_files
from hyperdata_sidecar.tools.verify import DLQ, SEALS, SNAPSHOTS, Collector

TOPICS = {BOOK_DIFFS: "book", ORDER_STATUSES: "orders", FILLS: "fills", DLQ: "dlq", SEALS: "seals", SNAPSHOTS: "snaps"}
PARTITIONS = {"book": 1, "orders": 1, "fills": 2, "dlq": 1, "seals": 1, "snaps": 1}
TABLE_OF = {TOPICS[t]: t for t in (BOOK_DIFFS, ORDER_STATUSES, FILLS)}
BLOCKS = range(100, 110)  # one line per block in every data partition: block 100 + offset
CONTENT = {103: b"a" * 1000, 106: b"b" * 2000}
NODE = "node-a"


@dataclass
class Message:
    """What the collector needs of a consumed message."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]] = field(default_factory=list)


def data_messages(blocks=BLOCKS) -> list[Message]:
    out = []
    for topic, count in PARTITIONS.items():
        for p in range(count) if topic in TABLE_OF else ():
            for offset, block in enumerate(blocks):
                line_id = f"{TABLE_OF[topic]}|{block}|{p}".encode()
                headers = [("line_id", line_id), ("source", b"x/hourly/20260610/1"), ("offset", b"0")]
                out.append(Message(topic, p, offset, b"BTC", b"{}", headers))
    return out


def relpath(height: int) -> str:
    return f"periodic_abci_states/20260610/{height}.rmp"


def resume(height: int) -> dict[str, dict[str, int]]:
    """The right resume offsets: the first record above the height in every partition."""
    offset = height - BLOCKS[0] + 1
    return {topic: {str(p): offset for p in range(PARTITIONS[topic])} for topic in TABLE_OF}


def event_value(height: int, **changes) -> dict:
    data = CONTENT.get(height, b"")
    value = {
        "height": height,
        "path": relpath(height),
        "date": "20260610",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "finalized_at": "2026-06-10T14:00:03.120Z",
        "node": NODE,
        "offsets": resume(height),
    }
    value.update(changes)
    return {k: v for k, v in value.items() if v is not DROP}


DROP = object()


def event(height: int, offset: int = 0, *, key: bytes | None = None, **changes) -> Message:
    value = orjson.dumps(event_value(height, **changes))
    return Message("snaps", 0, offset, str(height).encode() if key is None else key, value)


def collected(*messages: Message, blocks=BLOCKS) -> Observed:
    collector = Collector(TOPICS, PARTITIONS)
    for message in [*data_messages(blocks), *messages]:
        collector.keep(message)
    return collector.observed


@pytest.fixture
def tree(tmp_path) -> Path:
    for height, data in CONTENT.items():
        (tmp_path / relpath(height)).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relpath(height)).write_bytes(data)
    return tmp_path


def check(tree: Path, observed: Observed, *, node: str | None = None, backups=None, grace_s: float = 0.0) -> VerifyReport:
    report = VerifyReport(backups_checked=backups is not None)
    reconcile_snapshots(report, read_snapshots(tree, grace_s=grace_s), observed, node=node, backups=backups)
    return report


def kinds(report: VerifyReport) -> dict[str, int]:
    assert report.snapshots is not None
    return {kind: n for kind, n in report.snapshots.counts.items() if n}


def test_the_collector_keeps_snapshot_events_apart_from_data_and_seals():
    observed = collected(event(103))

    assert [(r.partition, r.offset, r.key) for r in observed.snapshots] == [(0, 0, b"103")]
    assert observed.seals == [] and len(observed.data) == 4 * len(BLOCKS)
    assert event_paths(observed.snapshots) == {relpath(103)}


def test_one_correct_event_per_snapshot_passes(tree):
    report = check(tree, collected(event(103, 0), event(106, 1)))

    assert report.ok and report.failures == 0, report.summary()
    assert (report.snapshots.files, report.snapshots.complete, report.snapshots.events, report.snapshots.heights_ok) == (
        2,
        2,
        2,
        2,
    )
    assert "snapshots: 2 files (2 complete), 2 events, 2 heights ok, 0 partial" in report.summary()
    assert report.to_dict()["snapshots"]["heights_ok"] == 2


def test_a_complete_snapshot_without_an_event_is_missing(tree):
    report = check(tree, collected(event(103)))

    assert kinds(report) == {"snapshot_missing": 1} and not report.ok
    [problem] = report.problems
    assert (problem.kind, problem.table, problem.source) == ("snapshot_missing", "periodic_abci_states", relpath(106))


def test_a_snapshot_younger_than_the_grace_is_not_owed_an_event_yet(tree):
    os.utime(tree / relpath(103), (time.time() - 60, time.time() - 60))

    report = check(tree, collected(), grace_s=30)

    assert kinds(report) == {"snapshot_missing": 1} and report.problems[0].source == relpath(103)
    assert report.snapshots.complete == 1


def test_two_events_for_one_height_are_a_duplicate(tree):
    report = check(tree, collected(event(103, 0), event(106, 1), event(103, 2)))

    assert kinds(report) == {"snapshot_duplicate": 1}
    assert report.snapshots.heights_ok == 1
    assert "2 events for height 103 (0:0, 0:2)" in report.problems[0].detail


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"size": 999}, "size 999, the file has 1000"),
        ({"sha256": "0" * 64}, "sha256 '000"),
        ({"key": b"0103"}, "key b'0103', expected '103'"),
        ({"path": relpath(104)}, "is not that of height 103"),
        (
            {"path": "periodic_abci_states/20260611/103.rmp", "date": "20260611"},
            "the snapshot of height 103 is 'periodic_abci_states/20260610/103.rmp'",
        ),
        ({"path": "periodic_abci_states/2026-06-10/103.rmp"}, "is not periodic_abci_states/<YYYYMMDD>/<height>.rmp"),
        ({"date": "20260611"}, "date '20260611', the path has '20260610'"),
        ({"finalized_at": "2026-06-10T14:00:03"}, "is not a UTC time ending in Z"),
        ({"node": DROP}, "node missing"),
        ({"offsets": DROP}, "offsets missing or not an object"),
        ({"offsets": {**resume(103), "fills": {"0": 4}}}, "offsets[fills] name partitions ['0'], expected 0 to 1"),
        ({"offsets": {**resume(103), "fills": {"0": 4, "1": -1}}}, "offsets[fills][1] = -1 is not an offset"),
        ({"offsets": {**resume(103), "dlq": {"0": 0}}}, "offsets name 'dlq', which is not a data topic"),
        ({"offsets": {"book": {"0": 4}, "orders": {"0": 4}}}, "offsets lack fills"),
        ({"partial": ["node_unknown_streaming"]}, "is not a list of distinct table dir names"),
        ({"partial": [FILLS, FILLS]}, "is not a list of distinct table dir names"),
        ({"partial": [{"table": FILLS}]}, "is not a list of distinct table dir names"),
        ({"partial": FILLS}, "is not a list of distinct table dir names"),
    ],
)
def test_an_event_that_misdescribes_its_snapshot_is_wrong(tree, change, detail):
    key = change.pop("key", None)
    report = check(tree, collected(event(103, 0, key=key, **change), event(106, 1)))

    assert kinds(report) == {"snapshot_wrong": 1}
    assert detail in report.problems[0].detail
    assert report.snapshots.heights_ok == 1


def test_a_value_that_is_no_json_object_with_a_height_is_wrong_and_its_key_names_the_height(tree):
    keyed = check(tree, collected(Message("snaps", 0, 5, b"103", b"not json"), event(106, 1)))
    unkeyed = check(tree, collected(Message("snaps", 0, 5, None, b'{"height": "103"}'), event(106, 1)))

    assert kinds(keyed) == {"snapshot_wrong": 1}
    assert kinds(unkeyed) == {"snapshot_wrong": 1, "snapshot_missing": 1}


def test_each_record_on_the_wrong_side_of_a_resume_offset_is_counted(tree):
    offsets = resume(103)
    offsets["fills"]["1"] = 2  # blocks 102 and 103 lie at or after it

    report = check(tree, collected(event(103, 0, offsets=offsets), event(106, 1)))

    assert kinds(report) == {"snapshot_offsets": 2}
    assert report.failures == 2 and report.snapshots.heights_ok == 1
    assert report.problems[0].detail.startswith("fills[1] resumes at 2: offset 2 (at or after it) has block 102 <= 103")
    assert "(and 1 more)" in report.problems[0].detail


def test_a_resume_offset_beyond_the_end_read_is_wrong(tree):
    observed = collected(event(103, 0, offsets={**resume(103), "book": {"0": 11}}), event(106, 1))
    observed.ends = {(topic, p): len(BLOCKS) for topic in TABLE_OF for p in range(PARTITIONS[topic])}

    report = check(tree, observed)

    assert kinds(report) == {"snapshot_offsets": 1}
    assert "book[0] resumes at 11, beyond its end offset 10" in report.problems[0].detail


def test_after_a_crash_a_resume_offset_at_the_second_crossing_holds(tree):
    again = [*BLOCKS, *range(102, 110)]  # the window from block 102 on published again
    offsets = {topic: {str(p): 12 for p in range(PARTITIONS[topic])} for topic in TABLE_OF}

    report = check(tree, collected(event(103, 0, offsets=offsets), event(106, 1, offsets=resume(106)), blocks=again))

    assert kinds(report) == {} and report.ok


def test_a_quiet_table_named_partial_is_checked_only_before_its_offsets(tree):
    at_end = {**resume(103), "fills": {"0": 2, "1": 2}}  # fills had published blocks 100, 101 only then

    named = check(tree, collected(event(103, 0, offsets=at_end, partial=[FILLS]), event(106, 1)))
    unnamed = check(tree, collected(event(103, 0, offsets=at_end), event(106, 1)))
    too_far = check(
        tree, collected(event(103, 0, offsets={**resume(103), "fills": {"0": 6, "1": 6}}, partial=[FILLS]), event(106, 1))
    )

    assert kinds(named) == {} and named.snapshots.partial == 1
    assert kinds(unnamed) == {"snapshot_offsets": 4}
    assert kinds(too_far) == {"snapshot_offsets": 4}


def test_a_pruned_snapshot_is_checked_against_its_backup_copy(tree):
    gone = SnapshotCopy(relpath(100), 7, hashlib.sha256(b"pruned!").hexdigest())
    value = {"size": 7, "sha256": gone.sha256}
    events = collected(event(100, 2, path=relpath(100), **value), event(103, 0), event(106, 1))

    right = check(tree, events, backups={relpath(100): gone, relpath(103): None, relpath(106): None})
    wrong = check(tree, events, backups={relpath(100): SnapshotCopy(relpath(100), 8, gone.sha256)})

    assert kinds(right) == {"backup_missing": 2} and right.snapshots.heights_ok == 3
    assert "size 7, its backup copy has 8" in next(p for p in wrong.problems if p.kind == "snapshot_wrong").detail


def test_an_event_for_a_snapshot_found_nowhere_is_unexpected_or_with_a_node_foreign(tree):
    events = collected(event(100, 2, path=relpath(100)), event(103, 0), event(106, 1))

    assert kinds(check(tree, events)) == {"snapshot_unexpected": 1}
    with_node = check(tree, events, node=NODE)
    assert kinds(with_node) == {"foreign": 1} and with_node.ok


def test_other_nodes_events_are_left_out_when_a_node_is_given(tree):
    events = collected(event(103, 0), event(106, 1), event(103, 2, node="node-b"), event(999, 3, node="node-b"))

    report = check(tree, events, node=NODE)

    assert kinds(report) == {} and report.snapshots.events == 2


def test_complete_snapshots_must_have_a_backup_equal_to_them(tree):
    copies = {
        relpath(103): read_copy(tree, relpath(103)),
        relpath(106): SnapshotCopy(relpath(106), 2000, "f" * 64),
    }

    report = check(tree, collected(event(103, 0), event(106, 1)), backups=copies)
    assert kinds(report) == {"backup_wrong": 1} and report.snapshots.backups_ok == 1
    assert "backups ok 1/2" in report.summary()


def test_snapshot_files_are_named_by_height_in_real_directories_only(tmp_path):
    root = tmp_path / "periodic_abci_states"
    for name in ("20260610/900.rmp", "20260610/95.rmp", "20260610/95.rmp.tmp", "20260611/01.rmp"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")
    (root / "20260612").symlink_to(root / "20260610")
    (root / "20260611" / "7.rmp").symlink_to(root / "20260610" / "95.rmp")

    assert [s.relpath for s in snapshot_files(tmp_path)] == [
        "periodic_abci_states/20260610/95.rmp",
        "periodic_abci_states/20260610/900.rmp",
    ]


def test_an_empty_snapshot_is_not_complete(tmp_path):
    (tmp_path / relpath(103)).parent.mkdir(parents=True)
    (tmp_path / relpath(103)).write_bytes(b"")

    [empty] = read_snapshots(tmp_path)
    assert (empty.size, empty.complete) == (0, False)
