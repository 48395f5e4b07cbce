"""The layering rule (README, "Layout"; docs/architecture.md), checked on the source with ``ast``:

* ``replimon/core`` imports nothing outside the standard library and itself;
* nothing under ``replimon/`` imports ``replimon.streaming`` or ``pyspark``, except the entry
  points ``replimon/cli.py`` and ``replimon/demo.py``; neither do ``producers/`` and
  ``dashboards/``: ``streaming/`` holds every module that needs a SparkSession;
* no import cycles between the package's modules (imports inside functions count too: a lazy
  import hides a cycle, it does not remove it).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.wheel import setup_py

ROOT = Path(__file__).resolve().parents[1]
# Source folder -> the package it installs as (setup.py's ROOTS).
PACKAGES = {folder: package for package, folder in setup_py().ROOTS.items()}
ENTRY_POINTS = {"replimon.cli", "replimon.demo"}
SPARK = ("replimon.streaming", "pyspark")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            out[_module_name(path)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in the file (absolute names)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            out.add(base)
            # ``from pkg import mod`` imports the module pkg.mod when there is one
            out.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES)
    return out


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_package_is_found() -> None:
    assert {"replimon.core.alerts", "replimon.cli", "replimon.streaming.job", "replimon.producers.publisher",
            "replimon.dashboards.build"} <= set(MODULES)


def test_core_imports_only_the_standard_library_and_itself() -> None:
    stdlib = sys.stdlib_module_names
    bad = {name: sorted(i for i in imports if not _within(i, "replimon.core")
                        and i.split(".")[0] not in stdlib and i != "__future__")
           for name, imports in IMPORTS.items() if _within(name, "replimon.core")}
    assert not {k: v for k, v in bad.items() if v}


def test_only_streaming_and_the_entry_points_touch_spark() -> None:
    bad = {}
    for name, imports in IMPORTS.items():
        if _within(name, "replimon.streaming") or name in ENTRY_POINTS:
            continue
        hits = sorted(i for i in imports if any(_within(i, s) for s in SPARK))
        if hits:
            bad[name] = hits
    assert not bad, bad


def _cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph = {n: sorted(i for i in imports if i in MODULES and i != n) for n, imports in IMPORTS.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("rule", ["core", "spark", "cycles"])
def test_the_checks_can_fail(rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check fails on a planted violation (a test that cannot fail proves nothing)."""
    if rule == "core":
        monkeypatch.setitem(IMPORTS, "replimon.core.alerts", IMPORTS["replimon.core.alerts"] | {"psycopg"})
        with pytest.raises(AssertionError):
            test_core_imports_only_the_standard_library_and_itself()
    elif rule == "spark":
        monkeypatch.setitem(IMPORTS, "replimon.check", IMPORTS["replimon.check"] | {"pyspark.sql"})
        with pytest.raises(AssertionError):
            test_only_streaming_and_the_entry_points_touch_spark()
    else:
        monkeypatch.setitem(IMPORTS, "replimon.core.alerts",
                            IMPORTS["replimon.core.alerts"] | {"replimon.check"})
        assert _cycles()
