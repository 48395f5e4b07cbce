"""The ``replimon`` command through ``replimon.cli.main`` (and once as the installed script)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replimon.cli import main
from replimon.config import Settings
from replimon.contract import Invalid, parse_event
from replimon.producers.simulator import CATALOGUE
from tests.support import one_error_line

ROOT = Path(__file__).resolve().parents[1]
SIM = ["simulate", "--seed", "7", "--groups", "3", "--nodes", "3", "--duration", "30s"]


pytestmark = pytest.mark.usefixtures("clean_env")


# ------------------------------------------------------------------------------------ simulate
def test_simulate_is_deterministic_and_every_line_parses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SIM, "--out", "A"]) == 0
    first = (tmp_path / "A").read_bytes()
    assert main([*SIM, "--out", "B"]) == 0
    assert (tmp_path / "B").read_bytes() == first
    assert "wrote" in capsys.readouterr().err
    lines = first.splitlines()
    assert len(lines) > 1000  # 3 groups x 30 s x 20 decisions/s, plus the rest
    groups = set()
    for n, line in enumerate(lines, 1):
        event = parse_event(line)
        assert not isinstance(event, Invalid), f"line {n}: {event.reason}"
        groups.add(event.group)
    assert groups == {"g1", "g2", "g3"}
    assert not (tmp_path / "A.faults.json").exists()  # nothing injected, no manifest


def test_simulate_same_seed_same_file_when_rerun_over_itself(tmp_path: Path) -> None:
    assert main([*SIM, "--out", "A"]) == 0
    first = (tmp_path / "A").read_bytes()
    assert main([*SIM, "--out", "A"]) == 0
    assert (tmp_path / "A").read_bytes() == first


def test_simulate_other_seed_differs(tmp_path: Path) -> None:
    assert main([*SIM, "--out", "A"]) == 0
    assert main([*SIM[:2], "8", *SIM[3:], "--out", "B"]) == 0
    assert (tmp_path / "A").read_bytes() != (tmp_path / "B").read_bytes()


def test_simulate_inject_writes_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SIM, "--out", "A", "--inject", "beyond_horizon:g2@10s"]) == 0
    assert "A.faults.json" in capsys.readouterr().err
    manifest = json.loads((tmp_path / "A.faults.json").read_text(encoding="utf-8"))
    assert isinstance(manifest, list) and len(manifest) == 1
    fault = manifest[0]
    assert fault["fault"] == "beyond_horizon"
    assert fault["alert"] == CATALOGUE["beyond_horizon"].alert
    assert fault["group"] == "g2"
    assert fault["at_ms"] == 10_000
    for line in (tmp_path / "A").read_bytes().splitlines():
        assert not isinstance(parse_event(line), Invalid)


BAD_FLAGS = [
    ("groups-not-int", ["--groups", "x", "--out", "A"], "--groups"),
    ("groups-zero", ["--groups", "0", "--out", "A"], "--groups"),
    ("nodes-too-many", ["--nodes", "12", "--out", "A"], "--nodes"),
    ("duration-unit", ["--duration", "3x", "--out", "A"], "3x"),
    ("duration-zero-file", ["--duration", "0", "--out", "A"], "--duration"),
    ("inject-unknown-fault", ["--inject", "nosuch", "--out", "A"], "nosuch"),
    ("inject-unknown-group", ["--inject", "node_silent:g9", "--out", "A"], "g9"),
    ("inject-bad-time", ["--inject", "node_silent:g1@soon", "--out", "A"], "soon"),
    ("start-bad", ["--start", "yesterday", "--out", "A"], "--start"),
    ("unknown-option", ["--bogus", "--out", "A"], "--bogus"),
    ("out-and-kafka", ["--out", "A", "--kafka"], "--kafka"),
    ("neither-out-nor-kafka", [], "--out"),
    ("option-without-value", ["--out"], "--out"),
]


@pytest.mark.parametrize(("args", "word"), [pytest.param(a, w, id=i) for i, a, w in BAD_FLAGS])
def test_simulate_bad_flags_exit_2_with_one_line(
    args: list[str], word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *args]) == 2
    line = one_error_line(capsys)
    assert line.startswith("replimon:")
    assert word in line
    assert not (tmp_path / "A.faults.json").exists()


@pytest.mark.parametrize(
    "args",
    [["nosuch"], ["--bogus", "config"], ["schema", "--nope"]],
    ids=["unknown-command", "unknown-root-option", "unknown-schema-option"],
)
def test_other_usage_errors_exit_2_with_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert one_error_line(capsys).startswith("replimon:")


def test_rejected_simulate_leaves_existing_output_alone(tmp_path: Path) -> None:
    (tmp_path / "A").write_text("precious\n", encoding="utf-8")
    assert main([*SIM, "--out", "A", "--inject", "node_silent:g9"]) == 2
    assert (tmp_path / "A").read_text(encoding="utf-8") == "precious\n"


def test_list_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--list-faults"]) == 0
    out = capsys.readouterr().out
    for name, spec in CATALOGUE.items():
        assert name in out, f"fault {name} not listed"
        assert spec.alert in out


def test_simulate_family_gen_writes_a_generations_fleet_with_its_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from replimon.producers.simulator_gen import CATALOGUE as GEN_CATALOGUE

    out = tmp_path / "gen.jsonl"
    assert main(["simulate", "--family", "gen", "--seed", "5", "--groups", "2", "--duration", "60s",
                 "--out", str(out), "--inject", "gen_xact_divergent:pg1@10s"]) == 0
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert {e["group"] for e in events} == {"pg1", "pg2"} and {e["type"] for e in events} == {
        "gen.state", "gen.heartbeat", "gen.xact"}
    assert min(e["seq"] for e in events if e["incarnation"] == 0) == 0  # the boot's loads are written
    (fault,) = json.loads((tmp_path / "gen.jsonl.faults.json").read_text())
    assert fault["alert"] == "GEN_XACT_DIVERGENT"
    capsys.readouterr()
    assert main(["check", str(out), "--min-severity", "warning"]) == 1
    kinds = {json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()}
    assert kinds == {"GEN_XACT_DIVERGENT"}
    assert main(["simulate", "--family", "gen", "--list-faults"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in GEN_CATALOGUE)
    assert main(["simulate", "--family", "raft", "--out", str(out)]) == 2
    assert "--family" in one_error_line(capsys)


def test_list_faults_shows_the_text_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--list-faults"]) == 0
    out = capsys.readouterr().out
    assert "NAME[:GROUP][@TIME]" in out
    assert CATALOGUE["eh_out_of_domain"].summary in out


# -------------------------------------------------------------------------------- bad config
def test_bad_config_from_env_exits_2_naming_field_and_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REPLIMON_THRESHOLDS__SKEW_S", "-1")
    assert main(["config"]) == 2
    line = one_error_line(capsys)
    assert "thresholds.skew_s" in line and "REPLIMON_THRESHOLDS__SKEW_S" in line
    assert main([*SIM, "--out", "A"]) == 2
    assert "thresholds.skew_s" in one_error_line(capsys)


@pytest.mark.parametrize("where", ["flag", "env"])
def test_bad_config_file_exits_2_naming_field(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("thresholds:\n  node_silent_s: -1\n", encoding="utf-8")
    if where == "flag":
        args = ["--config", "bad.yaml", "config"]
    else:
        monkeypatch.setenv("REPLIMON_CONFIG", "bad.yaml")
        args = ["config"]
    assert main(args) == 2
    line = one_error_line(capsys)
    assert "thresholds.node_silent_s" in line and "bad.yaml" in line
    assert capsys.readouterr().out == ""


def test_missing_config_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "nope.yaml", "config"]) == 2
    assert "nope.yaml" in one_error_line(capsys)


# ------------------------------------------------------------------------- schema and config
def test_schema_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--check"]) == 0
    assert "up to date" in capsys.readouterr().err


def test_schema_prints_the_checked_in_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    out = capsys.readouterr().out
    assert out == (ROOT / "replimon" / "contract" / "event-v1.schema.json").read_text(encoding="utf-8")


def test_config_prints_effective_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    defaults = Settings().model_dump(mode="json")  # before the env var: Settings() reads env too
    assert main(["config"]) == 0
    assert json.loads(capsys.readouterr().out) == defaults

    monkeypatch.setenv("REPLIMON_THRESHOLDS__NODE_SILENT_S", "8")
    assert main(["config"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["thresholds"]["node_silent_s"] == 8.0
    shown["thresholds"]["node_silent_s"] = defaults["thresholds"]["node_silent_s"]
    assert shown == defaults


def test_config_reads_the_file_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text("simulator:\n  groups: 9\n", encoding="utf-8")
    assert main(["-c", "c.yaml", "config"]) == 0
    assert json.loads(capsys.readouterr().out)["simulator"]["groups"] == 9


def test_config_from_repo_root_equals_defaults(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["config"]) == 0
    assert json.loads(capsys.readouterr().out) == Settings().model_dump(mode="json")


# ------------------------------------------------------------------------ the console script
def _script() -> str:
    beside = Path(sys.executable).parent / "replimon"
    if beside.is_file():
        return str(beside)
    found = shutil.which("replimon")
    if found is None:
        pytest.skip("the replimon console script is not installed")
    return found


def test_console_script_bad_flag(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
    proc = subprocess.run(
        [_script(), "simulate", "--groups", "x", "--out", "A"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60, check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "--groups" in lines[0]
    assert proc.stdout == ""
    assert not (tmp_path / "A").exists()
