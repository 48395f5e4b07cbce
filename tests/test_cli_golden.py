"""What the CLI prints, pinned (``tests/golden/cli.json``): each family's fault catalogue, each
family's simulated trace (digest), ``check`` over a four-family trace with a fault of each (its
alerts and summary), and the effective configuration. A change that alters any of these for users
fails here; ``REPLIMON_GENERATE_GOLDEN_FILES=1`` rewrites the file, for a change meant to alter
them (say so in the commit)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from replimon.cli import main
from tests.support.golden import digest
from tests.support.wheel import FOUR_FAMILY_FAULTS

GOLDEN = Path(__file__).parent / "golden" / "cli.json"
GENERATE = os.environ.get("REPLIMON_GENERATE_GOLDEN_FILES") == "1"  # read before clean_env drops it

pytestmark = pytest.mark.usefixtures("clean_env")


def outputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def run(name: str, argv: list[str]) -> str:
        capsys.readouterr()
        code = main(argv)
        got = capsys.readouterr()
        out[name] = {"exit": code, "stdout": got.out}
        return got.err

    traces = []
    for family, fault in FOUR_FAMILY_FAULTS.items():
        run(f"list-faults {family}", ["simulate", "--family", family, "--list-faults"])
        path = tmp_path / f"{family}.jsonl"  # named relative to the working directory (clean_env:
        # tmp_path), as the evidence names the file
        run(f"simulate {family}", ["simulate", "--family", family, "--seed", "3", "--groups", "2",
                                   "--duration", "90s", "--inject", fault, "--out", path.name])
        out[f"simulate {family}"]["trace"] = digest(path.read_text())
        out[f"simulate {family}"]["faults"] = json.loads(Path(f"{path}.faults.json").read_text())
        traces.append(path.name)
    err = run("check", ["check", "--sort-by-time", *traces])
    out["check"]["summary"] = [line for line in err.splitlines() if " checked in " not in line]
    run("config", ["config"])
    return out


def test_cli_outputs_match_the_golden_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    got = outputs(capsys, tmp_path)
    if GENERATE:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        return
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name] == want[name], name
    assert want["check"]["exit"] == 1 and len(want["check"]["stdout"].splitlines()) > 20
