"""What a user installs is the whole product: the wheel built from the tree carries every module and
data file, and installed on its own (not editable, in a fresh virtual environment that cannot see
the checkout, without the dev extra's packages) it runs every family (tests/support/wheel.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.wheel import (
    FOUR_FAMILY_ALERTS,
    FOUR_FAMILY_FAULTS,
    build_wheel,
    child_env,
    copy_files,
    fresh_env,
    missing_from_wheel,
    tracked_files,
    wheel_names,
    wheel_of_tree,
)


@pytest.fixture(scope="module")
def tree_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheel_of_tree(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def installed(tree_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fresh environment's bin/ folder, with the wheel installed."""
    return fresh_env(tree_wheel, tmp_path_factory.mktemp("fresh") / "venv").parent


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``argv`` from ``cwd`` (not the checkout), with nothing in the environment choosing a path."""
    return subprocess.run(argv, cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=300, check=False)


# -- what the wheel holds -------------------------------------------------------------------------------
def test_the_wheel_holds_every_module_and_data_file_of_the_tree(tree_wheel: Path) -> None:
    files = tracked_files()
    under_roots = [f for f in files if f.startswith(("replimon/", "streaming/", "producers/", "dashboards/"))]
    assert len(under_roots) > 150
    assert missing_from_wheel(tree_wheel, files) == []
    names = wheel_names(tree_wheel)
    for family in ("xcom", "gen", "qlog", "chain"):
        assert f"replimon/core/rules/{family}/__init__.py" in names
    assert {"replimon/store/migrations/001_init.sql", "replimon/contract/event-v1.schema.json",
            "replimon/streaming/java/NioLocalFileSystem.java", "replimon/dashboards/json/fleet.json"} <= names


def test_a_new_package_is_packed_and_one_left_out_is_named(tmp_path: Path) -> None:
    files = tracked_files()
    tree = copy_files(files, tmp_path / "tree")
    planted = {  # a new rule package with data, and a folder of modules that is no package
        "replimon/core/rules/planted/__init__.py": "",
        "replimon/core/rules/planted/safety.py": "RULE = 1\n",
        "replimon/core/rules/planted/limits/defaults.json": "{}\n",
        "producers/simulator_planted/__init__.py": "",
        "streaming/sinks/unpackaged/extra.py": "X = 1\n",
    }
    for name, text in planted.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    wheel = build_wheel(tree, tmp_path / "dist")
    names = wheel_names(wheel)
    assert {"replimon/core/rules/planted/safety.py", "replimon/core/rules/planted/limits/defaults.json",
            "replimon/producers/simulator_planted/__init__.py"} <= names
    # A folder of modules without __init__.py is no package: discovery skips it, and the check says so.
    assert missing_from_wheel(wheel, [*files, *planted]) == ["streaming/sinks/unpackaged/extra.py"]
    # And a package dropped from a wheel is named, module by module.
    cut = tmp_path / "cut" / wheel.name
    cut.parent.mkdir()
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(cut, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith("replimon/core/rules/chain/"):
                dst.writestr(item, src.read(item))
    dropped = missing_from_wheel(cut, files)
    assert dropped and all(f.startswith("replimon/core/rules/chain/") for f in dropped)
    assert "replimon/core/rules/chain/__init__.py" in dropped


# -- the wheel on its own -------------------------------------------------------------------------------
def test_the_installed_wheel_imports_every_module_from_itself(installed: Path, tree_wheel: Path,
                                                              tmp_path: Path) -> None:
    script = (
        "import importlib, json, pkgutil, sys, replimon\n"
        "names = sorted(m.name for m in pkgutil.walk_packages(replimon.__path__, 'replimon.'))\n"
        "files = {n: importlib.import_module(n).__file__ for n in names}\n"
        "print(json.dumps({'root': replimon.__file__, 'files': files}))\n"
    )
    done = run([str(installed / "python"), "-c", script], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    venv = installed.parent
    assert Path(out["root"]).is_relative_to(venv), out["root"]
    assert all(Path(f).is_relative_to(venv) for f in out["files"].values())
    modules = {n for n in wheel_names(tree_wheel) if n.endswith(".py")}
    site = Path(out["root"]).parents[1]
    imported = {Path(f).relative_to(site).as_posix() for f in [out["root"], *out["files"].values()]}
    assert imported == modules, sorted(modules ^ imported)


def test_the_installed_wheel_refuses_the_dev_extras_packages(installed: Path, tmp_path: Path) -> None:
    """The environment really is an installation's: a module only the dev extra brings is absent."""
    done = run([str(installed / "python"), "-c", "import pytest"], tmp_path)
    assert done.returncode == 1 and "dev extra" in done.stderr, done.stderr[-2000:]
    done = run([str(installed / "python"), "-c", "import pydantic, pyspark, great_expectations"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_installed_wheel_simulates_and_checks_every_family(installed: Path, tmp_path: Path) -> None:
    replimon = str(installed / "replimon")
    traces, expected = [], set()
    for family, fault in FOUR_FAMILY_FAULTS.items():
        out = tmp_path / f"{family}.jsonl"
        done = run([replimon, "simulate", "--family", family, "--seed", "3", "--groups", "2",
                    "--duration", "90s", "--inject", fault, "--out", str(out)], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        types = {json.loads(line)["type"] for line in out.read_text().splitlines()}
        assert types, family
        (manifest,) = json.loads(Path(f"{out}.faults.json").read_text())
        expected.add((manifest["group"], manifest["alert"]))
        traces.append(str(out))
    assert expected == FOUR_FAMILY_ALERTS

    check = [replimon, "check", "--sort-by-time", *traces, "--min-severity", "warning"]
    done = run(check, tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]  # critical alerts fired
    alerts = [json.loads(line) for line in done.stdout.splitlines()]
    assert {(a["group"], a["kind"]) for a in alerts} == expected
    # the same answer, byte for byte, as the checkout's own check
    here = run([str(Path(sys.executable).parent / "replimon"), *check[1:]], tmp_path)
    assert here.stdout == done.stdout


def test_the_installed_wheel_checks_its_shipped_schema(installed: Path, tmp_path: Path) -> None:
    done = run([str(installed / "replimon"), "schema", "--check"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "up to date" in done.stderr
