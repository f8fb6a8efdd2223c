"""Faust's worker consumer reading ``read_committed`` (``DELIVERY=exactly_once``).

With exactly_once the progress, rotation and snapshot-event records are written in the data plane's
transactions, and the agents must see only the committed ones: a progress record of an aborted
transaction would move a file's offset past lines that were never committed. Faust reads
``read_committed`` only in its own ``processing_guarantee="exactly_once"``, which also makes it
write through one aiokafka transactional producer per input partition (not usable here:
faust-streaming #517, #177, #323). So :func:`install` marks the app, and the consumer Faust creates
for a marked app's worker gets aiokafka's ``isolation_level="read_committed"`` before it starts.

Records written without a transaction (Faust's own changelogs, the progress barrier, a host app's
topics) are read as before: a ``read_committed`` reader waits only behind open transactions.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

READ_COMMITTED_ATTR = "_hyperdata_sidecar_read_committed"
_PATCHED = "_hyperdata_sidecar_patched"


def install(app: faust.App) -> None:
    """Make ``app``'s worker consumer read ``read_committed`` (patches Faust's aiokafka driver once per process)."""
    setattr(app, READ_COMMITTED_ATTR, True)
    create = AIOKafkaConsumerThread._create_worker_consumer
    if getattr(create, _PATCHED, False):
        return

    def create_worker_consumer(self: AIOKafkaConsumerThread, transport: Any) -> Any:
        consumer = create(self, transport)
        if getattr(self.app, READ_COMMITTED_ATTR, False):
            # aiokafka reads the level when the consumer starts (its fetcher is made in start()).
            consumer._isolation_level = "read_committed"
        return consumer

    setattr(create_worker_consumer, _PATCHED, True)
    AIOKafkaConsumerThread._create_worker_consumer = create_worker_consumer  # type: ignore[method-assign]


def isolation_level(app: faust.App) -> str:
    """The isolation level ``app``'s worker consumer reads with."""
    return "read_committed" if getattr(app, READ_COMMITTED_ATTR, False) else "read_uncommitted"
