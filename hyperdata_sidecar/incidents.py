"""What went wrong with the watched files since the start, for the status page.

:class:`IncidentHistory` keeps the last lost files, late appends and rewritten sealed files, and per
table the count and last of its block regressions; each record is also a metric and a log line.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from hyperdata_sidecar.core.records import Regression
from hyperdata_sidecar.core.times import iso_utc
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics

SHOWN = 20  # lost files kept for the status page (and as many late appends and rewritten sealed files)


class IncidentHistory:
    """The incidents the tailers report, as the status page shows them."""

    def __init__(self, metrics: SidecarMetrics, log: EventLog) -> None:
        self._metrics = metrics
        self.log = log
        self.lost: deque[dict[str, Any]] = deque(maxlen=SHOWN)
        self.late_appends: deque[dict[str, Any]] = deque(maxlen=SHOWN)
        self.rewritten: deque[dict[str, Any]] = deque(maxlen=SHOWN)
        self.regressions: dict[str, dict[str, Any]] = {}  # table -> how many since start, and the last one

    def file_lost(self, table: str, path: str, reason: str, published_to: int, size_seen: int) -> None:
        self._metrics.file_lost(table)
        self.lost.append(
            {"path": path, "reason": reason, "published_to": published_to, "size_seen": size_seen, "at": iso_utc(time.time())}
        )
        self.log.error("file_lost", table=table, path=path, reason=reason, published_to=published_to, size_seen=size_seen)

    def block_regression(self, table: str, path: str, regression: Regression) -> None:
        self._metrics.block_regression(table)
        seen = self.regressions.get(table, {}).get("count", 0) + 1
        self.regressions[table] = {
            "count": seen,
            "path": path,
            "offset": regression.offset,
            "previous": regression.previous,
            "block": regression.block,
            "epoch": regression.epoch,
            "at": iso_utc(time.time()),
        }
        self.log.limited(
            logging.WARNING,
            "block_regression",
            table,
            10.0,
            table=table,
            path=path,
            offset=regression.offset,
            previous_block=regression.previous,
            block=regression.block,
            epoch=regression.epoch,
            since_start=seen,
        )

    def late_append(self, table: str, path: str, revision: int, sealed_size: int, size: int) -> None:
        self._metrics.late_append(table)
        self.late_appends.append(
            {"path": path, "revision": revision, "sealed_size": sealed_size, "size": size, "at": iso_utc(time.time())}
        )
        self.log.error("late_append", table=table, path=path, sealed_size=sealed_size, size=size, revision=revision)

    def sealed_file_rewritten(self, table: str, path: str, reason: str, sealed_size: int, size: int) -> None:
        self._metrics.sealed_file_rewritten(table, reason)
        self.rewritten.append(
            {"path": path, "reason": reason, "sealed_size": sealed_size, "size": size, "at": iso_utc(time.time())}
        )
        self.log.error("sealed_file_rewritten", table=table, path=path, reason=reason, sealed_size=sealed_size, size=size)
