"""Corpora of node-shaped hour files sized in megabytes, written by the fixture generator."""

from __future__ import annotations

import datetime
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from hyperdata_sidecar.tools.generate import CorpusSummary, generate_corpus

START = datetime.datetime(2026, 6, 10, 13)
"""First hour of every benchmark corpus (a real hour of the Jun-10 recording the shapes come from)."""

_SAMPLE_LINES = 20_000


def bytes_per_line(lines_per_hour: Mapping[str, int] | None = None, seed: int = 1) -> float:
    """Mean line size, newline included, of a corpus in the production mix (or ``lines_per_hour``'s)."""
    with tempfile.TemporaryDirectory(prefix="bench-sample-") as tmp:
        sample = generate_corpus(
            Path(tmp),
            hours=1,
            lines_per_hour=dict(lines_per_hour) if lines_per_hour else _SAMPLE_LINES,
            seed=seed,
            start=START,
        )
    return sample.bytes / sample.lines


def write_backlog(out_dir: Path, *, megabytes: float, hours: int, seed: int) -> CorpusSummary:
    """About ``megabytes`` MB of lines in the production mix, spread over ``hours`` hour files per table."""
    total = int(megabytes * 1e6 / bytes_per_line(seed=seed))
    return generate_corpus(out_dir, hours=hours, lines_per_hour=max(1, total // hours), seed=seed, start=START)


def write_table_hour(
    out_dir: Path, table: str, *, megabytes: float, seed: int, start: datetime.datetime = START
) -> CorpusSummary:
    """One hour file of ``table`` holding about ``megabytes`` MB."""
    sample = {table: _SAMPLE_LINES // 4}
    lines = max(1, int(megabytes * 1e6 / bytes_per_line(sample, seed=seed)))
    return generate_corpus(out_dir, hours=1, lines_per_hour={table: lines}, seed=seed, start=start)


def link_corpus(corpus: CorpusSummary, into: Path) -> None:
    """The files of ``corpus`` in ``into`` as hard links: the same bytes for another worker, no copy."""
    for summary in corpus.files:
        target = into / summary.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(Path(corpus.root) / summary.relpath, target)
