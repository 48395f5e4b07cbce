"""What the ``replimon`` command prints: its summaries and tables (rich on a terminal, plain lines
otherwise), and the time flags it reads. ``cli.py`` is the commands; this is their output."""

from __future__ import annotations

from typing import Any

from rich.console import Console

err = Console(stderr=True)


def parse_time(text: str, flag: str = "--start") -> int:
    if text.isdigit():
        return int(text)
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{flag}: not ISO-8601 or epoch ms: {text!r}") from None
    if dt.tzinfo is None:
        raise ValueError(f"{flag}: give a time zone (e.g. 2026-01-01T00:00:00Z)")
    return int(dt.timestamp() * 1000)


def print_faults(catalogue: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape("simulator fault catalogue (inject with --inject NAME[:GROUP][@TIME])"))
    table.add_column("fault")
    table.add_column("alert it must raise")
    table.add_column("what happens")
    for spec in catalogue.values():
        table.add_row(spec.name, spec.alert, escape(spec.summary))
    Console(width=max(Console().width, 140)).print(table)


def check_summary(result: Any, seconds: float, failed: bool, fail_on: str) -> None:
    """A human summary on stderr: a table on a terminal, plain lines otherwise."""
    from rich.table import Table

    from replimon.check import SEVERITY_RANK

    span = 0.0 if result.first_ts is None else (result.last_ts - result.first_ts) / 1000
    head = (f"{result.events} events from {result.groups} group(s) over {span:.1f} s of event time "
            f"checked in {seconds:.1f} s; {len(result.bad)} bad line(s), {result.duplicates} "
            f"duplicate(s), {result.lost} event(s) lost")
    for bad in result.bad[:20]:
        err.print(f"bad line {bad.source}:{bad.line}: {bad.reason}", highlight=False, markup=False, soft_wrap=True)
    if len(result.bad) > 20:
        err.print(f"... and {len(result.bad) - 20} more bad line(s)", highlight=False, markup=False)
    firing = sorted(result.firing().items(), key=lambda kv: (-SEVERITY_RANK[kv[0][1]], kv[0][0]))
    verdict = f"FAILED (--fail-on {fail_on})" if failed else "ok"
    if err.is_terminal:
        table = Table(title=head, title_justify="left")
        for col in ("kind", "severity", "category", "firing"):
            table.add_column(col)
        for (kind, sev, cat), n in firing:
            table.add_row(kind, sev, cat, str(n))
        err.print(table)
        err.print(f"result: {verdict}", highlight=False, markup=False)
        return
    err.print(head, highlight=False, markup=False, soft_wrap=True)
    for (kind, sev, cat), n in firing:
        err.print(f"  {kind:<26} {sev:<8} {cat:<9} {n}", highlight=False, markup=False)
    err.print(f"result: {verdict}", highlight=False, markup=False)



def validate_summary(result: Any) -> None:
    """The verdict per expectation on stdout: a table on a terminal, plain lines otherwise."""
    from rich.table import Table

    from replimon.quality.command import headline, summary_rows, verdict

    out = Console()
    for line in result.invalid:
        err.print(f"not validated: {line}", highlight=False, markup=False, soft_wrap=True)
    rows = summary_rows(result)
    if out.is_terminal:
        table = Table(title=headline(result), title_justify="left")
        for col in ("suite", "expectation", "result", "evaluated", "unexpected", "samples"):
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row, style=None if row[2] == "pass" else "bold red")
        out.print(table, highlight=False, markup=False)
    else:
        out.print(headline(result), highlight=False, markup=False, soft_wrap=True)
        for suite, name, res, evaluated, unexpected, samples in rows:
            out.print(f"  {res:<5} {suite:<20} {name}  evaluated {evaluated or '-'}, unexpected "
                      f"{unexpected or '0'}" + (f"  e.g. {samples}" if samples else ""),
                      highlight=False, markup=False, soft_wrap=True)
    out.print(f"result: {verdict(result)}", highlight=False, markup=False)
    if result.docs is not None:
        out.print(f"data docs: {result.docs}", highlight=False, markup=False, soft_wrap=True)
