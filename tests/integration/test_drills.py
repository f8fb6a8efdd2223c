"""The fast fault drills (1, 2, 3, 4, 6, 7, 8, 9, 12, 13, 14, 15, 15b, 15c) at CI scale, against the session's broker;
drill 1 again, 2d (three SIGKILLs during outages) and the transactions' drills (16, 17, 18) with
``DELIVERY=exactly_once``; drill 10 with ``BACKUP_SINK=object_store``, on the session's S3 server.
Drill 19 (one stream from two nodes: 19, 19b, 19c) runs in ``make drills`` only: test_stream.py
covers its takeover and its restarted standby in CI, test_stream_yield.py the yield of an active
whose node stalls.

The drills themselves live in ``drills.py`` (``scripts/drills.py`` runs all of them at full scale);
each test runs one and asserts every check it made.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import replace

import pytest

from hyperdata_sidecar.core.tables import TABLES

from drill_kit import EXACTLY_ONCE, BackupBucket, DrillContext
from drills import (
    backup_target_unwritable,
    broker_absent_at_start,
    broker_down,
    broker_frozen,
    broker_frozen_past_txn_timeout,
    deleted_before_published,
    hostile_lines,
    hostile_tree,
    local_state_lost,
    object_store_refusing,
    second_worker_same_node_id,
    sigkill_during_commit,
    sigkill_during_outage,
    sigkill_mid_tail,
    sigterm_during_catch_up,
    sigterm_while_backup_fails,
    state_disk_full,
    stream_cut_off,
    stream_failover,
    stream_stalls,
    topic_deleted,
    truncated_or_replaced,
)


@pytest.fixture
def ctx(tmp_path, kafka_bootstrap, kafka_broker, unique_topic_prefix) -> DrillContext:
    return DrillContext(kafka_bootstrap, tmp_path, unique_topic_prefix, broker=kafka_broker)


@pytest.fixture
def eos(ctx) -> DrillContext:
    """The drill's context with ``DELIVERY=exactly_once``: the verifier reads ``read_committed``."""
    return replace(ctx, delivery=EXACTLY_ONCE)


@pytest.fixture
def in_object_store(ctx, s3_server) -> DrillContext:
    """The drill's context with ``BACKUP_SINK=object_store``: its sidecars back up to a new bucket on
    the session's S3 server."""
    return replace(ctx, bucket=BackupBucket.made_on(s3_server, f"t-{uuid.uuid4().hex[:12]}"))


async def test_sigkill_three_times_mid_tail_loses_nothing_seals_once_and_duplicates_only_unpersisted_windows(ctx):
    result = await sigkill_mid_tail(ctx, kills=3)
    assert result.ok, result.describe()


@pytest.mark.parametrize("during", ["catch-up", "live"])
async def test_a_broker_outage_loses_nothing_repeats_nothing_and_keeps_every_partition_in_order(ctx, during):
    if ctx.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not stop")
    # The requirement's 5 % of a core is checked at full scale (make drills, 90 s). Over CI's 20 s it
    # measured 4.2-7.2 % on the CI machine with the same code (docs/reliability.md, drill 2): here
    # the bound catches what it guards against, a retry loop spinning (aiokafka's took a whole core).
    result = await broker_down(ctx, outage_s=20.0, during=during, lines_per_hour=20_000, cpu_bound=0.10)
    assert result.ok, result.describe()


async def test_a_sigkill_during_a_broker_outage_repeats_at_most_the_unpersisted_window(ctx):
    if ctx.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not stop")
    result = await sigkill_during_outage(ctx, outage_s=8.0, lines_per_hour=20_000)
    assert result.ok, result.describe()


async def test_sigkills_during_broker_outages_in_exactly_once_repeat_nothing_for_a_read_committed_reader(eos):
    """The issue's scenario at CI scale (drill 2d): three SIGKILLs, each into a broker outage, in one catch-up."""
    if eos.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not stop")
    result = await sigkill_during_outage(eos, outage_s=5.0, kills=3, lines_per_hour=20_000)
    assert result.ok and result.duplicates == 0, result.describe()


async def test_a_frozen_broker_loses_nothing_repeats_nothing_and_costs_the_worker_almost_no_cpu(ctx):
    if ctx.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not freeze")
    result = await broker_frozen(ctx, frozen_s=20.0, lines_per_hour=20_000)
    assert result.ok, result.describe()


async def test_a_broker_absent_at_startup_is_waited_for_with_logged_retries(ctx):
    if ctx.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not stop")
    result = await broker_absent_at_start(ctx)
    assert result.ok, result.describe()


async def test_losing_the_local_state_after_a_sigkill_resumes_from_the_changelog_with_one_window_again(ctx):
    result = await local_state_lost(ctx)
    assert result.ok, result.describe()


async def test_truncated_and_replaced_files_are_detected_counted_and_read_again_from_byte_zero(ctx):
    result = await truncated_or_replaced(ctx)
    assert result.ok, result.describe()


async def test_a_file_deleted_before_it_was_published_is_logged_counted_and_the_tailer_carries_on(ctx):
    result = await deleted_before_published(ctx)
    assert result.ok, result.describe()


async def test_hostile_lines_never_stop_the_worker_and_every_line_lands_on_its_topic_or_the_dlq(ctx):
    result = await hostile_lines(ctx)
    assert result.ok, result.describe()


async def test_a_full_then_read_only_backup_target_is_retried_while_data_and_seals_flow(ctx):
    result = await backup_target_unwritable(ctx)
    if result.skipped is not None:
        pytest.skip(f"drill 9 {result.skipped}: it mounts a small tmpfs as the backup target")
    assert result.ok, result.describe()


async def test_the_backup_target_drill_is_skipped_not_failed_without_root(tmp_path, monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = await backup_target_unwritable(DrillContext("127.0.0.1:1", tmp_path, "unused."))
    assert (result.skipped, result.outcome, result.checks) == ("needs root", "skipped: needs root", [])


async def test_an_object_store_without_its_bucket_then_refusing_writes_is_retried_while_data_and_seals_flow(ctx):
    result = await object_store_refusing(ctx)
    assert result.ok, result.describe()


async def test_sigterm_while_a_backup_keeps_failing_exits_within_the_stop_bound(ctx):
    result = await sigterm_while_backup_fails(ctx)
    assert result.ok, result.describe()


async def test_sigterm_during_a_heavy_catch_up_with_the_object_store_exits_in_time_and_every_sealed_file_is_an_object(
    in_object_store, s3_server
):
    result = await sigterm_during_catch_up(in_object_store)
    assert result.ok, result.describe()
    stored = s3_server.client().list_objects_v2(Bucket=in_object_store.bucket.name).get("Contents", [])
    assert len(stored) == len(TABLES), stored  # each table's first hour, sealed once the second began


async def test_a_hostile_tree_never_stops_or_spins_the_worker_and_every_intact_file_is_published_exactly(ctx):
    result = await hostile_tree(ctx)
    assert result.ok, result.describe()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs for STATE_PATH: needs root")
async def test_a_full_state_disk_is_counted_named_in_readiness_stops_the_tailers_and_is_survived(ctx):
    result = await state_disk_full(ctx)
    assert result.ok, result.describe()


@pytest.mark.parametrize(
    "auto_create, at_once", [(True, False), (False, False), (True, True)], ids=["auto-create-on", "auto-create-off", "at-once"]
)
async def test_a_data_topic_deleted_in_flight_and_created_again_loses_nothing_and_repeats_nothing(ctx, auto_create, at_once):
    result = await topic_deleted(ctx, auto_create=auto_create, at_once=at_once)
    assert result.ok, result.describe()


async def test_sigkills_mid_tail_in_exactly_once_lose_nothing_and_repeat_nothing_for_a_read_committed_reader(eos):
    result = await sigkill_mid_tail(eos, kills=3)
    assert result.ok, result.describe()
    assert result.duplicates == 0, result.describe()


async def test_sigkills_as_transactions_commit_lose_nothing_and_repeat_nothing_for_a_read_committed_reader(eos):
    result = await sigkill_during_commit(eos, kills=3)
    assert result.ok, result.describe()
    assert result.duplicates == 0, result.describe()


async def test_a_second_worker_with_the_same_node_id_fences_the_first_and_nothing_is_published_twice(eos):
    result = await second_worker_same_node_id(eos)
    assert result.ok, result.describe()
    assert result.duplicates == 0, result.describe()


async def test_a_broker_frozen_past_the_transaction_timeout_aborts_redoes_and_repeats_nothing(eos):
    if eos.broker is None:
        pytest.skip("HYPERDATA_TEST_BOOTSTRAP names an external broker this test may not freeze")
    # The issue's 10 s from the thaw to committing again is checked at full scale (make drills'
    # exactly_once run); here the drill reports the figure.
    result = await broker_frozen_past_txn_timeout(eos, txn_timeout_ms=5000, frozen_s=12.0)
    assert result.ok, result.describe()
    assert result.duplicates == 0, result.describe()


@pytest.mark.parametrize(
    "drill",
    [
        sigkill_during_commit,
        second_worker_same_node_id,
        broker_frozen_past_txn_timeout,
        stream_failover,
        stream_cut_off,
        stream_stalls,
    ],
)
async def test_the_transactions_drills_are_skipped_not_failed_in_at_least_once(tmp_path, drill):
    result = await drill(DrillContext("127.0.0.1:1", tmp_path, "unused."))
    assert result.outcome.startswith("skipped: exactly_once only") and result.checks == []


@pytest.mark.parametrize("drill", [backup_target_unwritable, sigterm_while_backup_fails])
async def test_the_backup_dir_drills_are_skipped_not_failed_with_the_object_store(tmp_path, drill):
    ctx = DrillContext("127.0.0.1:1", tmp_path, "unused.", bucket=BackupBucket("http://127.0.0.1:1", "unused"))
    result = await drill(ctx)
    assert result.outcome.startswith("skipped: local sink only") and result.checks == []
