"""The sidecar's pages on the Faust web server. All are GET-only and read-only: they read the
sidecar's read model (:class:`~hyperdata_sidecar.ports.SidecarView`) and change nothing, metrics
included (the state gauges are refreshed by a timer)."""

from __future__ import annotations

import time
from typing import Any

import faust
from faust.web import Request, Response, View

from hyperdata_sidecar.ports import SidecarView
from hyperdata_sidecar.web import snapshot
from hyperdata_sidecar.web.history import EVERY_S, History
from hyperdata_sidecar.web.page import render_page
from hyperdata_sidecar.web.rates import LineRates

SEALS_DEFAULT_LIMIT = 50
SEALS_MAX_LIMIT = 1000
RATE_SAMPLE_S = 1.0
GAUGES_EVERY_S = 1.0  # how often the state gauges are brought up to date (a scrape sees them at most this old)


def install_pages(app: faust.App, sidecar: SidecarView) -> None:
    """Register the sidecar's pages and the timers that sample line rates and the charts' history
    and refresh the state gauges on ``app``.

    Must run before the web server starts (``install`` calls it): the pages are registered before
    Faust's own blueprints, which is what lets the status page take ``/`` from Faust's index. A host
    app that registered its own ``/`` first keeps it; the status page is always at ``/sidecar/`` too.
    """
    rates = LineRates()
    history = History()

    @app.timer(RATE_SAMPLE_S, name="hyperdata_sidecar.web.sample_line_rates")
    async def sample_line_rates(*_: Any) -> None:
        rates.observe(time.monotonic(), sidecar.metrics.lines_published_totals())

    @app.timer(EVERY_S, name="hyperdata_sidecar.web.sample_history")
    async def sample_history(*_: Any) -> None:
        totals = sidecar.metrics.lines_published_totals()
        history.record(time.time(), totals, {table: sidecar.metrics.publish_lag_seconds(table) for table in totals})

    @app.timer(GAUGES_EVERY_S, name="hyperdata_sidecar.web.refresh_gauges")
    async def refresh_gauges(*_: Any) -> None:
        snapshot.refresh_gauges(sidecar)

    async def status_page(view: View, request: Request) -> Response:
        return view.html(render_page(snapshot.status(sidecar, rates, history)), headers={"Cache-Control": "no-store"})

    app.page("/sidecar/", name="hyperdata_sidecar.status_page")(status_page)
    # A host app's own page at / stays; registering a second GET / would make aiohttp raise.
    if "/" not in app.web.views:
        app.page("/", name="hyperdata_sidecar.status")(status_page)

    @app.page("/metrics", name="hyperdata_sidecar.metrics")
    async def metrics(view: View, request: Request) -> Response:
        body, content_type = sidecar.metrics.render()
        # Passed as a header, not content_type=, so the exposition format's version parameter survives.
        return view.bytes(body, headers={"Content-Type": content_type})

    @app.page("/healthz", name="hyperdata_sidecar.healthz")
    async def healthz(view: View, request: Request) -> Response:
        return view.json({"status": "alive"})

    @app.page("/readyz", name="hyperdata_sidecar.readyz")
    async def readyz(view: View, request: Request) -> Response:
        reasons = sidecar.readiness.not_ready_reasons()
        return view.json({"ready": not reasons, "reasons": reasons}, status=503 if reasons else 200)

    @app.page("/sidecar/files/", name="hyperdata_sidecar.files")
    async def files(view: View, request: Request) -> Response:
        statuses = snapshot.files(sidecar)
        return view.json(
            {
                "files": [s.to_json() for s in statuses],
                "counts": snapshot.file_state_counts(statuses),
                "backlog": snapshot.backlogs(sidecar),
            }
        )

    @app.page("/sidecar/seals/", name="hyperdata_sidecar.seals")
    async def seals(view: View, request: Request) -> Response:
        limit = _limit(request.query.get("limit"))
        if limit is None:
            return view.error(400, f"limit must be an integer from 1 to {SEALS_MAX_LIMIT}")
        return view.json({"seals": snapshot.seals(sidecar, limit), "limit": limit})

    @app.page("/sidecar/snapshots/", name="hyperdata_sidecar.snapshots")
    async def snapshots(view: View, request: Request) -> Response:
        limit = _limit(request.query.get("limit"))
        if limit is None:
            return view.error(400, f"limit must be an integer from 1 to {SEALS_MAX_LIMIT}")
        return view.json({**snapshot.snapshots(sidecar, limit), "limit": limit})

    @app.page("/sidecar/dlq/", name="hyperdata_sidecar.dlq")
    async def dlq(view: View, request: Request) -> Response:
        return view.json(snapshot.dlq(sidecar))

    @app.page("/sidecar/status/", name="hyperdata_sidecar.status_json")
    async def status_json(view: View, request: Request) -> Response:
        return view.json(snapshot.status(sidecar, rates, history).to_json())


def _limit(raw: str | None) -> int | None:
    """The ``limit`` query parameter: the default when absent, None when not 1..SEALS_MAX_LIMIT."""
    if raw is None:
        return SEALS_DEFAULT_LIMIT
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 1 <= value <= SEALS_MAX_LIMIT else None
