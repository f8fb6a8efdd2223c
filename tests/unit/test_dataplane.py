"""The data plane's reactions to librdkafka's client events (no broker: the events are given to the
callbacks librdkafka would call), and its producer configuration."""

from __future__ import annotations

import logging

import orjson
import pytest
from confluent_kafka import KafkaError

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.records import SEQ_START, Record, Topics
from hyperdata_sidecar.core.tables import TABLES
from hyperdata_sidecar.core.window import WriterState
from hyperdata_sidecar.dataplane import DataPlane, DataPlaneError
from hyperdata_sidecar.engines import FileLines
from hyperdata_sidecar.engines.python import PythonEngine
from hyperdata_sidecar.logs import EventLog


def make(tmp_path, **env: str) -> tuple[DataPlane, list, list]:
    plane, changes, _errors, fatal = make_counting(tmp_path, **env)
    return plane, changes, fatal


def make_counting(tmp_path, **env: str) -> tuple[DataPlane, list, list, list]:
    """A data plane whose broker changes (a refused login as its words), error kinds and fatal
    errors land in lists."""
    settings = load_settings({"WATCH_DIR": str(tmp_path), "NODE_ID": "unit", **env})
    changes: list = []
    errors: list = []
    fatal: list = []
    plane = DataPlane(
        settings,
        EventLog(logging.getLogger("tests.dataplane")),
        PythonEngine("test"),
        on_broker=changes.append,
        on_login_refused=changes.append,
        on_error=errors.append,
        on_fatal=fatal.append,
    )
    return plane, changes, errors, fatal


def stats(*states: str) -> str:
    return orjson.dumps({"brokers": {f"b{i}": {"state": state} for i, state in enumerate(states)}}).decode()


def test_the_producer_is_idempotent_waits_forever_and_keeps_batches_below_the_limit(tmp_path):
    plane, _, _ = make(tmp_path, PRODUCER_LINGER_MS="50", PRODUCER_BATCH_BYTES="1048576")
    plane.batch_bytes = 65000
    config = plane._config()
    assert (config["enable.idempotence"], config["acks"], config["compression.type"]) == (True, "all", "zstd")
    assert (config["message.timeout.ms"], config["linger.ms"], config["batch.size"]) == (0, 50, 65000)


def test_security_settings_reach_librdkafka_without_empty_values(tmp_path):
    plane, _, _ = make(
        tmp_path,
        KAFKA_SECURITY_PROTOCOL="SASL_SSL",
        KAFKA_SASL_MECHANISM="SCRAM-SHA-512",
        KAFKA_SASL_USERNAME="u",
        KAFKA_SASL_PASSWORD="p",
        KAFKA_SSL_CAFILE="/ca.pem",
    )
    config = plane._config()
    assert config["security.protocol"] == "sasl_ssl" and config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl.username"], config["sasl.password"], config["ssl.ca.location"]) == ("u", "p", "/ca.pem")
    assert "ssl.certificate.location" not in config


def test_broker_state_follows_the_statistics_and_all_brokers_down(tmp_path):
    plane, changes, _ = make(tmp_path)
    on_stats, on_error = plane._config()["stats_cb"], plane._config()["error_cb"]
    on_stats(stats("UP", "DOWN"))
    on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    on_stats(stats("DOWN"))
    on_stats(stats("CONNECT", "UP"))
    assert changes == [True, False, True]


def test_a_fatal_error_is_reported_once_and_logged(tmp_path, caplog):
    plane, _, fatal = make(tmp_path)
    caplog.set_level(logging.ERROR, logger="tests.dataplane")
    error = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)
    plane._config()["error_cb"](error)
    assert fatal == [error] and plane.fatal is error
    assert [r.getMessage() for r in caplog.records] == ["producer_fatal"]


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE])
def test_a_broker_transport_error_is_counted_as_transport_every_time(tmp_path, code):
    plane, _, errors, _ = make_counting(tmp_path)
    for _ in range(3):  # the log line is rate-limited, the count is not
        plane._config()["error_cb"](KafkaError(code))
    assert errors == ["transport"] * 3


def test_a_refused_login_is_counted_as_login_refused_every_time_and_named_in_its_own_line(tmp_path, caplog):
    plane, changes, errors, _ = make_counting(
        tmp_path,
        KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        KAFKA_SASL_MECHANISM="PLAIN",
        KAFKA_SASL_USERNAME="sidecar",
        KAFKA_SASL_PASSWORD="pw-never-shown",
    )
    caplog.set_level(logging.WARNING, logger="tests.dataplane")
    detail = "sasl_plaintext://127.0.0.1:9094/bootstrap: SASL authentication error: Authentication failed"
    for _ in range(3):  # the log line is rate-limited, the count is not
        plane._config()["error_cb"](KafkaError(KafkaError._AUTHENTICATION, detail))
    assert errors == ["login_refused"] * 3
    [record] = caplog.records
    assert record.getMessage() == "broker_login_refused"
    fields = record.fields  # type: ignore[attr-defined]
    assert (fields["mechanism"], fields["user"]) == ("PLAIN", "sidecar")
    assert fields["error"] == f"the broker refused the login (SASL PLAIN, user sidecar): {detail}"
    assert "pw-never-shown" not in repr(fields)
    # Readiness hears it every time (the worker's not-ready reason), until a login succeeds.
    assert changes == [fields["error"]] * 3
    plane._config()["stats_cb"](stats("UP"))
    assert changes[-1] is True


def test_another_producer_error_is_counted_as_client(tmp_path, caplog):
    plane, _, errors, _ = make_counting(tmp_path)
    caplog.set_level(logging.WARNING, logger="tests.dataplane")
    plane._config()["error_cb"](KafkaError(KafkaError._MSG_TIMED_OUT))
    assert errors == ["client"]
    assert [r.getMessage() for r in caplog.records] == ["producer_error"]


def test_a_fatal_error_is_counted_as_fatal(tmp_path):
    plane, _, errors, fatal = make_counting(tmp_path)
    plane._config()["error_cb"](KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True))
    assert errors == ["fatal"] and len(fatal) == 1


def test_the_ways_to_the_producer_before_connect_raise_a_clear_error(tmp_path):
    plane, _, _ = make(tmp_path)
    with pytest.raises(DataPlaneError, match="not connected"):
        plane.resend(Record("t", 0, b"k", b"v", []), print)
    with pytest.raises(DataPlaneError, match="not connected"):
        plane.lines(FileLines(TABLES[0], Topics("t", 1, "d", 1), "x", WriterState(0, SEQ_START, None, None), b"", 100))
