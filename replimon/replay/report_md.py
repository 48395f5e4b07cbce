"""The Markdown summary of a run report, and what the HTML and the Markdown share: how to
reproduce the run, durations and table cells as text.

The Markdown is meant to be pasted into a postmortem document: a header with the run and its
event-time span, alerts by kind (the same counts as the HTML and as ``count(DISTINCT alert_id)``
in the alerts table), the affected groups, detection latency per kind, the data-quality verdict
and the command to reproduce the run. Cells from the data are escaped for Markdown tables.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from replimon.replay import iso
from replimon.replay.report_data import RunData

MINUTE_MS = 60_000
MAX_MD_GROUPS = 100


def duration(ms: float | None) -> str:
    """Milliseconds for a person: '850 ms', '12.4 s', '3 min 5 s'."""
    if ms is None:
        return "-"
    if abs(ms) < 1000:
        return f"{ms:.0f} ms"
    if abs(ms) < 60_000:
        return f"{ms / 1000:.2f} s" if abs(ms) < 10_000 else f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def run_kind(data: RunData) -> str:
    """One phrase saying what produced the run."""
    if data.live:
        return "the live run"
    if data.replay is not None:
        return f"a replay (replay_runs status {data.replay['status']})"
    return "a run written by the streaming job without a replay_runs row (not `replimon replay`)"


@dataclass
class Reproduce:
    """How to get this run's results again."""

    note: str  # a sentence saying where the command comes from
    command: str  # shell text
    details: list[tuple[str, str]] = field(default_factory=list)  # (name, value) rows
    offsets: dict[str, Any] = field(default_factory=dict)  # starting/ending offsets (Spark JSON)


def reproduce(data: RunData) -> Reproduce:
    """From ``replay_runs.params`` for a replay; otherwise the replay command covering the
    run's event-time span, rounded out to whole minutes (the tables keep snapshots and alerts,
    not every event, so the earliest and latest times they hold are inside the real span)."""
    if data.replay is not None:
        params = dict(data.replay["params"])
        argv = params.pop("command", None)
        if argv:
            command = shlex.join(str(a) for a in argv)
        else:
            command = shlex.join(_replay_argv(params.get("from_ms"), params.get("to_ms"),
                                              params.get("groups"), params.get("state_from")))
        details = [("status", str(data.replay["status"])),
                   ("started", iso(data.replay["started_ms"])),
                   ("finished", iso(data.replay["finished_ms"]))]
        for key in ("from_ms", "to_ms"):
            if params.get(key) is not None:
                details.append((key, f"{params.pop(key)} ({iso(data.replay['params'][key])})"))
        offsets = {k: params.pop(k) for k in ("starting_offsets", "ending_offsets") if k in params}
        details += [(k, v if isinstance(v, str) else json.dumps(v, sort_keys=True))
                    for k, v in sorted(params.items())]
        return Reproduce("The command this replay ran (replay_runs.params), with the Kafka "
                         "offsets it read:", command, details, offsets)
    if data.span is None:
        return Reproduce("The run holds no event times, so there is no window to replay.", "-")
    lo = data.span[0] // MINUTE_MS * MINUTE_MS
    hi = -(-(data.span[1] + 1) // MINUTE_MS) * MINUTE_MS
    what = ("This is the live run: it has no replay_runs row." if data.live else
            f"Run {data.run_id!r} has no replay_runs row: the streaming job wrote it directly "
            "(e.g. `replimon run --replay` or a test harness), not `replimon replay`.")
    note = (f"{what} The replay covering its event-time span ({iso(data.span[0])} to "
            f"{iso(data.span[1])}, rounded out to whole minutes; record timestamps are event "
            "times, and Kafka must still hold the window):")
    return Reproduce(note, shlex.join(_replay_argv(lo, hi, None, None)),
                     [("event-time span", f"{iso(data.span[0])} to {iso(data.span[1])}")])


def _replay_argv(from_ms: Any, to_ms: Any, groups: Any, state: Any) -> list[str]:
    argv = ["replimon", "replay", "--from", iso(from_ms), "--to", iso(to_ms)]
    if groups:
        argv += ["--groups", ",".join(str(g) for g in groups)]
    if state:
        argv += ["--state", str(state)]
    return argv


def md_cell(value: Any) -> str:
    """A value as one Markdown table cell: pipes, backticks and line breaks neutralised."""
    text = "" if value is None else str(value)
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")
            .replace("\r", " ").replace("\n", " "))


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows)]


def markdown(data: RunData) -> str:
    """The Markdown summary of the run."""
    span = "no event times" if data.span is None else (
        f"{iso(data.span[0])} to {iso(data.span[1])} "
        f"({duration(data.span[1] - data.span[0])})")
    total = sum(k.alerts for k in data.kinds)
    sev = ", ".join(f"{data.severities.get(s, 0)} {s}" for s in ("critical", "warning", "info"))
    out = [f"# replimon run `{md_cell(data.run_id)}`: postmortem summary", "",
           f"- run: `{md_cell(data.run_id)}`, {run_kind(data)}",
           f"- event time: {span}",
           f"- groups: {data.groups} ({len(data.affected)} with warning or critical alerts)",
           f"- events taken by the monitor: {_n(data.events)}; records read: {_n(data.records_read)}"
           f" in {data.batches} micro-batches; dead letters: {data.dead_letters}",
           f"- alerts: {total} ({sev})", "", "## Alerts by kind", ""]
    if data.kinds:
        out += _table(["kind", "severity", "category", "alerts", "resolved"],
                      [[k.kind, k.severity, k.category, k.alerts, k.resolved] for k in data.kinds])
    else:
        out.append("No alerts.")
    out += ["", "## Affected groups", ""]
    if data.affected:
        out += _table(["group", "critical", "warning", "first alert", "kinds"],
                      [[a.group, a.critical, a.warning, iso(a.first_ms), ", ".join(a.kinds)]
                       for a in data.affected[:MAX_MD_GROUPS]])
        if len(data.affected) > MAX_MD_GROUPS:
            out.append(f"\n... and {len(data.affected) - MAX_MD_GROUPS} more groups (see the HTML "
                       "report).")
    else:
        out.append("No group had a warning or critical alert.")
    out += ["", "## Detection latency (event time: detected_ts - event_ts, first rows)", ""]
    if data.latency:
        head = ["kind", "alerts", "median", "max"]
        rows = [[lat.kind, lat.alerts, duration(lat.median_ms), duration(lat.max_ms)]
                for lat in data.latency]
        if data.live:
            head += ["wall clock median (inserted_at - event_ts)", "wall clock max"]
            for row, lat in zip(rows, data.latency, strict=True):
                row += [duration(lat.wall_median_ms), duration(lat.wall_max_ms)]
        out += _table(head, rows)
    else:
        out.append("No alerts.")
    out += ["", "## Data quality", ""]
    if data.dq:
        failing = [d for d in data.dq if d.failures]
        out.append(f"{len(data.dq)} expectations evaluated, {len(failing)} with failures.")
        out += ["", *_table(["suite", "expectation", "evaluations", "failures", "unexpected rows"],
                            [[d.suite, d.expectation, d.evaluations, d.failures, _n(d.unexpected)]
                             for d in data.dq])]
    else:
        out.append("No data-quality results for this run.")
    rep = reproduce(data)
    out += ["", "## Reproduce", "", rep.note, "", "```sh", rep.command, "```"]
    if rep.offsets:
        out += ["", "Offsets (Spark's Kafka offset JSON):", "", "```json",
                json.dumps(rep.offsets, indent=2, sort_keys=True), "```"]
    return "\n".join(out) + "\n"


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"
