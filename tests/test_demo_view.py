"""The demo's live view of the job (``replimon.demo.MonitorView``): alert messages are shown
whole, wrapped to the terminal, and info alerts (events) are never listed as firing."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rich.console import Console

from replimon.demo import MonitorView


def _alert(kind: str, severity: str, category: str, message: str, status: str = "firing") -> dict[str, Any]:
    return {"alert_id": kind.lower(), "group": "g1", "kind": kind, "severity": severity,
            "category": category, "status": status, "node": "n1", "instance": 42,
            "message": message}


def test_recent_alerts_wrap_their_whole_message_and_skip_info_events() -> None:
    message = ("proposer n2 decided instance 1234 beyond its event horizon: window base 1200 "
               "+ event horizon 10 = 1210 < 1234; the majority had executed 1199, so the decision "
               "could overwrite an instance a member has not executed yet (END-OF-MESSAGE)")
    view = MonitorView()
    view(SimpleNamespace(dead_letters=[], snapshots=[], alerts=[
        _alert("BEYOND_HORIZON", "critical", "violation", message),
        _alert("INCOMPLETE_HISTORY", "info", "data", "first event was not the boot decision"),
        _alert("CONFIG_INSTALLED", "info", "info", "config installed")]))
    assert [a["kind"] for a in view.alerts] == ["BEYOND_HORIZON"] and list(view.firing) == ["beyond_horizon"]
    console = Console(width=100, record=True, color_system=None)
    console.print(view.recent())
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 100
    # The message column's pieces, read row by row, give the whole message back.
    cells = [line.rsplit("│", 2)[-2].strip() for line in lines if line.count("│") >= 8]
    assert "".join(c for c in cells if c != "message").replace(" ", "") == message.replace(" ", "")
    assert len(cells) > 3  # wrapped over several lines, not cut
