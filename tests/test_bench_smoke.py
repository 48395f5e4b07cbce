"""Smoke test of bench/core.py: it runs and writes its JSON. No timing is asserted here; figures
are read from a full run of the benchmark (bench/README.md), never from a unit test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "core.py"


def test_bench_core_quick_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "results" / "core.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--repeat", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Monitor.process" in proc.stdout
    res = json.loads(out.read_text(encoding="utf-8"))

    assert res["benchmark"] == "core" and res["quick"] is True
    for key in ("cpu_count", "python", "date"):
        assert key in res["machine"]

    mix = res["workload"]["mix"]
    assert mix["events"] > 0
    assert set(mix["types"]) <= {"decision", "execution", "heartbeat", "config"}
    assert sum(mix["types"].values()) == mix["events"]

    tp = res["throughput"]
    assert tp["repeat"] == 1 and tp["target_events_per_s"] == 200_000
    assert isinstance(tp["meets_target"], bool)
    for name in ("baseline", "monitor", "parse_event"):
        stats = tp["events_per_s"][name]
        assert {"median", "min", "max", "runs"} <= set(stats) and len(stats["runs"]) == 1
    for name in ("monitor_to_baseline", "parse_event_to_baseline"):
        assert "median" in tp["ratios"][name]

    mem = res["memory"]
    assert mem["state_json_bytes_per_group"]["median"] > 0
    assert "tracemalloc_retained_bytes_per_group" in mem

    for line in ("scaling", "long_history"):
        sc = res[line]
        sizes = sc["state_json_bytes_per_group"]
        assert sizes["at_first_checkpoint"]["median"] > 0 and sizes["at_end"]["median"] > 0
        assert {"median", "max"} <= set(sc["growth_end_over_first"])
        assert sc["state_json_bytes_series"]

    assert isinstance(res["workload"]["alerts"], dict)  # kind/status -> count, shown in the table
