"""The state writer: a table write the store refuses is counted, logged, named in readiness and
retried until the store takes it; nothing is dropped."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateWriter

ENOSPC = "IO error: No space left on device: While appending to file: /state/000004.log: No space left on device"


class FullDiskTable(dict[str, Any]):
    """A table whose store refuses its next ``refusals`` writes the way rocksdict does (a bare Exception)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals
        self.reopened = 0

    def _maybe_refuse(self) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise Exception(ENOSPC)

    def __setitem__(self, key: str, value: Any) -> None:
        self._maybe_refuse()
        super().__setitem__(key, value)

    def pop(self, key: str, default: Any = None) -> Any:
        self._maybe_refuse()
        return super().pop(key, default)


class Shell:
    """The pause and reopen the writer gets from the worker; records what it was asked."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.pauses: list[float] = []
        self.stop_after = stop_after

    async def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        return self.stop_after is None or len(self.pauses) < self.stop_after

    def reopen(self, table: Any) -> None:
        table.reopened += 1


def failures(metrics: SidecarMetrics) -> float:
    return metrics.registry.get_sample_value("hyperdata_sidecar_state_persist_failures_total") or 0.0


def make_writer(shell: Shell, metrics: SidecarMetrics) -> StateWriter:
    return StateWriter(metrics, EventLog(logging.getLogger("tests.state")), "/state", shell.pause, shell.reopen)


async def test_a_refused_write_is_retried_until_the_store_takes_it(caplog):
    table, shell, metrics = FullDiskTable(refusals=3), Shell(), SidecarMetrics()
    writer = make_writer(shell, metrics)
    with caplog.at_level(logging.INFO, logger="tests.state"):
        assert await writer.put(table, "a/b", {"offset": 7}) is True
    assert table == {"a/b": {"offset": 7}}
    assert failures(metrics) == 3
    assert shell.pauses == [0.5, 1.0, 2.0]  # the back-off doubles between tries
    assert table.reopened == 3  # the store is brought out of its error state before each try
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("state_write_failed") == 1  # rate-limited
    [again] = [r for r in caplog.records if r.getMessage() == "state_writable_again"]
    assert again.fields["refused_writes"] == 3


async def test_readiness_names_the_state_dir_while_writes_fail_and_clears_once_one_is_taken():
    table, metrics = FullDiskTable(refusals=2), SidecarMetrics()
    seen: list[str | None] = []

    async def pause(seconds: float) -> bool:
        seen.append(writer.problem)
        return True

    writer = StateWriter(metrics, EventLog(logging.getLogger("tests.state")), "/state", pause, lambda table: None)
    assert writer.problem is None
    await writer.put(table, "k", 1)
    assert seen == [f"STATE_PATH /state: {ENOSPC}"] * 2
    assert writer.problem is None


async def test_a_pop_the_store_refuses_is_retried_too():
    table, shell, metrics = FullDiskTable(refusals=0), Shell(), SidecarMetrics()
    table["gone"] = 1
    table.refusals = 1
    assert await make_writer(shell, metrics).pop(table, "gone") is True
    assert "gone" not in table and failures(metrics) == 1


async def test_a_worker_stopping_leaves_the_write_undone_and_says_so(caplog):
    table, shell, metrics = FullDiskTable(refusals=10), Shell(stop_after=2), SidecarMetrics()
    writer = make_writer(shell, metrics)
    with caplog.at_level(logging.INFO, logger="tests.state"):
        assert await writer.put(table, "k", 1) is False
    assert table == {} and failures(metrics) == 2
    assert "state_write_abandoned" in [r.getMessage() for r in caplog.records]
    assert writer.problem is not None


async def test_an_error_that_is_not_a_refusal_is_raised_not_retried():
    class Broken(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            raise KeyError(key)

    shell, metrics = Shell(), SidecarMetrics()
    with pytest.raises(KeyError):
        await make_writer(shell, metrics).put(Broken(), "k", 1)
    assert shell.pauses == [] and failures(metrics) == 0


async def test_while_the_store_cannot_be_reopened_the_write_waits_and_readiness_names_the_reopen_error():
    table, metrics = FullDiskTable(refusals=1), SidecarMetrics()
    reopens: list[str | None] = []

    def reopen(_: Any) -> None:
        reopens.append(writer.problem)
        if len(reopens) <= 2:
            raise Exception("IO error: No space left on device: While appending to file: /state/000009.sst")

    async def pause(seconds: float) -> bool:
        return True

    writer = StateWriter(metrics, EventLog(logging.getLogger("tests.state")), "/state", pause, reopen)
    assert await writer.put(table, "k", 1) is True
    assert table == {"k": 1} and failures(metrics) == 1  # no write is tried on a store that did not reopen
    assert reopens == [
        f"STATE_PATH /state: {ENOSPC}",
        "STATE_PATH /state: IO error: No space left on device: While appending to file: /state/000009.sst",
        "STATE_PATH /state: IO error: No space left on device: While appending to file: /state/000009.sst",
    ]
