"""``Engine.txn_error``: what a failed call of either engine's producer says, read the same from both.

The errors are real ones, raised by each engine's producer with no broker to reach (a transactional
call without a ``transactional.id``, one out of turn, one that times out); the flags a broker would
set (fatal, abort required) are read from confluent-kafka's own ``KafkaError``. The fenced producer
and the records refused outside a transaction are tests/integration/test_engine_producer.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from hyperdata_sidecar.engines import Engine, TxnError
from hyperdata_sidecar.engines.native import NativeEngine
from hyperdata_sidecar.engines.python import PythonEngine

NOWHERE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}  # no broker: nothing answers
TRANSACTIONAL = {**NOWHERE, "transactional.id": "unit", "transaction.timeout.ms": 1000, "message.timeout.ms": 1000}


@pytest.fixture(params=["python", "native"])
def engine(request: pytest.FixtureRequest) -> Engine:
    return PythonEngine("test") if request.param == "python" else NativeEngine(request.getfixturevalue("native"))


def read(engine: Engine, call: Any, *args: Any) -> TxnError | None:
    """What ``engine`` reads from the exception ``call(*args)`` raises."""
    with pytest.raises(Exception) as raised:
        call(*args)
    return engine.txn_error(raised.value)


def test_a_transactional_call_without_a_transactional_id_is_not_configured(engine: Engine) -> None:
    producer = engine.producer(dict(NOWHERE))

    assert read(engine, producer.begin_transaction) == TxnError(
        "_NOT_CONFIGURED", "The Transactional API requires transactional.id to be configured", False, False, False
    )


def test_a_call_before_init_transactions_is_out_of_turn(engine: Engine) -> None:
    producer = engine.producer(dict(TRANSACTIONAL))

    assert read(engine, producer.begin_transaction) == TxnError(
        "_STATE", "Operation not valid in state Init", False, False, False
    )
    refused = read(engine, producer.produce, "topic", b"v", b"k", 0, None, None, 0, [])
    assert refused is not None and (refused.name, refused.fatal, refused.retriable) == ("_STATE", False, False)


def test_init_transactions_that_times_out_is_retriable_and_goes_on_meanwhile(engine: Engine) -> None:
    producer = engine.producer(dict(TRANSACTIONAL))

    timed_out = read(engine, producer.init_transactions, 0.2)
    assert timed_out == TxnError(
        "_TIMED_OUT", "Timed out waiting for operation to finish, retry call to resume", False, True, False
    )
    # Still in progress: another call waits for it, and is retriable too.
    conflict = read(engine, producer.begin_transaction)
    assert conflict is not None and (conflict.name, conflict.fatal, conflict.retriable) == ("_CONFLICT", False, True)


@pytest.mark.parametrize(
    ("fatal", "retriable", "txn_requires_abort"),
    [(True, False, False), (False, True, False), (False, False, True)],
)
def test_confluent_kafka_s_flags_are_read_as_they_are(fatal: bool, retriable: bool, txn_requires_abort: bool) -> None:
    error = KafkaError(KafkaError._FENCED, "fenced", fatal=fatal, retriable=retriable, txn_requires_abort=txn_requires_abort)

    assert PythonEngine("test").txn_error(KafkaException(error)) == TxnError(
        "_FENCED", "fenced", fatal, retriable, txn_requires_abort
    )


def test_a_record_refused_with_fatal_is_fatal_though_confluent_kafka_does_not_flag_it() -> None:
    # confluent-kafka's refusal of a record after the producer's fatal error: the code alone.
    refusal = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error"))

    view = PythonEngine("test").txn_error(refusal)

    assert view is not None and (view.name, view.fatal) == ("_FATAL", True)


def test_what_the_producer_did_not_raise_with_its_error_is_none(engine: Engine, native: Any) -> None:
    others = [
        BufferError("queue full"),
        ValueError("producer configuration"),
        KafkaException(),
        KafkaException("no KafkaError in it"),
        native.TransactionError("no ClientError in it"),
        native.ProduceError(),
    ]

    assert [engine.txn_error(exc) for exc in others] == [None] * len(others)


def test_each_engine_reads_only_its_own_producer_s_errors(native: Any) -> None:
    python, compiled = PythonEngine("test"), NativeEngine(native)
    from_python = _raised(python.producer(dict(NOWHERE)).begin_transaction)
    from_native = _raised(compiled.producer(dict(NOWHERE)).begin_transaction)

    assert python.txn_error(from_native) is None and compiled.txn_error(from_python) is None
    assert python.txn_error(from_python) == compiled.txn_error(from_native)


def _raised(call: Any) -> BaseException:
    with pytest.raises(Exception) as raised:
        call()
    return raised.value
