"""Smoke test of bench/core.py: it runs and writes its JSON. No timing is asserted here; figures
are read from a full run of the benchmark (bench/README.md), never from a unit test."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

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
    for name in ("baseline", "monitor", "parse_event", "decode_event", "chain", "chain_parse_twice"):
        stats = tp["events_per_s"][name]
        assert {"median", "min", "max", "runs"} <= set(stats) and len(stats["runs"]) == 1
    for name in ("monitor_to_baseline", "parse_event_to_baseline", "chain_to_chain_parse_twice"):
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

    # The mixed fleet (--families, default all four): every family has events, a throughput line
    # of its own and state sizes; the whole fleet's Monitor.process and chain lines.
    mixed = res["workload"]["mixed"]
    families = ("xcom", "gen", "qlog", "chain")
    assert set(mixed["families"]) == set(families)
    assert all(f["events"] > 0 for f in mixed["families"].values())
    assert sum(f["events"] for f in mixed["families"].values()) == mixed["events"]
    for name in ("mixed_monitor", "mixed_chain", *(f"mixed_{f}_monitor" for f in families)):
        assert tp["events_per_s"][name]["median"] > 0 and f"{name}_to_baseline" in tp["ratios"]
    assert all(mixed["state_json_bytes_per_group"][f]["median"] > 0 for f in families)
    assert "mixed fleet: chain now" in proc.stdout and "qlog events alone" in proc.stdout


def test_bench_mixed_trace_has_every_family_and_its_faults(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/traces.py over the four families: each gets its share of the groups and of the rate,
    its events are in the trace (in time order) and faults of every family are planned and
    injected, each in its own group."""
    monkeypatch.syspath_prepend(str(BENCH.parent))
    fleets = importlib.import_module("fleets")
    traces = importlib.import_module("traces")
    families = fleets.parse_families("xcom,gen,qlog,chain")
    plan = traces.fault_plan(8, 8, 2.0, 4.0, families)
    assert {fleets.family_of(i.group) for i in plan} == {"xcom", "gen", "qlog", "chain"}
    assert len({i.group for i in plan}) == len(plan) == 8
    specs = traces.fleet_specs(families, 8, 3, 400, 8.0, 7)
    trace = traces.write_fleet(tmp_path / "mixed.tsv", specs, plan)
    assert set(trace.families) == {"xcom", "gen", "qlog", "chain"}
    assert all(f["events"] > 0 and f["faults"] == 2 for f in trace.families.values())
    assert sum(f["events"] for f in trace.families.values()) == trace.events
    assert {fleets.family_of(f["group"]) for f in trace.faults} == set(trace.families)
    assert all(f["alert"] for f in trace.faults)
    ticks = [int(line.split("\t", 1)[0]) for line in trace.path.read_text(encoding="utf-8").splitlines()]
    assert len(ticks) == trace.events and ticks == sorted(ticks)
    assert abs(trace.rate - 400) <= 0.15 * 400  # calibrated, not hoped for (a short trace: 15%)


# bench/pipeline.py: the cheap part by default; the whole --quick run (Spark) only with -m slow.
PIPELINE = Path(__file__).resolve().parents[1] / "bench" / "pipeline.py"


def test_bench_pipeline_quick_no_spark_writes_json(tmp_path: Path) -> None:
    """bench/pipeline.py without the services (traces at a set rate, the core ceiling): seconds."""
    out = tmp_path / "results" / "pipeline.json"
    proc = subprocess.run(
        [sys.executable, str(PIPELINE), "--quick", "--no-spark", "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "core chain" in proc.stdout
    res = json.loads(out.read_text(encoding="utf-8"))

    assert res["benchmark"] == "pipeline" and res["quick"] is True
    for key in ("cpu_count", "python", "date", "load_average_at_start_1_5_15", "load_average_at_end_1_5_15"):
        assert key in res["machine"]
    assert res["settings"]["nodes"] == 5 and res["targets"] is None
    (g,) = res["groups"]
    (w,) = g["workload"].values()
    # The trace's rate is set by calibration, not hoped for: within 10% of the target.
    assert abs(w["events_per_s"] - res["settings"]["rates"][0]) <= 0.1 * res["settings"]["rates"][0]
    assert w["faults"] == res["settings"]["faults"] and sum(w["types"].values()) == w["events"]
    for name in ("chain", "chain_parse_twice", "monitor", "decode_event"):
        assert g["core"]["events_per_s"][name]["median"] > 0
    assert g["core"]["chain_to_chain_parse_twice"] > 0


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_bench_pipeline_quick_writes_json(tmp_path: Path) -> None:
    """The whole of bench/pipeline.py --quick: broker, PostgreSQL, Spark (minutes on 2 cores)."""
    out = tmp_path / "results" / "pipeline.json"
    proc = subprocess.run(
        [sys.executable, str(PIPELINE), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=850, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Sustained, live" in proc.stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    (g,) = res["groups"]
    rec = g["recorded"]
    (cap,) = rec["capacity"]
    (rep,) = rec["replay"]
    assert cap["error"] is None and cap["steady_batches"] >= 1 and cap["events_per_s"] > 0
    assert rep["error"] is None and rep["completed"] and rep["rows_read"] == rec["events"]
    (rate,) = g["sustained"]
    (run,) = rate["runs"]
    assert run["error"] is None and run["drained"], run
    assert isinstance(run["keeps_up"], bool) and set(run["criteria"]) == {
        "rate_matched", "backlog_bounded", "batch_ms_within_trigger"}
    assert run["published_total"] > 0 and run["batches_in_window"] >= 1
    # Every injected fault raised its alert, and the latency of each was measured.
    assert run["fault_alerts"]["found"] == run["fault_alerts"]["injected"] > 0
    assert run["latency_s"]["inserted"]["n"] >= run["fault_alerts"]["injected"]
    assert set(run["cpu"]["cores"]) >= {"driver", "jvm", "python_workers", "broker", "postgres", "publisher"}
