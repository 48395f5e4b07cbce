"""Dashboards as code (docs/dashboards.md): the four dashboards of ``boards/`` and the alert
rules of ``alert_rules.py`` serialised to the files checked in under ``dashboards/``.

``replimon dashboards generate [--check]`` calls `generate`. The JSON is stable: keys sorted,
2-space indent, a trailing newline, panel ids and grid positions fixed by the code, so the same
code always gives the same bytes and the golden test (tests/dashboards/test_dashboards.py) can
compare them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards.alert_rules import rules_files
from replimon.dashboards.boards import alerts, fleet, group, pipeline
from replimon.dashboards.common import HERE, JSON_DIR

BOARDS = {"fleet": fleet, "group": group, "alerts": alerts, "pipeline": pipeline}  # one JSON file each
NAMES = tuple(BOARDS)


def build(name: str) -> model.Dashboard:
    """Dashboard ``name`` as the SDK's model, panel ids numbered in order."""
    built: model.Dashboard = BOARDS[name].build().build()
    for i, panel in enumerate(built.panels or [], start=1):
        panel.id_val = i
    return built


def render(value: Any) -> str:
    """The stable JSON text of an SDK model (or plain data)."""
    return json.dumps(value, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def dashboard_files() -> dict[str, str]:
    """Every generated file: path relative to ``dashboards/`` -> its text (the dashboards'
    JSON, and the provisioning YAML of ``alert_rules.rules_files``)."""
    rel = JSON_DIR.relative_to(HERE)
    return {**{str(rel / f"{name}.json"): render(build(name)) for name in NAMES}, **rules_files()}


def _stale(expected: Iterable[str]) -> list[Path]:
    """JSON files in ``json/`` that the code no longer generates (a renamed dashboard)."""
    keep = {HERE / p for p in expected}
    return sorted(p for p in JSON_DIR.glob("*.json") if p not in keep)


def generate(check: bool = False) -> list[str]:
    """Write every generated file whose content changed; return their paths. With ``check``,
    write nothing and return the paths that differ from what the code generates (a missing
    file, a changed one, or a JSON file in ``json/`` the code no longer generates)."""
    files = dashboard_files()
    changed: list[str] = []
    for rel, text in files.items():
        path = HERE / rel
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        changed.append(str(path))
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in _stale(files):
        changed.append(str(path))
        if not check:
            path.unlink()
    return changed

