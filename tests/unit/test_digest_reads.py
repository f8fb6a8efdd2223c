"""The two ways an hour file is read and hashed (hyperdata_sidecar/digest.py): Python's reads and
the compiled engine's, which must give the same bytes, the same digest and the same errors."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperdata_sidecar.digest import PYTHON_READS, ChunkReads
from hyperdata_sidecar.engines.native import NativeReads


@pytest.fixture(params=["python", "native"])
def reads(request: pytest.FixtureRequest) -> ChunkReads:
    if request.param == "python":
        return PYTHON_READS
    return NativeReads(request.getfixturevalue("native"))


def as_bytes(chunk: Any) -> bytes:
    return chunk if isinstance(chunk, bytes) else chunk.to_bytes()


# The fixture is the engine's module, the same for every example.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=700_000), cuts=st.lists(st.integers(min_value=1, max_value=300_000), max_size=6))
def test_reads_in_any_pieces_give_the_files_bytes_and_its_sha256(native: Any, tmp_path_factory, data: bytes, cuts: list[int]):
    path = tmp_path_factory.mktemp("reads") / "0"
    path.write_bytes(data)
    for reads in (PYTHON_READS, NativeReads(native)):
        digest = reads.digest()
        position, got = 0, b""
        for length in [*cuts, len(data) + 1]:
            chunk = reads.read(path, position, length, digest)
            got += as_bytes(chunk)
            position += len(chunk)
        assert got == data
        assert (digest.upto, digest.hexdigest()) == (len(data), hashlib.sha256(data).hexdigest())


def test_a_read_that_does_not_start_where_the_digest_stands_is_not_hashed(reads: ChunkReads, tmp_path: Path):
    path = tmp_path / "0"
    path.write_bytes(b"0123456789")
    digest = reads.digest()
    assert as_bytes(reads.read(path, 4, 3, digest)) == b"456"
    assert (digest.upto, digest.hexdigest()) == (0, hashlib.sha256().hexdigest())
    reads.read(path, 0, 4, digest)
    assert (digest.upto, digest.hexdigest()) == (4, hashlib.sha256(b"0123").hexdigest())


def test_a_read_past_the_end_is_empty(reads: ChunkReads, tmp_path: Path):
    path = tmp_path / "0"
    path.write_bytes(b"abc")
    digest = reads.digest()
    assert len(reads.read(path, 3, 100, digest)) == 0
    assert digest.upto == 0


def test_the_engines_digest_catches_up_from_disk_like_hashlibs(native: Any, tmp_path: Path):
    path = tmp_path / "0"
    path.write_bytes(os.urandom(50_000))
    digest = NativeReads(native).digest()
    digest.catch_up(path, 30_000)
    NativeReads(native).read(path, 30_000, 100_000, digest)
    assert digest.hexdigest() == hashlib.sha256(path.read_bytes()).hexdigest()


def _errors(reads: ChunkReads, path: Path) -> tuple[type, int | None]:
    with pytest.raises(OSError) as raised:
        reads.read(path, 0, 10, reads.digest())
    return type(raised.value), raised.value.errno


def test_what_is_not_a_regular_file_is_refused_with_the_same_error_by_both(native: Any, tmp_path: Path):
    target = tmp_path / "target"
    target.write_bytes(b"line\n")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "dir").mkdir()
    cases = {"missing": errno.ENOENT, "link": errno.ELOOP, "pipe": errno.EINVAL, "dir": errno.EINVAL}
    for name, expected in cases.items():
        python = _errors(PYTHON_READS, tmp_path / name)
        assert python == _errors(NativeReads(native), tmp_path / name), name
        assert python[1] == expected, name
    assert _errors(NativeReads(native), tmp_path / "missing")[0] is FileNotFoundError
