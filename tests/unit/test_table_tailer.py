"""The tailer against a fake librdkafka (tests/unit/fake_broker.py) on a real temp directory:
every complete line once, in file order per partition, checkpoints only behind delivery reports,
through outages, refusals, back-pressure, rotations, truncations, deletions and restarts. Every
test runs on both line engines (the ``line_engine`` fixture of tests/unit/conftest.py)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from hyperdata_sidecar.core.cursor import CursorStage
from hyperdata_sidecar.core.tables import TABLE_BY_DIR
from hyperdata_sidecar.tailer import TableTailer

from fake_broker import FakeBroker, FakeHost, rooms, tailer_settings
from test_core_lineinfo import EVENT_OF, envelope

pytestmark = pytest.mark.usefixtures("line_engine")

SPEC = TABLE_BY_DIR["node_raw_book_diffs_streaming"]
TOPIC, DLQ = "hyperliquid.book-diffs", "hyperliquid.sidecar-dlq"
PARTITIONS = {TOPIC: 6, DLQ: 3, "hyperliquid.order-statuses": 6, "hyperliquid.fills": 3, "hyperliquid.node-files": 3}
COINS = ["BTC", "ETH", "SOL", "LIT", "xyz:TSLA"]
# The documented window (docs/architecture.md, docs/reliability.md): up to 4 read cycles per table
# handed to the producer ahead of their delivery reports. Written out, not imported, so that a
# wider window in the code fails the bounds below.
WINDOW_CYCLES = 4


def line(n: int, block: int | None = None) -> bytes:
    """Line ``n``: its first bytes (a nanosecond local_time, as the node writes) differ from every other line's."""
    event = EVENT_OF[SPEC](COINS[n % len(COINS)])
    return envelope(
        [event], block_number=block if block is not None else 1000 + n // 3, n=n, local_time=f"2026-06-10T13:10:56.{n:09d}"
    )


def hour_path(watch: Path, hour: int) -> Path:
    return watch / SPEC.dir_name / "hourly" / "20260610" / str(hour)


def append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        f.write(data)


def new_tailer(watch: Path, host: FakeHost, broker: FakeBroker, **env: str) -> TableTailer:
    stored = {p: c for p, c in host.checkpoints.items() if p.startswith(SPEC.dir_name)}
    return TableTailer(SPEC, tailer_settings(watch, **env), rooms(host, broker), stored)


async def run_ticks(tailer: TableTailer, times: int = 3) -> None:
    for _ in range(times):
        await tailer.tick()


def published(broker: FakeBroker, source: str | None = None) -> list[tuple[str, int]]:
    """(source, offset) of every data record, in the order the partitions hold them."""
    out = []
    for record in broker.records(TOPIC):
        src = record.header("source").decode()
        if source is None or src == source:
            out.append((src, int(record.header("offset"))))
    return out


def in_file_order_per_partition(
    broker: FakeBroker, *, first_deliveries_only: bool = False, late: set[bytes] = frozenset(), ignore: set[int] = frozenset()
) -> bool:
    """Each partition holds its lines in file order (``first_deliveries_only``: ignoring repeats).

    Lines in ``late`` (appended to a file after the next one began) only have to be in order
    within their own file: the next file's lines may come before them. Records whose id() is in
    ``ignore`` (a truncated file's earlier content) are left out.
    """
    for (topic, _), records in broker.log.items():
        if topic != TOPIC:
            continue
        positions = [(r.header("source"), int(r.header("offset")), r.value in late) for r in records if id(r) not in ignore]
        if first_deliveries_only:
            positions = list(dict.fromkeys(positions))
        on_time = [p[:2] for p in positions if not p[2]]
        if on_time != sorted(on_time):
            return False
        for source in {p[0] for p in positions}:
            offsets = [p[1] for p in positions if p[0] == source]
            if offsets != sorted(offsets):
                return False
    return True


def seal_ranges_hold(broker: FakeBroker, manifest) -> bool:
    """The seal's offsets cover its file: each partition's first and last offset hold lines of the
    file, and every line of the file published before the seal (late lines aside) has a copy in
    its partition's range; partitions the seal does not name hold none of its lines."""
    ranges = (manifest.offsets or {}).get(TOPIC, {})
    for (topic, partition), records in broker.log.items():
        if topic != TOPIC:
            continue
        mine = [(i, r) for i, r in enumerate(records) if r.header("source").decode() == manifest.path]
        on_time = {int(r.header("offset")) for _, r in mine if b"|late-" not in r.header("line_id")}
        if str(partition) not in ranges:
            if on_time:
                return False
            continue
        first, last = ranges[str(partition)]
        if any(records[i].header("source").decode() != manifest.path for i in (first, last)):
            return False
        inside = {int(r.header("offset")) for i, r in mine if first <= i <= last}
        if not on_time <= inside:
            return False
    return True


async def read_while_the_window_lets_it(tailer: TableTailer, path: Path, turns: int = 5000) -> None:
    """Give a tick whose reports do not come (the broker is away) ``turns`` turns of the event loop,
    or fewer if it reads ``path`` to its end first: the window, not the test, stops its reading."""
    size, relpath = path.stat().st_size, str(path.relative_to(path.parents[3]))
    for _ in range(turns):
        tracked = tailer.files.get(relpath)
        if tracked is not None and tracked.reader.position >= size:
            return
        await asyncio.sleep(0)


@pytest.fixture
def watch(tmp_path: Path) -> Path:
    path = tmp_path / "watch"
    path.mkdir()
    return path


# --- the plain path ----------------------------------------------------------------------------


async def test_two_hours_are_published_in_order_checkpointed_and_the_first_sealed(watch):
    lines = [line(n) for n in range(40)]
    append(hour_path(watch, 13), b"\n".join(lines[:25]) + b"\n")
    append(hour_path(watch, 14), b"\n".join(lines[25:]) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await run_ticks(new_tailer(watch, host, broker))
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(lines)
    assert in_file_order_per_partition(broker)
    [manifest] = host.rotations
    assert (manifest.path, manifest.lines, manifest.size) == (
        f"{SPEC.dir_name}/hourly/20260610/13",
        25,
        hour_path(watch, 13).stat().st_size,
    )
    assert manifest.offsets and seal_ranges_hold(broker, manifest)
    newest = host.checkpoints[f"{SPEC.dir_name}/hourly/20260610/14"]
    assert (newest.stage, newest.byte_offset, newest.lines) == (CursorStage.TAILING, hour_path(watch, 14).stat().st_size, 15)


async def test_nothing_new_is_read_while_the_state_store_refuses_writes_and_all_of_it_after(watch):
    path = hour_path(watch, 13)
    append(path, b"".join(line(n) + b"\n" for n in range(10)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    append(path, b"".join(line(n) + b"\n" for n in range(10, 20)))
    host.problem = "STATE_PATH /state: IO error: No space left on device"
    await run_ticks(tailer)
    while_full = len(broker.records(TOPIC))
    host.problem = None
    await tailer.tick()
    assert while_full == 10
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(line(n) for n in range(20))


async def test_line_ids_continue_across_the_rotation_when_a_block_spans_two_files(watch):
    append(hour_path(watch, 13), line(0, block=7) + b"\n" + line(1, block=7) + b"\n")
    append(hour_path(watch, 14), line(2, block=7) + b"\n" + line(3, block=8) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await run_ticks(new_tailer(watch, host, broker))
    ids = sorted(r.header("line_id").decode() for r in broker.records(TOPIC))
    assert ids == [f"{SPEC.dir_name}|7|0", f"{SPEC.dir_name}|7|1", f"{SPEC.dir_name}|7|2", f"{SPEC.dir_name}|8|0"]


async def test_a_partial_line_waits_for_its_newline(watch):
    path = hour_path(watch, 13)
    whole = line(0) + b"\n" + line(1)
    append(path, whole[:-10])
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    assert [r.value for r in broker.records(TOPIC)] == [line(0)]
    append(path, whole[-10:] + b"\n")
    await tailer.tick()
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted([line(0), line(1)])


async def test_an_unterminated_last_line_goes_to_the_dlq_when_the_file_is_finalized(watch):
    append(hour_path(watch, 13), line(0) + b"\n" + b'{"cut')
    append(hour_path(watch, 14), line(1) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await run_ticks(new_tailer(watch, host, broker))
    [dead] = broker.records(DLQ)
    assert (dead.value, dead.header("reason")) == (b'{"cut', b"unterminated")
    assert host.rotations[0].dlq_lines == 1 and host.rotations[0].size == hour_path(watch, 13).stat().st_size


# --- delivery: nothing is checkpointed before it is reported -------------------------------------


async def test_nothing_is_checkpointed_past_what_the_broker_reported(watch):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(60)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.down_for = 10**9
    tailer = new_tailer(watch, host, broker)
    task = asyncio.ensure_future(tailer.tick())
    await read_while_the_window_lets_it(tailer, hour_path(watch, 13))
    assert not task.done()
    # Only the file's adoption is persisted: at byte 0, no line counted.
    assert [(c.byte_offset, c.lines) for c in host.checkpoints.values()] == [(0, 0)]
    # The window is full and reading stopped: at most the window's cycles and the one being read are out.
    reader = tailer.files[f"{SPEC.dir_name}/hourly/20260610/13"].reader
    assert reader.position <= (WINDOW_CYCLES + 1) * tailer.settings.read_budget_bytes < hour_path(watch, 13).stat().st_size
    assert len(tailer.window) <= WINDOW_CYCLES + 1
    broker.down_for = 0
    await task
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(line(n) for n in range(60))
    assert in_file_order_per_partition(broker)
    assert host.checkpoints[f"{SPEC.dir_name}/hourly/20260610/13"].lines == 60


async def test_a_full_producer_queue_is_back_pressure_not_a_lost_line(watch):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(50)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS, capacity=3)
    await run_ticks(new_tailer(watch, host, broker))
    assert published(broker) and sorted(r.value for r in broker.records(TOPIC)) == sorted(line(n) for n in range(50))
    assert in_file_order_per_partition(broker)


async def test_a_record_the_client_refuses_holds_the_table_and_is_sent_again(watch):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(10)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.client_refusals = 3
    await run_ticks(new_tailer(watch, host, broker))
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(line(n) for n in range(10))
    assert host.held_ever and "Unknown partition" in host.held_ever[0]
    assert host.holds == {}


async def test_a_record_refused_for_good_becomes_a_rejected_reference_and_the_rest_stays_in_order(watch):
    big = envelope([EVENT_OF[SPEC]("BTC")], block_number=1005, pad="x" * 3000)
    lines = [line(n) for n in range(12)]
    lines.insert(6, big)
    append(hour_path(watch, 13), b"".join(x + b"\n" for x in lines))
    append(hour_path(watch, 14), line(99) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.max_value = 2000
    await run_ticks(new_tailer(watch, host, broker, READ_BUDGET_BYTES="8192"))
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(lines[:6] + lines[7:] + [line(99)])
    assert in_file_order_per_partition(broker)
    [rejected] = broker.records(DLQ)
    assert (rejected.header("reason"), rejected.header("error")) == (b"rejected", b"MSG_SIZE_TOO_LARGE")
    offset = sum(len(x) + 1 for x in lines[:6])
    assert orjson.loads(rejected.value)["offset"] == offset and orjson.loads(rejected.value)["length"] == len(big)
    assert (host.rotations[0].lines, host.rotations[0].dlq_lines) == (12, 1)
    assert host.metrics.dlq_counts()[SPEC.dir_name]["rejected"] == 1


async def test_a_topic_that_cannot_be_written_holds_the_table_then_every_line_arrives_once(watch):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(30)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.refuse_topic[TOPIC] = 3
    await run_ticks(new_tailer(watch, host, broker))
    values = [r.value for r in broker.records(TOPIC)]
    assert sorted(values) == sorted(line(n) for n in range(30)) and len(values) == len(set(values))
    assert in_file_order_per_partition(broker)
    assert any("UNKNOWN_TOPIC_OR_PART" in reason for reason in host.held_ever)
    assert host.holds == {} and host.pauses


async def test_a_restart_resumes_from_the_checkpoint_and_repeats_at_most_the_window(watch):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(80)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    broker.down_for = 10**9
    tailer = new_tailer(watch, host, broker)
    task = asyncio.ensure_future(tailer.tick())
    await read_while_the_window_lets_it(tailer, hour_path(watch, 13))
    broker.down_for = 0
    broker.serve()  # some reports come in; then the process dies with records still queued
    task.cancel()
    broker.lost_queue()
    await run_ticks(new_tailer(watch, host, broker))
    values = [r.value for r in broker.records(TOPIC)]
    assert set(values) == {line(n) for n in range(80)}
    assert in_file_order_per_partition(broker, first_deliveries_only=True)
    per_line = tailer.settings.read_budget_bytes // len(line(0)) + 1
    assert len(values) - 80 <= (WINDOW_CYCLES + 1) * per_line


# --- the model ---------------------------------------------------------------------------------


class TailerModel(RuleBasedStateMachine):
    """Random appends (whole and partial lines, to the current file and, late, to older ones),
    block regressions, rotations, outages, refused topics, back-pressure, truncations, deletions and
    crashes against the tailer, on a real directory. Whenever the broker is back and no line is
    half-written, two ticks publish every complete line of every file: each once (a line a file held
    when the tailer crashed may come twice), first deliveries in file order in every partition, one
    line id per line and no id for two. A crash or a truncation resets what the model expects of
    the lines it touched; every line written after it is held to all the checks again."""

    @initialize()
    def setup(self) -> None:
        import tempfile

        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="tailer-model-"))
        self.watch = self.root / "watch"
        self.watch.mkdir()
        self.host, self.broker = FakeHost(), FakeBroker(PARTITIONS, capacity=40)
        self.tailer = new_tailer(self.watch, self.host, self.broker)
        self.hour = 13
        self.counter = 0
        self.pending = b""  # the start of line(counter), already in the current file
        self.content: dict[str, list[bytes]] = {}  # complete lines each file holds now
        self.ever: dict[str, set[bytes]] = {}  # every complete line each file ever held
        self.exactly_once_from: dict[str, int] = {}  # per file: lines from this index on are owed exactly once
        self.truncated: set[str] = set()
        self.before_truncation: set[int] = (
            set()
        )  # id() of records (the broker's log keeps them all) of a file's content before it was truncated
        self.late_pending: dict[Path, tuple[bytes, bytes]] = {}  # an older file's unterminated late line: written, whole
        self.late: set[bytes] = set()  # lines appended to a file after the next one began

    def teardown(self) -> None:
        import shutil

        if hasattr(self, "loop"):
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)

    @property
    def current(self) -> Path:
        return hour_path(self.watch, self.hour)

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.watch))

    @rule(count=st.integers(1, 12))
    def append_lines(self, count: int) -> None:
        new = [line(self.counter + i) for i in range(count)]  # new[0] completes a pending partial line
        self.counter += count
        append(self.current, b"".join(x + b"\n" for x in new)[len(self.pending) :])
        self.pending = b""
        self.content.setdefault(self.rel(self.current), []).extend(new)
        self.ever.setdefault(self.rel(self.current), set()).update(new)

    @precondition(lambda self: not self.pending)
    @rule(cut=st.integers(1, 30))
    def append_partial(self, cut: int) -> None:
        self.pending = line(self.counter)[:cut]
        append(self.current, self.pending)

    @precondition(lambda self: not self.pending)
    @rule(back=st.integers(1, 400))
    def regress(self, back: int) -> None:
        """A line whose block is lower than the table's newest (the chain rewound)."""
        new = line(self.counter, block=1000 + self.counter // 3 - back)
        self.counter += 1
        append(self.current, new + b"\n")
        self.content.setdefault(self.rel(self.current), []).append(new)
        self.ever.setdefault(self.rel(self.current), set()).add(new)

    @precondition(lambda self: self.hour > 13)
    @rule(data=st.data(), count=st.integers(0, 4), cut=st.none() | st.integers(1, 30))
    def append_late(self, data, count: int, cut: int | None) -> None:
        """Lines appended to an older file (sealed or not yet), completing its unterminated late
        line if it has one, and ending in an unterminated one when ``cut`` says so."""
        older = [
            p for p in sorted(self.watch.rglob("*")) if p.is_file() and p != self.current and self.rel(p) not in self.truncated
        ]
        if not older:
            return
        target = data.draw(st.sampled_from(older))
        written, unfinished = self.late_pending.pop(target, (b"", None))
        complete = ([unfinished] if unfinished is not None else []) + [line(self.counter + i) for i in range(count)]
        self.counter += count
        body = b"".join(x + b"\n" for x in complete)[len(written) :]
        if cut is not None:
            extra = line(self.counter)
            self.counter += 1
            body += extra[:cut]
            self.late_pending[target] = (extra[:cut], extra)
        append(target, body)
        self.content.setdefault(self.rel(target), []).extend(complete)
        self.ever.setdefault(self.rel(target), set()).update(complete)
        self.late.update(complete)

    @precondition(lambda self: not self.pending and self.hour < 23)  # hour 24 is no hour file
    @rule()
    def rotate(self) -> None:
        self.hour += 1
        append(self.current, b"")

    @rule(polls=st.integers(1, 30))
    def outage(self, polls: int) -> None:
        self.broker.down_for = polls

    @rule(polls=st.integers(1, 3))
    def topic_refused(self, polls: int) -> None:
        self.broker.refuse_topic[TOPIC] = polls

    @rule()
    def tick(self) -> None:
        self.loop.run_until_complete(self.tailer.tick())

    @rule(steps=st.integers(1, 40))
    def crash(self, steps: int) -> None:
        task = self.loop.create_task(self.tailer.tick())
        for _ in range(steps):
            if task.done():
                break
            self.loop.run_until_complete(asyncio.sleep(0))
        task.cancel()
        self.loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
        self.broker.lost_queue()
        self.host.holds.clear()
        self.tailer = new_tailer(self.watch, self.host, self.broker)
        # What the files held at the crash may be published again; what is appended later may not.
        self.exactly_once_from = {rel: len(lines) for rel, lines in self.content.items()}

    def forget_content_of(self, path: Path) -> None:
        """``path`` was cut to nothing: its earlier lines' records are another content's, at the same offsets."""
        rel = self.rel(path)
        self.before_truncation |= {id(r) for r in self.broker.records(TOPIC) if r.header("source").decode() == rel}
        self.truncated.add(rel)
        self.exactly_once_from.pop(rel, None)

    @precondition(lambda self: not self.pending and self.current.exists() and self.current.stat().st_size > 0)
    @rule()
    def truncate_current(self) -> None:
        self.current.write_bytes(b"")
        self.content[self.rel(self.current)] = []
        self.forget_content_of(self.current)

    @precondition(lambda self: self.hour > 13)
    @rule(data=st.data())
    def truncate_older_file(self, data) -> None:
        """An older file cut short: read again from byte 0 if it was not sealed yet, reported and
        left alone if it was. Either way its lines are not owed any more, and nothing is appended to it again."""
        older = [p for p in sorted(self.watch.rglob("*")) if p.is_file() and p != self.current and p.stat().st_size > 0]
        if not older:
            return
        doomed = data.draw(st.sampled_from(older))
        doomed.write_bytes(b"")
        self.content.pop(self.rel(doomed), None)
        self.late_pending.pop(doomed, None)
        self.forget_content_of(doomed)

    @precondition(lambda self: self.hour > 13)
    @rule(data=st.data())
    def delete_older_file(self, data) -> None:
        older = [p for p in sorted(self.watch.rglob("*")) if p.is_file() and p != self.current]
        if not older:
            return
        doomed = data.draw(st.sampled_from(older))
        doomed.unlink()
        self.late_pending.pop(doomed, None)
        self.content.pop(self.rel(doomed), None)  # its lines are not owed any more (reported lost if unpublished)

    @invariant()
    def only_lines_of_the_files_are_published(self) -> None:
        for record in self.broker.records(TOPIC):
            assert record.value in self.ever[record.header("source").decode()]

    @invariant()
    def each_line_has_one_id_and_no_id_names_two_lines(self) -> None:
        by_line: dict[tuple[str, int], set[bytes]] = {}
        for record in self.broker.records(TOPIC):
            source = record.header("source").decode()
            if id(record) not in self.before_truncation:  # other lines at the same offsets
                by_line.setdefault((source, int(record.header("offset"))), set()).add(record.header("line_id"))
        assert all(len(found) == 1 for found in by_line.values())
        every = [i for found in by_line.values() for i in found]
        assert len(every) == len(set(every))

    @invariant()
    def every_seal_says_where_its_files_lines_are(self) -> None:
        for manifest in self.host.rotations:
            if manifest.path not in self.truncated:
                assert seal_ranges_hold(self.broker, manifest)

    @invariant()
    def a_quiet_broker_gets_every_complete_line(self) -> None:
        if not hasattr(self, "loop") or self.broker.down_for or any(self.broker.refuse_topic.values()) or self.pending:
            return
        self.loop.run_until_complete(self.tailer.tick())
        self.loop.run_until_complete(self.tailer.tick())
        for rel, lines in self.content.items():
            got = [r.value for r in self.broker.records(TOPIC) if r.header("source").decode() == rel]
            assert set(lines) <= set(got)
            owed_once = lines[self.exactly_once_from.get(rel, 0) :]
            assert all(got.count(x) == 1 for x in owed_once), rel
        assert in_file_order_per_partition(self.broker, first_deliveries_only=True, late=self.late, ignore=self.before_truncation)
        assert self.host.holds == {}


def test_tailer_model() -> None:
    """The model, on the ``line_engine`` the module's tests run (a pytest test, so the fixture applies)."""
    run_state_machine_as_test(
        TailerModel,
        settings=settings(max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]),
    )


# --- what the operator sees ---------------------------------------------------------------------


async def test_tail_lag_is_warned_about_while_the_backlog_is_read_not_only_once_caught_up(watch, caplog):
    append(hour_path(watch, 13), b"".join(line(n) + b"\n" for n in range(200)))
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker, LAG_WARN_BYTES="1000")
    caplog.set_level("WARNING", logger="tests.tailer")
    await tailer.tick()
    warnings = [r for r in caplog.records if r.getMessage() == "tail_lag"]
    assert warnings and warnings[0].fields["lag_bytes"] > 1000


async def test_a_finalized_file_deleted_before_its_seal_is_reported_lost(watch):
    append(hour_path(watch, 13), line(0) + b"\n")
    append(hour_path(watch, 14), line(1) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    host.rotations.clear()  # the seal agent has not recorded the seal yet
    hour_path(watch, 13).unlink()
    await tailer.tick()
    assert host.lost == [(f"{SPEC.dir_name}/hourly/20260610/13", "deleted before its seal")]


async def test_a_sealed_file_deleted_by_the_pruner_is_not_lost(watch):
    append(hour_path(watch, 13), line(0) + b"\n")
    append(hour_path(watch, 14), line(1) + b"\n")
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = new_tailer(watch, host, broker)
    await tailer.tick()
    hour_path(watch, 13).unlink()
    await tailer.tick()
    assert host.lost == [] and f"{SPEC.dir_name}/hourly/20260610/13" in host.forgotten


# --- sealed files that change: late appends and rewrites -----------------------------------------


def rel(hour: int) -> str:
    return f"{SPEC.dir_name}/hourly/20260610/{hour}"


def ids(broker: FakeBroker, source: str) -> list[str]:
    return [
        r.header("line_id").decode()
        for r in sorted(broker.records(TOPIC), key=lambda r: int(r.header("offset")))
        if r.header("source").decode() == source
    ]


async def sealed_pair(watch, host, broker, first: list[bytes], second: list[bytes], **env) -> TableTailer:
    """Hours 13 and 14 with these lines, 13 finalized and sealed; returns the tailer."""
    append(hour_path(watch, 13), b"".join(x + b"\n" for x in first))
    append(hour_path(watch, 14), b"".join(x + b"\n" for x in second))
    tailer = new_tailer(watch, host, broker, **env)
    await run_ticks(tailer)
    assert [m.path for m in host.rotations] == [rel(13)]
    return tailer


async def test_lines_appended_after_the_seal_are_published_with_the_files_own_ids_tagged_and_sealed_again(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = await sealed_pair(watch, host, broker, [line(0, block=7), line(1, block=7)], [line(2, block=7), line(3, block=8)])
    sealed_size = hour_path(watch, 13).stat().st_size
    append(hour_path(watch, 13), line(4, block=7) + b"\n" + line(5, block=9) + b"\n")
    await tailer.tick()
    tag = "|late-20260610-13"
    assert ids(broker, rel(14)) == [f"{SPEC.dir_name}|7|2", f"{SPEC.dir_name}|8|0"]
    assert ids(broker, rel(13)) == [
        f"{SPEC.dir_name}|7|0",
        f"{SPEC.dir_name}|7|1",
        f"{SPEC.dir_name}|7|2{tag}",
        f"{SPEC.dir_name}|9|0{tag}",
    ]
    data = hour_path(watch, 13).read_bytes()
    revised = host.rotations[-1]
    assert (revised.path, revised.revision, revised.size, revised.sha256) == (
        rel(13),
        2,
        len(data),
        hashlib.sha256(data).hexdigest(),
    )
    assert (revised.lines, revised.dlq_lines, revised.block_range) == (4, 0, (7, 9))
    assert host.late_appends == [(rel(13), 2, sealed_size, len(data))]
    cursor = host.checkpoints[rel(13)]
    assert (cursor.stage, cursor.revision, cursor.carry_state) == (CursorStage.FINALIZED, 2, (7, 2, 0))


async def test_a_late_append_completes_the_line_the_seal_dead_lettered_as_unterminated(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    cut = line(1, block=7)
    append(hour_path(watch, 13), line(0, block=7) + b"\n" + cut[:20])
    append(hour_path(watch, 14), line(2, block=8) + b"\n")
    tailer = new_tailer(watch, host, broker)
    await run_ticks(tailer)
    [unterminated] = broker.records(DLQ)
    assert unterminated.value == cut[:20] and host.rotations[0].dlq_lines == 1
    append(hour_path(watch, 13), cut[20:] + b"\n")
    await tailer.tick()
    late = [r for r in broker.records(TOPIC) if r.value == cut]
    assert [(int(r.header("offset")), r.header("line_id")) for r in late] == [
        (len(line(0, block=7)) + 1, f"{SPEC.dir_name}|7|1|late-20260610-13".encode())
    ]
    revised = host.rotations[-1]
    assert (revised.revision, revised.lines, revised.dlq_lines, revised.size) == (2, 2, 1, hour_path(watch, 13).stat().st_size)


async def test_every_late_append_is_a_new_revision_and_the_next_file_still_continues_from_the_first_end(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = await sealed_pair(watch, host, broker, [line(0, block=7)], [line(1, block=8)])
    for n in (2, 3):
        append(hour_path(watch, 13), line(n, block=7) + b"\n")
        await tailer.tick()
    assert [m.revision for m in host.rotations if m.path == rel(13)] == [1, 2, 3]
    append(hour_path(watch, 15), line(4, block=8) + b"\n")  # 14 ends in block 8, seq 1
    await run_ticks(tailer)
    assert ids(broker, rel(15)) == [f"{SPEC.dir_name}|8|1"]


async def test_a_restart_while_late_lines_are_published_gives_them_the_same_ids(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await sealed_pair(watch, host, broker, [line(0, block=7)], [line(1, block=8)])
    tailer = new_tailer(watch, host, broker, SEAL_GRACE_MS="600000")  # the reopened file stays reopened
    append(hour_path(watch, 13), line(2, block=7) + b"\n")
    await tailer.tick()
    assert host.checkpoints[rel(13)].stage is CursorStage.REOPENED
    append(hour_path(watch, 13), line(3, block=7) + b"\n")
    await run_ticks(new_tailer(watch, host, broker))
    assert ids(broker, rel(13)) == [f"{SPEC.dir_name}|7|{n}" + ("|late-20260610-13" if n else "") for n in range(3)]
    assert host.rotations[-1].revision == 2 and host.rotations[-1].lines == 3


async def test_a_reopened_file_does_not_hold_back_the_file_being_tailed(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    await sealed_pair(watch, host, broker, [line(0)], [line(1)])
    tailer = new_tailer(watch, host, broker, SEAL_GRACE_MS="600000")
    append(hour_path(watch, 13), line(2) + b"\n")
    append(hour_path(watch, 14), line(3) + b"\n")
    await tailer.tick()
    assert {r.value for r in broker.records(TOPIC)} == {line(n) for n in range(4)}
    assert host.checkpoints[rel(13)].stage is CursorStage.REOPENED and len(host.rotations) == 1


@pytest.mark.parametrize(
    ("rewrite", "reason"), [(lambda data: data[:-5], "truncated"), (lambda data: b'{"x":1}\n' + data, "replaced")]
)
async def test_a_sealed_file_that_shrinks_or_changes_its_head_is_reported_and_never_read_again(watch, rewrite, reason):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = await sealed_pair(watch, host, broker, [line(0), line(1)], [line(2)])
    before = len(broker.records(TOPIC)) + len(broker.records(DLQ))
    hour_path(watch, 13).write_bytes(rewrite(hour_path(watch, 13).read_bytes()))
    await run_ticks(tailer)
    append(hour_path(watch, 13), line(3) + b"\n")
    await run_ticks(tailer)
    assert host.rewritten == [(rel(13), reason)]
    assert len(broker.records(TOPIC)) + len(broker.records(DLQ)) == before
    assert host.checkpoints[rel(13)].stage is CursorStage.REWRITTEN and len(host.rotations) == 1


async def test_a_sealed_file_past_the_watch_window_is_not_looked_at(watch, monkeypatch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = await sealed_pair(watch, host, broker, [line(0)], [line(1)], LATE_APPEND_WATCH_S="0")
    stats = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: stats.append(str(path)) or real_stat(path, *a, **k))
    append(hour_path(watch, 13), line(2) + b"\n")
    await run_ticks(tailer)
    assert str(hour_path(watch, 13)) not in stats
    assert host.late_appends == [] and line(2) not in {r.value for r in broker.records(TOPIC)}


async def test_a_sealed_file_in_the_watch_window_costs_one_stat_per_poll(watch, monkeypatch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    tailer = await sealed_pair(watch, host, broker, [line(0)], [line(1)])
    stats = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: stats.append(str(path)) or real_stat(path, *a, **k))
    await run_ticks(tailer, 5)
    assert stats.count(str(hour_path(watch, 13))) == 5


# --- block regressions -------------------------------------------------------------------------


async def test_a_block_regression_is_published_as_usual_reported_once_delivered_and_counted_in_the_seal(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    lines = [line(0, block=9), line(1, block=5), line(2, block=5)]
    await sealed_pair(watch, host, broker, lines, [line(3, block=4)])
    assert ids(broker, rel(13)) == [f"{SPEC.dir_name}|9|0", f"{SPEC.dir_name}|5|0|r1", f"{SPEC.dir_name}|5|1|r1"]
    assert ids(broker, rel(14)) == [f"{SPEC.dir_name}|4|0|r2"]
    assert sorted(r.value for r in broker.records(TOPIC)) == sorted(lines + [line(3, block=4)])
    assert [(path, r.previous, r.block, r.epoch) for path, r in host.regressions] == [(rel(13), 9, 5, 1), (rel(14), 5, 4, 2)]
    assert host.rotations[0].block_regressions == 1
    assert host.checkpoints[rel(14)].seq_state == (4, 1, 2)


async def test_the_regression_epoch_survives_a_restart(watch):
    host, broker = FakeHost(), FakeBroker(PARTITIONS)
    append(hour_path(watch, 13), line(0, block=9) + b"\n" + line(1, block=5) + b"\n")
    await run_ticks(new_tailer(watch, host, broker))
    append(hour_path(watch, 13), line(2, block=6) + b"\n")
    await run_ticks(new_tailer(watch, host, broker))
    assert ids(broker, rel(13))[-1] == f"{SPEC.dir_name}|6|0|r1"
