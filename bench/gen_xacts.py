"""The generations family's traced outcomes in a group's saved state, over a long run.

Run from the repository root with the project's interpreter::

    .venv/bin/python bench/gen_xacts.py --minutes 14 --out bench/results/gen_xacts.json

One generations group of 3 nodes from the simulator (its default sample: every node traces the
same transactions), fed to ``Monitor.process``; every simulated minute the size of
``json.dumps(GroupMonitor.to_state())`` (what Spark's state store keeps for the group), the part
of it that is the traced outcomes (``xacts``), and how many gids are remembered. The outcomes are
kept for the design's 10 minutes (docs/families.md 2.3), one short string per gid and at most
``XACT_MAX`` gids, so the size rises for 10 minutes and then stays flat; the table says how flat.
Pure Python, no Spark: seconds per simulated minute.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from replimon.core import Monitor  # noqa: E402
from replimon.producers import simulator_gen  # noqa: E402


def run(minutes: int, seed: int) -> list[dict[str, Any]]:
    monitor = Monitor()
    sim = simulator_gen.Simulator(simulator_gen.SimOptions(groups=1, nodes=3, seed=seed,
                                                           duration_ms=minutes * 60_000), [], monitor.process)
    rows = []
    for minute in range(1, minutes + 1):
        while sim.t < minute * 60_000:
            sim.step()
        (group,) = monitor.groups.values()
        state = group.to_state()
        rows.append({"minute": minute, "state_bytes": len(json.dumps(state)),
                     "xacts_bytes": len(json.dumps(state.get("xacts", {}))), "gids": len(state.get("xacts", {}))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=14)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    start = time.perf_counter()
    rows = run(args.minutes, args.seed)
    print(f"{'minute':>6} {'state bytes':>12} {'xacts bytes':>12} {'gids':>6}")
    for r in rows:
        print(f"{r['minute']:>6} {r['state_bytes']:>12} {r['xacts_bytes']:>12} {r['gids']:>6}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    result = {"command": " ".join(sys.argv), "commit": commit, "python": platform.python_version(),
              "seconds": round(time.perf_counter() - start, 1), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
