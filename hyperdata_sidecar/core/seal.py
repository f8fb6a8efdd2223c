"""The seal record published to ``hyperliquid.node-files`` for each finalized revision of an hour file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

OffsetRanges = dict[str, dict[str, list[int]]]
"""Where a file's records are, as seals and cursors keep it: data topic -> partition (a decimal
string, as JSON object keys are) -> [first offset, last offset]."""


def merge_ranges(known: OffsetRanges | None, topic: str, ranges: dict[int, tuple[int, int]]) -> OffsetRanges | None:
    """``known`` widened by ``ranges`` (of ``topic``); ``known`` itself is left as it was. None (not
    known: part of the file was published before offsets were kept) stays None."""
    if known is None or not ranges:
        return known
    merged = {name: dict(parts) for name, parts in known.items()}
    parts = merged.setdefault(topic, {})
    for partition, (low, high) in ranges.items():
        key = str(partition)
        old = parts.get(key)
        parts[key] = [low, high] if old is None else [min(old[0], low), max(old[1], high)]
    merged[topic] = dict(sorted(parts.items(), key=lambda item: int(item[0])))
    return merged


def revision_of(record: Mapping[str, Any] | None) -> int:
    """The file revision a seal or backup record (a ``sidecar-seals`` or ``sidecar-backups`` value)
    is about: 0 without a record, 1 for a record written before revisions existed."""
    return 0 if record is None else int(record.get("revision", 1))


def published_revision_of(seal: Mapping[str, Any] | None) -> int:
    """The revision a ``sidecar-seals`` record says was sealed *on the seal topic*: 0 for a
    standby's seal (kept in its state, never published), so the file is sealed again once this
    sidecar publishes it as its stream's active."""
    return 0 if seal is not None and seal.get("standby") is True else revision_of(seal)


@dataclass(frozen=True)
class SealManifest:
    """One finalized hour file: where it is, what it holds and its digest.

    ``path`` is relative to WATCH_DIR; ``block_range`` is (first, last) block of its good lines, or
    None if it has none; ``size`` and ``sha256`` cover the whole file; ``lines`` counts published
    lines and ``dlq_lines`` the lines sent to the DLQ; ``node`` names the node that wrote it.
    ``revision`` is 1 for a file's first seal; a file that grows after its seal gets another seal,
    revision 2 (then 3, ...), describing the whole file again. ``block_regressions`` counts its lines
    whose block is lower than the previous good line's (their ids carry a regression epoch).
    ``offsets`` says where its published lines are: per data topic and partition, the offsets of
    the first and last of them (a file's lines are the only lines of their table in that range,
    but for lines published again after a crash); None when unknown (a file partly published by a
    version that did not keep them).

    ``standby``: the seal of a file a stream's standby finished reading (STREAM_ID), which it keeps
    in its state and backs up but never publishes: ``block_range`` is its first and last good
    lines' blocks, ``lines``, ``dlq_lines`` and ``block_regressions`` are 0 (it counts none) and
    ``offsets`` None (it published nothing). Only then is it in the JSON.
    """

    table: str
    path: str
    date: str
    hour: str
    block_range: tuple[int, int] | None
    size: int
    sha256: str
    finalized_at: str
    lines: int
    dlq_lines: int
    node: str
    revision: int = 1
    block_regressions: int = 0
    offsets: OffsetRanges | None = None
    standby: bool = False

    @property
    def key(self) -> str:
        """The Kafka key of the seal record: ``<table>|<date>|<hour>``."""
        return f"{self.table}|{self.date}|{self.hour}"

    def to_json(self) -> bytes:
        """The record value: a JSON object with the fields in declaration order (``standby`` only
        when true: a published seal never is one)."""
        standby = {"standby": True} if self.standby else {}
        return orjson.dumps(
            {
                "table": self.table,
                "path": self.path,
                "date": self.date,
                "hour": self.hour,
                "block_range": list(self.block_range) if self.block_range is not None else None,
                "size": self.size,
                "sha256": self.sha256,
                "finalized_at": self.finalized_at,
                "lines": self.lines,
                "dlq_lines": self.dlq_lines,
                "node": self.node,
                "revision": self.revision,
                "block_regressions": self.block_regressions,
                "offsets": self.offsets,
                **standby,
            }
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SealManifest:
        """The manifest a ``sidecar-seals`` record keeps (its extra fields, ``sealed_at``, are
        ignored). Raises ValueError as :meth:`from_json` does."""
        return cls.from_json(orjson.dumps(dict(record)))

    @classmethod
    def from_json(cls, data: bytes) -> SealManifest:
        """Parse a record value written by :meth:`to_json`.

        Raises ValueError (naming the field) if ``data`` is not such an object; unknown fields are
        ignored, and seals written before ``revision`` and ``block_regressions`` existed read as
        revision 1 with no regressions.
        """
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"seal manifest is not JSON: {exc}") from exc
        if type(obj) is not dict:
            raise ValueError("seal manifest is not a JSON object")
        return cls(
            table=_field(obj, "table", str),
            path=_field(obj, "path", str),
            date=_field(obj, "date", str),
            hour=_field(obj, "hour", str),
            block_range=_block_range(obj),
            size=_field(obj, "size", int),
            sha256=_field(obj, "sha256", str),
            finalized_at=_field(obj, "finalized_at", str),
            lines=_field(obj, "lines", int),
            dlq_lines=_field(obj, "dlq_lines", int),
            node=_field(obj, "node", str),
            revision=_field(obj, "revision", int) if "revision" in obj else 1,
            block_regressions=_field(obj, "block_regressions", int) if "block_regressions" in obj else 0,
            offsets=_offsets(obj),
            standby=_field(obj, "standby", bool) if "standby" in obj else False,
        )


def _field(obj: dict[str, Any], name: str, kind: type) -> Any:
    if name not in obj:
        raise ValueError(f"seal manifest has no {name!r}")
    value = obj[name]
    # type() and not isinstance(): a JSON boolean is not a count.
    if type(value) is not kind:
        raise ValueError(f"seal manifest {name!r} is {type(value).__name__}, expected {kind.__name__}")
    return value


def _block_range(obj: dict[str, Any]) -> tuple[int, int] | None:
    if "block_range" not in obj:
        raise ValueError("seal manifest has no 'block_range'")
    value = obj["block_range"]
    if value is None:
        return None
    if type(value) is not list or len(value) != 2 or any(type(b) is not int for b in value):
        raise ValueError(f"seal manifest 'block_range' is not [first, last] integers: {value!r}")
    return value[0], value[1]


def _offsets(obj: dict[str, Any]) -> OffsetRanges | None:
    value = obj.get("offsets")
    if value is None:
        return None
    if type(value) is not dict or not all(
        type(parts) is dict
        and all(
            type(partition) is str
            and partition.isdigit()
            and type(pair) is list
            and len(pair) == 2
            and all(type(o) is int for o in pair)
            for partition, pair in parts.items()
        )
        for parts in value.values()
    ):
        raise ValueError(f"seal manifest 'offsets' is not {{topic: {{partition: [first, last]}}}}: {value!r}")
    return value
