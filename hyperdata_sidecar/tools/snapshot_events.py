"""Checking the snapshot events against the tree's snapshot files and the data partitions: pure, no I/O.

For each snapshot height (of one node, when the verifier is given one):

- one event, not more (``snapshot_duplicate``);
- it describes its file, the tree's snapshot of that height (``snapshot_wrong``): key = the
  height, ``path`` = ``periodic_abci_states/<date>/<height>.rmp``, ``date``, ``size`` and
  ``sha256``; once the node pruned the file, those of its backup copy at ``path`` (neither:
  ``snapshot_unexpected``, or ``foreign`` when a node is given, as for seals of files outside the
  tree); ``finalized_at``, ``node``, a resume offset for every partition of every data topic, and
  ``partial`` naming tables;
- its resume offsets hold against the partitions as read (``snapshot_offsets``, see
  :mod:`hyperdata_sidecar.tools.positions`; a table named in ``partial`` is checked only before
  its offsets, which were the partitions' ends at that moment);

and every complete snapshot of the tree has an event (``snapshot_missing``) and, when backups are
checked, a backup copy equal to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR, SnapshotFile
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.core.times import epoch_of
from hyperdata_sidecar.tools.positions import PartitionBlocks, block_of
from hyperdata_sidecar.tools.reconcile import Observed, SnapshotRecord
from hyperdata_sidecar.tools.report import VerifyReport
from hyperdata_sidecar.tools.snapshot_files import ExpectedSnapshot, SnapshotCopy


@dataclass(frozen=True)
class _Event:
    record: SnapshotRecord
    value: dict[str, Any] | None

    @classmethod
    def read(cls, record: SnapshotRecord) -> _Event:
        try:
            value = orjson.loads(record.value)
        except orjson.JSONDecodeError:
            value = None
        return cls(record, value if isinstance(value, dict) else None)

    @property
    def height(self) -> int | None:
        height = self.value.get("height") if self.value is not None else None
        if type(height) is int:
            return height
        key = self.record.key or b""
        return int(key) if key.isdigit() else None

    @property
    def relpath(self) -> str:
        path = self.value.get("path") if self.value is not None else None
        return path if isinstance(path, str) else f"<snapshot key {self.record.key!r}>"

    @property
    def node(self) -> Any:
        return self.value.get("node") if self.value is not None else None

    @property
    def where(self) -> str:
        return f"{self.record.partition}:{self.record.offset}"


def event_paths(records: Sequence[SnapshotRecord]) -> set[str]:
    """The snapshot paths the events name (the shell reads their backup copies when they are gone)."""
    return {event.relpath for event in map(_Event.read, records)}


class _Partitions:
    """The data partitions as read, each indexed once for the resume offsets of every event."""

    def __init__(self, observed: Observed) -> None:
        self.records = observed.data_by_partition()
        self.indexed: dict[tuple[str, int], PartitionBlocks] = {}

    def blocks(self, topic: str, partition: int) -> PartitionBlocks:
        key = (topic, partition)
        if key not in self.indexed:
            self.indexed[key] = PartitionBlocks((r.offset, block_of(r.line_id), r.line_id) for r in self.records.get(key, []))
        return self.indexed[key]


def reconcile_snapshots(
    report: VerifyReport,
    files: Sequence[ExpectedSnapshot],
    observed: Observed,
    *,
    node: str | None = None,
    backups: Mapping[str, SnapshotCopy | None] | None = None,
) -> None:
    """Check ``observed.snapshots`` against ``files`` and the data partitions of ``observed``, into
    ``report`` (its ``snapshots`` section). ``node``: only that node's events are checked (and an
    event for a file found nowhere is ``foreign``). ``backups``: relpath → the backup copy (None:
    missing), for every complete file and every path an event names that is not in the tree; None
    when backups are not checked."""
    section = report.snapshot()
    section.files += len(files)
    section.complete += sum(f.complete for f in files)
    events = [e for e in map(_Event.read, observed.snapshots) if node is None or e.node in (node, None)]
    section.events += len(events)
    groups: dict[tuple[Any, int | None], list[_Event]] = {}
    for event in events:
        groups.setdefault((event.node, event.height), []).append(event)
    check = _EventCheck(report, {f.file.height: f for f in files}, observed, backups, tolerate_foreign=node is not None)
    for (_, height), group in groups.items():
        ok = len(group) == 1
        if not ok:
            detail = f"{len(group)} events for height {height} ({', '.join(event.where for event in group)})"
            report.add("snapshot_duplicate", SNAPSHOT_DIR, group[0].relpath, None, detail, count=len(group) - 1)
        for event in group:
            ok = check.event(event) and ok
        section.heights_ok += ok
    announced = {event.height for event in events}
    for f in files:
        if f.complete and f.file.height not in announced:
            report.add("snapshot_missing", SNAPSHOT_DIR, f.relpath, None, f"no event for height {f.file.height}")
        if f.complete and backups is not None:
            _check_backup(report, f, backups.get(f.relpath))


class _EventCheck:
    """One event against its file and the partitions; every problem goes to the report."""

    def __init__(
        self,
        report: VerifyReport,
        tree: Mapping[int, ExpectedSnapshot],
        observed: Observed,
        backups: Mapping[str, SnapshotCopy | None] | None,
        *,
        tolerate_foreign: bool,
    ) -> None:
        self.report = report
        self.tree = tree
        self.observed = observed
        self.backups = backups
        self.tolerate_foreign = tolerate_foreign
        self.partitions = _Partitions(observed)

    def event(self, event: _Event) -> bool:
        """True when the event is right in every respect checked."""
        where = (SNAPSHOT_DIR, event.relpath, None)
        value, height = event.value, event.height
        if value is None or type(value.get("height")) is not int or height is None or height < 0:
            self.report.add("snapshot_wrong", *where, f"value is not a JSON object with a height ({event.where})")
            return False
        offsets, problems = _resume_offsets(value.get("offsets"), self.observed.partitions)
        partial, partial_problems = _partial(value)
        problems += _field_differences(event, height) + partial_problems
        found = self._found(event, height)
        if found is not None:
            copy, what = found
            if event.relpath != copy.relpath:
                problems.append(f"path {event.relpath!r}, the snapshot of height {height} is {copy.relpath!r}")
            for name, want in (("size", copy.size), ("sha256", copy.sha256)):
                if value.get(name) != want:
                    problems.append(f"{name} {value.get(name)!r}, {what} has {want!r}")
        else:
            kind = "foreign" if self.tolerate_foreign else "snapshot_unexpected"
            self.report.add(kind, *where, f"no such file in the tree or the backup dir ({event.where})")
        if problems:
            self.report.add("snapshot_wrong", *where, "; ".join(problems) + f" ({event.where})")
        self.report.snapshot().partial += bool(partial)
        misplaced = self._misplaced(event, height, offsets, partial)
        return found is not None and not problems and not misplaced

    def _found(self, event: _Event, height: int) -> tuple[SnapshotCopy | ExpectedSnapshot, str] | None:
        """The snapshot of the event's height in the tree, else the backup copy at the event's path."""
        if height in self.tree:
            return self.tree[height], "the file"
        named = SnapshotFile.parse(event.relpath)
        if named is None or named.height != height or self.backups is None:
            return None
        copy = self.backups.get(event.relpath)
        return (copy, "its backup copy") if copy is not None else None

    def _misplaced(self, event: _Event, height: int, offsets: Mapping[tuple[str, int], int], partial: set[str]) -> int:
        """Report the records on the wrong side of each resume offset; how many there are."""
        total = 0
        for (topic, partition), resume in sorted(offsets.items()):
            end = self.observed.ends.get((topic, partition))
            label = f"{topic}[{partition}] resumes at {resume}"
            if end is not None and resume > end:
                self.report.add("snapshot_offsets", SNAPSHOT_DIR, event.relpath, None, f"{label}, beyond its end offset {end}")
                total += 1
                continue
            quiet = self.observed.topic_tables.get(topic) in partial
            misplaced = self.partitions.blocks(topic, partition).misplaced(height, resume, partial=quiet)
            if misplaced:
                more = f" (and {len(misplaced) - 1} more)" if len(misplaced) > 1 else ""
                detail = f"{label}: {misplaced[0].describe(height)}{more}"
                self.report.add("snapshot_offsets", SNAPSHOT_DIR, event.relpath, None, detail, count=len(misplaced))
                total += len(misplaced)
        return total


def _field_differences(event: _Event, height: int) -> list[str]:
    assert event.value is not None
    value = event.value
    out = []
    if event.record.key != str(height).encode():
        out.append(f"key {event.record.key!r}, expected {str(height)!r}")
    path = value.get("path")
    parsed = SnapshotFile.parse(path) if isinstance(path, str) else None
    if parsed is None:
        out.append(f"path {path!r} is not {SNAPSHOT_DIR}/<YYYYMMDD>/<height>.rmp")
    else:
        if parsed.height != height:
            out.append(f"path {path!r} is not that of height {height}")
        if value.get("date") != parsed.date:
            out.append(f"date {value.get('date')!r}, the path has {parsed.date!r}")
    finalized_at = value.get("finalized_at")
    if not (isinstance(finalized_at, str) and finalized_at.endswith("Z") and epoch_of(finalized_at) is not None):
        out.append(f"finalized_at {finalized_at!r} is not a UTC time ending in Z")
    if not isinstance(value.get("node"), str):
        out.append("node missing or not a string")
    return out


def _resume_offsets(offsets: Any, partitions: Mapping[str, int]) -> tuple[dict[tuple[str, int], int], list[str]]:
    """The resume offsets an event names, per (topic, partition), and what is wrong with them: one
    for every partition of every data topic, each a non-negative integer under the partition's
    decimal number."""
    if not isinstance(offsets, dict):
        return {}, ["offsets missing or not an object"]
    found: dict[tuple[str, int], int] = {}
    out = [f"offsets name {topic!r}, which is not a data topic" for topic in sorted(set(offsets) - set(partitions))]
    for topic, count in sorted(partitions.items()):
        parts = offsets.get(topic)
        if not isinstance(parts, dict):
            out.append(f"offsets lack {topic}")
            continue
        if set(parts) != {str(p) for p in range(count)}:
            out.append(f"offsets[{topic}] name partitions {sorted(parts)}, expected 0 to {count - 1}")
        for p in range(count):
            resume = parts.get(str(p))
            if type(resume) is int and resume >= 0:
                found[topic, p] = resume
            elif str(p) in parts:
                out.append(f"offsets[{topic}][{p}] = {resume!r} is not an offset")
    return found, out


def _partial(value: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The tables an event names as quiet, and what is wrong with its ``partial`` (absent: none)."""
    partial = value.get("partial", [])
    names = {t for t in partial if isinstance(t, str) and t in TABLE_BY_DIR} if isinstance(partial, list) else set()
    if isinstance(partial, list) and len(names) == len(partial):
        return names, []
    return set(), [f"partial {partial!r} is not a list of distinct table dir names"]


def _check_backup(report: VerifyReport, expected: ExpectedSnapshot, copy: SnapshotCopy | None) -> None:
    where = (SNAPSHOT_DIR, expected.relpath, None)
    if copy is None:
        report.add("backup_missing", *where, "no backup")
    elif (copy.size, copy.sha256) != (expected.size, expected.sha256):
        detail = f"backup {copy.size} bytes, sha256 {copy.sha256}; file {expected.size} bytes, {expected.sha256}"
        report.add("backup_wrong", *where, detail)
    else:
        report.snapshot().backups_ok += 1
