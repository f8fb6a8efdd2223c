"""CPU time and memory of processes and of the whole machine, read from ``/proc`` (Linux only)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, all its threads included.

    Raises ``FileNotFoundError`` once the process is gone.
    """
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / _TICKS_PER_S


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` (resident now) and ``VmHWM`` (peak resident) of ``pid`` in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found


def io_counters(pid: int) -> dict[str, int]:
    """``/proc/<pid>/io`` of ``pid``: ``rchar`` (bytes its read-like calls returned, page cache or
    not; ``copy_file_range`` counts), ``read_bytes`` (bytes it had fetched from storage), and their
    write twins. Reading another user's process needs the rights ptrace would."""
    found = {}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        name, _, value = line.partition(":")
        found[name] = int(value)
    return found


def machine_busy_seconds() -> tuple[float, float, float]:
    """(busy, total, stolen) CPU seconds of the whole machine since boot, all cores summed.

    ``stolen`` is the steal time of a virtual machine: time its virtual CPUs wanted to run but the
    hypervisor ran something else. It is counted as busy; a run with much of it ran on a shared host.
    """
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already inside user
    return (total - idle) / _TICKS_PER_S, total / _TICKS_PER_S, fields[7] / _TICKS_PER_S


@dataclass
class CpuWindow:
    """CPU used by named processes and by the whole machine between :meth:`start` and :meth:`stop`.

    A process that exits inside the window keeps the CPU it had at its last :meth:`sample`; call
    ``sample()`` just before stopping processes you own.
    """

    pids: dict[str, int]
    began: float = 0.0
    wall_s: float = 0.0

    def __post_init__(self) -> None:
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._machine_first = (0.0, 0.0, 0.0)
        self._machine_last = (0.0, 0.0, 0.0)

    def start(self) -> CpuWindow:
        self.began = time.monotonic()
        self._first = self._read()
        self._last = dict(self._first)
        self._machine_first = machine_busy_seconds()
        return self

    def sample(self) -> None:
        self._last.update(self._read())
        self._machine_last = machine_busy_seconds()
        self.wall_s = time.monotonic() - self.began

    def stop(self) -> CpuWindow:
        self.sample()
        return self

    def cpu_s(self, name: str) -> float:
        return self._last.get(name, 0.0) - self._first.get(name, 0.0)

    def share(self, name: str) -> float:
        """CPU of ``name`` over the window, in percent of one core."""
        return 100.0 * self.cpu_s(name) / self.wall_s if self.wall_s > 0 else 0.0

    def machine_share(self) -> float:
        """CPU of the whole machine over the window, in percent of one core (2 cores = 200%)."""
        busy = self._machine_last[0] - self._machine_first[0]
        return 100.0 * busy / self.wall_s if self.wall_s > 0 else 0.0

    def steal_share(self) -> float:
        """CPU time the hypervisor took from this machine over the window, in percent of one core."""
        stolen = self._machine_last[2] - self._machine_first[2]
        return 100.0 * stolen / self.wall_s if self.wall_s > 0 else 0.0

    def others_share(self, extra_cpu_s: float = 0.0) -> float:
        """CPU of every process not watched here (less ``extra_cpu_s`` known by other means, and
        less the steal time), % of one core."""
        ours = sum(self.cpu_s(name) for name in self.pids) + extra_cpu_s
        return self.machine_share() - self.steal_share() - (100.0 * ours / self.wall_s if self.wall_s > 0 else 0.0)

    def to_dict(self) -> dict[str, object]:
        return {
            "wall_s": round(self.wall_s, 3),
            "cpu_s": {name: round(self.cpu_s(name), 2) for name in self.pids},
            "cpu_pct_of_one_core": {name: round(self.share(name), 1) for name in self.pids},
            "machine_cpu_pct_of_one_core": round(self.machine_share(), 1),
            "others_cpu_pct_of_one_core": round(self.others_share(), 1),
            "steal_pct_of_one_core": round(self.steal_share(), 1),
        }

    def _read(self) -> dict[str, float]:
        out = {}
        for name, pid in self.pids.items():
            try:
                out[name] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
        return out
