"""hyperdata-sidecar: streams a Hyperliquid node's hourly JSONL files to Kafka (see README.md).

``faust -A hyperdata_sidecar worker`` finds the app as ``hyperdata_sidecar.app`` (built in
``hyperdata_sidecar.standalone``). It is created on first access, so the pure core and the tools
import without reading any configuration. The module is not called ``app``: an imported submodule
of that name would replace this attribute.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "app":
        from hyperdata_sidecar.standalone import app

        return app
    raise AttributeError(f"module 'hyperdata_sidecar' has no attribute {name!r}")
