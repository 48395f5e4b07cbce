"""The checked-in Great Expectations project (``expectations/``), written from the suites as code.

``expectations/`` is a GX 1.x file-based project (``gx.get_context(mode="file",
project_root_dir="expectations")``): ``gx/great_expectations.yml`` and one JSON file per suite
under ``gx/expectations/`` (GX stores the suite ``replica.decisions`` as
``replica/decisions.json``). The JSON is generated from ``replimon.quality.suites`` with stable
ids, so regenerating it changes nothing unless a suite changed:

    .venv/bin/python -m replimon.quality.project --write   # (re)write the suites
    .venv/bin/python -m replimon.quality.project --check   # exit 1 if a file differs

The job and ``replimon validate`` build the suites from code (an ephemeral context); the project
is what a person opens with GX, reviews in a diff, or builds data docs from.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from replimon.quality.suites import SUITES, spec_id, spec_of, suite_id, to_gx

DEFAULT_ROOT = Path(__file__).resolve().parents[2] / "expectations"


def suite_path(root: Path, name: str) -> Path:
    """Where GX's file store keeps suite ``name`` (dots become folders)."""
    return root / "gx" / "expectations" / Path(*name.split(".")).with_suffix(".json")


def write_project(root: Path = DEFAULT_ROOT) -> list[Path]:
    """Create the project if needed and (re)write every suite with stable ids; returns the
    suite files. Suites that are no longer defined are deleted."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=str(root))
    # No usage statistics and no progress bars on the terminal, for anyone opening the project.
    context.variables.analytics_enabled = False
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.variables.save()
    for old in context.suites.all():
        if old.name not in SUITES:
            context.suites.delete(old.name)
    paths = []
    for name in SUITES:
        suite = context.suites.add_or_update(to_gx(name))
        suite.id = suite_id(name)
        for expectation in suite.expectations:
            config = expectation.configuration
            expectation.id = spec_id(spec_of(name, config.type, config.kwargs))
        suite.save()
        path = suite_path(root, name)
        # GX writes its own indentation and key order; normalise so a diff shows only content.
        path.write_text(json.dumps(json.loads(path.read_text(encoding="utf-8")), indent=2,
                                   sort_keys=True) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def differences(root: Path = DEFAULT_ROOT) -> list[str]:
    """The suite files under ``root`` that differ from what the code generates (or are missing,
    or are suites the code no longer has)."""
    with tempfile.TemporaryDirectory(prefix="replimon-gx-") as tmp:
        fresh = Path(tmp)
        write_project(fresh)
        want = {p.relative_to(fresh): p.read_text(encoding="utf-8")
                for p in (fresh / "gx" / "expectations").rglob("*.json")}
    have = {p.relative_to(root): p.read_text(encoding="utf-8")
            for p in (root / "gx" / "expectations").rglob("*.json")} if root.exists() else {}
    return sorted(str(p) for p in set(want) | set(have) if want.get(p) != have.get(p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replimon.quality.project", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="project root [expectations/]")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="(re)write the suites")
    mode.add_argument("--check", action="store_true", help="exit 1 if a suite file differs")
    args = parser.parse_args(argv)
    if args.check:
        changed = differences(args.root)
        for path in changed:
            print(f"differs: {path}", file=sys.stderr)
        return 1 if changed else 0
    for written in write_project(args.root):
        print(f"wrote: {written}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
