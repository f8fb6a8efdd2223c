"""The Kafka broker a benchmark run talks to: one it starts itself under ``var/bench/``, or one given."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hyperdata_sidecar.devkafka import KAFKA_VERSION, LocalKafka, free_low_port


@dataclass(frozen=True)
class Broker:
    """Where the broker listens; ``pid`` and ``log_dir`` (its ``log.dirs``) are known only for a
    broker this run started."""

    bootstrap: str
    pid: int | None
    version: str
    log_dir: Path | None = None


@contextlib.contextmanager
def broker(data_dir: Path, bootstrap: str | None = None) -> Iterator[Broker]:
    """Yield ``bootstrap``'s broker, or start a fresh LocalKafka in ``data_dir`` and remove it after."""
    if bootstrap:
        yield Broker(bootstrap, None, "unknown (external broker)")
        return
    shutil.rmtree(data_dir, ignore_errors=True)
    port = free_low_port()
    controller_port = free_low_port({port})
    kafka = LocalKafka(data_dir, port=port, controller_port=controller_port)
    kafka.start()
    try:
        yield Broker(kafka.bootstrap, kafka.pid(), KAFKA_VERSION, data_dir / "logs")
    finally:
        kafka.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
