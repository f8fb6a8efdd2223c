"""Every table's backlog, sampled once a second: what the metrics, the status page, ``/sidecar/files/``
and the alert read.

The measuring is :mod:`hyperdata_sidecar.core.backlog` (a :class:`BacklogMeter` per table); this
module feeds it the tailers' backlogs, exports them as ``hyperdata_sidecar_backlog_bytes`` and
``hyperdata_sidecar_backlog_files`` and logs one line when a table starts falling behind and one
when it no longer is.
"""

from __future__ import annotations

from collections.abc import Mapping

from hyperdata_sidecar.core.backlog import Backlog, BacklogMeter, Estimate
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics


class TableBacklogs:
    """One :class:`BacklogMeter` per table and the latest estimate of each."""

    def __init__(self, metrics: SidecarMetrics, log: EventLog) -> None:
        self.metrics = metrics
        self.log = log
        self._meters: dict[str, BacklogMeter] = {}
        self._estimates: dict[str, Estimate] = {}

    def sample(self, now: float, backlogs: Mapping[str, Backlog]) -> None:
        """Record each table's backlog at ``now`` (monotonic seconds) and export it."""
        for table, backlog in backlogs.items():
            estimate = self._meters.setdefault(table, BacklogMeter()).sample(now, backlog)
            previous = self._estimates.get(table)
            self._estimates[table] = estimate
            self.metrics.set_backlog(table, backlog.bytes, backlog.files)
            if estimate.falling_behind != (previous is not None and previous.falling_behind):
                self._report_turn(table, estimate)

    def estimates(self) -> dict[str, Estimate]:
        """The latest estimate of each table sampled so far."""
        return dict(self._estimates)

    def _report_turn(self, table: str, estimate: Estimate) -> None:
        fields = {"table": table, "backlog_bytes": estimate.backlog.bytes, "backlog_files": estimate.backlog.files}
        if estimate.falling_behind:
            # Once per turn, not per sample: the state lasts while the backlog does not shrink.
            self.log.warning("falling_behind", **fields, drain_bytes_per_s=estimate.drain_bytes_per_s)
        else:
            self.log.info("falling_behind_ended", **fields, eta_s=estimate.eta_s)
