"""The verifier's findings: counts per table and kind, a few examples of each problem, a verdict.

Node snapshots are not a table: their counts and problems are kept apart (``snapshots``), under the
name of their directory, ``periodic_abci_states``. The verdict is taken on the records a consumer of
one isolation level is given (``isolation``); a ``read_committed`` report also carries what a
``read_uncommitted`` reader sees (:meth:`VerifyReport.take_uncommitted`), which never fails it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hyperdata_sidecar.core.snapshots import SNAPSHOT_DIR
from hyperdata_sidecar.tools.isolation import READ_UNCOMMITTED

FAILING_KINDS: dict[str, str] = {
    "lost": "a line of a file is not on its topic",
    "wrong_topic": "a line is on another table's topic",
    "wrong_key": "message key is not the coin of events[0]",
    "wrong_partition": "partition is not murmur2(key) % partitions",
    "wrong_value": "value is not the line's bytes",
    "wrong_line_id": "line_id header missing or not <table>|<block>|<seq_in_block>[|r<epoch>][|late-<date>-<hour>]",
    "order": "a coin's lines are out of file order within its partition",
    "unexpected": "a data message matches no good line of the tree",
    "dlq_missing": "a bad line (or a line an earlier seal ended unterminated) is not in the DLQ",
    "dlq_wrong": "DLQ record with the wrong reason, key or value",
    "dlq_unexpected": "a DLQ record matches no bad line of the tree",
    "seal_missing": "a finalized file has no seal",
    "seal_wrong": "a seal does not describe its file (the latest revision) or a prefix of it (an earlier one)",
    "seal_duplicate": "a finalized file has more than one seal of one revision",
    "seal_unexpected": "a seal for a file that is not finalized or not in the tree",
    "seal_offsets": "a seal's offset range does not hold its file (first or last is not its record, or a line has no copy inside)",
    "backup_missing": "a finalized file (or complete snapshot) has no backup",
    "backup_wrong": "a backup differs from its file (sha256)",
    "snapshot_missing": "a complete node snapshot has no event",
    "snapshot_wrong": "a snapshot event does not describe its file (key, path, date, size, sha256, node, offsets, partial)",
    "snapshot_duplicate": "a snapshot height has more than one event",
    "snapshot_unexpected": "a snapshot event for a file neither in the tree nor in the backup dir",
    "snapshot_offsets": "a record lies on the wrong side of a snapshot's resume offset (duplicates aside)",
}
"""Kinds of problem that fail the verification, with what each means."""

TOLERATED_KINDS: dict[str, str] = {
    "duplicate": "a data line published more than once (fails above --allowed-duplicates)",
    "dlq_duplicate": "a bad line sent to the DLQ more than once (counts as a duplicate)",
    "foreign": "a message for a file outside this tree (other sidecars, pruned files; only with --node)",
    "rejected": "a good line the broker refused for good, on the DLQ as a reference (reason rejected)",
}

_EXAMPLES_PER_KIND = 20


@dataclass(frozen=True)
class Problem:
    """One finding: its kind, table, where (source path and byte offset, if known) and what differs."""

    kind: str
    table: str
    source: str | None
    offset: int | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "table": self.table,
            "source": self.source,
            "offset": self.offset,
            "detail": self.detail,
        }


@dataclass
class TableReport:
    """One table: what its files hold, what Kafka holds, and the problems found."""

    table: str
    files: int = 0
    finalized: int = 0
    lines: int = 0  # good lines in the files
    dlq_lines: int = 0  # bad lines in the files (incl. unterminated tails of finalized files)
    records: int = 0  # data messages on the table's topic
    dlq_records: int = 0
    lines_ok: int = 0  # good lines found, every copy correct
    dlq_ok: int = 0
    seals_ok: int = 0
    backups_ok: int = 0
    seal_ranges: int = 0  # seals carrying offset ranges, checked
    seal_ranges_ok: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def wrong(self) -> int:
        return sum(n for kind, n in self.counts.items() if kind.startswith("wrong_") or kind == "unexpected")

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "files": self.files,
            "finalized": self.finalized,
            "lines": self.lines,
            "dlq_lines": self.dlq_lines,
            "records": self.records,
            "dlq_records": self.dlq_records,
            "lines_ok": self.lines_ok,
            "dlq_ok": self.dlq_ok,
            "seals_ok": self.seals_ok,
            "backups_ok": self.backups_ok,
            "seal_ranges": self.seal_ranges,
            "seal_ranges_ok": self.seal_ranges_ok,
            "counts": dict(self.counts),
        }


@dataclass
class SnapshotReport:
    """The node snapshots: files in the tree, events on the snapshot topic, and the problems found."""

    files: int = 0
    complete: int = 0  # files owed an event: not empty, unchanged for the grace
    events: int = 0  # events (of the node checked, if one is given)
    heights_ok: int = 0  # heights with exactly one event, correct
    partial: int = 0  # events naming a table that stayed quiet
    backups_ok: int = 0
    counts: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "complete": self.complete,
            "events": self.events,
            "heights_ok": self.heights_ok,
            "partial": self.partial,
            "backups_ok": self.backups_ok,
            "counts": dict(self.counts),
        }


@dataclass
class VerifyReport:
    """Everything the verifier found. ``ok`` only when nothing failing was found and the duplicates
    (data and DLQ) are within ``allowed_duplicates``, both in the view of the ``isolation`` level.

    ``uncommitted_duplicates``: in a ``read_committed`` report, the duplicates a ``read_uncommitted``
    reader sees (records of aborted transactions published again count there); informative, it
    never fails the report. None when the topics were read ``read_uncommitted`` only.
    """

    allowed_duplicates: int = 0
    backups_checked: bool = False
    isolation: str = READ_UNCOMMITTED
    uncommitted_duplicates: int | None = None
    tables: dict[str, TableReport] = field(default_factory=dict)
    snapshots: SnapshotReport | None = None  # None: snapshot events were not checked
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _examples: Counter[str] = field(default_factory=Counter, repr=False)

    def table(self, name: str) -> TableReport:
        if name not in self.tables:
            self.tables[name] = TableReport(name)
        return self.tables[name]

    def snapshot(self) -> SnapshotReport:
        if self.snapshots is None:
            self.snapshots = SnapshotReport()
        return self.snapshots

    def add(self, kind: str, table: str, source: str | None, offset: int | None, detail: str, count: int = 1) -> None:
        """Count ``count`` problems of ``kind`` in ``table`` (``periodic_abci_states``: the snapshots),
        keeping the first few as examples."""
        if kind not in FAILING_KINDS and kind not in TOLERATED_KINDS:
            raise ValueError(f"unknown problem kind {kind!r}")
        counts = self.snapshot().counts if table == SNAPSHOT_DIR else self.table(table).counts
        counts[kind] += count
        if self._examples[kind] < _EXAMPLES_PER_KIND:
            self._examples[kind] += 1
            self.problems.append(Problem(kind, table, source, offset, detail))

    def count(self, kind: str) -> int:
        in_snapshots = self.snapshots.counts[kind] if self.snapshots is not None else 0
        return sum(t.counts[kind] for t in self.tables.values()) + in_snapshots

    @property
    def duplicates(self) -> int:
        return self.count("duplicate") + self.count("dlq_duplicate")

    @property
    def duplicates_by_isolation(self) -> dict[str, int]:
        """Duplicates per isolation level read: the verdict's level, and ``read_uncommitted`` too in a
        ``read_committed`` report."""
        out = {self.isolation: self.duplicates}
        if self.uncommitted_duplicates is not None:
            out[READ_UNCOMMITTED] = self.uncommitted_duplicates
        return out

    def take_uncommitted(self, uncommitted: VerifyReport) -> None:
        """Carry into this report what a ``read_uncommitted`` reader sees, from ``uncommitted`` (the
        same check on that reader's view): its duplicates, and as a note the failing findings it has
        beyond this report's (a seal of an aborted transaction, say). Neither changes the verdict."""
        self.uncommitted_duplicates = uncommitted.duplicates
        more = {kind: uncommitted.count(kind) - self.count(kind) for kind in FAILING_KINDS}
        listed = ", ".join(f"{n} {kind}" for kind, n in more.items() if n > 0)
        if listed:
            self.notes.append(
                f"a {uncommitted.isolation} reader also sees {listed} (not failing: the verdict reads {self.isolation})"
            )

    @property
    def failures(self) -> int:
        return sum(self.count(kind) for kind in FAILING_KINDS)

    @property
    def ok(self) -> bool:
        return self.failures == 0 and self.duplicates <= self.allowed_duplicates

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "failures": self.failures,
            "duplicates": self.duplicates,
            "allowed_duplicates": self.allowed_duplicates,
            "isolation": self.isolation,
            "duplicates_by_isolation": self.duplicates_by_isolation,
            "tables": {name: t.to_dict() for name, t in self.tables.items()},
            "snapshots": self.snapshots.to_dict() if self.snapshots is not None else None,
            "problems": [p.to_dict() for p in self.problems],
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """A human-readable table per table, examples of each problem, and the verdict line."""
        header = (
            "table",
            "files",
            "final",
            "lines",
            "kafka",
            "lost",
            "dup",
            "wrong",
            "order",
            "dlq ok",
            "seals ok",
            "backups ok",
        )
        rows = [header]
        for t in self.tables.values():
            rows.append(
                (
                    t.table.removeprefix("node_").removesuffix("_streaming"),
                    str(t.files),
                    str(t.finalized),
                    str(t.lines),
                    str(t.records),
                    str(t.counts["lost"]),
                    str(t.counts["duplicate"] + t.counts["dlq_duplicate"]),
                    str(t.wrong),
                    str(t.counts["order"]),
                    f"{t.dlq_ok}/{t.dlq_lines}",
                    f"{t.seals_ok}/{t.finalized}",
                    f"{t.backups_ok}/{t.finalized}" if self.backups_checked else "-",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        out = [
            "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
            for row in rows
        ]
        out.extend(self._position_lines())
        kinds = {**FAILING_KINDS, **TOLERATED_KINDS}
        for kind, meaning in kinds.items():
            total = self.count(kind)
            if total:
                out.append(f"{kind}: {total} ({meaning})")
                for p in self.problems:
                    if p.kind == kind:
                        where = p.source if p.source is not None else "-"
                        if p.offset is not None:
                            where += f" @{p.offset}"
                        out.append(f"  {where}: {p.detail}")
        out.extend(f"note: {note}" for note in self.notes)
        if self.uncommitted_duplicates is not None:
            out.append(f"{READ_UNCOMMITTED} view: {self.uncommitted_duplicates} duplicates (informative, not failing)")
        verdict = "OK" if self.ok else "FAILED"
        out.append(
            f"{verdict}: {self.count('lost')} lost, {self.failures} failing findings, "
            f"{self.duplicates} duplicates (allowed {self.allowed_duplicates}), {self.isolation} view"
        )
        return "\n".join(out)

    def _position_lines(self) -> list[str]:
        """The summary's lines on seal offset ranges and snapshots (none when neither was checked)."""
        out = []
        checked = sum(t.seal_ranges for t in self.tables.values())
        if checked:
            ok = sum(t.seal_ranges_ok for t in self.tables.values())
            out.append(f"seal offset ranges ok: {ok}/{checked}")
        snapshots = self.snapshots
        if snapshots is not None:
            backups = f", backups ok {snapshots.backups_ok}/{snapshots.complete}" if self.backups_checked else ""
            out.append(
                f"snapshots: {snapshots.files} files ({snapshots.complete} complete), {snapshots.events} events, "
                f"{snapshots.heights_ok} heights ok, {snapshots.partial} partial{backups}"
            )
        return out
