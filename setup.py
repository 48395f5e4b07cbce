"""The package list and the package data, derived from the tree (the metadata is in pyproject.toml).

The repository's top level shows the architecture (docs/architecture.md): ``producers/``,
``streaming/`` and ``dashboards/`` are sub-packages of ``replimon`` that live beside it rather than
inside it. ``ROOTS`` maps each installed package to its folder; every package below a root (a
folder with an ``__init__.py``) is found, and every other file in a package's folder or in its
data folders (folders without an ``__init__.py``, such as ``store/migrations``) ships as that
package's data. Nothing is listed by hand, so a new module, package or data file cannot be left
out of the wheel (tests/test_wheel.py builds one and checks).
"""

from __future__ import annotations

import os

from setuptools import find_packages, setup

ROOTS = {
    "replimon": "replimon",
    "replimon.producers": "producers",
    "replimon.streaming": "streaming",
    "replimon.dashboards": "dashboards",
}
SKIP_DIRS = {"__pycache__"}
SKIP_SUFFIXES = (".py", ".pyc", ".pyo")


def packages() -> dict[str, str]:
    """Every package under the roots, with its folder (relative, '/'-separated)."""
    found: dict[str, str] = {}
    for name, folder in ROOTS.items():
        found[name] = folder
        for sub in find_packages(folder):
            found[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"
    # A root found inside another root's folder would be packed twice (not so today).
    return found


def package_data(found: dict[str, str]) -> dict[str, list[str]]:
    """Each package's non-Python files: in its folder and in sub-folders that are not packages."""
    package_dirs = set(found.values())
    data: dict[str, list[str]] = {}
    for name, folder in found.items():
        files = []
        for here, dirs, names in os.walk(folder):
            here = here.replace(os.sep, "/")
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and f"{here}/{d}" not in package_dirs)
            files += [os.path.relpath(f"{here}/{n}", folder).replace(os.sep, "/")
                      for n in sorted(names) if not n.endswith(SKIP_SUFFIXES)]
        if files:
            data[name] = files
    return data


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import ROOTS and the functions
    PACKAGES = packages()
    setup(package_dir=ROOTS, packages=sorted(PACKAGES), package_data=package_data(PACKAGES))
