"""The hostile-tree drill's programs and model: random events under WATCH_DIR while a worker runs.

Hypothesis draws programs (:func:`collect_programs`): lines appended to the newest hour file (some
left unterminated, some not JSON) or late to an older one, new hours written in place or renamed
in, and damage: truncations, replacements, deletions, renames away, symlinks and pipes where an
hour file is or could be, unreadable files. :class:`HostileTree` applies the events to a real watch
tree and remembers which files it damaged. Those, the file that becomes the newest again when the
newest one goes (sealed or not, depending on timing), and the symlinks and pipes (which are no hour
files) are left out of the check; every other file must be in Kafka exactly per the contract.

The contents are chosen so that damage to one file cannot change another file's line ids: each
hour file has blocks of its own, above every earlier file's, its lines' blocks never go down, and
lines appended late reuse the file's last block. So no block spans two files and no block goes back:
a file's first line starts at seq 0 in epoch 0 whatever came before it.
"""

from __future__ import annotations

import datetime
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from hyperdata_sidecar.core.tables import TABLES, CoinLocation

START = datetime.datetime(2026, 6, 10, 0)
BLOCKS_PER_FILE = 10**6
COINS = ("BTC", "ETH", "SOL", "xyz:TSLA", "@107")
# Appends dominate, as on a node; every kind of damage comes up in a program of a few dozen events.
KINDS = (
    ("append",) * 6
    + ("append_late",) * 3
    + ("rotate",) * 2
    + ("rename_in",)
    + ("truncate", "replace", "delete", "rename_away", "symlink", "fifo", "unreadable")
)


class Event(NamedTuple):
    kind: str
    table: int  # index into TABLES
    pick: float  # which file, as a fraction of the candidates; where to truncate or what to do for some kinds
    count: int  # lines to write
    cut: int | None  # the last line is left unterminated after this many bytes
    bad: bool  # one of the lines is not JSON (a dead letter)
    pause: float  # seconds to wait after it

    def describe(self) -> str:
        return f"{self.kind}({TABLES[self.table].dir_name.split('_')[1]}, pick={self.pick:.2f}, n={self.count}, cut={self.cut}, bad={self.bad})"


EVENTS = st.builds(
    Event,
    kind=st.sampled_from(KINDS),
    table=st.integers(0, len(TABLES) - 1),
    pick=st.floats(0, 1, exclude_max=True),
    count=st.integers(1, 6),
    cut=st.none() | st.integers(1, 60),
    bad=st.sampled_from([False] * 4 + [True]),
    pause=st.sampled_from([0.0, 0.02, 0.1, 0.3]),
)


def collect_programs(count: int, steps: int, seed: int) -> list[list[Event]]:
    """``count`` programs of ``steps`` events drawn by Hypothesis from ``seed``: the most varied of
    three times as many draws (the first draws of a run tend to repeat one kind of event)."""
    drawn: list[list[Event]] = []

    @hypothesis_seed(seed)
    @settings(max_examples=3 * count, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(EVENTS, min_size=steps, max_size=steps))
    def draw(program: list[Event]) -> None:
        drawn.append(program)

    draw()
    drawn.sort(key=lambda program: -len({event.kind for event in program}))
    return drawn[:count]


def line(table: str, block: int, n: int) -> bytes:
    """A good line of ``table``; its first bytes (a nanosecond local_time) are its own."""
    coin = COINS[n % len(COINS)]
    location = next(spec.coin_location for spec in TABLES if spec.dir_name == table)
    if location is CoinLocation.EVENT:
        event: object = {"coin": coin, "side": "B", "px": "1.5", "n": n}
    elif location is CoinLocation.ORDER:
        event = {"status": "open", "order": {"coin": coin, "oid": n}}
    else:
        event = ["0x" + "ab" * 20, {"coin": coin, "px": "2", "tid": n}]
    return orjson.dumps(
        {
            "local_time": f"2026-06-10T00:00:00.{n:09d}",
            "block_time": "2026-06-10T00:00:00.1",
            "block_number": block,
            "events": [event],
        }
    )


@dataclass
class HourModel:
    """One regular hour file the model wrote: its blocks, and its unterminated last line if any."""

    relpath: str
    base: int
    last_block: int
    unfinished: tuple[bytes, bytes] | None = None  # (bytes written, the whole line)


@dataclass
class TableModel:
    table: str
    next_hour: int = 0
    files: dict[str, HourModel] = field(default_factory=dict)  # present regular files the model wrote


class HostileTree:
    """A watch tree under attack, and what of it must still be published exactly."""

    def __init__(self, watch: Path) -> None:
        self.watch = watch
        self.tables = {spec.dir_name: TableModel(spec.dir_name) for spec in TABLES}
        self.damaged: set[str] = set()  # hour files changed under the sidecar (still present or not)
        self.odd: set[str] = set()  # symlinks and pipes at hour-file names
        self.locked: set[Path] = set()  # chmod 000
        self.counter = 0
        self.bases = 0
        self.done: Counter[str] = Counter()

    # ------------------------------------------------------------------ what is owed

    def ignored(self) -> set[str]:
        return self.damaged | self.odd

    def present(self, table: str) -> list[str]:
        """The regular hour files of ``table`` on disk, oldest first (damaged ones included)."""
        return sorted(self.tables[table].files, key=self._hour_of)

    def newest(self, table: str) -> str | None:
        files = self.present(table)
        return files[-1] if files else None

    # ------------------------------------------------------------------ events

    def start(self) -> None:
        """One hour file per table with a few lines, before the worker starts."""
        for table in self.tables:
            self._new_hour(table, 5, None, False, renamed=False)

    def apply(self, event: Event) -> None:
        table = TABLES[event.table].dir_name
        getattr(self, f"_{event.kind}")(table, event)
        self.done[event.kind] += 1

    def finish(self) -> None:
        """Make every file readable again (a node's files stay readable)."""
        for path in self.locked:
            if path.exists():
                path.chmod(0o644)
        self.locked.clear()

    def _append(self, table: str, event: Event) -> None:
        newest = self.newest(table)
        if newest is None or newest in self.damaged:
            self._new_hour(table, event.count, event.cut, event.bad, renamed=False)
            return
        self._write_lines(self.tables[table].files[newest], event.count, event.cut, event.bad, late=False)

    def _append_late(self, table: str, event: Event) -> None:
        older = [rel for rel in self.present(table)[:-1] if rel not in self.damaged]
        if not older:
            self._append(table, event)
            return
        target = self.tables[table].files[older[int(event.pick * len(older))]]
        self._write_lines(target, event.count, event.cut, event.bad, late=True)

    def _rotate(self, table: str, event: Event) -> None:
        self._new_hour(table, event.count, event.cut, event.bad, renamed=False)

    def _rename_in(self, table: str, event: Event) -> None:
        self._new_hour(table, event.count, event.cut, event.bad, renamed=True)

    def _truncate(self, table: str, event: Event) -> None:
        target = self._pick_file(table, event.pick)
        if target is not None:
            path = self.watch / target
            size = path.stat().st_size
            os.truncate(path, size * ((event.cut or 0) % 60) // 60)
            self._damage(table, target, keep=True)

    def _replace(self, table: str, event: Event) -> None:
        target = self._pick_file(table, event.pick)
        if target is not None:
            # Other lines in the file's own blocks: read again from byte 0 if it was not sealed yet,
            # they hand the next file a block below its own, as the original did.
            base = self.tables[table].files[target].base
            fresh = [line(table, base, self.counter + i) for i in range(event.count)]
            self.counter += event.count
            temporary = (self.watch / target).with_name(f".replacing-{self.counter}")
            temporary.write_bytes(b"".join(x + b"\n" for x in fresh))
            os.replace(temporary, self.watch / target)
            self._damage(table, target, keep=True)

    def _delete(self, table: str, event: Event) -> None:
        target = self._pick_file(table, event.pick)
        if target is not None:
            (self.watch / target).unlink()
            self._damage(table, target, keep=False)

    def _rename_away(self, table: str, event: Event) -> None:
        target = self._pick_file(table, event.pick)
        if target is not None:
            path = self.watch / target
            path.rename(path.with_name(f"{path.name}.moved"))
            self._damage(table, target, keep=False)

    def _symlink(self, table: str, event: Event) -> None:
        """A symlink at a new hour name (to /dev/zero or to another hour file), or in place of one."""
        where = self._odd_place(table, event.pick)
        pointee = Path("/dev/zero") if event.bad else self.watch / (self.newest(table) or where)
        (self.watch / where).symlink_to(pointee)

    def _fifo(self, table: str, event: Event) -> None:
        """A pipe at a new hour name or in place of one (opening it for reading would wait forever)."""
        os.mkfifo(self.watch / self._odd_place(table, event.pick))

    def _unreadable(self, table: str, event: Event) -> None:
        if self.locked and event.bad:
            path = sorted(self.locked)[int(event.pick * len(self.locked))]
            path.chmod(0o644)
            self.locked.discard(path)
            return
        target = self._pick_file(table, event.pick)
        if target is not None:
            (self.watch / target).chmod(0)
            self.locked.add(self.watch / target)

    # ------------------------------------------------------------------ helpers

    def _hour_of(self, relpath: str) -> tuple[str, int]:
        date, hour = relpath.rsplit("/", 2)[1:]
        return date, int(hour)

    def _next_name(self, table: str) -> str:
        model = self.tables[table]
        moment = START + datetime.timedelta(hours=model.next_hour)
        model.next_hour += 1
        return f"{table}/hourly/{moment:%Y%m%d}/{moment.hour}"

    def _new_hour(self, table: str, count: int, cut: int | None, bad: bool, *, renamed: bool) -> None:
        relpath = self._next_name(table)
        self.bases += 1
        hour = HourModel(relpath, self.bases * BLOCKS_PER_FILE, self.bases * BLOCKS_PER_FILE)
        path = self.watch / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        target = path.with_name(f".incoming-{self.counter}") if renamed else path
        target.touch()
        self.tables[table].files[relpath] = hour
        self._write_lines(hour, count, cut, bad, late=False, path=target)
        if renamed:
            os.rename(target, path)

    def _write_lines(
        self, hour: HourModel, count: int, cut: int | None, bad: bool, *, late: bool, path: Path | None = None
    ) -> None:
        """Append ``count`` lines to ``hour`` (after completing its unterminated one), the last cut at
        ``cut`` bytes if given. Lines appended as the newest file climb the file's blocks; late ones
        stay in its last block."""
        table = hour.relpath.split("/", 1)[0]
        whole: list[bytes] = [hour.unfinished[1]] if hour.unfinished is not None else []
        written = hour.unfinished[0] if hour.unfinished is not None else b""
        for index in range(count):
            if not late and (self.counter + index) % 2:
                hour.last_block += 1
            whole.append(
                b"not json %d" % self.counter if bad and index == 0 else line(table, hour.last_block, self.counter + index)
            )
        self.counter += count
        data = b"".join(x + b"\n" for x in whole)[len(written) :]
        hour.unfinished = None
        if cut is not None:
            extra = line(table, hour.last_block, self.counter)
            self.counter += 1
            data += extra[:cut]
            hour.unfinished = (extra[:cut], extra)
        with open(path or self.watch / hour.relpath, "ab") as f:
            f.write(data)

    def _pick_file(self, table: str, pick: float) -> str | None:
        files = self.present(table)
        return files[int(pick * len(files))] if files else None

    def _damage(self, table: str, relpath: str, *, keep: bool) -> None:
        newest = self.newest(table)
        self.damaged.add(relpath)
        if not keep:
            del self.tables[table].files[relpath]
            if relpath == newest and self.newest(table) is not None:
                # The file before becomes the newest again, though it may be sealed already (a later
                # file existed): whether it is owes a seal depends on timing, so it is left out too.
                self.damaged.add(self.newest(table))
        self.locked.discard(self.watch / relpath)

    def _odd_place(self, table: str, pick: float) -> str:
        """Where a symlink or pipe goes: in place of an existing hour file (damaging it) or at a new name."""
        target = self._pick_file(table, pick) if pick < 0.5 else None
        if target is not None:
            (self.watch / target).unlink()
            self._damage(table, target, keep=False)
        else:
            target = self._next_name(table)
            (self.watch / target).parent.mkdir(parents=True, exist_ok=True)
        self.odd.add(target)
        return target
