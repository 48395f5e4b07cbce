"""Tables of the benchmarks, printed the same way: rich on a terminal, aligned plain text
otherwise. ``tables``: (title, header, rows) triples; an all-empty header means a two-column
list of label and value."""

from __future__ import annotations

import sys
from typing import Any


def render_tables(tables: list[tuple[str, list[str], list[list[str]]]], stream: Any = None) -> None:
    stream = stream or sys.stdout
    if stream.isatty():
        from rich.console import Console
        from rich.table import Table

        console = Console(file=stream)
        for title, header, rows in tables:
            table = Table(title=title, show_header=any(header), title_justify="left")
            for i, h in enumerate(header):
                table.add_column(h, justify="right" if i and len(header) > 2 else "left")
            for row in rows:
                table.add_row(*row)
            console.print(table)
        return
    for title, header, rows in tables:
        print(f"\n{title}", file=stream)
        body = [header, *rows] if any(header) else rows
        ncols = max(len(r) for r in body)  # a two-column list has an empty header
        widths = [max(len(r[i]) for r in body if i < len(r)) for i in range(ncols)]
        for n, row in enumerate(body):
            cells = [c.ljust(widths[i]) if i == 0 or len(header) == 2 else c.rjust(widths[i])
                     for i, c in enumerate(row)]
            print("  " + "  ".join(cells).rstrip(), file=stream)
            if n == 0 and any(header):
                print("  " + "  ".join("-" * x for x in widths), file=stream)
