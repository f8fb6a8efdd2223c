"""Redelivery: the rare path after a failed delivery report. Rebuild, resend or dead-letter.

When a cycle's reports include failures, the window stops: every cycle in it settles, the records
behind the failures are rebuilt from the file (the same bytes and start state give the same
records), and each is dealt with by its :class:`~hyperdata_sidecar.core.delivery.Verdict`:

- ``rejected`` (the broker refuses this record for good): its ``rejected`` dead letter replaces it,
  and the line counts as a DLQ line in the cursors of the window;
- ``hold`` (the topic cannot be written now: missing, not authorized, partitions unknown): the table
  is held and the record is sent again after a back-off, as is a dead letter that cannot be written;
- ``fatal``: the worker stops (a restart resumes from the checkpoint).

A cycle whose records of a topic were found below where the topic stood (``PublishFlow.vouch``)
has the topic checked first (``PublishFlow.check_suspected``): found with another count or missing,
every record of that topic in the cycle is sent again, delivered or not, after a hold (the check of
the topic before the retry is what lets them go).

The file's line engine makes the records again and the dead letters that replace them (each engine
its own), and :meth:`PublishFlow.resend` hands them to the producer. A record the client refuses
when it is sent again (e.g. ``_UNKNOWN_PARTITION`` while the topic has fewer partitions than the
contract) stays failed with that refusal, judged the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from hyperdata_sidecar.core.delivery import Deliveries, Refusal, Verdict, verdict
from hyperdata_sidecar.core.records import Record, Topics
from hyperdata_sidecar.core.window import Cycle, Window
from hyperdata_sidecar.filetail import FileTail
from hyperdata_sidecar.publishing import Abandoned, PublishFlow
from hyperdata_sidecar.tailer_events import TailerEvents


class FailedRecord(NamedTuple):
    """A record whose delivery failed: the cycle it belongs to, what was produced, the error.
    ``is_replacement``: the record is the dead letter that already replaced a refused one."""

    cycle: Cycle
    record: Record
    error: Any
    is_replacement: bool

    def resent_as_is(self) -> bool:
        """True when the record is sent again unchanged (rather than replaced by its dead letter)."""
        return verdict(self.error) is Verdict.HOLD or self.is_replacement


class Redelivery:
    """Resolves the failed records of one table's window."""

    def __init__(self, topics: Topics, flow: PublishFlow, events: TailerEvents) -> None:
        self.topics = topics
        self.flow = flow
        self.events = events

    async def resolve(self, window: Window, tail: FileTail) -> None:
        """Deal with every failed record of ``window`` (cycles of ``tail``), so that its cycles can
        be committed in order. Nothing is read meanwhile: the file keeps its position."""
        for cycle in window:
            await self.flow.until(cycle.settled)
        await self.flow.check_suspected(window)
        failed: list[FailedRecord] = []
        for cycle in window:
            if cycle.failed():
                failed += self._failed(cycle, await self._rebuild(cycle, tail))
            cycle.resolved = True
        backoff = self.flow.backoff()
        while failed:
            if any(verdict(item.error) is Verdict.FATAL for item in failed):
                raise Abandoned()  # the data plane stops the worker; a restart resumes from the checkpoint
            resend = [item for item in failed if item.resent_as_is()]
            if resend:
                first = resend[0]
                reason = f"{first.record.topic}: {first.error.name()} ({first.error.str()})"
                await self.flow.hold(backoff, tuple({item.record.topic: None for item in resend}), reason, records=len(resend))
            failed = await self._send(failed, window, tail)
        self.flow.release(backoff)

    @staticmethod
    def _failed(cycle: Cycle, records: Mapping[tuple[str, int], list[Record]]) -> list[FailedRecord]:
        """The records of ``cycle`` to deal with: its failed ones (unless dealt with before) and every
        record of a topic distrusted since (but a record already replaced by its dead letter)."""
        distrusted = cycle.deliveries.take_distrusted()
        failures = cycle.deliveries.failures()
        items = [
            FailedRecord(cycle, records[(f.topic, f.partition)][f.position], f.error, False)
            for f in failures
            if not cycle.resolved and f.topic not in distrusted
        ]
        replaced = {
            (f.topic, f.partition, f.position) for f in failures if cycle.resolved and verdict(f.error) is Verdict.REJECTED
        }
        for (topic, partition), group in records.items():
            if topic in distrusted:
                items += [
                    FailedRecord(cycle, record, distrusted[topic], False)
                    for position, record in enumerate(group)
                    if (topic, partition, position) not in replaced
                ]
        return items

    async def _send(self, failed: list[FailedRecord], window: Window, tail: FileTail) -> list[FailedRecord]:
        """Send each failed record again (or its dead letter); the ones that failed again."""
        repairs, produced = Deliveries(), 0
        sent: dict[tuple[str, int], list[FailedRecord]] = {}
        refused: list[FailedRecord] = []
        for index, item in enumerate(failed):
            replacing = not item.resent_as_is()
            record = self._rejected(item, window, tail) if replacing else item.record
            again = FailedRecord(item.cycle, record, None, item.is_replacement or replacing)
            refusal = await self.flow.resend(record, _widening(repairs.callback(record.topic, record.partition), item.cycle))
            if refusal is not None:
                # The rest waits for the next round, unsent: a partition's records stay in file order.
                refused = [again._replace(error=Refusal.of(refusal)), *failed[index + 1 :]]
                break
            sent.setdefault((record.topic, record.partition), []).append(again)
            produced += 1
        self.events.records_resent(sum(1 for item in failed if item.resent_as_is()))
        await self.flow.until(lambda: repairs.reported() == produced)
        return [sent[(f.topic, f.partition)][f.position]._replace(error=f.error) for f in repairs.failures()] + refused

    async def _rebuild(self, cycle: Cycle, tail: FileTail) -> Mapping[tuple[str, int], list[Record]]:
        """The records ``cycle`` produced, by (topic, partition) in order, made again from the file."""
        data = b"" if cycle.partial is not None else await tail.reader.read_range(cycle.start.offset, cycle.end)
        return tail.engine.rebuild(cycle, data)

    def _rejected(self, item: FailedRecord, window: Window, tail: FileTail) -> Record:
        """The dead letter for a record the broker refused for good; counts, logs and reports it."""
        record, error = item.record, item.error
        if record.topic == self.topics.data:
            window.rejected(item.cycle)
        self.events.record_rejected(record, tail.path, error.name(), error.str())
        return tail.engine.rejection(record, error.name(), error.str())


def _widening(report: Callable[[Any, Any], None], cycle: Cycle) -> Callable[[Any, Any], None]:
    """``report``, and a record sent again that is delivered counts among ``cycle``'s offsets."""

    def on_delivery(error: Any, message: Any) -> None:
        report(error, message)
        if error is None:
            cycle.deliveries.widen(message.topic(), message.partition(), message.offset())

    return on_delivery
