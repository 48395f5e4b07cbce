"""CPU seconds of the benchmark's process tree, split by part (driver, Spark JVM, Spark's Python
workers, broker, PostgreSQL, publisher), and of the whole machine, from ``/proc``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

# -- CPU of the process tree ---------------------------------------------------------------------
CPU_PARTS = ("driver", "jvm", "python_workers", "broker", "postgres", "publisher", "other_ours")
Procs = dict[int, tuple[int, str, str, int, int]]


def _procs() -> Procs:
    """pid -> (ppid, comm, argv[0], own utime+stime, the same + reaped children's), clock ticks."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv0 = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        own = int(f[11]) + int(f[12])
        out[int(entry)] = (int(f[1]), comm, argv0, own, own + int(f[13]) + int(f[14]))
    return out


def _machine_busy() -> int:
    parts = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(parts) - parts[3] - (parts[4] if len(parts) > 4 else 0)


class CpuMeter:
    """CPU seconds of this process tree by part, and of the whole machine, between two samples.

    A process counts with the time of its children it has reaped (Spark's Python daemon reaps
    its workers), except this process (the driver), which counts its own time only."""

    def __init__(self, publisher_pid: int | None = None) -> None:
        self.publisher_pid = publisher_pid
        self.hz = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def sample() -> tuple[float, Procs, int]:
        return time.time(), _procs(), _machine_busy()

    def part(self, pid: int, procs: Procs) -> str | None:
        me = os.getpid()
        if pid == me:
            return "driver"
        chain, cur = [], pid
        while cur in procs and cur != me and len(chain) < 64:
            chain.append(cur)
            cur = procs[cur][0]
        if cur != me:
            return None  # not ours
        if self.publisher_pid is not None and self.publisher_pid in chain:
            return "publisher"
        _, comm, argv0, _, _ = procs[pid]
        if "tansu" in comm or "tansu" in argv0:
            return "broker"
        if comm.startswith("postgres") or argv0.endswith("/postgres") or argv0.startswith("postgres:"):
            return "postgres"
        if comm == "java":
            return "jvm"
        if any(procs[a][1] == "java" for a in chain[1:]):
            return "python_workers"
        return "other_ours"

    def watch(self, stop: Any, interval: float = 0.5) -> dict[str, set[int]]:
        """Start a thread that notes every process of the tree it sees (by part) until ``stop``
        is set: a part that keeps starting processes (Python workers per task) shows here. Processes
        that live less than ``interval`` may be missed, so the counts are lower bounds."""
        seen: dict[str, set[int]] = {k: set() for k in CPU_PARTS}

        def loop() -> None:
            while not stop.is_set():
                procs = _procs()
                for pid in procs:
                    name = self.part(pid, procs)
                    if name is not None:
                        seen[name].add(pid)
                stop.wait(interval)

        threading.Thread(target=loop, name="bench-proc-watch", daemon=True).start()
        return seen

    def between(self, a: tuple[float, Procs, int], b: tuple[float, Procs, int]) -> dict[str, Any]:
        (wa, pa, ma), (wb, pb, mb) = a, b
        secs = max(wb - wa, 1e-9)
        used = dict.fromkeys(CPU_PARTS, 0.0)
        for pid, entry in pb.items():
            name = self.part(pid, pb)
            if name is None:
                continue
            col = 3 if name == "driver" else 4
            old = pa.get(pid)
            before = old[col] if old is not None and old[1] == entry[1] else 0
            used[name] += max(0, entry[col] - before) / self.hz
        ours = sum(used.values())
        machine = (mb - ma) / self.hz
        return {"seconds": round(secs, 1), "cpus": os.cpu_count(),
                "cores": {k: round(v / secs, 2) for k, v in used.items()},
                "ours": round(ours / secs, 2), "machine": round(machine / secs, 2),
                "others": round(max(0.0, machine - ours) / secs, 2)}
