"""The worker's link to the broker: waiting for it at start, connecting (retried), and its state.

:class:`BrokerLink` is where a change to how the worker reaches Kafka goes. It owns:

- the start-up wait of the standalone app (:meth:`BrokerLink.wait`): Faust's own clients give up
  when the broker is absent at start, so the worker waits here first, one line per try;
- the connect of the runtime (:meth:`BrokerLink.connect`): the login (``broker_login``: aiokafka's
  and librdkafka's clients would only say that no broker answered), the topic contract
  (``TOPICS_APPLY_ON_START``), the data plane's producer; retried with a back-off until it works or
  the worker stops, each failure one line (``broker_connect_failed``, or ``broker_login_refused``
  naming the mechanism and user, never the password);
- the broker's state as the data plane reports it (:meth:`BrokerLink.reachable`,
  :meth:`BrokerLink.login_refused`) and the reason it gives readiness (:meth:`BrokerLink.not_ready_reason`).
"""

from __future__ import annotations

from aiokafka.errors import KafkaError

from hyperdata_sidecar import broker_login
from hyperdata_sidecar.broker_login import LoginRefused
from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.dataplane import DataPlane, DataPlaneError
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.shutdown import Shutdown
from hyperdata_sidecar.topics import apply_contract, load_contract

FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 30.0
#: What a failed look at the broker raises: no answer, a client error, a refused login, a topic missing.
CONNECT_ERRORS = (TimeoutError, KafkaError, OSError, DataPlaneError, LoginRefused)


class BrokerLink:
    """The broker as the worker sees it: connected or not, and why not."""

    def __init__(self, settings: Settings, metrics: SidecarMetrics, log: EventLog, shutdown: Shutdown) -> None:
        self.settings = settings
        self.metrics = metrics
        self.log = log
        self.shutdown = shutdown
        self.connected = False
        self.waiting: str | None = None  # while the worker waits for the broker at start: why
        self.refused: str | None = None  # the broker refused the producer's login: its words, until it connects

    # ------------------------------------------------------------------ state (the data plane's reports)

    def reachable(self, connected: bool) -> None:
        """The producer's broker connection came up or went down."""
        if connected:
            self.refused = None
        if connected != self.connected:
            self.connected = connected
            self.metrics.set_broker_connected(connected)
            self.log.info("broker_connected" if connected else "broker_unreachable", bootstrap=self.settings.kafka_bootstrap)

    def login_refused(self, why: str) -> None:
        """The broker refused the producer's login (a password changed on one side only): said as
        the reason the worker is not ready, instead of an unreachable broker, until it connects."""
        self.refused = why

    def not_ready_reason(self) -> str | None:
        """Why the broker keeps the worker from being ready (None: it does not)."""
        if self.waiting is not None:
            return self.waiting
        if not self.connected:
            return self.refused or f"broker unreachable ({self.settings.kafka_bootstrap})"
        return None

    # ------------------------------------------------------------------ getting there

    async def wait(self) -> None:
        """Return once a Kafka client can bootstrap from KAFKA_BOOTSTRAP (or the worker stops),
        logging one line per failed try; readiness says what it waits for meanwhile."""
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while not self.shutdown.stopping:
            attempt = backoff.tries + 1
            try:
                await broker_login.bootstrap(self.settings.kafka_bootstrap, self.settings.security)
                self.waiting = None
                return
            except CONNECT_ERRORS as exc:
                error = self.failed(exc, attempt, backoff.delay)
                self.waiting = f"waiting for Kafka at {self.settings.kafka_bootstrap}: {error} (attempt {attempt}, next in {backoff.delay:g}s)"
            await backoff.wait(self.shutdown.pause)

    async def connect(self, dataplane: DataPlane) -> bool:
        """Log in, apply the topic contract, connect ``dataplane``; retried until it works (True) or
        the worker stops (False)."""
        settings = self.settings
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while not self.shutdown.stopping:
            attempt = backoff.tries + 1
            try:
                # First the login: aiokafka's admin client and librdkafka's would only say that no
                # broker answered.
                await broker_login.bootstrap(settings.kafka_bootstrap, settings.security)
                if settings.topics_apply_on_start:
                    await apply_contract(
                        settings.kafka_bootstrap,
                        load_contract(settings.topic_names()),
                        replication_factor=settings.topic_replication_factor,
                        admin_kwargs=settings.security.client_kwargs(),
                    )
                await dataplane.connect(settings.contract_topics())
            except CONNECT_ERRORS as exc:
                self.failed(exc, attempt, backoff.delay)
                await backoff.wait(self.shutdown.pause)
                continue
            self.reachable(True)
            return True
        return False

    def failed(self, exc: BaseException, attempt: int, retry_in_s: float) -> str:
        """Log one line for a failed look at the broker (``broker_login_refused``, counted, when the
        broker refused the login; else ``broker_connect_failed``) and return its error."""
        self.reachable(False)
        if isinstance(exc, LoginRefused):
            self.login_refused(str(exc))
            self.metrics.producer_error("login_refused")
            self.log.error(
                "broker_login_refused",
                bootstrap=self.settings.kafka_bootstrap,
                mechanism=exc.mechanism,
                user=exc.user,
                attempt=attempt,
                error=str(exc),
                retry_in_s=retry_in_s,
            )
            return str(exc)
        error = self.describe(exc)
        self.log.warning(
            "broker_connect_failed", bootstrap=self.settings.kafka_bootstrap, attempt=attempt, error=error, retry_in_s=retry_in_s
        )
        return error

    def describe(self, exc: BaseException) -> str:
        """One line for a failed connection; names the security protocol, since a TLS or SASL
        mismatch often surfaces from the client as a bare connection error."""
        text = f"{type(exc).__name__}: {exc}".rstrip(": ")
        protocol = self.settings.security.protocol
        if protocol != "PLAINTEXT":
            text += f" (security protocol {protocol}: check the listener, credentials and certificates)"
        return text
