"""Append-to-receive latency of the data topics, measured by a consumer process of its own:

    python -m bench.latency --bootstrap HOST:PORT --topic TOPIC=COUNT [--topic ...] --deadline EPOCH_S
                            --out FILE --logs DIR

Reads each topic from its beginning with one ``kcat -C`` per topic (librdkafka costs a fifth of the
CPU aiokafka's consumer needs per record, and the consumer shares the machine with what it measures),
``read_committed`` (librdkafka's default, set all the same: a sidecar with ``DELIVERY=exactly_once``
is measured as its consumers see it, a line arriving once its transaction is committed), and prints ``ready <pid> ...`` (its kcat processes) once every kcat has reached the end of every
partition. It stops when each topic has delivered COUNT records or at the deadline, and writes the
figures as JSON to FILE. For each record it takes ``now - local_time`` (the tap stamps
``local_time`` when it appends the line), and splits it at the record's CreateTime, which the
sidecar's producer sets when it adds the record to a batch: ``local_time → CreateTime`` is the
sidecar's read-and-parse share, ``CreateTime → now`` the rest of its cycle (batching, compression,
the ack) plus the broker and the consumer.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import re
import selectors
import shutil
import subprocess
import time
from pathlib import Path

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

    def add_all(self, values: list[float]) -> None:
        if not values:
            return
        counts = self.counts
        for seconds in values:
            ms = int(seconds * 1000)
            counts[ms if 0 <= ms < _HISTOGRAM_MS else (0 if ms < 0 else _HISTOGRAM_MS)] += 1
        self.n += len(values)
        self.total_s += sum(values)
        self.max_s = max(self.max_s, max(values))
        self.min_s = min(self.min_s, min(values))

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

    def received_lines(self, now: float, lines: list[bytes]) -> None:
        """Count kcat's output ``lines`` (``<CreateTime ms> <value>``), all read at ``now``."""
        if self.first_at is None:
            self.first_at = now
        self.last_at = now
        appended, created = [], []
        parse = self.parse
        for line in lines:
            created_ms, _, value = line.partition(b" ")
            try:
                created_s = int(created_ms) / 1000
                appended.append(parse(value))
            except ValueError:
                self.unparsed += 1
                continue
            created.append(created_s)
        totals = [now - a for a in appended]
        self.total.add_all(totals)
        self.sidecar.add_all([c - a for c, a in zip(created, appended, strict=True)])
        self.delivery.add_all([now - c for c in created])
        if totals:
            second = int(now - self.first_at)
            self.by_second.extend([0, 0.0, 0.0] for _ in range(second + 1 - len(self.by_second)))
            bucket = self.by_second[second]
            bucket[0] += len(totals)
            bucket[1] += sum(totals)
            bucket[2] = max(bucket[2], max(totals))

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


class TopicReader:
    """One ``kcat -C`` reading a topic from its beginning; its output is cut into lines as it arrives."""

    def __init__(self, kcat: str, bootstrap: str, topic: str, count: int, logs: Path) -> None:
        self.topic = topic
        self.stderr_path = logs / f"kcat-consume-{topic}.log"
        command = [
            kcat,
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-u",
            "-c",
            str(count),
            "-X",
            "fetch.wait.max.ms=50",
            "-X",
            "isolation.level=read_committed",
            "-f",
            "%T %s\\n",
        ]
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        self.fd = self.process.stdout.fileno()
        self._partial = b""

    def at_end_of(self, partitions: int) -> bool:
        """Has kcat reported the end of all ``partitions`` partitions (it is fetching, nothing missed)?"""
        text = self.stderr_path.read_text(errors="replace")
        return len(set(re.findall(r"Reached end of topic \S+ \[(\d+)\]", text))) >= partitions

    def read_lines(self) -> list[bytes] | None:
        """The complete lines that arrived since the last call; None at the end of kcat's output."""
        data = os.read(self.fd, 1 << 20)
        if not data:
            return None
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return data[:cut].splitlines()

    def close(self) -> None:
        self.process.stdout.close()  # a kcat blocked writing to us gets EPIPE and exits
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def measure(bootstrap: str, counts: dict[str, int], deadline: float, logs: Path) -> dict[str, object]:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is not installed")
    partitions = asyncio.run(_partition_counts(bootstrap, list(counts)))
    readers = [TopicReader(kcat, bootstrap, topic, count, logs) for topic, count in counts.items()]
    recorder = LatencyRecorder()
    ready = False
    try:
        with selectors.DefaultSelector() as selector:
            for reader in readers:
                selector.register(reader.fd, selectors.EVENT_READ, reader)
            while selector.get_map() and time.time() < deadline:
                for key, _events in selector.select(timeout=0.05):
                    lines = key.data.read_lines()
                    if lines is None:
                        selector.unregister(key.fd)
                    else:
                        recorder.received_lines(time.time(), lines)
                if not ready and all(reader.at_end_of(partitions[reader.topic]) for reader in readers):
                    ready = True
                    print("ready", *(reader.process.pid for reader in readers), flush=True)
    finally:
        for reader in readers:
            reader.close()
    return recorder.summary(sum(counts.values()))


async def _partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    return {topic: len(await partitions_of(bootstrap, topic)) for topic in topics}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.latency")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", action="append", required=True, help="TOPIC=COUNT: read COUNT records of TOPIC")
    parser.add_argument("--deadline", type=float, required=True, help="stop at this epoch time even if short")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True, help="kcat's stderr goes here")
    args = parser.parse_args(argv)
    counts = {topic: int(count) for topic, _, count in (spec.rpartition("=") for spec in args.topic)}
    args.out.write_text(json.dumps(measure(args.bootstrap, counts, args.deadline, args.logs)))


if __name__ == "__main__":
    main()
