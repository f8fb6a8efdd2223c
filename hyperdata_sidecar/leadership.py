"""The stream's leadership: which sidecar of a ``STREAM_ID`` publishes, decided by one Kafka group.

As Karapace elects its primary, every sidecar of the stream joins one consumer group
(``<STREAM_ID>-sidecar-stream-leader``) on the stream's one-partition topic (``<STREAM_ID>-sidecar-stream``)
with its own assignor, :class:`StreamAssignor`: the group's leader member runs the election of
:func:`hyperdata_sidecar.core.leadership.elect` on what every member claimed when it joined, the
member given the partition is the active and every member learns the outcome. A sidecar's own Faust
group is not used: each sidecar is its own Faust app, with its own tables, and Faust's assignor would
move them between nodes.

The group says who is active; it does not stop a former active on its own. The active writes with
the stream's ``transactional.id``, so the new active's ``init_transactions`` fences the former one
before its first record, and a former active that learns it lost (an assignment without the
partition) stops its worker (:attr:`Leadership.on_demoted`); the restart stands by.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment, ConsumerProtocolMemberMetadata
from aiokafka.errors import KafkaError

from hyperdata_sidecar.config import Settings
from hyperdata_sidecar.core.backoff import Backoff
from hyperdata_sidecar.core.leadership import Claim, Role, Verdict, elect
from hyperdata_sidecar.logs import EventLog
from hyperdata_sidecar.metrics import SidecarMetrics
from hyperdata_sidecar.topics import TopicSpec, apply_contract

#: How long the group waits for a member's heartbeat before it elects another active (the broker's
#: default ``group.min.session.timeout.ms`` is also 6 s): a killed active's standby takes over after it.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 1000
POLL_MS = 1000  # the group's consumer is polled (nothing is fetched: its partition is paused) this often
FIRST_BACKOFF_S, MAX_BACKOFF_S = 1.0, 30.0
LEAVE_TIMEOUT_S = 5.0  # at the stop, how long leaving the group may take (a broker away does not answer)


def stream_topic_name(stream_id: str) -> str:
    """The stream's one-partition topic: the leadership group's, and the position records'."""
    return f"{stream_id}-sidecar-stream"


class StreamAssignor(AbstractPartitionAssignor):
    """aiokafka's assignor for the stream's group: :func:`elect` on the members' claims."""

    name = "hyperdata-sidecar-stream-v1"
    version = 0

    def __init__(self, leadership: Leadership) -> None:
        self._leadership = leadership

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(self.version, sorted(topics), self._leadership.claim().encode())

    def assign(
        self, cluster: ClusterMetadata, members: Mapping[str, ConsumerProtocolMemberMetadata]
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        election = elect({member: Claim.decode(meta.user_data) for member, meta in members.items()})
        topic, verdict = self._leadership.topic, election.verdict.encode()
        return {
            member: ConsumerProtocolMemberAssignment(self.version, [(topic, [0])] if member == election.member else [], verdict)
            for member in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self._leadership.assigned(Verdict.decode(assignment.user_data), holds=bool(assignment.partitions()))


class _Paused(ConsumerRebalanceListener):
    """Pauses the partition when it is assigned: the group's consumer never fetches a record."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            self.consumer.pause(*assigned)


class Leadership:
    """This sidecar's part in its stream: standby until the group elects it, then active until the
    worker stops (a demotion stops the worker: :attr:`on_demoted`)."""

    def __init__(
        self, settings: Settings, metrics: SidecarMetrics, log: EventLog, *, client_id: str, on_demoted: Callable[[str], None]
    ) -> None:
        assert settings.stream_id is not None
        self.settings = settings
        self.stream = settings.stream_id
        self.topic = stream_topic_name(self.stream)
        self.group = f"{self.stream}-sidecar-stream-leader"
        self.client_id = client_id
        self.node = settings.node_id
        self.metrics = metrics
        self.log = log
        self.on_demoted = on_demoted
        self.role = Role.STANDBY
        self.term = 0
        self.verdict: Verdict | None = None  # the last election's outcome, as this member learned it
        self.elected_at: float | None = None  # epoch seconds this sidecar became active
        self._elected = asyncio.Event()
        self._consumer: AIOKafkaConsumer | None = None
        self._stopping = False
        self.problem: str | None = "not in the stream's group yet"  # for readiness; None once a join completed
        metrics.stream_role(False, 0)

    # ------------------------------------------------------------------ what the group says

    def claim(self) -> Claim:
        """What this member says when it joins: its node, its term and since when while it is
        active, the highest term it has learned of."""
        seen = max(self.verdict.term if self.verdict is not None else 0, self.term)
        if self.role is Role.ACTIVE:
            return Claim(self.node, self.term, seen, self.elected_at or 0.0)
        return Claim(self.node, 0, seen)

    def assigned(self, verdict: Verdict | None, *, holds: bool) -> None:
        """The group's election reached this member: it holds the stream's partition or not."""
        self.verdict, self.problem = verdict, None
        members = len(verdict.members) if verdict is not None else 0
        if holds and self.role is Role.STANDBY:
            self.role, self.term, self.elected_at = Role.ACTIVE, verdict.term if verdict else 0, time.time()
            self.metrics.stream_elected()
            self.log.info("stream_elected", stream=self.stream, term=self.term, members=list(verdict.members) if verdict else [])
            self._elected.set()
        elif not holds and self.role is Role.ACTIVE:
            active = verdict.active if verdict is not None else None
            reason = f"the stream's group elected {active or 'no member'} (term {verdict.term if verdict else '?'})"
            self.log.error("stream_demoted", stream=self.stream, term=self.term, reason=reason)
            self.role = Role.STANDBY
            self.on_demoted(reason)
        elif not holds:
            self.log.info("stream_standby", stream=self.stream, active=verdict.active if verdict else None, members=members)
        self.metrics.stream_role(self.role is Role.ACTIVE, members)

    def not_ready_reason(self) -> str | None:
        """Why this sidecar is not ready to take its stream over (None: it is in the group)."""
        return None if self.problem is None else f"stream {self.stream}: {self.problem}"

    async def elected(self) -> None:
        """Return once this sidecar is the stream's active."""
        await self._elected.wait()

    def status(self) -> dict[str, Any]:
        """For the status views: the stream, this sidecar's role and term, the active and the members."""
        verdict = self.verdict
        return {
            "stream": self.stream,
            "role": self.role.value,
            "term": self.term if self.role is Role.ACTIVE else None,
            "active": verdict.active if verdict is not None else None,
            "members": list(verdict.members) if verdict is not None else [],
            "elected_at": self.elected_at,
        }

    # ------------------------------------------------------------------ the group's consumer

    async def run(self, pause: Callable[[float], Any]) -> None:
        """Join the group and stay in it until :meth:`leave`; a failed consumer is logged
        (``stream_group_failed``) and made again after a back-off (``pause``: the worker's sleep)."""
        backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
        while not self._stopping:
            consumer = self._consumer = AIOKafkaConsumer(
                bootstrap_servers=self.settings.kafka_bootstrap,
                client_id=self.client_id,
                group_id=self.group,
                enable_auto_commit=False,
                partition_assignment_strategy=(StreamAssignor(self),),
                session_timeout_ms=SESSION_TIMEOUT_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                **self.settings.security.client_kwargs(),
            )
            try:
                await self._declare_topic()
                await consumer.start()
                consumer.subscribe([self.topic], listener=_Paused(consumer))
                backoff = Backoff(FIRST_BACKOFF_S, MAX_BACKOFF_S)
                while not self._stopping:
                    await consumer.getmany(timeout_ms=POLL_MS)  # keeps the member alive; its partition is paused
            except (KafkaError, OSError) as exc:
                self.problem = f"the leadership group's consumer failed: {type(exc).__name__}: {exc}"
                self.log.limited(
                    logging.WARNING,
                    "stream_group_failed",
                    self.group,
                    60.0,
                    group=self.group,
                    role=self.role.value,
                    error=f"{type(exc).__name__}: {exc}",
                    retry_in_s=backoff.delay,
                )
            finally:
                if not self._stopping:
                    await consumer.stop()
            if not self._stopping:
                await backoff.wait(pause)

    async def _declare_topic(self) -> None:
        """Create the stream's topic if it is missing (one partition, compacted: the last position
        per table is all a handover reads); every sidecar of the stream does, the first one wins."""
        spec = TopicSpec("stream", self.topic, "STREAM_ID", "", "internal", 1, "table", {"cleanup.policy": "compact"})
        await apply_contract(
            self.settings.kafka_bootstrap,
            [spec],
            replication_factor=self.settings.topic_replication_factor,
            admin_kwargs=self.settings.security.client_kwargs(),
        )

    async def leave(self) -> None:
        """Leave the group (at the worker's stop, after the data path stopped): a standby is elected
        at once instead of after the session timeout."""
        self._stopping = True
        if self._consumer is not None:
            try:
                await asyncio.wait_for(self._consumer.stop(), LEAVE_TIMEOUT_S)
            except TimeoutError:
                self.log.warning(
                    "stream_group_failed",
                    group=self.group,
                    role=self.role.value,
                    error=f"no answer to leaving the group within {LEAVE_TIMEOUT_S:.0f} s",
                )
