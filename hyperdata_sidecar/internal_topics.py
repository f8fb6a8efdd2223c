"""How the rooms write the internal progress, rotation and snapshot-event topics.

With ``DELIVERY=at_least_once`` through Faust's producer, as Faust's topics do. With
``exactly_once`` into the data plane's open transaction (:meth:`~hyperdata_sidecar.dataplane.DataPlane.send_internal`),
with the records they cover: a progress record is read (the agents read ``read_committed``) only
once the lines it covers are committed, and an aborted transaction takes both away. The values are
written as Faust's ``json`` and ``raw`` serializers would, so the agents read them either way.
"""

from __future__ import annotations

from typing import Any, Protocol

import faust
import orjson


class InternalSender(Protocol):
    """The data plane, as an internal topic is written into its transaction."""

    @property
    def exactly_once(self) -> bool: ...

    async def send_internal(self, topic: str, key: bytes | None, value: bytes) -> None: ...


class InternalTopic:
    """One internal topic (one partition, JSON keys) as the rooms send to it; :attr:`topic` is the
    Faust topic the agents read."""

    def __init__(self, topic: faust.types.TopicT, sender: InternalSender) -> None:
        self.topic = topic
        self.sender = sender

    async def send(self, *, key: str | None, value: Any) -> None:
        """Send one record: ``value`` is bytes (the ``raw`` serializer's) or a JSON-serializable object."""
        if not self.sender.exactly_once:
            await self.topic.send(key=key, value=value)
            return
        encoded_key = None if key is None else orjson.dumps(key)
        encoded = value if isinstance(value, bytes) else orjson.dumps(value)
        await self.sender.send_internal(self.topic.get_topic_name(), encoded_key, encoded)
