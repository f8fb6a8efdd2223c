"""The broker's view of the sidecar's topics, asked with an admin client (blocking: run in a worker thread).

:class:`TopicAdmin` answers what the door checks a topic against: its partition count, its
``max.message.bytes``, and its partitions' end offsets (where a record written from now on lands at
the lowest: a new incarnation of the topic counts from 0 again). Each look makes an admin client of
its own, gone with it: an idle one would keep reconnecting, and logging, through a broker outage.
None of the sidecar's clients creates a topic (``allow.auto.create.topics=false``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec

from hyperdata_sidecar.config import Settings

LIBRDKAFKA_LOGGER = "hyperdata_sidecar.librdkafka"
METADATA_TIMEOUT_S = 10.0
#: What the broker answers for a moment about a topic just created: its leaders are not known yet.
LEADERS_SETTLING = frozenset({"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE"})
LEADERS_SETTLE_S = 5.0


class TopicLookFailed(Exception):
    """The broker could not be asked about a topic (unreachable, a topic missing at start)."""


class TopicAdmin:
    """The admin client's looks at the topics of ``contract`` (topic -> its partition count)."""

    def __init__(self, settings: Settings, contract: Mapping[str, int]) -> None:
        self.settings = settings
        self.contract = contract

    def describe(self, topics: list[str]) -> tuple[dict[str, int], dict[str, int], dict[str, dict[int, int]]]:
        """Blocking: partition counts, effective ``max.message.bytes`` and, of each topic with the
        contract's count, its partitions' end offsets."""
        admin = self.admin()
        metadata = _metadata(admin)
        partitions: dict[str, int] = {}
        for topic in topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                reason = found.error.str() if found is not None and found.error is not None else "not in the broker's metadata"
                raise TopicLookFailed(f"topic {topic}: {reason}")
            partitions[topic] = len(found.partitions)
        resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics]
        limits: dict[str, int] = {}
        try:
            for resource, future in admin.describe_configs(resources, request_timeout=METADATA_TIMEOUT_S).items():
                entry = future.result(timeout=METADATA_TIMEOUT_S).get("max.message.bytes")
                limits[resource.name] = int(entry.value) if entry is not None and entry.value else 1048588
        except KafkaException as exc:
            raise TopicLookFailed(f"topic configs: {exc.args[0].str() if exc.args else exc}") from exc
        floors = {
            topic: self.end_offsets(admin, topic, count)
            for topic, count in partitions.items()
            if count == self.contract.get(topic)
        }
        return partitions, limits, floors

    def counts(self, topics: list[str]) -> dict[str, int]:
        """Blocking: each topic's partition count in one metadata request (0: missing)."""
        metadata = _metadata(self.admin())
        found = {topic: metadata.topics.get(topic) for topic in topics}
        return {topic: len(t.partitions) if t is not None and t.error is None else 0 for topic, t in found.items()}

    def leader(self, topic: str, partition: int) -> int | None:
        """Blocking: the broker's leader of ``topic``'s ``partition`` (its node id), None when it has none."""
        found = _metadata(self.admin(), topic).topics.get(topic)
        described = found.partitions.get(partition) if found is not None and found.error is None else None
        return described.leader if described is not None and described.leader >= 0 else None

    def end_offsets(self, admin: AdminClient, topic: str, count: int) -> dict[int, int]:
        """Blocking: the end offset of each of ``topic``'s ``count`` partitions (asked again for a few
        seconds while the leaders of a topic just created settle)."""
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(count)}
        deadline = time.monotonic() + LEADERS_SETTLE_S
        while True:
            try:
                return {
                    tp.partition: future.result(timeout=METADATA_TIMEOUT_S).offset
                    for tp, future in admin.list_offsets(request, request_timeout=METADATA_TIMEOUT_S).items()
                }
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                name = error.name() if isinstance(error, KafkaError) else ""
                if name not in LEADERS_SETTLING or time.monotonic() > deadline:
                    raise TopicLookFailed(
                        f"topic {topic} end offsets: {error.str() if isinstance(error, KafkaError) else exc}"
                    ) from exc
            time.sleep(0.2)

    def look(self, topic: str, refused: bool) -> tuple[int, dict[int, int] | None]:
        """Blocking: the broker's partition count of ``topic`` (0: missing) and, when it is the
        contract's and the topic may not be written now (``refused``), its end offsets (to check it again)."""
        admin = self.admin()
        try:
            described = admin.describe_topics(TopicCollection([topic]), request_timeout=METADATA_TIMEOUT_S)[topic]
            count = len(described.result(timeout=METADATA_TIMEOUT_S).partitions)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return 0, None
            raise TopicLookFailed(f"topic {topic}: {error.str() if isinstance(error, KafkaError) else exc}") from exc
        if count != self.contract.get(topic) or not refused:
            return count, None
        return count, self.end_offsets(admin, topic, count)

    def admin(self) -> AdminClient:
        """A client for one look at the topics, gone with it (an idle one would keep reconnecting, and
        logging, through a broker outage); its librdkafka lines go to the data plane's logger."""
        config: dict[str, Any] = {**self.client_config(), "logger": logging.getLogger(LIBRDKAFKA_LOGGER), "log_level": 4}
        return AdminClient(config)

    def client_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.settings.kafka_bootstrap,
            # Never create a topic: librdkafka's producer asks the broker to (its default, unlike a
            # consumer's), and a topic deleted under the worker came back with the broker's count.
            "allow.auto.create.topics": False,
            **self.settings.security.librdkafka_config(),
        }


def _metadata(admin: AdminClient, topic: str | None = None) -> Any:
    """Blocking: the broker's metadata (of ``topic`` only, when given; a ``ClusterMetadata``);
    :class:`TopicLookFailed` when the broker cannot be asked."""
    try:
        return admin.list_topics(topic=topic, timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        raise TopicLookFailed(f"broker metadata: {exc.args[0].str() if exc.args else exc}") from exc
