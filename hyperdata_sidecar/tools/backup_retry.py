"""``backup-retry``: ask a worker for a new series of backup tries of one hour file.

The request is a record on the worker's internal backup-attempts topic
(``<app id>-sidecar-backup-attempts``), the topic its ``backup_attempts`` agent reads. Going through
Kafka rather than the web server keeps the web endpoints read-only, and a request sent while the
worker is down is served when it runs again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from hyperdata_sidecar.core.hourfile import HourFile
from hyperdata_sidecar.core.snapshots import SnapshotFile


def watched_relpath(path: str, watch_dir: Path) -> str:
    """``path`` as the sidecar names it: relative to ``watch_dir`` (an absolute path must lie below
    it). Raises ValueError when it names no hour file and no node snapshot."""
    relpath = path
    if os.path.isabs(path):
        try:
            relpath = Path(os.path.normpath(path)).relative_to(Path(os.path.normpath(watch_dir))).as_posix()
        except ValueError:
            raise ValueError(f"{path} is not below WATCH_DIR ({watch_dir})") from None
    if HourFile.parse(relpath) is None and SnapshotFile.parse(relpath) is None:
        raise ValueError(
            f"{path!r} names no hour file (<table>/hourly/<YYYYMMDD>/<H> below WATCH_DIR) and no node snapshot "
            "(periodic_abci_states/<YYYYMMDD>/<height>.rmp)"
        )
    return relpath


async def request_backup_retry(bootstrap: str, topic: str, relpath: str, client_kwargs: Mapping[str, Any]) -> None:
    """Write the request for ``relpath`` to ``topic``, encoded as Faust's json codec reads it.

    Raises RuntimeError when the topic does not exist (no worker with this app id ever ran), and
    aiokafka's errors when the broker cannot be reached.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **client_kwargs)
    await admin.start()
    try:
        if topic not in await admin.list_topics():
            raise RuntimeError(f"topic {topic} does not exist: has a worker with this NODE_ID ever run against {bootstrap}?")
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **client_kwargs)
    await producer.start()
    try:
        await producer.send_and_wait(
            topic, key=json.dumps(relpath).encode(), value=json.dumps({"kind": "request", "path": relpath}).encode()
        )
    finally:
        await producer.stop()
