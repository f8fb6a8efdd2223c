"""The progress topic: how the tailers' checkpoints and forgets reach the offsets table.

The tailers send to it (:meth:`ProgressTopic.checkpoint`, :meth:`ProgressTopic.forget`); the
``progress`` agent applies each record (:meth:`ProgressTopic.apply`) through the state writer, so a
refused table write holds the agent, not the record. At start, :meth:`ProgressTopic.barrier` waits
until every record sent before it is applied: the offsets table is then complete.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import MutableMapping, Sequence
from typing import Any

import faust
from aiokafka.errors import KafkaError

from hyperdata_sidecar.core.cursor import FileCursor
from hyperdata_sidecar.internal_topics import InternalTopic
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.state_writer import StateWriter


class ProgressTopic:
    """Sends progress records and applies them to the tables (the tables are written only here and in the agents)."""

    def __init__(
        self,
        topic: faust.types.TopicT,
        offsets: MutableMapping[str, Any],
        forgotten_in: Sequence[MutableMapping[str, Any]],
        writer: StateWriter,
        metrics: SidecarMetrics,
        log: EventLog,
        *,
        out: InternalTopic | None = None,
    ) -> None:
        self.topic = topic
        self.out: InternalTopic | faust.types.TopicT = out if out is not None else topic  # checkpoints, forgets
        self._offsets = offsets
        self._forgotten_in = forgotten_in  # every table a forget removes the path from
        self._writer = writer
        self._metrics = metrics
        self.log = log
        self._barriers: dict[str, asyncio.Future[None]] = {}

    # ------------------------------------------------------------------ sending (the tailers, the start)

    async def checkpoint(self, cursor: FileCursor) -> None:
        """Send ``cursor``. A failed send is counted and logged, not raised: the next checkpoint of
        the file carries everything this one did (at worst a restart re-publishes)."""
        try:
            await self.out.send(key=cursor.path, value={"kind": "checkpoint", "cursor": cursor.to_record()})
        except (TimeoutError, KafkaError, OSError) as exc:
            self._metrics.state_persist_failed()
            self.log.limited(logging.ERROR, "checkpoint_failed", cursor.path, 10.0, path=cursor.path, error=str(exc))

    async def forget(self, path: str) -> None:
        await self.out.send(key=path, value={"kind": "forget", "path": path})

    async def barrier(self) -> None:
        """Return once every record sent to the topic before this call is applied."""
        token = uuid.uuid4().hex
        reached = self._barriers[token] = asyncio.get_running_loop().create_future()
        await self.topic.send(key=None, value={"kind": "barrier", "token": token})
        await reached

    def held_elsewhere(self) -> str | None:
        """Why the barrier cannot pass yet, when this worker's consumer holds no partition of the
        progress topic: another worker of the same app id (a second one with the same ``NODE_ID``)
        holds it, and this one waits until that one stops. None otherwise."""
        app = getattr(self.topic, "app", None)
        consumer = getattr(app, "consumer", None)
        if app is None or consumer is None:
            return None
        try:
            assigned = consumer.assignment()
        except Exception:  # noqa: BLE001 - a consumer not started yet holds nothing to name
            return None
        name = self.topic.get_topic_name()
        if any(tp.topic == name for tp in assigned):
            return None
        return f"waiting for {name}: another worker of app {app.conf.id} holds it (a second worker with the same NODE_ID?)"

    # ------------------------------------------------------------------ applying (the progress agent)

    async def apply(self, record: dict[str, Any]) -> None:
        """Apply one progress record to the tables; returns once the tables took it (or the worker stops)."""
        kind = record.get("kind")
        if kind == "checkpoint":
            cursor = record["cursor"]
            await self._writer.put(self._offsets, cursor["path"], cursor)
        elif kind == "forget":
            for table in self._forgotten_in:
                if not await self._writer.pop(table, record["path"]):
                    return
        elif kind == "barrier":
            reached = self._barriers.pop(record.get("token", ""), None)
            if reached is not None and not reached.done():
                reached.set_result(None)
        else:
            self.log.warning("unknown_progress_record", record=str(record)[:200])
