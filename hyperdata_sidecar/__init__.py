"""hyperdata-sidecar: streams a Hyperliquid node's hourly JSONL files to Kafka (see README.md).

``faust -A hyperdata_sidecar worker`` finds the app as ``hyperdata_sidecar.app``. It is created on first
access, so the pure core and the tools import without reading any configuration.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from hyperdata_sidecar.app import app

        return app
    raise AttributeError(f"module 'hyperdata_sidecar' has no attribute {name!r}")
