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
from faust.types import TP

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
        self.applied: dict[int, int] = {}  # partition -> offset of the last record applied (the agent sets it)
        self.barrier_at: tuple[int, int] | None = None  # (partition, offset) of the barrier record awaited

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
        sent = await self.topic.send(key=None, value={"kind": "barrier", "token": token})
        written = await sent  # the broker has it: its partition and offset
        self.barrier_at = (written.partition, written.offset)
        try:
            await reached
        finally:
            self.barrier_at = None

    async def rewind_if_skipped(self) -> dict[str, int | None] | None:
        """The consumer fetched past the awaited barrier record but the agent never applied it: seek
        the partition back to the first record not applied, so it and the records before it are
        applied (again, in order: each checkpoint sets the file's cursor). Seen twice:

        - after a frozen worker's consumer rejoined the group, Faust dropped records it had fetched
          (the position at the high watermark, the agent three records behind): back to the record
          after the last one applied;
        - a second worker with the same ``NODE_ID`` (drill 17): the first one, still holding the
          partition, applied this worker's barrier record and committed past it before it was
          fenced, so this worker, given the partition, starts past its own barrier and applies
          nothing. With nothing applied in this process: back to where it started (the committed
          offset), or to the barrier record if it started past it (what came before was applied by
          the former holder, and this worker's tables recovered it with the partition).

        What was done, or None when nothing was skipped."""
        if self.barrier_at is None:
            return None
        partition, offset = self.barrier_at
        applied = self.applied.get(partition)
        state = self.consumer_view().get("partitions", {}).get(str(partition))
        position = state.get("position") if state is not None else None
        if (applied is not None and applied >= offset) or position is None or position <= offset:
            return None
        tp = TP(self.topic.get_topic_name(), partition)
        consumer = self.topic.app.consumer
        if applied is not None:
            seek_to = applied + 1
        else:
            started = getattr(consumer, "_committed_offset", {}).get(tp)  # Faust's: the group's, at the assignment
            seek_to = offset if started is None else min(started, offset)
        await consumer.seek(tp, seek_to)
        return {"partition": partition, "barrier_offset": offset, "applied": applied, "position": position, "seek_to": seek_to}

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

    def consumer_view(self) -> dict[str, Any]:
        """What this worker's consumer knows of each progress partition it holds, for a barrier that
        waits long: the last offset the agent applied, and the fetch position, high watermark, last
        stable offset and whether Faust paused the partition or stopped its flow. Read from the
        consumer's thread without a lock: a snapshot for a log line and for the rewind's look at the
        position (a stale position at worst delays the seek, or seeks back once more: the records
        are applied again in order)."""
        app = getattr(self.topic, "app", None)
        consumer = getattr(app, "consumer", None)
        view: dict[str, Any] = {"applied": {str(p): offset for p, offset in self.applied.items()}}  # JSON keys
        if app is None or consumer is None:
            return view
        view["flow_active"] = getattr(consumer, "flow_active", None)
        view["in_recovery"] = getattr(app, "in_recovery", None)
        name = self.topic.get_topic_name()
        paused = {tp.partition for tp in getattr(consumer, "_paused_partitions", ()) if tp.topic == name}
        kafka = getattr(getattr(consumer, "_thread", None), "_consumer", None)  # aiokafka's, in Faust's thread
        try:
            assignment = kafka._subscription.subscription.assignment if kafka is not None else None
        except AttributeError:  # not subscribed yet
            assignment = None
        partitions: dict[str, dict[str, Any]] = {}
        for tp in consumer.assignment() if assignment is not None else ():
            if tp.topic != name or assignment is None:
                continue
            state = assignment.state_value(tp)
            partitions[str(tp.partition)] = {
                "position": getattr(state, "_position", None),
                "highwater": getattr(state, "highwater", None),
                "last_stable_offset": getattr(state, "lso", None),
                "paused": tp.partition in paused or bool(getattr(state, "paused", False)),
                "status": str(getattr(state, "_status", None)),
            }
        view["partitions"] = partitions
        return view

    # ------------------------------------------------------------------ applying (the progress agent)

    async def apply(self, record: dict[str, Any], *, partition: int = 0, offset: int = -1) -> None:
        """Apply one progress record (at ``offset`` of ``partition``) to the tables; returns once the
        tables took it (or the worker stops)."""
        self.applied[partition] = offset
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
