"""A stream's standby seals its own finished files (standby_files.StandbyFiles) on a real tree: the
oldest finished file without a seal is hashed (over several looks when it is larger than a look's
budget) and handed to the agents as a standby seal with the file's sha256 and edge blocks, once; a file it cannot read is put aside and named; the first look after a start hands the
standby seals whose backup is not done over again."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from hyperdata_sidecar import standby_files
from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.seal import SealManifest
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.standby_files import StandbyFiles

from test_core_standby_seal import fill_line

LOGGER = "tests.standby_files"
FILLS = "node_fills_streaming"


class Rotations:
    def __init__(self) -> None:
        self.handed: list[SealManifest] = []

    async def rotate_standby(self, manifest: SealManifest) -> None:
        self.handed.append(manifest)


def write_hour(watch: Path, hour: int, blocks: range, *, tail: bytes = b"", age_s: float = 600.0) -> Path:
    path = watch / FILLS / "hourly" / "20260610" / str(hour)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(fill_line(block) + b"\n" for block in blocks) + tail)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def room(
    tmp_path: Path, seals: dict[str, Any] | None = None, backups: dict[str, Any] | None = None
) -> tuple[StandbyFiles, Rotations]:
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "node-b", "SEAL_GRACE_MS": "2000"})
    rotations = Rotations()
    files = StandbyFiles(settings, seals or {}, backups or {}, rotations, EventLog(logging.getLogger(LOGGER)))  # type: ignore[arg-type]
    return files, rotations


async def test_the_oldest_finished_file_is_handed_over_once_with_its_digest_lines_and_edge_blocks(tmp_path):
    first = write_hour(tmp_path, 21, range(100, 140), tail=b'{"partial')
    write_hour(tmp_path, 22, range(140, 150))
    files, rotations = room(tmp_path)
    for _ in range(3):
        await files.tick()
    [seal] = rotations.handed
    data = first.read_bytes()
    assert (seal.path, seal.size, seal.sha256) == (f"{FILLS}/hourly/20260610/21", len(data), hashlib.sha256(data).hexdigest())
    assert (seal.lines, seal.block_range, seal.node, seal.standby, seal.offsets) == (0, (100, 139), "node-b", True, None)


async def test_a_file_that_grows_after_its_standby_seal_is_sealed_again_with_the_next_revision(tmp_path):
    first = write_hour(tmp_path, 21, range(100, 140))
    write_hour(tmp_path, 22, range(140, 150))
    files, rotations = room(tmp_path)
    await files.tick()
    [sealed] = rotations.handed
    files.seals[sealed.path] = {**orjson.loads(sealed.to_json()), "sealed_at": "t"}  # as the seal agent records it
    await files.tick()
    assert len(rotations.handed) == 1
    with open(first, "ab") as f:  # a late append
        f.write(fill_line(140) + b"\n")
    then = time.time() - 600
    os.utime(first, (then, then))
    for _ in range(3):
        await files.tick()
    [_, again] = rotations.handed
    data = first.read_bytes()
    assert (again.revision, again.size, again.sha256) == (2, len(data), hashlib.sha256(data).hexdigest())
    assert (again.standby, again.block_range) == (True, (100, 140))


async def test_a_file_larger_than_a_looks_budget_takes_several_looks(tmp_path, monkeypatch):
    monkeypatch.setattr(standby_files, "HASH_BUDGET_BYTES", 1000)
    first = write_hour(tmp_path, 21, range(100, 140))
    write_hour(tmp_path, 22, range(140, 150))
    files, rotations = room(tmp_path)
    looks = 0
    while not rotations.handed:
        await files.tick()
        looks += 1
    assert looks == -(-first.stat().st_size // 1000)
    assert rotations.handed[0].sha256 == hashlib.sha256(first.read_bytes()).hexdigest()


async def test_files_sealed_or_still_written_are_left_alone(tmp_path):
    write_hour(tmp_path, 20, range(1, 5))
    write_hour(tmp_path, 21, range(5, 9), age_s=0.0)  # changed just now: within the grace
    write_hour(tmp_path, 22, range(9, 12))
    files, rotations = room(tmp_path, seals={f"{FILLS}/hourly/20260610/20": {"revision": 1}})
    await files.tick()
    assert rotations.handed == []


async def test_a_file_that_shrank_under_the_hash_is_put_aside_and_named(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    monkeypatch.setattr(standby_files, "HASH_BUDGET_BYTES", 100)
    first = write_hour(tmp_path, 21, range(100, 140))
    write_hour(tmp_path, 22, range(140, 150))
    files, rotations = room(tmp_path)
    await files.tick()
    first.write_bytes(b"{}\n")
    await files.tick()
    await files.tick()  # put aside: not looked at again at once
    assert rotations.handed == []
    [record] = [r for r in caplog.records if r.name == LOGGER]
    assert record.getMessage() == "standby_seal_failed" and "EOFError" in record.fields["error"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backup, handed", [(None, True), ({"status": "parked"}, True), ({"status": "ok"}, False)])
async def test_the_first_look_hands_over_the_standby_seals_whose_backup_is_not_done(tmp_path, backup, handed):
    path = f"{FILLS}/hourly/20260610/20"
    seal = SealManifest(
        table=FILLS, path=path, date="20260610", hour="20", block_range=(1, 4), size=10, sha256="ab" * 32,
        finalized_at="t", lines=4, dlq_lines=0, node="node-b", standby=True,
    )  # fmt: skip
    record = {**orjson.loads(seal.to_json()), "sealed_at": "t"}
    files, rotations = room(tmp_path, seals={path: record}, backups={path: backup} if backup else {})
    await files.tick()
    await files.tick()
    assert rotations.handed == ([seal] if handed else [])
