"""The topic contract (``topics.toml``) and its idempotent application to a cluster; the names of
the sidecar's internal topics.

``faust -A hyperdata_sidecar topics`` applies it with the worker's own settings (``faust.ini`` and
the environment: topic names, ``KAFKA_BOOTSTRAP``, ``TOPIC_REPLICATION_FACTOR``, the SASL/SSL
settings); the worker applies it at start (``TOPICS_APPLY_ON_START``). Applying creates missing
topics with the contract's partitions and configs and leaves existing ones alone: one whose
partition count differs is reported (and logged as a warning with both counts), never altered,
because changing it would move keys between partitions under running consumers.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTRACT_PATH = Path(__file__).with_name("topics.toml")
_LEGAL_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class ContractError(ValueError):
    """The contract, or a topic name given in the environment, is not usable. ``setting`` names the
    ``TOPIC_*`` setting at fault."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting}: {problem}")
        self.setting = setting
        self.problem = problem


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the contract, with its name resolved from the environment."""

    role: str
    name: str
    env: str
    default: str
    plane: str
    partitions: int
    key: str
    config: Mapping[str, str]


class Outcome(enum.Enum):
    CREATED = "created"
    EXISTS = "exists"
    PARTITION_MISMATCH = "partition-mismatch"


@dataclass(frozen=True)
class TopicOutcome:
    """What applying the contract found or did for one topic."""

    topic: str
    outcome: Outcome
    partitions: int
    actual_partitions: int

    def describe(self) -> str:
        if self.outcome is Outcome.PARTITION_MISMATCH:
            return (
                f"{self.topic}: exists with {self.actual_partitions} partitions, the contract says {self.partitions}; left alone"
            )
        return f"{self.topic}: {self.outcome.value} ({self.actual_partitions} partitions)"


# --------------------------------------------------------------------------- internal topics

#: The sidecar's internal topics (one partition each, created by Faust), by role: checkpoints on
#: their way to ``sidecar-offsets``; finalized files on their way to the seal and backup agents;
#: backup retries and ``backup-retry`` requests; snapshot events on their way to the snapshot agent.
INTERNAL_TOPICS = ("progress", "rotations", "backup-attempts", "snapshot-events")


def internal_topic_name(app_id: str, role: str) -> str:
    """The internal topic of ``role`` (one of :data:`INTERNAL_TOPICS`) of the app ``app_id``:
    ``<app id>-sidecar-<role>`` (the ``backup-retry`` command writes to ``backup-attempts`` too)."""
    if role not in INTERNAL_TOPICS:
        raise ValueError(f"no internal topic {role!r}; the sidecar has {', '.join(INTERNAL_TOPICS)}")
    return f"{app_id}-sidecar-{role}"


# --------------------------------------------------------------------------- contract


def load_contract(env: Mapping[str, str] = os.environ, path: Path = CONTRACT_PATH) -> list[TopicSpec]:
    """Read the contract and resolve each topic's name from ``env`` (empty means unset).

    Raises ContractError naming the variable when a name is not a legal Kafka topic name,
    or when two roles resolve to the same topic.
    """
    with open(path, "rb") as contract:
        entries = tomllib.load(contract)["topics"]
    specs = [_spec(entry, env) for entry in entries]
    seen: dict[str, str] = {}
    for spec in specs:
        if spec.name in seen:
            raise ContractError(spec.env, f"names the topic {spec.name!r}, as {seen[spec.name]} does")
        seen[spec.name] = spec.env
    return specs


def _spec(entry: Mapping, env: Mapping[str, str]) -> TopicSpec:
    name = env.get(entry["env"]) or entry["default"]
    if not _LEGAL_TOPIC_NAME.fullmatch(name) or name in {".", ".."}:
        raise ContractError(entry["env"], f"{name!r} is not a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)")
    return TopicSpec(
        role=entry["role"],
        name=name,
        env=entry["env"],
        default=entry["default"],
        plane=entry["plane"],
        partitions=int(entry["partitions"]),
        key=entry["key"],
        config={key: str(value) for key, value in entry.get("config", {}).items()},
    )


def spec_for(specs: Sequence[TopicSpec], role: str) -> TopicSpec:
    """The spec of ``role`` ("book_diffs", "order_statuses", "fills", "seals", "dlq", "snapshots")."""
    for spec in specs:
        if spec.role == role:
            return spec
    raise KeyError(role)


def producer_max_request_size(specs: Sequence[TopicSpec]) -> int:
    """The producer request limit that matches the contract: its largest max.message.bytes."""
    return max(int(spec.config.get("max.message.bytes", 0)) for spec in specs)


# --------------------------------------------------------------------------- apply


async def apply_contract(
    bootstrap: str,
    specs: Sequence[TopicSpec],
    *,
    replication_factor: int = 1,
    admin_kwargs: dict | None = None,
) -> list[TopicOutcome]:
    """Create the missing topics of ``specs``; report on the existing ones. Idempotent.

    ``admin_kwargs`` go to AIOKafkaAdminClient as they are (security settings, timeouts).
    Returns one outcome per spec, in order; each is also logged (a partition mismatch as a
    warning). Raises aiokafka's KafkaError when the cluster cannot be reached or refuses
    to create a topic.
    """
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **(admin_kwargs or {}))
    await admin.start()
    try:
        created = await _create_missing(admin, specs, replication_factor)
        actual = await _partition_counts(admin, [spec.name for spec in specs])
    finally:
        await admin.close()
    outcomes = [_outcome(spec, created, actual) for spec in specs]
    for outcome in outcomes:
        level = logging.WARNING if outcome.outcome is Outcome.PARTITION_MISMATCH else logging.INFO
        log.log(level, "topic %s", outcome.describe())
    return outcomes


async def _create_missing(admin, specs: Sequence[TopicSpec], replication_factor: int) -> set[str]:
    """Create the topics the cluster lacks; return the names this call created."""
    from aiokafka.admin import NewTopic
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    # list_topics asks for all topics; asking for named ones would let a broker with
    # auto.create.topics.enable create them with its defaults.
    existing = set(await admin.list_topics())
    missing = [spec for spec in specs if spec.name not in existing]
    if not missing:
        return set()
    response = await admin.create_topics(
        [NewTopic(spec.name, spec.partitions, replication_factor, topic_configs=dict(spec.config)) for spec in missing]
    )
    created = set()
    for topic, error_code, *message in response.topic_errors:
        error = for_code(error_code)
        if error_code == 0:
            created.add(topic)
        elif error is not TopicAlreadyExistsError:
            # Another sidecar creating it at the same moment is fine; anything else is not.
            raise error(f"creating topic {topic}: {message[0] if message else ''}")
    return created


async def _partition_counts(admin, names: list[str], patience_s: float = 30.0) -> dict[str, int]:
    """Partition counts of existing topics, once the brokers' metadata shows them.

    A topic created a moment ago (by this call or another client) is briefly listed
    without partitions or with an error such as LEADER_NOT_AVAILABLE: ask again.
    """
    from aiokafka.errors import for_code

    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience_s
    while True:
        described = await admin.describe_topics(names)
        pending = [t for t in described if t["error_code"] or not t["partitions"]]
        if not pending:
            return {t["topic"]: len(t["partitions"]) for t in described}
        if loop.time() > deadline:
            raise for_code(pending[0]["error_code"])(f"no metadata for topic {pending[0]['topic']} after {patience_s:.0f}s")
        await asyncio.sleep(0.2)


def _outcome(spec: TopicSpec, created: set[str], actual: Mapping[str, int]) -> TopicOutcome:
    count = actual[spec.name]
    if spec.name in created:
        return TopicOutcome(spec.name, Outcome.CREATED, spec.partitions, count)
    kind = Outcome.EXISTS if count == spec.partitions else Outcome.PARTITION_MISMATCH
    return TopicOutcome(spec.name, kind, spec.partitions, count)
