"""Before and after: the core's per-event cost at an earlier commit and at this tree, as ratios
measured in one run.

The earlier commit is checked out into a temporary git worktree (``--base``, default the commit
before the protocol families work began). The workload is generated once, by this tree's XCom
simulator (XCom's contract did not change, so both trees accept the same bytes), and written to a
file. Each repetition then runs one child process per tree, in alternating order, each importing
``replimon`` from its own tree and timing the same three loops over the same events:

* ``baseline``: a per-group dict lookup and a counter update (``core.TrivialMonitor``), which
  puts the two children on one scale when the machine's load drifts between them;
* ``monitor``: ``Monitor.process`` on a fresh monitor over the decoded events;
* ``chain``: the job's per-event path without Spark (``chain.parse_once``: decode once, pack,
  unpack, ``Monitor.process``).

The figure is after / before per repetition (events per CPU second of this tree over the base's,
raw and normalised by each child's own baseline), and the median over repetitions. CPU time
(``time.process_time``), not wall time: on a shared 2-core machine a child that is descheduled
would otherwise look slower; wall-clock rates are kept in the JSON beside them.
``bench/floor.py --base`` does the same for the job in Spark.

    .venv/bin/python bench/versions.py [--base COMMIT] [--repeat 5] [--groups 40] [--duration 300]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# The last commit before the protocol families work (the family interface, quorum liveness from
# silence, the generations family): the "before" of docs/families.md's performance check.
DEFAULT_BASE = "03d320b"
DEFAULT_OUT = BENCH_DIR / "results" / "versions.json"
# The package folders pyproject.toml maps into ``replimon`` (package-dir): a bare checkout needs
# them linked in to import as the installed package does.
MAPPED = ("streaming", "producers", "dashboards")


def base_tree(commit: str, where: Path) -> Path:
    """A worktree of ``commit`` at ``where`` whose ``replimon`` imports as installed."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--force", str(where), commit],
                   check=True, capture_output=True)
    for name in MAPPED:
        link = where / "replimon" / name
        if not link.exists():
            link.symlink_to(where / name, target_is_directory=True)
    return where


def drop_tree(where: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                   check=False, capture_output=True)


def child_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(BENCH_DIR)])
    return env


def run_child(tree: Path, events: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(tree), str(events)],
                         env=child_env(tree), capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"the child for {tree} failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def child(tree: str, events_path: str) -> None:
    """One timing pass in this process over the events file, with ``replimon`` from ``tree``."""
    import replimon
    import replimon.core

    where = Path(replimon.core.__file__).resolve()
    if not where.is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"replimon.core imported from {where}, not from {tree}")
    import chain  # bench/chain.py: imports replimon from the same tree
    from core import TrivialMonitor  # bench/core.py's baseline

    import replimon.contract

    raws = Path(events_path).read_bytes().splitlines()
    events = [json.loads(r) for r in raws]
    gc.freeze()
    n = len(events)
    Monitor = replimon.core.Monitor
    # The job's path of that tree: decoded once where the tree has decode_event, else validated by
    # the models and parsed again (the path before; bench/chain.py).
    path = chain.parse_once if hasattr(replimon.contract, "decode_event") else chain.parse_twice

    def feed(process: Any) -> None:
        for ev in events:
            process(ev)

    def cpu(run: Any) -> float:
        """Events per CPU second of this process: on a shared machine the time it was not
        scheduled does not count (wall time is reported beside it)."""
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        run()
        c, w = time.process_time() - c0, time.perf_counter() - w0
        walls[-1].append(n / w)
        return n / c

    walls: list[list[float]] = [[]]
    feed(Monitor().process)  # warm-up of every code path
    rates = {"baseline": cpu(lambda: feed(TrivialMonitor().process)),
             "monitor": cpu(lambda: feed(Monitor().process)),
             "chain": cpu(lambda: path(raws, Monitor().process))}
    wall = dict(zip(rates, walls[0], strict=True))
    print(json.dumps({"rates": rates, "wall_rates": wall, "replimon": str(where.parent), "chain": path.__name__}))


def generate(groups: int, duration_s: float, seed: int, path: Path) -> int:
    from core import Workload
    from core import generate as make

    events = make(Workload(groups=groups, node_mix=(3, 4, 5), duration_ms=int(duration_s * 1000), seed=seed))
    with path.open("wb") as f:
        for ev in events:
            f.write(json.dumps(ev, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    return len(events)


def summary(values: Sequence[float], digits: int = 4) -> dict[str, Any]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits), "n": len(values)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help=f"the earlier commit (default {DEFAULT_BASE})")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--groups", type=int, default=40)
    ap.add_argument("--duration", type=float, default=300, help="simulated seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    # A stopped run still removes its worktree (the finally below): SIGTERM as an exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from machine import machine  # bench/machine.py
    from report import render_tables  # bench/report.py

    host = machine()
    with tempfile.TemporaryDirectory(prefix="replimon-versions-") as tmp:
        events = Path(tmp) / "events.jsonl"
        n = generate(args.groups, args.duration, args.seed, events)
        print(f"{n:,} events of {args.groups} XCom groups x {args.duration:.0f} s", file=sys.stderr)
        base = base_tree(args.base, Path(tmp) / "base")
        trees = {"before": base, "after": ROOT}
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        try:
            for rep in range(args.repeat):
                order = ("before", "after") if rep % 2 == 0 else ("after", "before")
                for name in order:
                    runs[name].append(run_child(trees[name], events)["rates"])
                b, a = runs["before"][-1], runs["after"][-1]
                print(f"  repetition {rep + 1}/{args.repeat}: monitor {b['monitor']:,.0f} -> "
                      f"{a['monitor']:,.0f} ev/s, chain {b['chain']:,.0f} -> {a['chain']:,.0f} ev/s",
                      file=sys.stderr)
        finally:
            drop_tree(base)
    base_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.base], capture_output=True,
                                 text=True, check=False).stdout.strip()
    ratios: dict[str, Any] = {}
    for what in ("monitor", "chain"):
        raw = [a[what] / b[what] for a, b in zip(runs["after"], runs["before"], strict=True)]
        norm = [(a[what] / a["baseline"]) / (b[what] / b["baseline"])
                for a, b in zip(runs["after"], runs["before"], strict=True)]
        ratios[what] = {"after_over_before": summary(raw), "normalised_by_baseline": summary(norm)}
    res = {
        "benchmark": "versions", "schema": 1, "machine": host,
        "load_average_at_end_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "base": base_commit, "workload": {"family": "xcom", "groups": args.groups,
                                          "duration_s": args.duration, "seed": args.seed, "events": n},
        "events_per_s": {name: {what: summary([r[what] for r in rs], 0) for what in rs[0]}
                         for name, rs in runs.items()},
        "ratios": ratios,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    rows = [[what, f"{res['events_per_s']['before'][what]['median']:,.0f}",
             f"{res['events_per_s']['after'][what]['median']:,.0f}",
             f"{ratios[what]['after_over_before']['median']:.3f}",
             f"{ratios[what]['normalised_by_baseline']['median']:.3f}"] for what in ("monitor", "chain")]
    render_tables([(f"XCom, before ({base_commit[:9]}) and after (this tree), medians of {args.repeat}",
                    ["loop", "before ev/s", "after ev/s", "after/before", "normalised"], rows)])
    print(f"\nwritten: {args.out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(main())
