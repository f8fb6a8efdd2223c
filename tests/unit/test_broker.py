"""The worker's link to the broker: its state as the data plane reports it (the gauge, one line per
change, the not-ready reason), one line per failed look at the broker (a refused login named as such,
never with the password; a hint at the security protocol), and the start-up wait and the connect,
each retried with a back-off until it works or the worker stops. The broker calls (the login, the
topic contract) are monkeypatched; a fake data plane and a recording shutdown stand in for the rooms."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from hyperdata_sidecar import broker, broker_login
from hyperdata_sidecar.broker import BrokerLink
from hyperdata_sidecar.broker_login import LoginRefused
from hyperdata_sidecar.config import Settings, load_settings
from hyperdata_sidecar.dataplane import DataPlaneError
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.shutdown import Shutdown

LOGGER = "tests.broker"
BOOTSTRAP = "k1:9092,k2:9092"
PASSWORD = "hunter2-secret"
SASL = {
    "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "KAFKA_SASL_USERNAME": "sidecar",
    "KAFKA_SASL_PASSWORD": PASSWORD,
}


class Stop:
    """The worker's shutdown: records each pause; the worker stops at pause number ``stop_at``."""

    def __init__(self, stop_at: int | None = None, seen: Any = None) -> None:
        self.pauses: list[float] = []
        self.stop_at = stop_at
        self.stopping = False
        self.seen = seen  # called at each pause (what the link says meanwhile)
        self.said: list[Any] = []

    async def pause(self, seconds: float) -> bool:
        self.pauses.append(seconds)
        if self.seen is not None:
            self.said.append(self.seen())
        if self.stop_at is not None and len(self.pauses) >= self.stop_at:
            self.stopping = True
        return not self.stopping


class DataPlane:
    """The data plane: its connect fails with each of ``failures`` in turn, then works."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.connected_with: list[list[str]] = []

    async def connect(self, topics: list[str]) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.connected_with.append(topics)


class Broker:
    """The broker's answers to the login (``broker_login.bootstrap``) and the topic contract
    (``apply_contract``): each call takes the next failure of its list, or works. With ``stop``, a
    failed login also sets the worker's stop flag (the stop comes while the login fails)."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        *logins: Exception,
        contract: list[Exception] | None = None,
        stop: list[bool] | None = None,
    ) -> None:
        self.logins = list(logins)
        self.contract = list(contract or [])
        self.stop = stop
        self.bootstraps: list[tuple[str, Any]] = []
        self.applied: list[dict[str, Any]] = []
        monkeypatch.setattr(broker_login, "bootstrap", self.bootstrap)
        monkeypatch.setattr(broker, "apply_contract", self.apply_contract)

    async def bootstrap(self, servers: str, security: Any) -> None:
        self.bootstraps.append((servers, security))
        if self.logins:
            if self.stop is not None:
                self.stop[0] = True
            raise self.logins.pop(0)

    async def apply_contract(self, bootstrap: str, specs: Any, **kwargs: Any) -> list[Any]:
        self.applied.append({"bootstrap": bootstrap, "topics": sorted(s.name for s in specs), **kwargs})
        if self.contract:
            raise self.contract.pop(0)
        return []


def settings(tmp_path: Path, **env: str) -> Settings:
    (tmp_path / "watch").mkdir(exist_ok=True)
    return load_settings({"WATCH_DIR": str(tmp_path / "watch"), "NODE_ID": "unit", "KAFKA_BOOTSTRAP": BOOTSTRAP, **env})


def link(tmp_path: Path, shutdown: Any = None, **env: str) -> BrokerLink:
    return BrokerLink(settings(tmp_path, **env), SidecarMetrics(), EventLog(logging.getLogger(LOGGER)), shutdown or Stop())


def connected_gauge(link: BrokerLink) -> float | None:
    return link.metrics.registry.get_sample_value("hyperdata_sidecar_broker_connected")


def login_refusals(link: BrokerLink) -> float | None:
    return link.metrics.registry.get_sample_value("hyperdata_sidecar_producer_errors_total", {"kind": "login_refused"})


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.levelname, r.getMessage(), r.fields) for r in caplog.records if r.name == LOGGER]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)


def refused(tmp_path: Path) -> LoginRefused:
    return LoginRefused(
        settings(tmp_path, **SASL).security, "Authentication failed during authentication due to invalid credentials"
    )


# -- state ----------------------------------------------------------------------------------------


def test_the_broker_coming_and_going_moves_the_gauge_with_one_line_per_change(tmp_path, caplog):
    b = link(tmp_path)
    b.reachable(True)
    b.reachable(True)
    assert b.connected and connected_gauge(b) == 1
    b.reachable(False)
    b.reachable(False)
    assert not b.connected and connected_gauge(b) == 0
    assert lines(caplog) == [
        ("INFO", "broker_connected", {"bootstrap": BOOTSTRAP}),
        ("INFO", "broker_unreachable", {"bootstrap": BOOTSTRAP}),
    ]


def test_a_link_never_connected_is_not_ready_because_the_broker_is_unreachable(tmp_path):
    assert link(tmp_path).not_ready_reason() == f"broker unreachable ({BOOTSTRAP})"


def test_a_connected_link_gives_no_reason(tmp_path):
    b = link(tmp_path)
    b.reachable(True)
    assert b.not_ready_reason() is None


def test_a_refused_login_is_the_reason_until_the_broker_connects(tmp_path):
    b = link(tmp_path)
    b.login_refused("the broker refused the login (SASL PLAIN, user sidecar): bad password")
    assert b.not_ready_reason() == "the broker refused the login (SASL PLAIN, user sidecar): bad password"
    b.reachable(True)
    b.reachable(False)
    assert b.not_ready_reason() == f"broker unreachable ({BOOTSTRAP})"


def test_while_waiting_at_start_the_wait_is_the_reason_even_over_a_refused_login(tmp_path):
    b = link(tmp_path)
    b.login_refused("refused")
    b.waiting = "waiting for Kafka at k1:9092"
    assert b.not_ready_reason() == "waiting for Kafka at k1:9092"


# -- a failed look at the broker ------------------------------------------------------------------


def test_a_failed_connection_is_a_connect_failed_warning_and_marks_the_broker_unreachable(tmp_path, caplog):
    b = link(tmp_path)
    b.reachable(True)
    caplog.clear()
    error = b.failed(KafkaConnectionError("k1:9092: ConnectionRefusedError"), 3, 2.0)
    assert error == "KafkaConnectionError: KafkaConnectionError: k1:9092: ConnectionRefusedError"
    assert not b.connected and login_refusals(b) == 0
    assert lines(caplog) == [
        ("INFO", "broker_unreachable", {"bootstrap": BOOTSTRAP}),
        ("WARNING", "broker_connect_failed", {"bootstrap": BOOTSTRAP, "attempt": 3, "error": error, "retry_in_s": 2.0}),
    ]


def test_a_refused_login_is_its_own_error_line_counted_naming_mechanism_and_user_never_the_password(tmp_path, caplog):
    b = link(tmp_path, **SASL)
    exc = refused(tmp_path)
    assert b.failed(exc, 1, 0.5) == str(exc)
    assert login_refusals(b) == 1
    assert b.not_ready_reason() == str(exc)
    [(level, event, fields)] = lines(caplog)
    assert (level, event) == ("ERROR", "broker_login_refused")
    assert fields == {
        "bootstrap": BOOTSTRAP,
        "mechanism": "SCRAM-SHA-512",
        "user": "sidecar",
        "attempt": 1,
        "error": str(exc),
        "retry_in_s": 0.5,
    }
    assert PASSWORD not in str(fields) and PASSWORD not in caplog.text


def test_a_failure_without_a_message_is_named_by_its_type(tmp_path):
    assert link(tmp_path).describe(TimeoutError()) == "TimeoutError"


def test_plaintext_failures_carry_no_hint(tmp_path):
    assert "security protocol" not in link(tmp_path).describe(OSError("connection reset"))


def test_a_failure_over_tls_or_sasl_names_the_security_protocol_to_check(tmp_path):
    assert link(tmp_path, **SASL).describe(OSError("connection reset")) == (
        "OSError: connection reset (security protocol SASL_PLAINTEXT: check the listener, credentials and certificates)"
    )


# -- the start-up wait ----------------------------------------------------------------------------


async def test_the_wait_retries_with_a_doubling_back_off_until_the_broker_answers(tmp_path, monkeypatch, caplog):
    answers = Broker(monkeypatch, KafkaConnectionError("no"), OSError("reset"))
    stop = Stop()
    b = link(tmp_path, stop)
    await b.wait()
    assert len(answers.bootstraps) == 3 and answers.bootstraps[0][0] == BOOTSTRAP
    assert stop.pauses == [0.5, 1.0]
    assert b.waiting is None
    assert [(e, f["attempt"], f["retry_in_s"]) for _, e, f in lines(caplog) if e == "broker_connect_failed"] == [
        ("broker_connect_failed", 1, 0.5),
        ("broker_connect_failed", 2, 1.0),
    ]


async def test_while_the_wait_lasts_readiness_is_told_what_it_waits_for(tmp_path, monkeypatch):
    Broker(monkeypatch, OSError("reset"))
    stop = Stop(seen=lambda: b.not_ready_reason())
    b = link(tmp_path, stop)
    await b.wait()
    assert stop.said == [f"waiting for Kafka at {BOOTSTRAP}: OSError: reset (attempt 1, next in 0.5s)"]
    assert b.not_ready_reason() == f"broker unreachable ({BOOTSTRAP})"  # the wait is over; the data plane has not connected


async def test_a_wait_that_meets_a_refused_login_counts_it_and_keeps_waiting(tmp_path, monkeypatch, caplog):
    Broker(monkeypatch, refused(tmp_path))
    b = link(tmp_path, **SASL)
    await b.wait()
    assert login_refusals(b) == 1
    assert [e for _, e, _ in lines(caplog)] == ["broker_login_refused"]


async def test_a_worker_stopping_during_the_waits_back_off_ends_the_wait(tmp_path, monkeypatch):
    stop = [False]
    answers = Broker(monkeypatch, OSError("reset"), OSError("reset"), stop=stop)
    b = link(tmp_path, Shutdown(lambda: stop[0]))
    await b.wait()
    assert len(answers.bootstraps) == 1
    assert b.waiting is not None  # it never reached the broker


async def test_a_worker_already_stopping_does_not_wait(tmp_path, monkeypatch):
    answers = Broker(monkeypatch)
    await link(tmp_path, Shutdown(lambda: True)).wait()
    assert answers.bootstraps == []


# -- the connect ----------------------------------------------------------------------------------


async def test_the_connect_logs_in_applies_the_contract_and_connects_the_data_plane(tmp_path, monkeypatch, caplog):
    answers, plane = Broker(monkeypatch), DataPlane()
    b = link(tmp_path)
    assert await b.connect(plane) is True
    assert [servers for servers, _ in answers.bootstraps] == [BOOTSTRAP]
    [applied] = answers.applied
    assert applied["bootstrap"] == BOOTSTRAP and applied["topics"] == sorted(b.settings.contract_topics())
    assert applied["replication_factor"] == b.settings.topic_replication_factor
    assert plane.connected_with == [b.settings.contract_topics()]
    assert b.connected and connected_gauge(b) == 1 and b.not_ready_reason() is None
    assert [e for _, e, _ in lines(caplog)] == ["broker_connected"]


async def test_the_contract_is_not_applied_when_topics_apply_on_start_is_off(tmp_path, monkeypatch):
    answers, plane = Broker(monkeypatch), DataPlane()
    assert await link(tmp_path, TOPICS_APPLY_ON_START="false").connect(plane) is True
    assert answers.applied == [] and len(plane.connected_with) == 1


async def test_each_failing_step_of_the_connect_is_one_line_and_a_retry(tmp_path, monkeypatch, caplog):
    answers = Broker(monkeypatch, KafkaConnectionError("no broker"), contract=[TimeoutError()])
    plane = DataPlane(DataPlaneError("topic hyperliquid.fills missing"))
    stop = Stop()
    b = link(tmp_path, stop)
    assert await b.connect(plane) is True
    assert stop.pauses == [0.5, 1.0, 2.0]
    assert len(answers.bootstraps) == 4 and len(answers.applied) == 3 and len(plane.connected_with) == 1
    failed = [(f["attempt"], f["error"]) for _, e, f in lines(caplog) if e == "broker_connect_failed"]
    assert failed == [
        (1, "KafkaConnectionError: KafkaConnectionError: no broker"),
        (2, "TimeoutError"),
        (3, "DataPlaneError: topic hyperliquid.fills missing"),
    ]


async def test_between_connect_attempts_a_refused_login_is_the_reason_then_cleared_by_the_connect(tmp_path, monkeypatch):
    exc = refused(tmp_path)
    Broker(monkeypatch, exc)
    stop = Stop(seen=lambda: b.not_ready_reason())
    b = link(tmp_path, stop, **SASL)
    assert await b.connect(DataPlane()) is True
    assert stop.said == [str(exc)]
    assert b.not_ready_reason() is None and login_refusals(b) == 1


async def test_a_worker_stopping_during_the_connects_back_off_leaves_it_unconnected(tmp_path, monkeypatch):
    stop = [False]
    answers, plane = Broker(monkeypatch, OSError("reset"), OSError("reset"), stop=stop), DataPlane()
    b = link(tmp_path, Shutdown(lambda: stop[0]))
    assert await b.connect(plane) is False
    assert len(answers.bootstraps) == 1 and plane.connected_with == [] and not b.connected


async def test_an_error_that_is_not_a_failed_look_at_the_broker_is_raised(tmp_path, monkeypatch):
    Broker(monkeypatch, ValueError("a bug"))
    with pytest.raises(ValueError):
        await link(tmp_path).connect(DataPlane())
