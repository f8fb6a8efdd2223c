"""The sidecar's web view, served by the Faust worker's web server (``WEB_BIND``:``WEB_PORT``).

Every endpoint is read-only (GET/HEAD) and exposes metadata only: paths relative to WATCH_DIR,
offsets, sizes, counts, digests, timestamps, backup references and the configuration summary
without secrets. No file contents and no credentials are ever served. Bind the port to a trusted
network: the endpoints are not authenticated.

==============================  ==========================================================
``/`` and ``/sidecar/``         status page (HTML, refreshes itself every few seconds); a host
                                app that serves its own ``/`` keeps it
``/metrics``                    Prometheus text exposition of the ``hyperdata_sidecar_*`` metrics
``/healthz``                    liveness: 200 while the worker's event loop answers
``/readyz``                     readiness: 200 when the runtime runs (tables recovered, producer
                                connected), no table is held and WATCH_DIR is readable; else 503
                                with ``reasons``
``/sidecar/files/``             every tracked hour file: offset, size, lag, held bytes, lines,
                                DLQ lines and state (tailing, skipped, finalized, sealed,
                                backed_up, backup_failed)
``/sidecar/seals/?limit=N``     the N (default 50, at most 1000) most recent seals, newest first
``/sidecar/snapshots/?limit=N`` the N newest published node snapshot events (with their backup
                                status) and the snapshots still waiting
``/sidecar/dlq/``               DLQ line counts per table and reason
``/sidecar/status/``            the status page's data as JSON
``/table/<name>/<key>/``        Faust's own table view; see below
==============================  ==========================================================

Faust's table view works for the sidecar's tables (``sidecar-offsets``, ``sidecar-seals``,
``sidecar-backups``, ``sidecar-snapshots``), whose keys are paths containing ``/``: percent-encode the slashes in the
key, e.g. ``/table/sidecar-offsets/node_fills_streaming%2Fhourly%2F20260610%2F13/``. aiohttp
matches routes on the still-encoded path (``URL.path_safe``) and decodes the key afterwards, so
``%2F`` reaches the table as ``/``; with the slashes unencoded the route does not match (404).
``tests/integration/test_web.py`` checks both. A proxy in front of the worker must forward ``%2F``
unchanged (nginx: ``proxy_pass`` without a URI part). Faust serves the tables' values as stored:
an offsets value's ``head`` is the hex of the first bytes of its file (the start of the first
line's ``local_time``); an app that must not serve even that sets ``web_tables_enabled=False``.
"""

from hyperdata_sidecar.web.routes import install_pages

__all__ = ["install_pages"]
