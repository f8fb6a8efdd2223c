"""Comparing what a watch tree owes (``expected``) with what the broker holds: pure, no I/O.

The broker side comes in as plain records (already consumed and digested by the shell in
``verify``), so every check here is testable with synthetic lists.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.partitioner import partition_for
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.tools.expected import ExpectedDlq, ExpectedFile, ExpectedLine
from hyperdata_sidecar.tools.report import VerifyReport

_UNKNOWN_TABLE = "unknown"


@dataclass(slots=True)
class DataRecord:
    """A data-topic message as the verifier keeps it: position, key, headers, value digest."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    source: str | None
    line_offset: int | None
    line_id: bytes | None
    digest: bytes


@dataclass(slots=True)
class DlqRecord:
    """A DLQ message: position, key, headers, value digest, and the value parsed as an oversize
    reference when it is a JSON object (small values only)."""

    partition: int
    offset: int
    key: bytes | None
    source: str | None
    line_offset: int | None
    reason: str | None
    digest: bytes
    ref: dict[str, Any] | None = None


@dataclass(slots=True)
class SealRecord:
    """A seal-topic message: position, key and raw value."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass(slots=True)
class SnapshotRecord:
    """A snapshot-topic message: position, key and raw value."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass
class Observed:
    """Everything read from the broker. Records of each topic are in partition-offset order.

    ``topic_tables`` maps each data topic to its table; ``partitions`` each data topic to its
    partition count; ``ends`` each (topic, partition) read to the end offset it was read to.
    """

    data: list[DataRecord] = field(default_factory=list)
    dlq: list[DlqRecord] = field(default_factory=list)
    seals: list[SealRecord] = field(default_factory=list)
    snapshots: list[SnapshotRecord] = field(default_factory=list)
    topic_tables: dict[str, str] = field(default_factory=dict)
    partitions: dict[str, int] = field(default_factory=dict)
    ends: dict[tuple[str, int], int] = field(default_factory=dict)

    def data_by_partition(self) -> dict[tuple[str, int], list[DataRecord]]:
        """The data records of each (topic, partition), in offset order."""
        out: dict[tuple[str, int], list[DataRecord]] = {}
        for record in self.data:
            out.setdefault((record.topic, record.partition), []).append(record)
        for records in out.values():
            if any(a.offset > b.offset for a, b in itertools.pairwise(records)):
                records.sort(key=lambda r: r.offset)
        return out


def reconcile(
    files: Iterable[ExpectedFile],
    observed: Observed,
    *,
    node: str | None = None,
    backups: Mapping[str, str | None] | None = None,
    allowed_duplicates: int = 0,
    ignore: Collection[str] = (),
) -> VerifyReport:
    """Check ``observed`` against ``files`` and report per table.

    ``node``: only seals whose ``node`` field equals it are considered, and messages for files
    outside the tree are tolerated as "foreign" (other sidecars share the topics). ``backups``:
    relpath → sha256 of its backup (None when absent), for finalized files; None skips the check.
    ``ignore``: relpaths whose files and records are left out altogether (files a test damaged).
    """
    report = VerifyReport(allowed_duplicates=allowed_duplicates, backups_checked=backups is not None)
    for spec in TABLES:
        report.table(spec.dir_name)
    ignored = set(ignore)
    files = [f for f in files if f.relpath not in ignored]
    if ignored:
        observed = _without(observed, ignored)
    late_from = {f.relpath: f.late_from for f in files if f.late_from is not None}
    in_order = sorted(observed.data, key=lambda r: (r.topic, r.partition, r.offset))
    data = _index_by_line(in_order)
    _check_order(report, observed, in_order, data, late_from)
    dlq = _index_by_line(observed.dlq)
    seals = _index_seals(report, observed.seals, node)
    for record in observed.data:
        report.table(observed.topic_tables.get(record.topic, _UNKNOWN_TABLE)).records += 1
    for dead in observed.dlq:
        report.table(_dlq_table(dead)).dlq_records += 1
    known: set[str] = set()
    for expected in files:
        known.add(expected.relpath)
        table = report.table(expected.table)
        table.files += 1
        table.finalized += expected.finalized
        table.lines += len(expected.lines)
        table.dlq_lines += len(expected.dlq)
        rejected = 0
        for line in expected.lines:
            copies = data.pop((expected.relpath, line.offset), [])
            if not copies and _rejected(dlq, expected.relpath, line.offset):
                report.add(
                    "rejected", expected.table, expected.relpath, line.offset, "refused by the broker; a reference is on the DLQ"
                )
                rejected += 1
                continue
            _check_line(report, observed, expected, line, copies)
        for entry in expected.tails:
            _check_dlq(report, expected, entry, _take_tail(dlq, expected.relpath, entry))
        for entry in expected.dlq:
            _check_dlq(report, expected, entry, dlq.pop((expected.relpath, entry.offset), []))
        _check_seals(report, expected, seals.pop(expected.relpath, []), rejected)
        if backups is not None and expected.finalized:
            _check_backup(report, expected, backups.get(expected.relpath))
    _report_leftovers(report, observed, data, dlq, seals, known, tolerate_foreign=node is not None)
    return report


# ---- data lines ---------------------------------------------------------------


def _rejected(dlq: dict[tuple[str | None, int | None], list[DlqRecord]], source: str, offset: int) -> bool:
    """True (and the DLQ record taken) when the line at ``source``/``offset`` is on the DLQ as a
    ``rejected`` reference: the broker refused it for good, so it is not on its data topic."""
    records = dlq.get((source, offset), [])
    refs = [r for r in records if r.reason == "rejected" and r.ref is not None and r.ref.get("offset") == offset]
    if not refs:
        return False
    rest = [r for r in records if r not in refs]
    if rest:
        dlq[(source, offset)] = rest
    else:
        del dlq[(source, offset)]
    return True


def _check_line(
    report: VerifyReport,
    observed: Observed,
    expected: ExpectedFile,
    line: ExpectedLine,
    copies: list[DataRecord],
) -> None:
    where = (expected.table, expected.relpath, line.offset)
    if not copies:
        report.add("lost", *where, "no message")
        return
    if len(copies) > 1:
        report.add("duplicate", *where, f"{len(copies)} copies", count=len(copies) - 1)
    found: dict[str, str] = {}
    for record in copies:
        for kind, detail in _line_differences(observed, expected, line, record):
            found.setdefault(kind, detail)
    for kind, detail in found.items():
        report.add(kind, *where, detail)
    if not found:
        report.table(expected.table).lines_ok += 1


def _line_differences(
    observed: Observed, expected: ExpectedFile, line: ExpectedLine, record: DataRecord
) -> list[tuple[str, str]]:
    out = []
    topic_table = observed.topic_tables.get(record.topic)
    if topic_table != expected.table:
        out.append(("wrong_topic", f"on {record.topic} ({topic_table})"))
    if record.key != line.key:
        out.append(("wrong_key", f"key {record.key!r}, expected {line.key!r}"))
    partitions = observed.partitions.get(record.topic)
    if partitions:
        want = partition_for(line.key, partitions)
        if record.partition != want:
            out.append(("wrong_partition", f"partition {record.partition}, expected {want} of {partitions}"))
    if record.digest != line.digest:
        out.append(("wrong_value", f"value differs from the line (message {record.partition}:{record.offset})"))
    if record.line_id != line.line_id:
        out.append(("wrong_line_id", f"line_id {record.line_id!r}, expected {line.line_id!r}"))
    return out


def _check_order(
    report: VerifyReport,
    observed: Observed,
    in_order: list[DataRecord],
    copies: dict[tuple[str | None, int | None], list[DataRecord]],
    late_from: Mapping[str, int],
) -> None:
    """Within a partition, the first copy of each line of a coin must come in (file, offset) order.

    ``in_order`` holds the records by (topic, partition, offset); ``copies`` indexes them by line,
    in that order. Later copies are re-publications (at-least-once) and are counted as duplicates,
    not here. A file's late lines (from ``late_from[relpath]`` on, appended after its first seal)
    come after later files' lines: they are only checked against each other.
    """
    file_order: dict[str, tuple[int, int] | None] = {}  # a few sources, millions of records
    last: dict[tuple[str, int, bytes | None, str | None], tuple[tuple[int, int], int, str]] = {}
    for record in in_order:
        if record.source is None or record.line_offset is None:
            continue
        if copies[record.source, record.line_offset][0] is not record:
            continue
        if record.source not in file_order:
            hour_file = HourFile.parse(record.source)
            file_order[record.source] = hour_file.sort_key if hour_file is not None else None
        sort_key = file_order[record.source]
        if sort_key is None:
            continue
        position = (sort_key, record.line_offset, record.source)
        late = late_from.get(record.source)
        slot = (
            record.topic,
            record.partition,
            record.key,
            record.source if late is not None and record.line_offset >= late else None,
        )
        previous = last.get(slot)
        if previous is not None and position < previous:
            report.add(
                "order",
                observed.topic_tables.get(record.topic, _UNKNOWN_TABLE),
                record.source,
                record.line_offset,
                f"coin {record.key!r} at {record.partition}:{record.offset} comes after {previous[2]}@{previous[1]}",
            )
        else:
            last[slot] = position


# ---- DLQ ----------------------------------------------------------------------


def _check_dlq(report: VerifyReport, expected: ExpectedFile, entry: ExpectedDlq, copies: list[DlqRecord]) -> None:
    where = (expected.table, expected.relpath, entry.offset)
    reasons = "/".join(sorted(entry.reasons))
    if not copies:
        report.add("dlq_missing", *where, f"no DLQ record (reason {reasons})")
        return
    if len(copies) > 1:
        report.add("dlq_duplicate", *where, f"{len(copies)} copies", count=len(copies) - 1)
    problems = [p for record in copies for p in _dlq_differences(expected, entry, record)]
    if problems:
        report.add("dlq_wrong", *where, "; ".join(dict.fromkeys(problems)))
    else:
        report.table(expected.table).dlq_ok += 1


def _dlq_differences(expected: ExpectedFile, entry: ExpectedDlq, record: DlqRecord) -> list[str]:
    out = []
    if record.reason not in entry.reasons:
        out.append(f"reason {record.reason!r}, expected {'/'.join(sorted(entry.reasons))}")
    if record.key != expected.table.encode():
        out.append(f"key {record.key!r}, expected {expected.table!r}")
    if entry.ref is not None:
        if record.ref != entry.ref:
            out.append(f"value {record.ref!r}, expected the reference {entry.ref!r}")
    elif record.digest != entry.digest:
        out.append("value differs from the line")
    return out


def _dlq_table(record: DlqRecord) -> str:
    hour_file = HourFile.parse(record.source) if record.source is not None else None
    if hour_file is not None:
        return hour_file.table
    key = record.key.decode(errors="replace") if record.key is not None else ""
    return key if key in TABLE_BY_DIR else _UNKNOWN_TABLE


# ---- seals and backups --------------------------------------------------------


def _index_seals(
    report: VerifyReport, records: list[SealRecord], node: str | None
) -> dict[str, list[tuple[SealRecord, dict[str, Any] | None]]]:
    """Seals by the relpath their key names; seals of other nodes dropped when ``node`` is given."""
    out: dict[str, list[tuple[SealRecord, dict[str, Any] | None]]] = {}
    for record in records:
        value = _json_object(record.value)
        if node is not None and value is not None and value.get("node") != node:
            continue
        out.setdefault(seal_relpath(record), []).append((record, value))
    return out


def seal_relpath(record: SealRecord) -> str:
    """The relpath a seal's key (``<table>|<date>|<hour>``) names, or a placeholder naming the key."""
    key = record.key.decode(errors="replace") if record.key is not None else ""
    parts = key.split("|")
    return f"{parts[0]}/hourly/{parts[1]}/{parts[2]}" if len(parts) == 3 else f"<seal key {key!r}>"


def _check_seals(
    report: VerifyReport, expected: ExpectedFile, seals: list[tuple[SealRecord, dict[str, Any] | None]], rejected: int
) -> None:
    """``rejected``: good lines of the file that the broker refused (counted as DLQ lines in its seal).

    A file has one seal per revision, 1 to n: the latest describes the file as it is, each earlier
    one a prefix of it (its size and that prefix's sha256).
    """
    where = (expected.table, expected.relpath, None)
    if not expected.finalized:
        for record, _ in seals:
            report.add(
                "seal_unexpected",
                *where,
                f"the newest file of its table is sealed ({record.partition}:{record.offset})",
            )
        return
    if not seals:
        report.add("seal_missing", *where, "no seal")
        return
    revisions = Counter(_seal_revision(value) for _, value in seals)
    repeated = sum(n - 1 for n in revisions.values())
    if repeated:
        report.add("seal_duplicate", *where, f"{len(seals)} seals for revisions {sorted(revisions.elements())}", count=repeated)
    latest = max(revisions)
    problems = []
    if sorted(revisions) != list(range(1, latest + 1)):
        problems.append(f"revisions {sorted(revisions)}, expected 1 to {latest}")
    for _, value in seals:
        if _seal_revision(value) == latest:
            problems += _seal_differences(expected, value, rejected)
        else:
            problems += _earlier_seal_differences(expected, value)
    if problems:
        report.add("seal_wrong", *where, "; ".join(dict.fromkeys(problems)))
    elif not repeated:
        report.table(expected.table).seals_ok += 1


def _seal_revision(value: dict[str, Any] | None) -> int:
    revision = value.get("revision", 1) if value is not None else 1
    return revision if type(revision) is int else 0


def _earlier_seal_differences(expected: ExpectedFile, value: dict[str, Any] | None) -> list[str]:
    """An earlier revision's seal: it must name this file and a prefix of it."""
    if value is None:
        return ["value is not a JSON object"]
    revision, size = value.get("revision"), value.get("size")
    if value.get("path") != expected.relpath:
        return [f"revision {revision} names {value.get('path')!r}"]
    if size not in expected.prefixes:
        return [f"revision {revision} has size {size!r}, which is not a prefix of the file ({expected.size} bytes)"]
    if value.get("sha256") != expected.prefixes[size]:
        return [f"revision {revision}: sha256 {value.get('sha256')!r} is not that of the file's first {size} bytes"]
    return []


def _seal_differences(expected: ExpectedFile, value: dict[str, Any] | None, rejected: int) -> list[str]:
    if value is None:
        return ["value is not a JSON object"]
    want = {
        "table": expected.table,
        "path": expected.relpath,
        "date": expected.hour_file.date,
        "hour": expected.hour_file.hour,
        "block_range": expected.block_range,
        "size": expected.size,
        "sha256": expected.sha256,
        "lines": len(expected.lines) - rejected,
        "dlq_lines": len(expected.dlq) + len(expected.tails) + rejected,
        "block_regressions": expected.block_regressions,
    }
    # Seals written before block_regressions existed count none.
    found = {name: value.get(name, 0 if name == "block_regressions" else None) for name in want}
    out = [f"{name} {found[name]!r}, expected {wanted!r}" for name, wanted in want.items() if found[name] != wanted]
    for name in ("finalized_at", "node"):
        if not isinstance(value.get(name), str):
            out.append(f"{name} missing or not a string")
    return out


def _check_backup(report: VerifyReport, expected: ExpectedFile, backup_sha256: str | None) -> None:
    where = (expected.table, expected.relpath, None)
    if backup_sha256 is None:
        report.add("backup_missing", *where, "no backup")
    elif backup_sha256 != expected.sha256:
        report.add("backup_wrong", *where, f"backup sha256 {backup_sha256}, file {expected.sha256}")
    else:
        report.table(expected.table).backups_ok += 1


# ---- what is left over ----------------------------------------------------------

_R = TypeVar("_R", DataRecord, DlqRecord)


def _take_tail(dlq: dict[tuple[str | None, int | None], list[DlqRecord]], source: str, entry: ExpectedDlq) -> list[DlqRecord]:
    """The DLQ records of an earlier revision's unterminated tail: ``unterminated`` at its start,
    with its value. Taken out of ``dlq``; the line's other records there stay (its start is also
    where the completed line, or a later tail, is)."""
    records = dlq.get((source, entry.offset), [])
    mine = [
        r
        for r in records
        if r.reason == "unterminated" and (r.ref == entry.ref if entry.ref is not None else r.digest == entry.digest)
    ]
    rest = [r for r in records if r not in mine]
    if rest:
        dlq[(source, entry.offset)] = rest
    else:
        dlq.pop((source, entry.offset), None)
    return mine


def _without(observed: Observed, ignored: set[str]) -> Observed:
    """``observed`` without the records of the ``ignored`` files (seals by their key's path)."""
    return Observed(
        data=[r for r in observed.data if r.source not in ignored],
        dlq=[r for r in observed.dlq if r.source not in ignored],
        seals=[r for r in observed.seals if seal_relpath(r) not in ignored],
        snapshots=observed.snapshots,
        topic_tables=observed.topic_tables,
        partitions=observed.partitions,
        ends=observed.ends,
    )


def _index_by_line(records: list[_R]) -> dict[tuple[str | None, int | None], list[_R]]:
    out: dict[tuple[str | None, int | None], list[_R]] = {}
    for record in records:
        out.setdefault((record.source, record.line_offset), []).append(record)
    return out


def _report_leftovers(
    report: VerifyReport,
    observed: Observed,
    data: dict[tuple[str | None, int | None], list[DataRecord]],
    dlq: dict[tuple[str | None, int | None], list[DlqRecord]],
    seals: dict[str, list[tuple[SealRecord, dict[str, Any] | None]]],
    known: set[str],
    *,
    tolerate_foreign: bool,
) -> None:
    def kind_for(source: str | None, failing: str) -> str:
        foreign = source is not None and source not in known and HourFile.parse(source) is not None
        return "foreign" if foreign and tolerate_foreign else failing

    for (source, line_offset), records in data.items():
        table = observed.topic_tables.get(records[0].topic, _UNKNOWN_TABLE)
        detail = "missing source/offset header" if source is None or line_offset is None else "no good line there"
        report.add(kind_for(source, "unexpected"), table, source, line_offset, detail, count=len(records))
    for (source, line_offset), dlq_records in dlq.items():
        detail = f"reason {dlq_records[0].reason!r}, no bad line there"
        report.add(
            kind_for(source, "dlq_unexpected"),
            _dlq_table(dlq_records[0]),
            source,
            line_offset,
            detail,
            count=len(dlq_records),
        )
    for relpath, found in seals.items():
        hour_file = HourFile.parse(relpath)
        table = hour_file.table if hour_file is not None else _UNKNOWN_TABLE
        report.add(
            kind_for(relpath, "seal_unexpected"),
            table,
            relpath,
            None,
            "seal for a file not in the tree",
            count=len(found),
        )


def _json_object(value: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def parse_reference(value: bytes) -> dict[str, Any] | None:
    """A DLQ value read as an oversize reference object, or None (raw lines are rarely JSON objects
    with exactly these fields; only small values are tried)."""
    if len(value) > 4096 or not value.startswith(b"{"):
        return None
    parsed = _json_object(value)
    if parsed is None or set(parsed) != {"source", "offset", "length", "sha256"}:
        return None
    return parsed
