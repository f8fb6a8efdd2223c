"""The one read of a whole topic that the seal and snapshot agents make after a start."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, TopicPartition

if TYPE_CHECKING:
    from hyperdata_sidecar.ports import TopicReaderHost


async def topic_values(host: TopicReaderHost, topic: str) -> list[bytes]:
    """The values of every record of ``topic`` (one of the data plane's topics), from its beginning
    to its end offsets of the moment the read starts."""
    settings = host.settings
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False, **settings.security.client_kwargs()
    )
    partitions = [TopicPartition(topic, p) for p in range(host.dataplane.partitions[topic])]
    await consumer.start()
    try:
        consumer.assign(partitions)
        for tp, offset in (await consumer.beginning_offsets(partitions)).items():
            consumer.seek(tp, offset)
        end = await consumer.end_offsets(partitions)
        values: list[bytes] = []
        while [tp for tp in partitions if await consumer.position(tp) < end[tp]]:
            for records in (await consumer.getmany(*partitions, timeout_ms=1000)).values():
                values += [record.value for record in records if record.value is not None]
        return values
    finally:
        await consumer.stop()
