"""The replay tap: ragged appends, hour files in order, the corpus reproduced byte for byte."""

from __future__ import annotations

import asyncio
import datetime
import io
import math
import random
import re
from pathlib import Path

import pytest

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.snapshots import SnapshotFile
from hyperdata_sidecar.tools.generate import PRODUCTION_LINES_PER_S, generate_corpus
from hyperdata_sidecar.tools.replay import (
    BlockProgress,
    Pace,
    ReplayError,
    chunk_size,
    corpus_files,
    corpus_snapshots,
    iso_now,
    last_block,
    replay,
    rewrite_local_time,
)
from hyperdata_sidecar.tools.shapes import BOOK_DIFFS, FILLS, ORDER_STATUSES

TABLES = (BOOK_DIFFS, ORDER_STATUSES, FILLS)


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    generate_corpus(
        root,
        hours=3,
        lines_per_hour={BOOK_DIFFS: 200, ORDER_STATUSES: 250, FILLS: 20},
        lines_per_block={BOOK_DIFFS: 30, ORDER_STATUSES: 40, FILLS: 2},
        seed=3,
        start=datetime.datetime(2026, 6, 10, 23),
        bad_every=40,
    )
    return root


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


async def fast(corpus: Path, target: Path, **kwargs):
    kwargs.setdefault("chunk_bytes", 2048)
    return await replay(corpus, target, speed=math.inf, progress=False, **kwargs)


async def test_the_target_ends_byte_identical_to_the_corpus(corpus, tmp_path):
    await fast(corpus, tmp_path / "watch")

    assert files_of(tmp_path / "watch") == files_of(corpus)


async def test_every_file_grows_in_several_ragged_appends_that_split_lines(corpus, tmp_path):
    summary = await fast(corpus, tmp_path / "watch")

    for table in TABLES:
        stats = summary.tables[table]
        assert stats.files == 3
        assert stats.chunks >= 2 * stats.files
        assert stats.partial_chunks > 0
        assert stats.bytes == sum(len(d) for name, d in files_of(corpus).items() if name.startswith(table))


def test_chunk_sizes_vary_around_the_mean_and_never_cover_a_whole_file():
    rng = random.Random(1)

    sizes = [chunk_size(rng, 1000, 10**6) for _ in range(500)]
    assert min(sizes) >= 500 and max(sizes) <= 1500
    assert len(set(sizes)) > 100
    assert all(chunk_size(rng, 1000, 900) <= 450 for _ in range(50))
    assert chunk_size(rng, 1000, 1) == 1


async def test_an_hour_file_appears_only_once_the_previous_hour_is_complete(corpus, tmp_path):
    target = tmp_path / "watch"
    expected = files_of(corpus)
    order = {t: [f.relpath for f in files] for t, files in corpus_files(corpus).items()}
    observations = 0

    async def watch_tree(done: asyncio.Event) -> None:
        nonlocal observations
        while not done.is_set():
            present = files_of(target) if target.exists() else {}
            for table in TABLES:
                names = [n for n in order[table] if n in present]
                assert names == order[table][: len(names)]
                for name in names[:-1]:
                    assert present[name] == expected[name]
            observations += 1
            await asyncio.sleep(0)

    done = asyncio.Event()
    watcher = asyncio.ensure_future(watch_tree(done))
    await fast(corpus, target)
    done.set()
    await watcher
    assert observations > 10


async def test_rewriting_local_time_changes_that_value_only(corpus, tmp_path):
    before = iso_now().decode()
    await fast(corpus, tmp_path / "watch", rewrite_local_time=True)
    after = iso_now().decode()

    original, replayed = files_of(corpus), files_of(tmp_path / "watch")
    assert replayed.keys() == original.keys()
    rewritten = 0
    for name, data in original.items():
        assert len(replayed[name]) == len(data)
        for old, new in zip(data.split(b"\n"), replayed[name].split(b"\n"), strict=True):
            if old.startswith(b'{"local_time":"'):
                assert old[:15] + old[44:] == new[:15] + new[44:]
                assert before <= new[15:44].decode() <= after
                rewritten += 1
            else:
                assert old == new
    assert rewritten > 1000


def test_rewrite_keeps_lengths_and_leaves_other_lines_alone():
    lines = b"\n".join(
        [
            b'{"local_time":"2026-06-10T13:10:56.723695057","block_number":1}',
            b'{"local_time":"2026-06-10T13:10:56.7","block_number":2}',
            b"",
            b'{"block_number":3,"local_time":"2026-06-10T13:10:56.723695057"}',
            b'{"local_time":"short"}',
        ]
    )
    now = b"2030-01-02T03:04:05.123456789"

    out = rewrite_local_time(lines, now).split(b"\n")

    assert out[0] == b'{"local_time":"2030-01-02T03:04:05.123456789","block_number":1}'
    assert out[1] == b'{"local_time":"2030-01-02T03:04:05.1","block_number":2}'
    assert out[2:] == lines.split(b"\n")[2:]


async def test_replay_refuses_a_target_that_already_holds_a_corpus_file(corpus, tmp_path):
    target = tmp_path / "watch"
    (target / FILLS / "hourly/20260611/0").parent.mkdir(parents=True)
    (target / FILLS / "hourly/20260611/0").write_bytes(b"")

    with pytest.raises(ReplayError, match="already exists"):
        await fast(corpus, target)


async def test_replay_refuses_a_corpus_without_hour_files(tmp_path):
    (tmp_path / "empty" / BOOK_DIFFS / "hourly").mkdir(parents=True)

    with pytest.raises(ReplayError, match="no <table>"):
        await fast(tmp_path / "empty", tmp_path / "watch")


def test_corpus_files_are_ordered_by_date_and_hour_as_numbers(tmp_path):
    for name in ("20260610/9", "20260610/10", "20260610/23", "20260611/0", "20260610/notes.txt"):
        path = tmp_path / FILLS / "hourly" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x\n")

    files = corpus_files(tmp_path)

    assert files[FILLS] == [
        HourFile(FILLS, d, h) for d, h in (("20260610", "9"), ("20260610", "10"), ("20260610", "23"), ("20260611", "0"))
    ]
    assert files[BOOK_DIFFS] == []


def test_the_default_pace_is_the_production_line_rate():
    pace = Pace.choose(ORDER_STATUSES, None, None)

    assert (pace.unit, pace.rate) == ("lines", PRODUCTION_LINES_PER_S[ORDER_STATUSES])
    assert pace.cost(b"a\nb\nc") == 2


def test_a_line_rate_per_table_overrides_the_default_for_that_table_only():
    rates = {FILLS: 5.0}

    assert Pace.choose(FILLS, None, rates).rate == 5.0
    assert Pace.choose(BOOK_DIFFS, None, rates).rate == PRODUCTION_LINES_PER_S[BOOK_DIFFS]


def test_speed_is_a_real_time_factor_on_the_file_and_wins_over_line_rates():
    pace = Pace.choose(FILLS, 60.0, {FILLS: 5.0})

    assert pace.unit == "bytes"
    assert pace.rate_for(3600) == pytest.approx(60.0)
    assert pace.cost(b"abc\n") == 4


def test_infinite_speed_means_unthrottled_and_nonpositive_rates_are_refused():
    assert Pace.choose(FILLS, math.inf, None).unit == "max"
    with pytest.raises(ReplayError):
        Pace.choose(FILLS, 0.0, None)
    with pytest.raises(ReplayError):
        Pace.choose(FILLS, None, {FILLS: 0.0})


async def test_progress_reports_each_table_when_asked_and_nothing_otherwise(corpus, tmp_path):
    shown, quiet = io.StringIO(), io.StringIO()

    await replay(corpus, tmp_path / "a", speed=math.inf, progress=True, progress_stream=shown)
    await replay(corpus, tmp_path / "b", speed=math.inf, progress=False, progress_stream=quiet)

    final = shown.getvalue().rsplit("\r", 1)[-1]
    for short in ("raw_book_diffs", "order_statuses", "fills"):
        assert short in final
    assert final.count("ETA done") == 3
    assert quiet.getvalue() == ""


# ---- node snapshots -------------------------------------------------------------


@pytest.fixture
def snapshot_corpus(tmp_path) -> Path:
    root = tmp_path / "snapshot-corpus"
    generate_corpus(
        root,
        hours=2,
        lines_per_hour={BOOK_DIFFS: 200, ORDER_STATUSES: 250, FILLS: 20},
        lines_per_block={BOOK_DIFFS: 20, ORDER_STATUSES: 25, FILLS: 2},
        seed=5,
        start=datetime.datetime(2026, 6, 10, 23),
        bad_every=30,
        snapshot_every=4,
        snapshot_bytes=64 * 1024 + 5,
    )
    return root


def complete_lines_max_block(root: Path) -> int:
    blocks = [-1]
    for table in TABLES:
        for path in (root / table / "hourly").glob("*/*") if (root / table).exists() else []:
            complete = path.read_bytes().rpartition(b"\n")[0]
            blocks += [int(m) for m in re.findall(rb'"block_number":([0-9]+)', complete)]
    return max(blocks)


async def test_snapshots_are_replayed_byte_for_byte_in_height_order(snapshot_corpus, tmp_path):
    summary = await fast(snapshot_corpus, tmp_path / "watch")

    assert files_of(tmp_path / "watch") == files_of(snapshot_corpus)
    assert summary.snapshots == [s.relpath for s in corpus_snapshots(snapshot_corpus)]
    assert len(summary.snapshots) >= 4
    assert summary.to_dict()["snapshots"] == {"files": len(summary.snapshots), "bytes": len(summary.snapshots) * (64 * 1024 + 5)}


async def test_a_snapshot_appears_once_a_table_has_a_line_above_its_height_and_grows_in_pieces(snapshot_corpus, tmp_path):
    target = tmp_path / "watch"
    snapshots = {s.relpath: s.height for s in corpus_snapshots(snapshot_corpus)}
    seen_sizes: dict[str, set[int]] = {relpath: set() for relpath in snapshots}

    async def watch_tree(done: asyncio.Event) -> None:
        while not done.is_set():
            for relpath, height in snapshots.items():
                path = target / relpath
                if path.exists():
                    if not seen_sizes[relpath]:
                        assert complete_lines_max_block(target) > height, relpath
                    seen_sizes[relpath].add(path.stat().st_size)
            await asyncio.sleep(0)

    done = asyncio.Event()
    watcher = asyncio.ensure_future(watch_tree(done))
    await fast(snapshot_corpus, target, cadence_s=0.01)
    done.set()
    await watcher
    for relpath, sizes in seen_sizes.items():
        assert 0 < min(sizes) < 64 * 1024 + 5 == max(sizes), relpath


async def test_a_snapshot_no_table_passes_is_written_once_the_tables_are_exhausted(corpus, tmp_path):
    beyond = SnapshotFile(2_000_000_000, "20260611")
    (corpus / beyond.relpath).parent.mkdir(parents=True)
    (corpus / beyond.relpath).write_bytes(b"state" * 100)
    target = tmp_path / "watch"
    hour_files = {name: data for name, data in files_of(corpus).items() if "/hourly/" in name}
    complete_when_it_appeared = []

    async def watch_tree(done: asyncio.Event) -> None:
        while not done.is_set() and not complete_when_it_appeared:
            if (target / beyond.relpath).exists():
                present = files_of(target)
                complete_when_it_appeared.append(all(present.get(name) == data for name, data in hour_files.items()))
            await asyncio.sleep(0)

    done = asyncio.Event()
    watcher = asyncio.ensure_future(watch_tree(done))
    summary = await fast(corpus, target, cadence_s=0.01)
    done.set()
    await watcher
    assert complete_when_it_appeared == [True]
    assert summary.snapshots == [beyond.relpath]


async def test_replay_refuses_a_target_that_already_holds_a_corpus_snapshot(snapshot_corpus, tmp_path):
    relpath = corpus_snapshots(snapshot_corpus)[0].relpath
    (tmp_path / "watch" / relpath).parent.mkdir(parents=True)
    (tmp_path / "watch" / relpath).write_bytes(b"")

    with pytest.raises(ReplayError, match="already exists"):
        await fast(snapshot_corpus, tmp_path / "watch")


def test_corpus_snapshots_are_ordered_by_height_and_other_names_ignored(tmp_path):
    for name in ("20260610/900.rmp", "20260611/1000.rmp", "20260610/95.rmp", "20260610/x.rmp", "20260610/7.tmp"):
        path = tmp_path / "periodic_abci_states" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")

    assert corpus_snapshots(tmp_path) == [
        SnapshotFile(95, "20260610"),
        SnapshotFile(900, "20260610"),
        SnapshotFile(1000, "20260611"),
    ]


@pytest.mark.parametrize(
    ("chunk", "block"),
    [
        (b'{"block_number":7,"events":[]}\n{"block_number":8,"events":[]}\n{"block_number":9,"ev', 8),
        (b'ents":[]}\n{"block_number":12,"events":[]}\n', 12),
        (b'{"block_number":7}\n{"local_time":"x","block_number":\n{"block_number":', 7),
        (b'"local_time":"2026-06-10T23:00:00.0"}\n', None),
        (b'{"block_number":7,"ev', None),
        (b"", None),
    ],
)
def test_the_last_block_of_a_chunk_is_that_of_its_last_complete_line_with_a_number(chunk, block):
    assert last_block(chunk) == block


def test_a_snapshot_is_due_once_one_table_passed_its_height_or_all_are_exhausted():
    progress = BlockProgress([BOOK_DIFFS, FILLS])
    progress.appended(BOOK_DIFFS, b'{"block_number":100}\n')
    progress.appended(FILLS, b'{"block_number":101}\n')
    progress.appended(FILLS, b'{"block_number":99}\n')  # a regression does not take back what was passed

    assert progress.passed(100) and not progress.passed(101)
    progress.finished(BOOK_DIFFS)
    assert not progress.passed(101)
    progress.finished(FILLS)
    assert progress.passed(10**12)
