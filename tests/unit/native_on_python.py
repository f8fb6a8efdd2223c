"""For tests only: the compiled line engine handing its records to a Python ``produce``.

The sidecar runs the native engine on its own producer only (``engines.native.NativeLines``). The
tailer's unit tests run both engines against one fake broker (tests/unit/fake_broker.py), so here
the native engine calls the broker's ``produce`` once per record, with the GIL held, on the event
loop, as the reference writer does (the engine's ``testing.PythonProducer`` sink), and the cycle's
reports are counted by Python callbacks. A refusal, a full queue or an outage then meets both
engines the same way.
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
        self.produce = produce

    def deliveries(self) -> Deliveries:
        return Deliveries()

    def sink(self, cycle: Cycle) -> Any:
        acks = cycle.deliveries.cycle_acks(self.file.topics, self.dlq_partition)
        return self.module.testing.PythonProducer(self.produce, acks.data, acks.dlq)

    async def run(self, step: Callable[[], bool]) -> bool:
        # A Python produce holds the GIL for each record and is no more thread-safe than what the
        # reference writer calls: on the event loop.
        return step()
