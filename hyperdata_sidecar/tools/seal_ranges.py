"""Checking the offset ranges seals carry against the data partitions: pure, no I/O.

A seal's ``offsets`` (``{"<data topic>": {"<partition>": [first, last]}}``) gives the first and the
last Kafka offset of the file's records in each partition they went to. For each range, the
records at first and at last must be lines of the file; the seal of a file's latest revision must
also hold every line of the file: each has a copy inside the range of its partition, and no
partition that holds a line of the file is left out (see
:func:`hyperdata_sidecar.tools.positions.range_problems`). A record is a line of a file by its
``source`` header. Seals without ``offsets``, or with ``null`` (unknown: the file was partly
published by a version that did not keep them), are not checked.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.tools.positions import range_problems
from hyperdata_sidecar.tools.reconcile import DataRecord, Observed, SealRecord, seal_relpath
from hyperdata_sidecar.tools.report import VerifyReport

_UNKNOWN_TABLE = "unknown"


def check_seal_ranges(report: VerifyReport, observed: Observed, *, node: str | None = None, ignore: Collection[str] = ()) -> None:
    """Check the ``offsets`` of every seal (of ``node``, if given) that has them, into ``report``
    (``seal_offsets`` problems, ``seal_ranges`` / ``seal_ranges_ok`` per table). ``ignore``: relpaths
    of files left out of the verification."""
    seals = [(record, value) for record, value in _seals(observed.seals, node) if seal_relpath(record) not in ignore]
    with_ranges = [(record, value) for record, value in seals if value.get("offsets") is not None]
    if not with_ranges:
        return
    latest: dict[str, int] = {}
    for record, value in seals:
        latest[seal_relpath(record)] = max(latest.get(seal_relpath(record), 0), _revision(value))
    partitions = {
        key: [(r.offset, r.source, r.line_offset) for r in records] for key, records in observed.data_by_partition().items()
    }
    holding = _partitions_holding(observed.data)
    for record, value in with_ranges:
        path = seal_relpath(record)
        offsets = value["offsets"]
        whole = _revision(value) == latest[path]
        problems = _problems(path, offsets, partitions, observed.partitions, whole=whole)
        if whole and isinstance(offsets, dict):
            named = {(topic, int(p)) for topic, parts in offsets.items() if isinstance(parts, dict) for p in parts if p.isdigit()}
            left_out = sorted(holding.get(path, set()) - named)
            problems += [f"no range for {topic}[{p}], which holds lines of the file" for topic, p in left_out]
        hour_file = HourFile.parse(path)
        table = report.table(hour_file.table if hour_file is not None else _UNKNOWN_TABLE)
        table.seal_ranges += 1
        if problems:
            detail = f"revision {_revision(value)} ({record.partition}:{record.offset}): " + "; ".join(problems)
            report.add("seal_offsets", table.table, path, None, detail)
        else:
            table.seal_ranges_ok += 1


def _seals(records: list[SealRecord], node: str | None) -> list[tuple[SealRecord, dict[str, Any]]]:
    """The seals that are JSON objects (others are ``seal_wrong`` already), of ``node`` if given."""
    out = []
    for record in records:
        value = _json_object(record.value)
        if value is not None and (node is None or value.get("node") == node):
            out.append((record, value))
    return out


def _problems(
    path: str,
    offsets: Any,
    records: dict[tuple[str, int], list[tuple[int, str | None, int | None]]],
    partitions: dict[str, int],
    *,
    whole: bool,
) -> list[str]:
    if not isinstance(offsets, dict):
        return ["offsets is not an object"]
    out = []
    for topic, parts in sorted(offsets.items()):
        if not isinstance(parts, dict):
            out.append(f"offsets[{topic}] is not an object")
            continue
        for p, span in sorted(parts.items()):
            if not (p.isdigit() and int(p) < partitions.get(topic, 0)):
                out.append(f"{topic}[{p}] is not a partition of a data topic")
            elif not (isinstance(span, list) and len(span) == 2 and all(type(o) is int and o >= 0 for o in span)):
                out.append(f"{topic}[{p}] range {span!r} is not [first, last]")
            else:
                found = range_problems(path, span[0], span[1], records.get((topic, int(p)), []), every_line=whole)
                out += [f"{topic}[{p}]: {problem}" for problem in found]
    return out


def _partitions_holding(data: list[DataRecord]) -> dict[str | None, set[tuple[str, int]]]:
    """source → the (topic, partition)s that hold lines of it."""
    out: dict[str | None, set[tuple[str, int]]] = {}
    for record in data:
        out.setdefault(record.source, set()).add((record.topic, record.partition))
    return out


def _revision(value: dict[str, Any]) -> int:
    revision = value.get("revision", 1)
    return revision if type(revision) is int else 0


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None
