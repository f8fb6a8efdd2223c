"""The standalone sidecar app: ``faust -A hyperdata_sidecar worker``.

Its id is ``hyperdata-sidecar-<NODE_ID>``, so sidecars on several node hosts share one Kafka
cluster without sharing consumer groups or changelogs.
"""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path

import faust

from hyperdata_sidecar.commands import install_commands
from hyperdata_sidecar.config import ConfigError, Settings, check_runtime, load_settings, prepare_state_path
from hyperdata_sidecar.logs import RepeatFilter
from hyperdata_sidecar.plugin import Sidecar, install

#: Cyclic-GC thresholds for the worker process. The hot path allocates a few containers per line
#: (40k lines/s in production); with CPython's default (700, 10, 10) the collector runs constantly
#: and walks every live object of Faust and aiokafka. Measured in docs/benchmarks.md.
GC_THRESHOLDS = (50_000, 20, 100)


class SidecarApp(faust.App):
    """The standalone app: checks the file system settings before the worker touches Kafka, waits for
    the broker, and tunes the garbage collector of the worker process (an embedding app decides that
    for itself)."""

    sidecar: Sidecar

    async def on_first_start(self) -> None:
        try:
            check_runtime(self.sidecar.settings)
            prepare_state_path(self.sidecar.settings, Path(self.conf.datadir))
        except ConfigError as exc:
            print(f"hyperdata-sidecar: configuration error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        gc.set_threshold(*GC_THRESHOLDS)
        repeats = RepeatFilter(every_s=60.0)
        for handler in logging.getLogger().handlers:
            handler.addFilter(repeats)
        # Faust's own producer and consumer give up when the broker is absent at start; the
        # sidecar may start before the broker, so it waits here, saying so once per try. The web
        # server starts first, so /healthz answers and /readyz and the status page say why not yet.
        if self.conf.web_enabled:
            await self.web.maybe_start()
        await self.sidecar.broker.wait()
        await super().on_first_start()

    async def on_started(self) -> None:
        await super().on_started()
        # Everything alive now (modules, Faust and aiokafka objects) lives as long as the worker:
        # keep it out of every future collection.
        gc.freeze()


def create_app(settings: Settings | None = None) -> faust.App:
    """A Faust app configured from ``settings`` with the sidecar and its commands installed."""
    settings = settings or load_settings()
    app_id = f"hyperdata-sidecar-{settings.node_id}"
    app = SidecarApp(
        app_id,
        broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.state_path / app_id),
        web_enabled=True,
        web_bind=settings.web_bind,
        web_port=settings.web_port,
        topic_replication_factor=settings.topic_replication_factor,
        consumer_auto_offset_reset="earliest",
        # A worker restarted after a crash waits for its dead predecessor to leave the consumer group:
        # 10 s instead of Faust's 60 s. The poll loops yield between cycles, so heartbeats keep flowing.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
        # Do not wait on shutdown for every buffered event to be processed: a rotation queued behind
        # a backup that keeps failing would hold SIGTERM. Unprocessed records are redelivered on
        # the next start, and every agent is idempotent (full-cursor checkpoints, seal and backup
        # dedup through their tables).
        stream_wait_empty=False,
        autodiscover=False,
    )
    app.sidecar = install(app, settings)
    install_commands(app)
    return app


def _credentials(settings: Settings) -> faust.auth.Credentials | None:
    security = settings.security
    kwargs = security.client_kwargs()
    if security.protocol == "PLAINTEXT":
        return None
    if security.protocol == "SSL":
        return faust.SSLCredentials(kwargs["ssl_context"])
    return faust.SASLCredentials(
        username=security.sasl_username,
        password=security.sasl_password,
        mechanism=security.sasl_mechanism,
        ssl_context=kwargs.get("ssl_context"),
    )


try:
    app = create_app()
except ConfigError as exc:
    print(f"hyperdata-sidecar: configuration error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None
