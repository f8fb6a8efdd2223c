"""Which output the node writes, told from the directories it makes under WATCH_DIR.

hl-visor writes each table in one of three layouts, chosen by its flags:

- ``--stream-with-block-info``: ``node_fills_streaming/`` (one event per line, in the block's
  envelope) and its two siblings: what the sidecar reads;
- ``--batch-by-block``: ``node_fills_by_block/`` (one line per block, every event of the block,
  ``events: []`` rows for blocks without any);
- neither: ``node_fills/`` (the plain layout, without the block envelope).

A table whose ``_streaming`` tree is missing while one of the others exists, or whose other tree
holds a newer hour than its own (a node restarted with other flags), is written in the wrong layout,
not late: :func:`other_output` says which.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

STREAMING_SUFFIX = "_streaming"
STREAMING_FLAG = "--stream-with-block-info"

#: An hour file's place in time: its date directory (``YYYYMMDD``) and hour.
HourKey = tuple[str, int]


class OutputMode(enum.Enum):
    """An output layout hl-visor writes other than the one the sidecar reads, with its flag."""

    BY_BLOCK = "by-block"
    PLAIN = "plain"

    @property
    def flag(self) -> str:
        """What the node was started with for this layout."""
        return "--batch-by-block" if self is OutputMode.BY_BLOCK else f"no {STREAMING_FLAG}"


class OtherOutput(NamedTuple):
    """A table written in another layout: the mode and the directory found for it."""

    mode: OutputMode
    dir_name: str

    def reason(self, table: str) -> str:
        """One line for readiness and the status page: what was found and the flag to change."""
        return (
            f"the node writes {self.dir_name}/ ({self.mode.value} output, {self.mode.flag}), not {table}/: "
            f"start hl-visor with {STREAMING_FLAG}"
        )


def other_outputs(table: str) -> tuple[OtherOutput, ...]:
    """The directories the node writes ``table`` (a ``node_*_streaming`` dir name) into in the other
    layouts, the by-block one first."""
    if not table.endswith(STREAMING_SUFFIX):
        raise ValueError(f"{table!r} is not a node table's streaming directory")
    base = table.removesuffix(STREAMING_SUFFIX)
    return OtherOutput(OutputMode.BY_BLOCK, f"{base}_by_block"), OtherOutput(OutputMode.PLAIN, base)


def other_output(
    table: str, *, missing: bool, newest: HourKey | None, elsewhere: Mapping[str, HourKey | None]
) -> OtherOutput | None:
    """The other layout the node writes ``table`` in, or None.

    ``missing``: the table's own tree is not there; ``newest``: its newest hour file (None: none);
    ``elsewhere``: the other layouts' directories that exist, each with its newest hour file. The node
    writes another layout when its directory exists and the table's own tree does not, or when it
    holds a newer hour than the table's own newest.
    """
    for other in other_outputs(table):
        if other.dir_name not in elsewhere:
            continue
        theirs = elsewhere[other.dir_name]
        if missing or (theirs is not None and newest is not None and theirs > newest):
            return other
    return None
