"""For tests and ``bench/`` only: the compiled line engine without its producer. The sidecar never
imports this module.

- :class:`NativeLinesOnPython`: the compiled engine handing each record to a Python ``produce``, once
  per record with the GIL held, on the event loop, as the reference writer does (the engine's
  ``testing.PythonProducer`` sink), its reports counted by the cycle's Python callbacks. The tailer's
  unit tests run both engines against one fake broker this way, so a refusal, a full queue or an
  outage meets both engines the same way.
- :class:`CollectingNativeLines`: the compiled engine keeping its records in its batches (collect
  mode, as it rebuilds a cycle), no delivery accounting: the differential tests and the engine
  micro-benchmark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hyperdata_sidecar.core.delivery import Deliveries
from hyperdata_sidecar.core.records import Produce
from hyperdata_sidecar.core.window import Cycle
from hyperdata_sidecar.engines import FileLines
from hyperdata_sidecar.engines.native import NativeLines


class NativeLinesOnPython(NativeLines):
    """The compiled engine of one file, producing through the Python callable ``produce``."""

    def __init__(self, module: Any, produce: Produce, file: FileLines) -> None:
        super().__init__(module, None, file)
        self.python_produce = produce

    def deliveries(self) -> Deliveries:
        return Deliveries()

    def sink(self, cycle: Cycle) -> Any:
        acks = cycle.deliveries.cycle_acks(self.file.topics, self.dlq_partition)
        return self.module.testing.PythonProducer(self.python_produce, acks.data, acks.dlq)

    async def run(self, step: Callable[[], bool]) -> bool:
        # A Python produce holds the GIL for each record and is no more thread-safe than what the
        # reference writer calls: on the event loop.
        return step()


class CollectingNativeLines(NativeLines):
    """The compiled engine of one file in collect mode: its records stay in its batches, no producer;
    a read runs in a worker thread with the GIL released, as in the sidecar."""

    def __init__(self, module: Any, file: FileLines) -> None:
        super().__init__(module, None, file)

    def deliveries(self) -> Deliveries:
        return Deliveries()

    def sink(self, cycle: Cycle) -> Any:
        return None
