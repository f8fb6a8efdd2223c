"""Whether the broker took the worker's login, and one line that says so when it did not.

aiokafka's ``AIOKafkaClient.bootstrap()`` catches the error of each bootstrap host, logs it on its
own logger and raises only "Unable to bootstrap from [...]": a refused SASL login
(``SaslAuthenticationFailed``) is lost to its caller. So the sidecar's own look at the broker,
:func:`bootstrap`, makes the same connection itself (aiokafka's ``create_conn``: API versions, the
SASL handshake and authentication, then one metadata request) and keeps each host's error.
librdkafka reports a refused login to the data plane's error callback as ``_AUTHENTICATION``.
:class:`LoginRefused` is what either becomes: the mechanism and the user (never the password) and
the broker's own words.
"""

from __future__ import annotations

from aiokafka.conn import collect_hosts, create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError, SaslAuthenticationFailed, UnsupportedSaslMechanismError
from aiokafka.protocol.metadata import MetadataRequest

from hyperdata_sidecar.config import KafkaSecurity

#: librdkafka's error name for a failed SASL handshake or authentication.
LIBRDKAFKA_AUTHENTICATION = "_AUTHENTICATION"


class LoginRefused(Exception):
    """The broker refused the worker's login: a wrong password, an unknown user, a mechanism it does
    not take. Retrying does not help until the credentials or the listener change."""

    def __init__(self, security: KafkaSecurity, reason: str) -> None:
        self.mechanism = security.sasl_mechanism
        self.user = security.sasl_username
        self.reason = reason
        super().__init__(f"the broker refused the login (SASL {self.mechanism}, user {self.user}): {reason}")


def refusal_of(exc: BaseException, security: KafkaSecurity) -> LoginRefused | None:
    """The refused login ``exc`` (an error of an aiokafka connection) stands for, or None if it is
    any other failure."""
    if isinstance(exc, SaslAuthenticationFailed):
        return LoginRefused(security, _broker_words(exc))
    if isinstance(exc, UnsupportedSaslMechanismError):
        return LoginRefused(security, f"the broker does not take SASL mechanism {security.sasl_mechanism} ({_broker_words(exc)})")
    return None


def librdkafka_refusal(name: str, detail: str, security: KafkaSecurity) -> LoginRefused | None:
    """The refused login a librdkafka error (its ``name()`` and ``str()``) stands for, or None."""
    return LoginRefused(security, detail) if name == LIBRDKAFKA_AUTHENTICATION else None


def _broker_words(exc: BaseException) -> str:
    # aiokafka raises the handshake's error with the connection object as its argument, and the
    # authentication's with the broker's error message (which may be empty).
    if exc.args and isinstance(exc.args[0], str) and exc.args[0]:
        return exc.args[0]
    return str(getattr(exc, "description", type(exc).__name__))


async def bootstrap(servers: str, security: KafkaSecurity) -> None:
    """Return once one of ``servers`` takes a connection, the login and a metadata request, as
    ``AIOKafkaClient.bootstrap()`` would.

    Raises :class:`LoginRefused` as soon as a host refused the login (the other hosts would refuse
    the same credentials), else ``KafkaConnectionError`` naming each host's error.
    """
    failures = []
    client_kwargs = security.client_kwargs()
    for host, port, _family in collect_hosts(servers):
        try:
            connection = await create_conn(host, port, **client_kwargs)
        except (OSError, TimeoutError, KafkaError) as exc:
            refused = refusal_of(exc, security)
            if refused is not None:
                raise refused from exc
            failures.append(f"{host}:{port}: {_failure(exc)}")
            continue
        try:
            await connection.send(MetadataRequest([]))
            return
        except (TimeoutError, KafkaError) as exc:
            failures.append(f"{host}:{port}: {_failure(exc)}")
        finally:
            connection.close()
    raise KafkaConnectionError("; ".join(failures))


def _failure(exc: BaseException) -> str:
    # aiokafka's errors name their class in str(); the standard library's do not.
    if isinstance(exc, KafkaError) and exc.args:
        return str(exc)
    return f"{type(exc).__name__}: {exc}".rstrip(": ")
