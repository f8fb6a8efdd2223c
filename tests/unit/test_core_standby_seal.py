"""What a stream's standby seals of its own files (core/standby_seal.py), and how such a seal is told
apart: ``standby`` in its JSON only when true, and a standby's seal is no published revision."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperdata_sidecar.core.handover import Occasion, needs_handover
from hyperdata_sidecar.core.seal import SealManifest, published_revision_of, revision_of
from hyperdata_sidecar.core.standby_seal import OnDisk, files_to_seal, first_good_block, next_standby_revision, standby_manifest

from test_core_handover import finalized  # a finalized cursor of revision N

FILLS = "node_fills_streaming"
NOW = 1_800_000_000.0


def on_disk(hour: int, modified: float = NOW - 600, size: int = 100) -> OnDisk:
    return OnDisk(f"{FILLS}/hourly/20260610/{hour}", size, modified)


def fill_line(block: int) -> bytes:
    fill = {"coin": "BTC", "px": "1", "sz": "1", "side": "B", "time": 1, "tid": block}
    event = ["0xuser", fill]
    return orjson.dumps({"local_time": "t", "block_time": "2026-06-10T22:00:00", "block_number": block, "events": [event]})


def test_the_newest_file_of_a_table_is_never_sealed_its_node_may_still_append():
    assert files_to_seal([on_disk(21)], {}, now=NOW, grace_s=2.0) == []
    assert files_to_seal([on_disk(21), on_disk(22)], {}, now=NOW, grace_s=2.0) == [on_disk(21)]


def test_a_file_that_changed_within_the_grace_waits():
    files = [on_disk(21, modified=NOW - 1.0), on_disk(22)]
    assert files_to_seal(files, {}, now=NOW, grace_s=2.0) == []
    assert files_to_seal(files, {}, now=NOW + 1.0, grace_s=2.0) == [files[0]]


def test_files_with_a_seal_recorded_or_passed_over_are_not_sealed_the_rest_oldest_first():
    files = [on_disk(19), on_disk(20), on_disk(21), on_disk(22)]
    sealed = {files[0].path: {"revision": 1, "standby": True}}
    assert files_to_seal(files, sealed, now=NOW, grace_s=2.0, passed=frozenset({files[1].path})) == [files[2]]


def test_a_file_that_grew_after_its_standby_seal_is_sealed_again_its_next_revision():
    grown, published = on_disk(20, size=150), on_disk(21, size=150)
    files = [grown, published, on_disk(22)]
    seals = {
        grown.path: {"revision": 1, "standby": True, "size": 100},
        published.path: {"revision": 1, "size": 100},  # the active's: it watches its files itself
    }
    assert files_to_seal(files, seals, now=NOW, grace_s=2.0) == [grown]
    assert next_standby_revision(seals[grown.path]) == 2 and next_standby_revision(None) == 1
    assert files_to_seal(files, seals, now=NOW, grace_s=2.0, handed={grown.path: 150}) == []  # handed at this size
    assert files_to_seal(files, seals, now=NOW, grace_s=2.0, handed={grown.path: 120}) == [grown]  # grew since
    seals[grown.path]["size"] = 150
    assert files_to_seal(files, seals, now=NOW, grace_s=2.0) == []


def test_the_block_of_the_first_good_line_is_found_past_bad_ones():
    assert first_good_block(FILLS, [b"not json", b'{"events": []}', fill_line(7), fill_line(8)]) == 7
    assert first_good_block(FILLS, [b"not json"]) is None
    assert first_good_block(FILLS, []) is None


def test_a_standbys_manifest_describes_the_whole_file_and_publishes_nothing():
    seal = standby_manifest(
        f"{FILLS}/hourly/20260610/22", size=300, sha256="ab" * 32, blocks=(7, 9), node="b", finalized_at="now"
    )
    assert (seal.table, seal.date, seal.hour, seal.block_range) == (FILLS, "20260610", "22", (7, 9))
    assert (seal.lines, seal.dlq_lines, seal.offsets, seal.revision, seal.standby) == (0, 0, None, 1, True)
    assert standby_manifest(seal.path, size=1, sha256="", blocks=(7, None), node="b", finalized_at="").block_range is None
    with pytest.raises(ValueError, match="not an hour file"):
        standby_manifest("elsewhere/x", size=1, sha256="", blocks=(None, None), node="b", finalized_at="")


@given(st.booleans())
def test_standby_is_in_the_json_only_when_true_and_reads_back(standby):
    seal = standby_manifest(
        f"{FILLS}/hourly/20260610/22", size=300, sha256="ab" * 32, blocks=(7, 9), node="b", finalized_at="now"
    )
    seal = SealManifest(**{**seal.__dict__, "standby": standby})
    assert ("standby" in orjson.loads(seal.to_json())) is standby
    assert SealManifest.from_json(seal.to_json()) == seal


def test_a_standby_field_that_is_not_a_boolean_is_refused():
    value = orjson.loads(
        standby_manifest(f"{FILLS}/hourly/20260610/22", size=1, sha256="", blocks=(1, 1), node="b", finalized_at="").to_json()
    )
    with pytest.raises(ValueError, match="standby"):
        SealManifest.from_json(orjson.dumps({**value, "standby": 1}))


def test_a_standbys_seal_is_no_published_revision_so_the_file_is_handed_over_once_finalized_here():
    standby, published = {"revision": 1, "standby": True}, {"revision": 1}
    assert (revision_of(standby), published_revision_of(standby)) == (1, 0)
    assert published_revision_of(published) == 1 and published_revision_of(None) == 0
    done = {"status": "ok", "revision": 1}
    assert needs_handover(finalized(1), standby, done, Occasion.START)
    assert not needs_handover(finalized(1), published, done, Occasion.START)
