"""Append-to-receive latency of the data topics, measured by a consumer process of its own:

    python -m bench.latency --bootstrap HOST:PORT --topic T [--topic T ...] --expect N
                            --deadline EPOCH_S --out FILE

Prints ``ready`` once every partition is assigned at its beginning, then reads until it has N
records or the deadline passes, and writes the figures as JSON to FILE. For each record it takes
``now - local_time`` (the tap stamps ``local_time`` when it appends the line), and splits it at the
record's CreateTime, which the sidecar's producer sets when it adds the record to a batch:
``local_time → CreateTime`` is the sidecar's share (poll, read, parse), ``CreateTime → now`` the
broker's and this consumer's (compression, ack, fetch).
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from bench.kafka import partitions_of

# local_time is the line's first field: {"local_time":"2026-06-10T13:10:56.723695057",...
_SECOND = slice(15, 34)
_NANOS = slice(35, 44)
_HISTOGRAM_MS = 600_000  # latencies are counted per millisecond up to 10 minutes; beyond, in the last slot


class LatencyHistogram:
    """Latencies counted per whole millisecond: exact percentiles to 1 ms in constant memory."""

    def __init__(self) -> None:
        self.counts = [0] * (_HISTOGRAM_MS + 1)
        self.n = 0
        self.max_s = float("-inf")
        self.min_s = float("inf")
        self.total_s = 0.0

    def add(self, seconds: float) -> None:
        ms = int(seconds * 1000)
        self.counts[min(max(ms, 0), _HISTOGRAM_MS)] += 1
        self.n += 1
        self.total_s += seconds
        if seconds > self.max_s:
            self.max_s = seconds
        if seconds < self.min_s:
            self.min_s = seconds

    def percentile(self, q: float) -> float:
        """The ``q`` quantile (0..1) in seconds, to the millisecond (the upper edge of its slot)."""
        rank = max(1, round(q * self.n))
        seen = 0
        for ms, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                return (ms + 1) / 1000
        return self.max_s

    def summary(self) -> dict[str, float | int]:
        if not self.n:
            return {"count": 0}
        return {
            "count": self.n,
            "mean_s": round(self.total_s / self.n, 4),
            "p50_s": self.percentile(0.50),
            "p90_s": self.percentile(0.90),
            "p99_s": self.percentile(0.99),
            "p999_s": self.percentile(0.999),
            "min_s": round(self.min_s, 4),
            "max_s": round(self.max_s, 4),
        }


class LocalTimeParser:
    """``local_time`` of a raw line as epoch seconds, with the date-time part cached per second."""

    def __init__(self) -> None:
        self._seconds: dict[bytes, int] = {}

    def __call__(self, value: bytes) -> float:
        text = value[_SECOND]
        second = self._seconds.get(text)
        if second is None:
            second = self._seconds[text] = calendar.timegm(time.strptime(text.decode(), "%Y-%m-%dT%H:%M:%S"))
        return second + int(value[_NANOS]) / 1e9


class LatencyRecorder:
    """Everything measured about the records received so far."""

    def __init__(self) -> None:
        self.total, self.sidecar, self.delivery = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
        self.parse = LocalTimeParser()
        self.unparsed = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.by_second: list[list[float]] = []  # per second since the first record: [records, sum, max]

    @property
    def received(self) -> int:
        return self.total.n + self.unparsed

    def fetched(self, now: float, records: list[ConsumerRecord]) -> None:
        """Count ``records``, all received at ``now`` (one fetch)."""
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        second = int(now - self.first_at)
        self.by_second.extend([0, 0.0, 0.0] for _ in range(second + 1 - len(self.by_second)))
        bucket = self.by_second[second]
        for record in records:
            try:
                appended = self.parse(record.value)
            except ValueError:
                self.unparsed += 1
                continue
            created = record.timestamp / 1000
            latency = now - appended
            self.total.add(latency)
            self.sidecar.add(created - appended)
            self.delivery.add(now - created)
            bucket[0] += 1
            bucket[1] += latency
            bucket[2] = max(bucket[2], latency)

    def summary(self, expect: int) -> dict[str, object]:
        return {
            "expected": expect,
            "received": self.received,
            "unparsed": self.unparsed,
            "first_received_at": self.first_at,
            "last_received_at": self.last_at,
            "append_to_receive": self.total.summary(),
            "append_to_create_time": self.sidecar.summary(),
            "create_time_to_receive": self.delivery.summary(),
            "by_second": [
                {"records": n, "mean_s": round(total / n, 3), "max_s": round(worst, 3)} for n, total, worst in self.by_second if n
            ],
        }


async def measure(bootstrap: str, topics: list[str], expect: int, deadline: float) -> dict[str, object]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=50,
        fetch_max_bytes=64 * 1024 * 1024,
        max_partition_fetch_bytes=16 * 1024 * 1024,
    )
    await consumer.start()
    recorder = LatencyRecorder()
    try:
        partitions = [tp for topic in topics for tp in await partitions_of(bootstrap, topic)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        for tp in partitions:
            await consumer.position(tp)
        print("ready", flush=True)
        while recorder.received < expect and time.time() < deadline:
            batches = await consumer.getmany(timeout_ms=200, max_records=100_000)
            now = time.time()
            for records in batches.values():
                recorder.fetched(now, records)
    finally:
        await consumer.stop()
    return recorder.summary(expect)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", action="append", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--deadline", type=float, required=True, help="stop at this epoch time even if short")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.bootstrap, args.topic, args.expect, args.deadline))
    args.out.write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
