"""Postmortems over stored runs: replaying a window of the topics under a new run id
(`replimon.replay.run`), comparing two runs (`replimon.replay.diff`) and writing a report of one
run (`replimon.replay.report`); docs/replay.md and docs/report.md.

The runs themselves (``live`` and replay run ids, `require_run`) and every read of them are the
PostgreSQL store's (``replimon.store.runs``, ``replimon.store.reads``); this module holds what the
diff, the report and the replay share to write about them as text.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from replimon.store.values import EPOCH, MAX_MS

__all__ = ["evidence_line", "iso"]


# -- text shared by the diff and the report ------------------------------------------------------
def iso(ms: int | None, *, date: bool = True) -> str:
    """Epoch ms as UTC ISO-8601 with milliseconds ('2026-01-01T00:00:09.865Z')."""
    if ms is None:
        return "-"
    if not 0 <= ms <= MAX_MS:  # e.g. the CLI's open end 2**62: past what datetime can hold
        return "the end" if ms > 0 else str(ms)
    text = (EPOCH + timedelta(milliseconds=ms)).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return text if date else text[11:]


def evidence_line(ev: dict[str, Any]) -> str:
    """One evidence event on one line: what, who, when, and where it was read."""
    where = (f"{ev['topic']}/{ev.get('partition')}/{ev.get('offset')}" if "topic" in ev
             else f"{ev.get('file', '?')}:{ev.get('line', '?')}" if "file" in ev else "-")
    extra = " ".join(f"{k}={ev[k]}" for k in ("instance", "count", "kind", "executed", "decided",
                                               "start", "event_horizon", "outcome") if k in ev)
    return (f"{ev.get('type', '?')} {ev.get('node', '?')} {iso(ev.get('ts_ms'), date=False)} "
            f"seq {ev.get('seq', '?')} @ {where}{' ' + extra if extra else ''}")
