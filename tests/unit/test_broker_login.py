"""Which connection errors are a refused login, and the line that names one (no broker: the errors
are the ones aiokafka raises and librdkafka reports on a failed SASL handshake or authentication)."""

from __future__ import annotations

import pytest
from aiokafka.errors import (
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from hyperdata_sidecar.broker_login import LoginRefused, librdkafka_refusal, refusal_of
from hyperdata_sidecar.config import KafkaSecurity

PASSWORD = "pw-never-shown"
SCRAM = KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_username="sidecar", sasl_password=PASSWORD)
INVALID = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


def test_a_failed_sasl_authentication_is_a_refused_login_naming_mechanism_user_and_the_brokers_words():
    refused = refusal_of(SaslAuthenticationFailed(INVALID), SCRAM)
    assert isinstance(refused, LoginRefused)
    assert (refused.mechanism, refused.user, refused.reason) == ("SCRAM-SHA-256", "sidecar", INVALID)
    assert str(refused) == f"the broker refused the login (SASL SCRAM-SHA-256, user sidecar): {INVALID}"


def test_a_failed_sasl_authentication_without_a_message_says_what_the_error_means():
    refused = refusal_of(SaslAuthenticationFailed(""), SCRAM)
    assert refused is not None and refused.reason == SaslAuthenticationFailed.description


def test_a_mechanism_the_broker_does_not_take_is_a_refused_login_naming_the_mechanism():
    connection = object()  # aiokafka raises the handshake's error with its connection as the argument
    refused = refusal_of(UnsupportedSaslMechanismError(connection), SCRAM)
    assert refused is not None
    assert (
        refused.reason == f"the broker does not take SASL mechanism SCRAM-SHA-256 ({UnsupportedSaslMechanismError.description})"
    )


@pytest.mark.parametrize(
    "exc",
    [
        KafkaConnectionError("Unable to bootstrap"),
        ConnectionRefusedError(111, "refused"),
        TimeoutError(),
        IllegalSaslStateError(),
    ],
)
def test_any_other_connection_error_is_not_a_refused_login(exc):
    assert refusal_of(exc, SCRAM) is None


def test_librdkafkas_authentication_error_is_a_refused_login_with_its_detail():
    detail = f"sasl_plaintext://127.0.0.1:9094/bootstrap: SASL authentication error: {INVALID} (after 3ms in state AUTH_REQ)"
    refused = librdkafka_refusal("_AUTHENTICATION", detail, SCRAM)
    assert refused is not None and str(refused) == f"the broker refused the login (SASL SCRAM-SHA-256, user sidecar): {detail}"


@pytest.mark.parametrize("name", ["_TRANSPORT", "_SSL", "_ALL_BROKERS_DOWN", "TOPIC_AUTHORIZATION_FAILED"])
def test_librdkafkas_other_errors_are_not_a_refused_login(name):
    assert librdkafka_refusal(name, "Local: Broker transport failure", SCRAM) is None


def test_a_refused_login_never_carries_the_password():
    refused = refusal_of(SaslAuthenticationFailed(INVALID), SCRAM)
    assert refused is not None
    assert PASSWORD not in str(refused) and PASSWORD not in repr(refused) and PASSWORD not in repr(vars(refused))
