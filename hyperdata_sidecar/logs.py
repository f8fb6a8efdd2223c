"""Structured JSON logs for the sidecar's own events: one object per line (time, level, event, fields).

Faust keeps its own log format; everything the sidecar says about files, seals, backups, lag, the DLQ
and the broker goes through :class:`EventLog`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from hyperdata_sidecar.core.times import iso_utc

LOGGER_NAME = "hyperdata_sidecar.events"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload = {"time": iso_utc(record.created), "level": record.levelname.lower(), "event": record.getMessage()}
        payload.update(getattr(record, "fields", {}))
        return orjson.dumps(payload, default=str).decode()


def json_logger(stream: TextIO | None = None) -> logging.Logger:
    """The process-wide JSON event logger, writing to ``stream`` (stderr by default)."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:
        handler = logging.StreamHandler(stream or sys.stderr)
        handler.setFormatter(_JsonFormatter())
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class EventLog:
    """Writes sidecar events; ``every`` rate-limits an event kind per key, counting what it held back."""

    def __init__(self, logger: logging.Logger | None = None, **context: Any) -> None:
        self._logger = logger or json_logger()
        self._context = context
        self._last: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields)

    def limited(self, level: int, event: str, key: str, every_s: float, **fields: Any) -> None:
        """Log ``event`` for ``key`` at most once per ``every_s``; the next line says how many were held."""
        slot = (event, key)
        now = time.monotonic()
        last = self._last.get(slot)
        if last is not None and now - last < every_s:
            self._suppressed[slot] = self._suppressed.get(slot, 0) + 1
            return
        self._last[slot] = now
        held = self._suppressed.pop(slot, 0)
        if held:
            fields["suppressed_since_last"] = held
        self._emit(level, event, fields)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        self._logger.log(level, event, extra={"fields": {**self._context, **fields}})


class RepeatFilter(logging.Filter):
    """Lets each message template (or each ``key(record)``) of the loggers under ``prefix`` through
    at most once per ``every_s``; the next one that passes says how many were held back. For client
    libraries that log every failed reconnect (aiokafka logs thousands of lines a second while a
    broker is down). Attach it to handlers, or to the one logger it names: a logger's own filters
    do not apply to its child loggers."""

    def __init__(
        self, prefix: str = "aiokafka", every_s: float = 10.0, key: Callable[[logging.LogRecord], str] | None = None
    ) -> None:
        super().__init__()
        self._prefix = prefix
        self._every_s = every_s
        self._key = key or (lambda record: f"{record.name}:{record.msg}")
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self._prefix):
            return True
        key = self._key(record)
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like this in the last {self._every_s:.0f}s)"
        return True
