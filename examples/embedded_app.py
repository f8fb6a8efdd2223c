"""A Faust app of your own that runs the sidecar next to its own agent.

Run it as a worker, with the sidecar's settings in the environment (or a ``faust.ini``)::

    PYTHONPATH=.:examples faust -A embedded_app worker -l info

What it shows:

- :func:`hyperdata_sidecar.plugin.install` puts the whole sidecar on this app: its topics, the
  ``sidecar-*`` tables, one polling loop per node table, its agents, its runtime service and its web
  pages (``/``, ``/metrics``, ``/healthz``, ``/readyz``, ``/sidecar/...``). Every one of them is
  named ``hyperdata_sidecar.*`` or ``sidecar-*``, so they do not collide with the host's own.
- The host keeps its own agent, table and page: ``fills_counter.count`` counts the fills lines the
  sidecar publishes, per coin, in the ``fills-per-coin`` table, served at ``/fills/per-coin/``.

The host agent reads the fills topic, so the topics must exist before the worker joins its group:
apply the contract once first (``faust -A hyperdata_sidecar topics``). The sidecar applies
it too when it starts, but the consumer group may have formed by then.
``STATE_PATH`` must exist: the app keeps its RocksDB tables in ``$STATE_PATH/<app id>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterable

import faust
from faust.web import Request, Response, View

from hyperdata_sidecar.config import load_settings
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.plugin import install
from hyperdata_sidecar.topics import load_contract, spec_for

settings = load_settings()
app_id = f"fills-counter-{settings.node_id}"

app = faust.App(
    app_id,
    broker=[f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",")],
    store="rocksdb://",
    datadir=str(settings.state_path / app_id),
    web_bind=settings.web_bind,
    web_port=settings.web_port,
    consumer_auto_offset_reset="earliest",
    autodiscover=False,
)

sidecar = install(app, settings)

fills = app.topic(
    settings.topic_for(TABLE_BY_DIR["node_fills_streaming"]),
    key_type=bytes,
    value_type=bytes,
    key_serializer="raw",
    value_serializer="raw",
)
# A table written from a topic's agent must have that topic's partition count (co-partitioning).
fills_per_coin = app.Table("fills-per-coin", default=int, partitions=spec_for(load_contract(), "fills").partitions)


@app.agent(fills, name="fills_counter.count")
async def count(lines: AsyncIterable[tuple[bytes, bytes]]) -> None:
    """Count each published fills line under its key (the coin of its first event)."""
    async for coin, _line in lines.items():  # noqa: PERF102 - a Faust stream: it has no keys()
        fills_per_coin[coin.decode()] += 1


@app.page("/fills/per-coin/", name="fills_counter.per_coin")
async def per_coin(view: View, request: Request) -> Response:
    """Lines counted per coin on this worker's partitions."""
    return view.json(dict(fills_per_coin.items()))
