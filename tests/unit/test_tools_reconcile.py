"""The verifier's comparison, without a broker: a correct stream passes, each kind of damage is named."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from pathlib import Path

import orjson
import pytest

from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.tools.expected import ExpectedFile, read_tree, value_digest
from hyperdata_sidecar.tools.reconcile import (
    DataRecord,
    DlqRecord,
    Observed,
    SealRecord,
    parse_reference,
    reconcile,
)
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES

TOPICS = {BOOK_DIFFS: "book", ORDER_STATUSES: "orders", FILLS: "fills"}
PARTITIONS = 6
FIRST = f"{BOOK_DIFFS}/hourly/20260610/9"
NEWEST = f"{BOOK_DIFFS}/hourly/20260610/10"


def book_line(block: int, coin: str) -> bytes:
    event = {"user": "0x1", "oid": 1, "coin": coin, "side": "B", "px": "1.0", "raw_book_diff": "remove"}
    return orjson.dumps(
        {
            "local_time": "2026-06-10T09:00:00.000000001",
            "block_time": "x",
            "block_number": block,
            "events": [event],
        }
    )


def write(root: Path, relpath: str, lines: list[bytes]) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))


@pytest.fixture
def files(tmp_path) -> list[ExpectedFile]:
    write(
        tmp_path,
        FIRST,
        [
            book_line(100, "BTC"),
            book_line(100, "ETH"),
            b"",
            book_line(101, "BTC"),
            book_line(101, "xyz:TSLA"),
        ],
    )
    write(tmp_path, NEWEST, [book_line(102, "BTC"), book_line(102, "ETH")])
    return list(read_tree(tmp_path, max_line_bytes=200))


def seal_value(f: ExpectedFile, **changes) -> bytes:
    value = {
        "table": f.table,
        "path": f.relpath,
        "date": f.hour_file.date,
        "hour": f.hour_file.hour,
        "block_range": f.block_range,
        "size": f.size,
        "sha256": f.sha256,
        "finalized_at": "2026-06-10T10:00:03.000Z",
        "lines": len(f.lines),
        "dlq_lines": len(f.dlq),
        "node": "node-a",
        "revision": 1,
        "block_regressions": f.block_regressions,
    }
    value.update(changes)
    return orjson.dumps(value)


def published(files: list[ExpectedFile]) -> Observed:
    """What a correct sidecar puts on the topics for ``files``."""
    observed = Observed(
        topic_tables={t: table for table, t in TOPICS.items()},
        partitions=dict.fromkeys(TOPICS.values(), PARTITIONS),
    )
    next_offset: Counter = Counter()
    for f in files:
        for line in f.lines:
            topic, partition = TOPICS[f.table], partition_for(line.key, PARTITIONS)
            observed.data.append(
                DataRecord(
                    topic,
                    partition,
                    next_offset[topic, partition],
                    line.key,
                    f.relpath,
                    line.offset,
                    line.line_id,
                    line.digest,
                )
            )
            next_offset[topic, partition] += 1
        for entry in f.tails + f.dlq:
            value = json.dumps(entry.ref).encode() if entry.ref else None
            digest = value_digest(value) if value else entry.digest
            reason = "unterminated" if "unterminated" in entry.reasons else min(entry.reasons)
            observed.dlq.append(
                DlqRecord(0, len(observed.dlq), f.table.encode(), f.relpath, entry.offset, reason, digest, entry.ref)
            )
        if f.finalized:
            key = f"{f.table}|{f.hour_file.date}|{f.hour_file.hour}".encode()
            for revision, size in enumerate(sorted(f.prefixes), start=1):
                earlier = seal_value(f, revision=revision, size=size, sha256=f.prefixes[size])
                observed.seals.append(SealRecord(0, len(observed.seals), key, earlier))
            latest = seal_value(f, revision=len(f.prefixes) + 1, dlq_lines=len(f.dlq) + len(f.tails))
            observed.seals.append(SealRecord(0, len(observed.seals), key, latest))
    return observed


def data_at(observed: Observed, source: str, index: int) -> DataRecord:
    return [r for r in observed.data if r.source == source][index]


def test_a_correct_stream_passes_with_every_line_dlq_record_and_seal_accounted_for(files):
    report = reconcile(files, published(files))

    assert report.ok, report.summary()
    book = report.tables[BOOK_DIFFS]
    assert (book.files, book.finalized, book.lines, book.lines_ok, book.records) == (2, 1, 6, 6, 6)
    assert (book.dlq_lines, book.dlq_ok, book.seals_ok) == (1, 1, 1)
    assert list(report.tables) == [BOOK_DIFFS, ORDER_STATUSES, FILLS]


def test_a_missing_message_is_lost_with_its_source_and_offset(files):
    observed = published(files)
    gone = data_at(observed, FIRST, 1)
    observed.data.remove(gone)

    report = reconcile(files, observed)

    assert not report.ok
    assert report.count("lost") == 1 and report.failures == 1
    [problem] = report.problems
    assert (problem.kind, problem.source, problem.offset) == ("lost", FIRST, gone.line_offset)


def test_a_line_the_broker_rejected_is_accounted_for_by_its_dlq_reference(files):
    observed = published(files)
    gone = data_at(observed, FIRST, 1)
    observed.data.remove(gone)
    ref = {"source": FIRST, "offset": gone.line_offset, "length": 300, "sha256": "ab" * 32}
    observed.dlq.append(DlqRecord(0, 99, BOOK_DIFFS.encode(), FIRST, gone.line_offset, "rejected", value_digest(b"x"), ref))
    first = next(f for f in files if f.relpath == FIRST)
    [seal] = [s for s in observed.seals if orjson.loads(s.value)["path"] == FIRST]
    counted = seal_value(first, lines=len(first.lines) - 1, dlq_lines=len(first.dlq) + 1)  # as the sidecar counts it
    observed.seals[observed.seals.index(seal)] = dataclasses.replace(seal, value=counted)

    report = reconcile(files, observed)

    assert report.ok, report.summary()
    assert (report.count("rejected"), report.count("lost")) == (1, 0)


def test_a_rejected_reference_for_another_offset_does_not_account_for_a_lost_line(files):
    observed = published(files)
    gone = data_at(observed, FIRST, 1)
    observed.data.remove(gone)
    ref = {"source": FIRST, "offset": gone.line_offset + 1, "length": 300, "sha256": "ab" * 32}
    observed.dlq.append(DlqRecord(0, 99, BOOK_DIFFS.encode(), FIRST, gone.line_offset, "rejected", value_digest(b"x"), ref))

    report = reconcile(files, observed)

    assert report.count("lost") == 1 and not report.ok


def test_duplicates_are_counted_and_fail_only_beyond_the_allowance(files):
    observed = published(files)
    again = data_at(observed, FIRST, 0)
    observed.data.append(dataclasses.replace(again, offset=again.offset + 100))

    strict = reconcile(files, observed)
    lenient = reconcile(files, observed, allowed_duplicates=1)

    assert strict.duplicates == 1 and strict.failures == 0 and not strict.ok
    assert lenient.ok
    assert strict.count("order") == 0


def test_a_duplicate_dlq_record_counts_as_a_duplicate(files):
    observed = published(files)
    observed.dlq.append(dataclasses.replace(observed.dlq[0], offset=99))

    report = reconcile(files, observed)

    assert report.count("dlq_duplicate") == 1 and report.duplicates == 1 and report.failures == 0


@pytest.mark.parametrize(
    ("change", "kind"),
    [
        ({"key": b"DOGE"}, "wrong_key"),
        ({"partition": "next"}, "wrong_partition"),
        ({"digest": value_digest(b"something else")}, "wrong_value"),
        ({"line_id": None}, "wrong_line_id"),
        ({"line_id": f"{BOOK_DIFFS}|100|7".encode()}, "wrong_line_id"),
        ({"topic": "orders"}, "wrong_topic"),
    ],
)
def test_a_damaged_message_is_reported_as_that_damage(files, change, kind):
    observed = published(files)
    record = data_at(observed, FIRST, 1)
    if change.get("partition") == "next":
        change = {"partition": (record.partition + 1) % PARTITIONS}
    index = observed.data.index(record)
    observed.data[index] = dataclasses.replace(record, **change)

    report = reconcile(files, observed)

    assert report.count(kind) == 1
    assert report.count("lost") == 0
    assert not report.ok
    assert [p.offset for p in report.problems if p.kind == kind] == [record.line_offset]


def test_a_coins_lines_out_of_file_order_in_their_partition_are_an_order_violation(files):
    observed = published(files)
    earlier, later = data_at(observed, FIRST, 0), data_at(observed, FIRST, 2)  # both BTC
    assert earlier.partition == later.partition
    earlier.offset, later.offset = later.offset, earlier.offset

    report = reconcile(files, observed)

    assert report.count("order") == 1 and not report.ok


def test_a_coins_lines_are_ordered_across_files_too(files):
    observed = published(files)
    first_file, newest_file = data_at(observed, FIRST, 2), data_at(observed, NEWEST, 0)  # both BTC
    first_file.offset, newest_file.offset = newest_file.offset, first_file.offset

    report = reconcile(files, observed)

    assert report.count("order") == 1


def test_a_republished_run_after_later_lines_is_duplication_not_disorder(files):
    observed = published(files)
    btc = [r for r in observed.data if r.key == b"BTC"]
    last = max(r.offset for r in btc)
    observed.data += [dataclasses.replace(r, offset=last + 1 + i) for i, r in enumerate(btc)]

    report = reconcile(files, observed, allowed_duplicates=len(btc))

    assert report.count("order") == 0 and report.duplicates == len(btc) and report.ok


def test_a_message_matching_no_good_line_is_unexpected(files):
    observed = published(files)
    blank = next(e for e in files[0].dlq)
    observed.data.append(DataRecord("book", 0, 50, b"BTC", FIRST, blank.offset, None, value_digest(b"")))
    observed.data.append(DataRecord("book", 0, 51, b"BTC", None, None, None, value_digest(b"x")))

    report = reconcile(files, observed)

    assert report.count("unexpected") == 2 and not report.ok


def test_messages_for_files_outside_the_tree_fail_unless_other_sidecars_are_declared(files):
    observed = published(files)
    observed.data.append(DataRecord("book", 0, 50, b"BTC", f"{BOOK_DIFFS}/hourly/20250101/0", 0, None, value_digest(b"")))

    alone = reconcile(files, observed)
    shared = reconcile(files, observed, node="node-a")

    assert alone.count("unexpected") == 1 and not alone.ok
    assert shared.count("foreign") == 1 and shared.ok


def test_a_bad_line_missing_from_the_dlq_is_reported(files):
    observed = published(files)
    observed.dlq.clear()

    report = reconcile(files, observed)

    assert report.count("dlq_missing") == 1 and not report.ok


@pytest.mark.parametrize(
    "change",
    [{"reason": "malformed"}, {"key": b"node_fills_streaming"}, {"digest": value_digest(b"not the line")}],
)
def test_a_dlq_record_with_the_wrong_reason_key_or_value_is_wrong(files, change):
    observed = published(files)
    observed.dlq[0] = dataclasses.replace(observed.dlq[0], **change)

    report = reconcile(files, observed)

    assert report.count("dlq_wrong") == 1 and report.tables[BOOK_DIFFS].dlq_ok == 0


def test_a_dlq_record_for_a_good_line_is_unexpected(files):
    observed = published(files)
    good = files[0].lines[0]
    observed.dlq.append(DlqRecord(0, 9, BOOK_DIFFS.encode(), FIRST, good.offset, "malformed", good.digest))

    report = reconcile(files, observed)

    assert report.count("dlq_unexpected") == 1


def test_an_oversize_line_must_arrive_as_its_reference(tmp_path):
    write(tmp_path, FIRST, [book_line(1, "BTC" * 100)])
    write(tmp_path, NEWEST, [])
    files = list(read_tree(tmp_path, max_line_bytes=200))
    observed = published(files)
    good = reconcile(files, observed)
    raw = dataclasses.replace(observed.dlq[0], ref=None, digest=value_digest(book_line(1, "BTC" * 100)))
    observed.dlq[0] = raw

    bad = reconcile(files, observed)

    assert good.ok
    assert bad.count("dlq_wrong") == 1


def test_a_finalized_file_without_a_seal_is_reported(files):
    observed = published(files)
    observed.seals.clear()

    report = reconcile(files, observed)

    assert report.count("seal_missing") == 1 and not report.ok


def test_two_seals_for_one_file_are_reported(files):
    observed = published(files)
    observed.seals.append(dataclasses.replace(observed.seals[0], offset=5))

    report = reconcile(files, observed)

    assert report.count("seal_duplicate") == 1 and not report.ok


@pytest.mark.parametrize(
    "change",
    [
        {"sha256": "0" * 64},
        {"size": 1},
        {"block_range": [100, 102]},
        {"lines": 3},
        {"dlq_lines": 0},
        {"hour": "09"},
        {"node": None},
    ],
)
def test_a_seal_that_misdescribes_its_file_is_wrong(files, change):
    observed = published(files)
    observed.seals[0].value = seal_value(files[0], **change)

    report = reconcile(files, observed)

    assert report.count("seal_wrong") == 1 and report.tables[BOOK_DIFFS].seals_ok == 0


def test_sealing_the_newest_file_is_unexpected(files):
    observed = published(files)
    observed.seals.append(SealRecord(0, 9, f"{BOOK_DIFFS}|20260610|10".encode(), seal_value(files[1])))

    report = reconcile(files, observed)

    assert report.count("seal_unexpected") == 1


def test_seals_of_other_nodes_are_ignored_when_a_node_is_given(files):
    observed = published(files)
    observed.seals.append(dataclasses.replace(observed.seals[0], offset=9, value=seal_value(files[0], node="node-b")))

    mixed = reconcile(files, observed)
    filtered = reconcile(files, observed, node="node-a")

    assert mixed.count("seal_duplicate") == 1
    assert filtered.ok


def test_backups_must_exist_and_match_the_file(files):
    observed = published(files)

    present = reconcile(files, observed, backups={FIRST: files[0].sha256})
    missing = reconcile(files, observed, backups={FIRST: None})
    different = reconcile(files, observed, backups={FIRST: "f" * 64})

    assert present.ok and present.tables[BOOK_DIFFS].backups_ok == 1
    assert missing.count("backup_missing") == 1 and not missing.ok
    assert different.count("backup_wrong") == 1 and not different.ok


def test_the_summary_names_the_verdict_and_each_problem_and_the_dict_is_json(files):
    observed = published(files)
    observed.data.pop()

    report = reconcile(files, observed)
    text = report.summary()

    assert text.splitlines()[-1].startswith("FAILED: 1 lost")
    assert f"{NEWEST} @" in text
    assert json.loads(json.dumps(report.to_dict()))["failures"] == 1


def test_only_small_json_objects_with_the_reference_fields_parse_as_references():
    ref = {"source": FIRST, "offset": 0, "length": 9, "sha256": "ab"}

    assert parse_reference(orjson.dumps(ref)) == ref
    assert parse_reference(orjson.dumps(ref | {"extra": 1})) is None
    assert parse_reference(b'{"local_time":"x"}') is None
    assert parse_reference(b"") is None


# --- regressions, late appends and revisions ------------------------------------------------------


LATE = "|late-20260610-9"


@pytest.fixture
def grown(tmp_path) -> tuple[Path, int]:
    """Hour 9 sealed after two lines and the start of a third, then grown; hour 10 newest."""
    lines = [book_line(100, "BTC"), book_line(100, "ETH"), book_line(100, "SOL"), book_line(101, "BTC")]
    write(tmp_path, FIRST, lines)
    write(tmp_path, NEWEST, [book_line(100, "BTC")])
    first_size = len(lines[0]) + len(lines[1]) + 2 + 10  # ten bytes into the third line
    return tmp_path, first_size


def test_a_regression_gives_the_line_and_every_later_one_the_next_epoch(tmp_path):
    write(tmp_path, FIRST, [book_line(100, "BTC"), book_line(99, "BTC"), book_line(99, "ETH")])
    write(tmp_path, NEWEST, [book_line(98, "BTC"), book_line(99, "BTC")])
    first, newest = read_tree(tmp_path)
    assert [line.line_id.split(b"|", 2)[2] for line in first.lines + newest.lines] == [
        b"0",
        b"0|r1",
        b"1|r1",
        b"0|r2",
        b"0|r2",
    ]
    assert (first.block_regressions, newest.block_regressions) == (1, 1)


def test_late_lines_continue_the_files_own_sequence_and_the_next_file_the_first_revisions(grown):
    root, first_size = grown
    first, newest = read_tree(root, sealed_sizes={FIRST: [first_size, (root / FIRST).stat().st_size]})
    assert [line.line_id.decode() for line in first.lines] == [
        f"{BOOK_DIFFS}|100|0",
        f"{BOOK_DIFFS}|100|1",
        f"{BOOK_DIFFS}|100|2{LATE}",
        f"{BOOK_DIFFS}|101|0{LATE}",
    ]
    assert [line.line_id.decode() for line in newest.lines] == [f"{BOOK_DIFFS}|100|2"]
    third = first.lines[2].offset
    assert (first.late_from, [(t.offset, t.reasons) for t in first.tails]) == (third, [(third, frozenset({"unterminated"}))])
    data = (root / FIRST).read_bytes()
    assert first.tails[0].digest == value_digest(data[third:first_size])
    assert first.prefixes == {first_size: hashlib.sha256(data[:first_size]).hexdigest()}


def test_a_first_revision_ending_on_a_line_boundary_leaves_no_tail(grown):
    root, _ = grown
    boundary = len(book_line(100, "BTC")) + 1
    first, _ = read_tree(root, sealed_sizes={FIRST: [boundary]})
    assert (first.late_from, first.tails, list(first.prefixes)) == (boundary, [], [boundary])


def test_a_grown_file_with_all_its_revisions_sealed_passes(grown):
    root, first_size = grown
    files = list(read_tree(root, sealed_sizes={FIRST: [first_size]}))
    report = reconcile(files, published(files))
    assert report.ok, report.summary()
    assert report.tables[BOOK_DIFFS].seals_ok == 1


def test_late_lines_after_the_next_files_lines_are_in_order_but_not_among_themselves(grown):
    root, first_size = grown
    files = list(read_tree(root, sealed_sizes={FIRST: [first_size]}))
    observed = published(files)
    late_btc, newest_btc = data_at(observed, FIRST, 3), data_at(observed, NEWEST, 0)  # both BTC
    assert late_btc.partition == newest_btc.partition
    late_btc.offset, newest_btc.offset = newest_btc.offset, late_btc.offset  # as a late append publishes them
    assert reconcile(files, observed).count("order") == 0
    on_time_btc = data_at(observed, FIRST, 0)
    on_time_btc.offset, late_btc.offset = late_btc.offset, on_time_btc.offset
    assert reconcile(files, observed).count("order") == 1


def test_a_missing_superseded_tail_is_a_missing_dlq_record(grown):
    root, first_size = grown
    files = list(read_tree(root, sealed_sizes={FIRST: [first_size]}))
    observed = published(files)
    observed.dlq = [r for r in observed.dlq if r.reason != "unterminated"]
    report = reconcile(files, observed)
    assert [p.kind for p in report.problems] == ["dlq_missing"]


@pytest.mark.parametrize(
    ("damage", "kind"),
    [
        (lambda seals: seals[:1], "seal_wrong"),  # the latest revision is missing: revision 1 does not describe the file
        (lambda seals: seals + seals[:1], "seal_duplicate"),
        (
            lambda seals: [
                seals[0],
                dataclasses.replace(seals[1], value=orjson.dumps({**orjson.loads(seals[1].value), "revision": 3})),
            ],
            "seal_wrong",
        ),
        (
            lambda seals: [
                dataclasses.replace(seals[0], value=orjson.dumps({**orjson.loads(seals[0].value), "sha256": "0" * 64})),
                seals[1],
            ],
            "seal_wrong",
        ),
    ],
    ids=["latest missing", "revision twice", "revision skipped", "earlier digest wrong"],
)
def test_revision_seals_that_do_not_describe_the_file_and_its_prefixes_fail(grown, damage, kind):
    root, first_size = grown
    files = list(read_tree(root, sealed_sizes={FIRST: [first_size]}))
    observed = published(files)
    observed.seals = damage([s for s in observed.seals if b"|9" in s.key])
    report = reconcile(files, observed)
    assert report.count(kind) == 1 and not report.ok


def test_ignored_files_owe_nothing_and_their_records_are_left_out(files):
    observed = published(files)
    observed.data = [r for r in observed.data if r.source != FIRST]
    observed.dlq.append(dataclasses.replace(observed.dlq[0], offset=99, line_offset=12345))
    report = reconcile(files, observed, ignore=[FIRST])
    assert report.ok, report.summary()
    assert report.tables[BOOK_DIFFS].files == 1
