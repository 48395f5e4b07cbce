"""``replimon check``: JSONL in, one JSON alert per line out, exit 0/1/2, bad lines never fatal."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replimon.cli import main
from replimon.core.alerts import FIELDS, KINDS
from replimon.producers.simulator import JsonlSink, SimOptions, Simulator, parse_injection

pytestmark = pytest.mark.usefixtures("clean_env")


def trace(path: Path, *faults: str, seconds: int = 60, groups: int = 2, seed: int = 4) -> Path:
    sink = JsonlSink(path)
    sim = Simulator(SimOptions(groups=groups, duration_ms=seconds * 1000, seed=seed),
                    [parse_injection(f) for f in faults], sink)
    sim.run()
    sink.close()
    Path(f"{path}.faults.json").write_text(json.dumps(sim.manifest()))
    return path


def alerts_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_clean_trace_exits_0_and_prints_only_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace(tmp_path / "clean.jsonl", seconds=90)
    assert main(["check", str(path)]) == 0
    captured = capsys.readouterr()
    alerts = alerts_of(captured.out)
    assert alerts and {a["kind"] for a in alerts} <= {"CONFIG_INSTALLED", "RECONFIG_REFUSED"}
    for a in alerts:
        assert tuple(a) == FIELDS
        assert (a["severity"], a["category"]) == KINDS[a["kind"]]
        assert a["evidence"] and all("file" in e and "line" in e for e in a["evidence"])
    assert "result: ok" in captured.err and "0 bad line(s)" in captured.err


def test_violation_exits_1_and_the_alert_names_the_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace(tmp_path / "bad.jsonl", "beyond_horizon:g2@20s")
    assert main(["check", str(path), "--min-severity", "warning"]) == 1
    captured = capsys.readouterr()
    (alert,) = alerts_of(captured.out)
    manifest = json.loads((tmp_path / "bad.jsonl.faults.json").read_text())[0]
    assert (alert["kind"], alert["group"], alert["node"]) == ("BEYOND_HORIZON", "g2", manifest["node"])
    assert alert["instance"] == manifest["last"]
    (ev,) = alert["evidence"]
    assert ev["window_base"] == manifest["window_base"] and ev["file"] == str(path)
    assert "FAILED" in captured.err


def test_a_wedge_fails_by_default_unless_fail_on_violation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace(tmp_path / "wedge.jsonl", "horizon_wedge:g1@15s", seconds=60)
    assert main(["check", str(path), "--min-severity", "critical"]) == 1
    alerts = alerts_of(capsys.readouterr().out)
    assert [(a["kind"], a["status"]) for a in alerts] == [("HORIZON_WEDGE", "firing"), ("HORIZON_WEDGE", "resolved")]
    assert alerts[0]["alert_id"] == alerts[1]["alert_id"]
    assert main(["check", str(path), "--fail-on", "critical"]) == 1
    assert main(["check", str(path), "--fail-on", "violation"]) == 0
    assert main(["check", str(path), "--fail-on", "never"]) == 0


@pytest.mark.parametrize("content", [b"", b"\n\n", gzip.compress(b'{"v": 1}\n' * 50), b"not json\n{}\n"],
                         ids=["empty", "blank", "gzip", "only-bad"])
def test_no_valid_event_exits_2_with_one_line(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "capture.jsonl"
    path.write_bytes(content)
    assert main(["check", str(path), "--fail-on", "never"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "no valid event" in lines[0] and "result: ok" not in err


def test_bad_lines_are_counted_with_line_numbers_and_never_fatal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = trace(tmp_path / "good.jsonl", seconds=20).read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    lines = good[:10] + ["not json", "", '{"v": 1, "type": "decision"}'] + good[10:] + ["\xff garbage"]
    mixed.write_text("\n".join(lines) + "\n")
    assert main(["check", str(mixed)]) == 0
    err = capsys.readouterr().err
    assert f"bad line {mixed}:11: not JSON" in err
    assert f"bad line {mixed}:13:" in err and f"bad line {mixed}:{len(lines)}:" in err
    assert "3 bad line(s)" in err and f"{len(good)} events" in err


def test_reads_several_files_in_order_and_stdin(tmp_path: Path) -> None:
    path = trace(tmp_path / "t.jsonl", "divergent_decision:g1@10s", seconds=30)
    lines = path.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    (tmp_path / "a.jsonl").write_text("".join(lines[:half]))
    (tmp_path / "b.jsonl").write_text("".join(lines[half:]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLIMON_")}
    cmd = [sys.executable, "-m", "replimon.cli", "check"]
    whole = subprocess.run([*cmd, str(path)], capture_output=True, text=True, env=env, check=False, timeout=120)
    split = subprocess.run([*cmd, str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")],
                           capture_output=True, text=True, env=env, check=False, timeout=120)
    piped = subprocess.run([*cmd, "-"], input=path.read_text(), capture_output=True, text=True, env=env,
                           check=False, timeout=120)
    assert whole.returncode == split.returncode == piped.returncode == 1
    ids = [a["alert_id"] for a in alerts_of(whole.stdout)]
    assert ids == [a["alert_id"] for a in alerts_of(split.stdout)] == [a["alert_id"] for a in alerts_of(piped.stdout)]
    assert "DIVERGENT_DECISION" in whole.stdout and "Traceback" not in whole.stderr + split.stderr + piped.stderr


def test_per_topic_captures_need_sort_by_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = [json.loads(line) for line in trace(tmp_path / "t.jsonl", seconds=40).read_text().splitlines()]
    files = []
    for etype in ("decision", "execution", "heartbeat", "config"):
        f = tmp_path / f"{etype}.jsonl"
        f.write_text("".join(json.dumps(e) + "\n" for e in events if e["type"] == etype))
        files.append(str(f))
    assert main(["check", *files, "--sort-by-time", "--min-severity", "warning"]) == 0
    assert capsys.readouterr().out == ""


def test_thresholds_come_from_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace(tmp_path / "t.jsonl", "node_silent:g1@10s", seconds=40)
    assert main(["check", str(path), "--min-severity", "warning"]) == 0
    assert "NODE_SILENT" in capsys.readouterr().out
    conf = tmp_path / "c.yaml"
    conf.write_text("thresholds:\n  node_silent_s: 30\n")
    assert main(["check", str(path), "--config", str(conf), "--min-severity", "warning"]) == 0
    assert capsys.readouterr().out == ""  # 12 s of silence is under the configured 30 s
    assert main(["--config", str(conf), "check", str(path), "--min-severity", "warning"]) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["check", "/nonexistent/x.jsonl"], "cannot read /nonexistent/x.jsonl"),
        (["check", "."], "cannot read ."),
        (["check", "-", "--fail-on", "always"], "--fail-on"),
        (["check", "-", "--min-severity", "loud"], "--min-severity"),
        (["check"], "files"),
    ],
)
def test_usage_and_unreadable_input_exit_2_with_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err


def test_bad_threshold_in_config_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text("thresholds:\n  skew_s: -1\n")
    assert main(["check", "-", "--config", str(conf)]) == 2
    assert "thresholds.skew_s" in capsys.readouterr().err


def test_one_node_ten_years_ahead_is_one_clock_skew_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/operations.md, "Clocks": no GROUP_SILENT elsewhere, no NODE_SILENT in its group, exit 0
    (a data warning does not fail the default ``--fail-on critical``)."""
    path = trace(tmp_path / "clean.jsonl", seconds=90, groups=3)
    years = 10 * 365 * 86_400_000
    lines = []
    for raw in path.read_text().splitlines():
        ev = json.loads(raw)
        if (ev["group"], ev["node"]) == ("g2", "n1"):
            ev["ts_ms"] += years
        lines.append(json.dumps(ev))
    skewed = tmp_path / "skewed.jsonl"
    skewed.write_text("\n".join(lines) + "\n")
    assert main(["check", str(skewed), "--min-severity", "warning", "--fail-on", "warning"]) == 1
    (alert,) = alerts_of(capsys.readouterr().out)
    assert (alert["kind"], alert["group"], alert["node"], alert["severity"]) == ("CLOCK_SKEW", "g2", "n1", "warning")
    assert main(["check", str(skewed), "--min-severity", "warning"]) == 0


def test_a_file_mixing_xcom_and_generations_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each group is checked by its family's rules (the family of its first event's type)."""
    from replimon.producers.simulator_gen import SimOptions as GenOptions
    from replimon.producers.simulator_gen import Simulator as GenSimulator
    from replimon.producers.simulator_gen import parse_injection as gen_injection

    events: list[dict[str, Any]] = []
    Simulator(SimOptions(groups=2, duration_ms=60_000, seed=4), [parse_injection("beyond_horizon:g2@20s")],
              events.append).run()
    GenSimulator(GenOptions(groups=2, nodes=3, duration_ms=60_000, seed=5),
                 [gen_injection("gen_donor_stale:pg1@10s")], events.append).run()
    events.sort(key=lambda e: e["ts_ms"])
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["check", str(path), "--min-severity", "warning"]) == 1
    captured = capsys.readouterr()
    got = sorted((a["group"], a["kind"]) for a in alerts_of(captured.out))
    assert got == [("g2", "BEYOND_HORIZON"), ("pg1", "GEN_DONOR_STALE")]
    assert "from 4 group(s)" in captured.err and "0 bad line(s)" in captured.err


def test_an_event_of_another_family_is_a_bad_line_and_one_family_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replimon.producers.simulator_gen import SimOptions as GenOptions
    from replimon.producers.simulator_gen import Simulator as GenSimulator

    events: list[dict[str, Any]] = []
    Simulator(SimOptions(groups=1, duration_ms=30_000, seed=4), [], events.append).run()
    stray: list[dict[str, Any]] = []
    GenSimulator(GenOptions(groups=1, nodes=3, duration_ms=5_000, seed=5), [], stray.append).run()
    shift = events[100]["ts_ms"] - stray[0]["ts_ms"]
    events += [{**e, "group": "g1", "node": "x" + e["node"], "ts_ms": e["ts_ms"] + shift} for e in stray]
    events.sort(key=lambda e: e["ts_ms"])
    path = tmp_path / "stray.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["check", str(path), "--min-severity", "warning", "--fail-on", "warning"]) == 1
    captured = capsys.readouterr()
    (alert,) = alerts_of(captured.out)
    assert (alert["kind"], alert["group"]) == ("FAMILY_CONFLICT", "g1")
    assert f"{len(stray)} bad line(s)" in captured.err
    # A pin wins over the first event: pinned to gen, the group's XCom events are the bad lines.
    config = tmp_path / "pins.yaml"
    config.write_text("families:\n  'g*': gen\n")
    assert main(["--config", str(config), "check", str(path), "--min-severity", "warning",
                 "--fail-on", "warning"]) == 1
    captured = capsys.readouterr()
    conflicts = [a for a in alerts_of(captured.out) if a["kind"] == "FAMILY_CONFLICT"]
    assert [a["group"] for a in conflicts] == ["g1"]
    assert "which is a gen group" in conflicts[0]["message"]
    assert f"{len(events) - len(stray)} bad line(s)" in captured.err
    assert "family conflict: group g1 is gen" in captured.err
