"""The data plane's transactions (exactly_once) without a broker: a producer that records the calls
librdkafka would get and fails them as scripted, and a clock the test moves."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.txn import TxnBudget, TxnPhase
from hyperdata_sidecar.engines import TxnError
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.transactions import (
    ABORT_CALL_TIMEOUT_S,
    CALL_TIMEOUT_S,
    ProducerFenced,
    TransactionAborted,
    Transactions,
)

LOGGER = "tests.transactions"
TIMED_OUT = TxnError("_TIMED_OUT", "the coordinator did not answer", fatal=False, retriable=True, requires_abort=False)
ABORTABLE = TxnError("_MSG_TIMED_OUT", "a record was not delivered", fatal=False, retriable=False, requires_abort=True)
FENCED = TxnError("_FENCED", "fenced by a newer instance", fatal=True, retriable=False, requires_abort=False)


class Failure(Exception):
    """What the fake producer raises: args[0] is the TxnError."""


class Producer:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, list[TxnError]] = {}
        self.timeouts: dict[str, list[float]] = {}  # each try's timeout, per call

    def _call(self, name: str, timeout: float | None = None) -> None:
        self.calls.append(name)
        if timeout is not None:
            self.timeouts.setdefault(name, []).append(timeout)
        failures = self.fail.get(name)
        if failures:
            raise Failure(failures.pop(0))

    def init_transactions(self, timeout: float) -> None:
        self._call("init", timeout)

    def begin_transaction(self) -> None:
        self._call("begin")

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit", timeout)

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort", timeout)


class Engine:
    @staticmethod
    def txn_error(exc: BaseException) -> TxnError | None:
        return exc.args[0] if isinstance(exc, Failure) else None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(delivery: str = "exactly_once", *, shared: bool = False) -> tuple[Transactions, Clock, list[str], list[str]]:
    settings = load_settings({"DELIVERY": delivery, "TXN_MAX_MS": "100", "TXN_MAX_BYTES": "1000", "NODE_ID": "n"})
    clock, aborts, fenced = Clock(), [], []
    txn = Transactions(
        settings,
        Engine(),  # type: ignore[arg-type]
        SidecarMetrics(),
        EventLog(logging.getLogger(LOGGER)),
        transactional_id="app-sidecar",
        on_abort=aborts.append,
        on_fenced=fenced.append,
        clock=clock,
        shared=shared,
    )
    return txn, clock, aborts, fenced


async def started(txn: Transactions) -> Producer:
    producer = Producer()
    await txn.start(producer, spin)  # type: ignore[arg-type]
    return producer


async def spin() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def eventually(condition: Any) -> None:
    """Wait (at most 2 s) for ``condition()``: the calls run in worker threads."""
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def test_budget_due_by_age_or_size_and_only_with_writes() -> None:
    budget = TxnBudget(max_s=0.25, max_bytes=100)
    budget.opened(10.0)
    assert not budget.due(99.0)  # nothing written: never due
    budget.took(10)
    assert not budget.due(10.1) and budget.due(10.25)
    budget.took(90)
    assert budget.due(10.0)
    assert budget.wait_s(10.1) == pytest.approx(0.15)
    budget.opened(20.0)
    assert (budget.bytes, budget.writes) == (0, 0)


async def test_at_least_once_lets_everything_through_and_never_commits() -> None:
    txn, *_ = make("at_least_once")
    assert txn.config() == {}
    await txn.start(Producer(), spin)  # type: ignore[arg-type]
    assert await txn.admit(10) == 0
    await txn.open_for_read()
    txn.enter_read(10)
    txn.leave_read()
    await txn.committed_through(5)
    await txn.run(lambda: False)  # returns at once
    assert txn.phase is TxnPhase.OFF


async def test_config_bounds_message_timeout_by_the_transaction_timeout() -> None:
    txn, *_ = make()
    assert txn.config() == {"transactional.id": "app-sidecar", "transaction.timeout.ms": 60000, "message.timeout.ms": 60000}


async def test_a_due_transaction_commits_once_the_tables_are_quiet_and_the_next_begins() -> None:
    txn, clock, *_ = make()
    producer = await started(txn)
    assert producer.calls == ["init", "begin"] and txn.phase is TxnPhase.OPEN and txn.number == 1
    busy = True
    txn.quiet = lambda: not busy
    await txn.open_for_read()
    txn.enter_read(10)
    txn.leave_read()
    clock.now += 0.2
    closing = asyncio.ensure_future(txn.close())
    await spin()
    assert txn.phase is TxnPhase.CLOSING and "commit" not in producer.calls
    number = await txn.admit(5)  # a progress record still goes in while the tables settle
    assert number == 1
    reading = asyncio.ensure_future(txn.open_for_read())  # a new read waits
    await spin()
    assert not reading.done()
    busy = False
    txn.settled()
    await closing
    assert producer.calls == ["init", "begin", "commit", "begin"]
    assert (txn.committed, txn.number, txn.phase) == (1, 2, TxnPhase.OPEN)
    await reading


async def test_writes_wait_while_the_commit_runs() -> None:
    txn, *_ = make()
    producer = await started(txn)
    release = asyncio.Event()
    entered = asyncio.Event()

    def slow_commit(_timeout: float) -> None:
        producer.calls.append("commit")
        entered.set()
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()

    loop = asyncio.get_running_loop()
    producer.commit_transaction = slow_commit  # type: ignore[method-assign]
    await txn.admit(1)
    closing = asyncio.ensure_future(txn.close())
    await entered.wait()
    assert txn.phase is TxnPhase.COMMITTING
    admitted = asyncio.ensure_future(txn.admit(1))
    await spin()
    assert not admitted.done()
    release.set()
    await closing
    assert await admitted == 2


async def test_a_commit_that_times_out_is_tried_again_and_named_meanwhile() -> None:
    txn, *_ = make()
    producer = await started(txn)
    producer.fail["commit"] = [TIMED_OUT, TIMED_OUT]
    await txn.admit(1)
    await txn.close()
    assert producer.calls.count("commit") == 3 and txn.committed == 1
    assert txn.waiting_for is None and txn.not_ready_reason() is None


async def test_an_abort_is_tried_in_short_tries_until_it_ends_a_commit_in_long_ones() -> None:
    """librdkafka puts records back for a retry after an abort's purge (the requests that failed
    out of sequence behind a timed-out record): a try then waits for them until its timeout, and the
    next try purges them. Short tries end such an abort in about a second, not CALL_TIMEOUT_S."""
    txn, _clock, aborts, _ = make()
    producer = await started(txn)
    producer.fail["commit"] = [TIMED_OUT]
    await txn.admit(1)
    await txn.close()
    producer.fail["abort"] = [TIMED_OUT, TIMED_OUT]
    await txn.admit(1)
    txn.record_failed("a record was not delivered: OUT_OF_ORDER_SEQUENCE_NUMBER")
    await txn.close()
    assert producer.timeouts["commit"] == [CALL_TIMEOUT_S, CALL_TIMEOUT_S]
    assert producer.timeouts["abort"] == [ABORT_CALL_TIMEOUT_S] * 3 and ABORT_CALL_TIMEOUT_S < CALL_TIMEOUT_S
    assert aborts == ["a record was not delivered: OUT_OF_ORDER_SEQUENCE_NUMBER"]


async def test_an_abortable_commit_error_aborts_and_the_writers_are_told_until_the_reads_are_redone() -> None:
    txn, _clock, aborts, _ = make()
    producer = await started(txn)
    producer.fail["commit"] = [ABORTABLE]
    await txn.admit(1)
    sealed = asyncio.ensure_future(txn.committed_through(1))
    await txn.close()
    assert producer.calls[-2:] == ["commit", "abort"]
    assert txn.phase is TxnPhase.ABORTED and aborts == ["_MSG_TIMED_OUT: a record was not delivered"]
    with pytest.raises(TransactionAborted):
        await sealed
    with pytest.raises(TransactionAborted):
        await txn.admit(1)
    with pytest.raises(TransactionAborted):
        await txn.open_for_read()
    with pytest.raises(TransactionAborted):
        txn.enter_read(1)
    assert "redoing the reads" in (txn.not_ready_reason() or "")
    txn.resume()
    assert txn.phase is TxnPhase.OPEN and txn.number == 2 and producer.calls[-1] == "begin"
    assert await txn.admit(1) == 2
    await txn.close()
    assert txn.committed == 2
    with pytest.raises(TransactionAborted):  # asked late, after a later one committed: still aborted
        await txn.committed_through(1)
    await txn.committed_through(2)


async def test_an_abort_asks_the_broker_for_the_topics_before_the_reads_are_redone() -> None:
    """A transaction failed because its topic was deleted: the redo must find the topic refused
    (its table holds), not fail again at its first record."""
    txn, _clock, aborts, _ = make()
    producer = Producer()
    order: list[str] = []

    async def recheck() -> None:
        order.append(f"recheck, {len(aborts)} redo(s) asked")

    await txn.start(producer, spin, None, recheck)  # type: ignore[arg-type]
    await txn.admit(1)
    txn.record_failed("UNKNOWN_TOPIC_OR_PART: the topic was deleted")
    await txn.close()
    assert order == ["recheck, 0 redo(s) asked"] and aborts == ["UNKNOWN_TOPIC_OR_PART: the topic was deleted"]


async def test_a_close_that_waits_long_for_the_tables_asks_the_broker_for_the_topics_every_period() -> None:
    """A topic replaced by a copy under the producer keeps its records unreported for a while: the
    look at the topics finds it (and aborts, as the data plane's refusal does), the close ends."""
    txn, clock, aborts, _ = make()
    producer = Producer()
    quiet = [False]
    txn.quiet = lambda: quiet[0]
    looks: list[float] = []

    async def recheck() -> None:
        looks.append(clock.now)
        if len(looks) == 2:
            txn.record_failed("orders may not be written: PARTITION_COUNT")

    await txn.start(producer, spin, None, recheck)  # type: ignore[arg-type]
    await txn.admit(1)
    closing = asyncio.ensure_future(txn.close())
    await spin()
    assert not looks
    clock.now += 4.9
    await asyncio.sleep(0.1)
    assert not looks
    clock.now += 0.2
    await eventually(lambda: len(looks) == 1)
    clock.now += 5.0
    await closing
    assert [round(t, 1) for t in looks] == [105.1, 110.1, 110.1]  # twice in the close, once at the abort
    assert aborts == ["orders may not be written: PARTITION_COUNT"] and "commit" not in producer.calls


async def test_a_failed_record_aborts_without_a_commit_once_the_reads_in_flight_end() -> None:
    txn, _clock, aborts, _ = make()
    producer = await started(txn)
    txn.enter_read(10)
    txn.record_failed("a record was not delivered: MSG_SIZE_TOO_LARGE")
    runner = asyncio.ensure_future(txn.run(lambda: False))
    await spin()
    assert "abort" not in producer.calls  # a hand-over is still producing
    txn.leave_read()
    await eventually(lambda: aborts)
    assert "commit" not in producer.calls and producer.calls[-1] == "abort"
    assert aborts == ["a record was not delivered: MSG_SIZE_TOO_LARGE"]
    runner.cancel()


async def test_fenced_stops_the_worker_and_nothing_more_is_written(caplog: pytest.LogCaptureFixture) -> None:
    txn, _clock, _aborts, fenced = make()
    producer = await started(txn)
    producer.fail["commit"] = [FENCED]
    await txn.admit(1)
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(ProducerFenced):
        await txn.close()
    assert txn.phase is TxnPhase.FENCED and fenced == ["_FENCED: fenced by a newer instance"]
    [record] = [r for r in caplog.records if r.getMessage() == "producer_fenced"]
    assert "same NODE_ID" in record.fields["meaning"] and record.fields["transactional_id"] == "app-sidecar"  # type: ignore[attr-defined]
    with pytest.raises(ProducerFenced):
        await txn.admit(1)
    assert "fenced" in (txn.not_ready_reason() or "")


async def test_the_loop_commits_by_age_and_stop_commits_the_rest() -> None:
    txn, clock, *_ = make()
    producer = await started(txn)
    stop = False
    runner = asyncio.ensure_future(txn.run(lambda: stop))
    await txn.admit(1)
    await spin()
    assert "commit" not in producer.calls  # young and small
    clock.now += 0.2
    txn.settled()
    await eventually(lambda: producer.calls.count("commit") == 1)
    stop = True
    txn.settled()
    await runner
    await txn.admit(1)
    await txn.finish()
    assert producer.calls.count("commit") == 2
    await txn.finish()  # nothing written since: no empty commit
    assert producer.calls.count("commit") == 2


async def test_init_failure_is_raised_for_the_connect_to_retry() -> None:
    txn, *_ = make()
    producer = Producer()
    producer.fail["init"] = [TIMED_OUT]
    with pytest.raises(Failure):
        await txn.start(producer, spin)  # type: ignore[arg-type]
    assert txn.phase is TxnPhase.OFF


INVALID_STATE = TxnError("INVALID_TXN_STATE", "Failed to end transaction", fatal=True, retriable=False, requires_abort=False)


@pytest.mark.parametrize(
    ("error", "age_s"),
    [(INVALID_STATE, 0.0), (FENCED, 61.0)],
    ids=["another fatal error", "fenced after the transaction timeout"],
)
async def test_a_fatal_error_that_is_not_a_newer_worker_gets_a_new_producer_and_the_reads_redone(
    error: TxnError, age_s: float, caplog: pytest.LogCaptureFixture
) -> None:
    txn, clock, aborts, fenced = make()
    old, new = Producer(), Producer()

    async def renew() -> Producer:
        new.calls.append("init")
        return new

    await txn.start(old, spin, renew)  # type: ignore[arg-type]
    old.fail["commit"] = [error]
    await txn.admit(1)
    clock.now += age_s
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await txn.close()
    assert old.calls == ["init", "begin", "commit"]  # the dead producer is not asked to abort
    assert txn.phase is TxnPhase.ABORTED and aborts and not fenced
    assert [r.fields["error"] for r in caplog.records if r.getMessage() == "producer_renewed"] == [error.name]  # type: ignore[attr-defined]
    txn.resume()
    assert new.calls == ["init", "begin"] and txn.phase is TxnPhase.OPEN


@pytest.mark.parametrize(
    ("error", "age_s"),
    [(INVALID_STATE, 0.0), (FENCED, 61.0)],
    ids=["another fatal error", "fenced after the transaction timeout"],
)
async def test_a_stream_s_sidecar_never_makes_a_new_producer_it_stops(
    error: TxnError, age_s: float, caplog: pytest.LogCaptureFixture
) -> None:
    """STREAM_ID: its init_transactions would fence the stream's newer active (a frozen former active
    cannot tell the broker's abort from the successor's fence)."""
    txn, clock, aborts, fenced = make(shared=True)
    renewed: list[str] = []

    async def renew() -> Producer:
        renewed.append("init")
        return Producer()

    old = Producer()
    await txn.start(old, spin, renew)  # type: ignore[arg-type]
    old.fail["commit"] = [error]
    await txn.admit(1)
    clock.now += age_s
    with caplog.at_level(logging.ERROR, logger=LOGGER), pytest.raises(ProducerFenced):
        await txn.close()
    assert renewed == [] and txn.phase is TxnPhase.FENCED and fenced and not aborts
    [record] = [r for r in caplog.records if r.getMessage() == "producer_fenced"]
    assert "another sidecar of the stream took it over" in record.fields["meaning"]  # type: ignore[attr-defined]
