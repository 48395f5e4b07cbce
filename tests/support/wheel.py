"""The wheel as a user installs it: built from a copy of the tracked tree, installed alone into a
fresh virtual environment (tests/test_wheel.py, tests/streaming/test_cluster.py, the image test in
tests/test_compose.py).

The fresh environment gets the project's third-party packages through a ``.pth`` path line (a path
line adds the folder but runs none of the ``.pth`` hooks inside it, so the project's editable
install does not come along), and an import hook there refuses every distribution that only the
``dev`` extra brings: what runs in it has only what ``pip install replimon`` (and the image, which
installs ``project.dependencies``) provides.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


@cache
def setup_py() -> ModuleType:
    """The repository's setup.py as a module (its ``setup()`` call runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("replimon_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tracked_files(root: Path = ROOT) -> list[str]:
    """Every file of ``root`` that git tracks or would (not ignored): what a fresh clone of the
    committed tree has, '/'-separated."""
    out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=root, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and (root / f).is_file()]


def copy_files(files: Iterable[str], dest: Path, root: Path = ROOT) -> Path:
    for f in files:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, dest / f)
    return dest


def build_wheel(src: Path, out: Path) -> Path:
    """``pip wheel`` of the project in ``src`` (no dependencies, this environment's setuptools)."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (wheel,) = out.glob("replimon-*.whl")
    return wheel


def wheel_of_tree(tmp: Path) -> Path:
    """The wheel built from a copy of the tracked tree, as a fresh clone would build it."""
    return build_wheel(copy_files(tracked_files(), tmp / "tree"), tmp / "dist")


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n for n in zf.namelist() if ".dist-info/" not in n}


def installed_name(path: str) -> str | None:
    """Where a file of the tree lands in the installed package (None: not under a package root)."""
    roots: dict[str, str] = setup_py().ROOTS
    for package, folder in roots.items():
        if path.startswith(folder + "/"):
            return package.replace(".", "/") + path[len(folder):]
    return None


def missing_from_wheel(wheel: Path, files: Iterable[str]) -> list[str]:
    """The files under the package roots that the wheel lacks."""
    have = wheel_names(wheel)
    return sorted(f for f in files if (name := installed_name(f)) is not None and name not in have)


# -- the fresh environment ------------------------------------------------------------------------------
def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(requirements: Iterable[tuple[str, frozenset[str]]]) -> set[str]:
    """Normalised names of the installed distributions ``requirements`` pull in (with their extras)."""
    found: set[str] = set()
    done: set[tuple[str, frozenset[str]]] = set()
    todo = list(requirements)
    while todo:
        name, extras = todo.pop()
        if (_key(name), extras) in done:
            continue
        done.add((_key(name), extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency of a dependency, not installed
        found.add(_key(name))
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((req.name, frozenset(req.extras)))
    return found


@cache
def dev_only_modules() -> tuple[str, ...]:
    """Top-level module names of the distributions only the ``dev`` extra installs."""
    project = metadata.distribution("replimon")
    runtime, dev = [], []
    for line in project.requires or []:
        req = Requirement(line)
        (dev if req.marker is not None and req.marker.evaluate({"extra": "dev"})
         and not req.marker.evaluate({"extra": ""}) else runtime).append((req.name, frozenset(req.extras)))
    only = _closure(dev) - _closure(runtime)
    names: set[str] = set()
    for dist in metadata.distributions():
        if _key(dist.metadata["Name"]) not in only:
            continue
        for f in dist.files or []:
            top = f.parts[0]
            if top.endswith((".dist-info", ".data")) or top in ("..", "__pycache__"):
                continue
            names.add(top.split(".")[0] if top.endswith((".py", ".so", ".pyd")) else top)
    return tuple(sorted(names))


BLOCKER = '''"""Refuse the modules only replimon's dev extra installs (tests/support/wheel.py)."""
import importlib.abc, sys
BLOCKED = frozenset({blocked!r})
class _DevOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"{{name}} is only in replimon's dev extra, not in an installation", name=name)
        return None
sys.meta_path.insert(0, _DevOnly())
'''


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that would choose a Python, a path or a config
    for a child (the session's Spark fixture may have set PYSPARK_PYTHON to the project's Python)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "REPLIMON_", "SPARK_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def fresh_env(wheel: Path, venv: Path, *, block_dev: bool = True) -> Path:
    """A new virtual environment with ``wheel`` installed (not editable, no dependencies) over the
    project's third-party packages; returns its Python. ``CLUSTER_TEST_FULL_INSTALL=1`` installs
    the wheel with all its dependencies from the package index instead (about 1 GB)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    if os.environ.get("CLUSTER_TEST_FULL_INSTALL") == "1":
        subprocess.run([*pip, "-c", str(ROOT / "constraints.txt"), str(wheel)], check=True,
                       capture_output=True, timeout=900)
        return python
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (purelib / "replimon-deps.pth").write_text("\n".join(deps) + "\n")
    if block_dev:
        (purelib / "replimon_devblock.py").write_text(BLOCKER.format(blocked=sorted(dev_only_modules())))
        (purelib / "replimon-devblock.pth").write_text("import replimon_devblock\n")
    # (cwd: with -c, Python imports from the working directory first)
    probe = subprocess.run([str(python), "-c", "import replimon"], capture_output=True, env=child_env(), cwd=venv)
    assert probe.returncode != 0, "the fresh environment must not see the project's replimon"
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, capture_output=True, timeout=300)
    return python


# -- a fleet of the four families -----------------------------------------------------------------------
# One fault of each family, each known to raise exactly its alert in a 90 s run of 2 groups (seed 3).
FOUR_FAMILY_FAULTS = {
    "xcom": "can_leave_unsafe:g2@30s",
    "gen": "gen_regression:pg1@30s",
    "qlog": "qlog_divergent_decree:ql1@30s",
    "chain": "chain_epoch_regression:ch1@30s",
}
FOUR_FAMILY_ALERTS = {("g2", "CAN_LEAVE_UNSAFE"), ("pg1", "GEN_REGRESSION"), ("ql1", "QLOG_DIVERGENT_DECREE"),
                      ("ch1", "CHAIN_EPOCH_REGRESSION")}  # (group, kind): what they raise, nothing else
SIMULATORS = {"xcom": "simulator", "gen": "simulator_gen", "qlog": "simulator_qlog", "chain": "simulator_chain"}


def four_family_events(seconds: int = 90, groups: int = 2, seed: int = 3) -> list[dict[str, object]]:
    """Two groups of each family with ``FOUR_FAMILY_FAULTS`` injected, in event-time order (as
    ``replimon check --sort-by-time`` reads the four simulators' files)."""
    import importlib

    events: list[dict[str, object]] = []
    for family, fault in FOUR_FAMILY_FAULTS.items():
        sim = importlib.import_module(f"replimon.producers.{SIMULATORS[family]}")
        sim.Simulator(sim.SimOptions(duration_ms=seconds * 1000, groups=groups, seed=seed),
                      [sim.parse_injection(fault)], events.append).run()
    return sorted(events, key=lambda e: e["ts_ms"])  # type: ignore[arg-type,return-value]
