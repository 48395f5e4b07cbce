"""Grafana's PostgreSQL query macros and template variables, expanded the way Grafana does it, so
every panel's and alert rule's SQL can run against a real PostgreSQL in the tests (no Grafana
server can run here; docs/dashboards.md, "Generating and testing").

Followed from Grafana's own code (pkg/tsdb/grafana-postgresql-datasource/macros.go for the
macros, the PostgreSQL datasource's ``interpolateVariable`` for variables):

* ``$__time(c)`` -> ``c AS "time"``; ``$__timeEpoch(c)`` -> ``extract(epoch from c) AS "time"``
* ``$__timeFilter(c)`` -> ``c BETWEEN '<from>' AND '<to>'`` (RFC 3339, UTC)
* ``$__timeFrom()`` / ``$__timeTo()`` -> ``'<from>'`` / ``'<to>'``
* ``$__timeGroup(c, '5m')`` -> ``floor(extract(epoch from c)/300)*300``; ``$__timeGroupAlias``
  adds ``AS "time"`` (an optional fill argument is accepted and, as in Grafana, does not change
  the SQL)
* ``$__unixEpochFilter(c)`` -> ``c >= <from s> AND c <= <to s>``; ``$__unixEpochGroup(c, '5m')``
  and ``$__unixEpochGroupAlias``
* ``$__interval`` (``'1m'`` style), ``$__interval_ms``, ``$__from`` / ``$__to`` (epoch ms)
* variables ``$name``, ``${name}``, ``[[name]]``: a single value of a variable that is neither
  multi-value nor include-all goes in as it is; otherwise each value is quoted as a SQL literal
  and the values are joined with commas (``IN ($group)``). ``${name:csv}``, ``${name:raw}`` and
  ``${name:sqlstring}`` are the explicit formats.

Anything else that looks like a macro (``$__something``) raises `UnknownMacro`: a panel must not
rely on an expansion this module would get wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["TimeRange", "UnknownMacro", "expand", "interval_seconds"]


class UnknownMacro(ValueError):
    """A macro or variable the expansion does not know."""


@dataclass(frozen=True)
class TimeRange:
    """The dashboard's time range and the panel's interval."""

    start: datetime
    end: datetime
    interval: str = "1m"

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("TimeRange needs timezone-aware datetimes")


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"^\s*'?(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)'?\s*$")


def interval_seconds(text: str) -> float:
    """``'5m'`` -> 300.0 (Grafana's interval syntax)."""
    m = _DURATION.match(text)
    if not m:
        raise UnknownMacro(f"not an interval: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _args(text: str) -> list[str]:
    """Split a macro's arguments on top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


_MACRO = re.compile(r"\$__(\w+)\(")


def _expand_macros(sql: str, tr: TimeRange) -> str:
    out = ""
    pos = 0
    while (m := _MACRO.search(sql, pos)) is not None:
        # the arguments end at the matching parenthesis
        depth, i = 1, m.end()
        while i < len(sql) and depth:
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
        if depth:
            raise UnknownMacro(f"unbalanced parentheses after $__{m.group(1)}")
        out += sql[pos:m.start()] + _macro(m.group(1), _args(sql[m.end():i - 1]), tr)
        pos = i
    return out + sql[pos:]


def _macro(name: str, args: list[str], tr: TimeRange) -> str:
    def need(n: int, most: int | None = None) -> None:
        if not n <= len(args) <= (most or n):
            raise UnknownMacro(f"$__{name} takes {n} argument(s), got {len(args)}: {args}")

    simple: dict[str, tuple[int, Callable[..., str]]] = {  # name -> (arguments, expansion)
        "time": (1, lambda c: f'{c} AS "time"'),
        "timeEpoch": (1, lambda c: f'extract(epoch from {c}) AS "time"'),
        "timeFilter": (1, lambda c: f"{c} BETWEEN '{_rfc3339(tr.start)}' AND '{_rfc3339(tr.end)}'"),
        "unixEpochFilter": (1, lambda c: f"{c} >= {int(tr.start.timestamp())} AND {c} <= {int(tr.end.timestamp())}"),
        "timeFrom": (0, lambda: f"'{_rfc3339(tr.start)}'"),
        "timeTo": (0, lambda: f"'{_rfc3339(tr.end)}'"),
    }
    if name in simple:
        arity, render = simple[name]
        need(arity)
        return render(*args)
    if name in ("timeGroup", "timeGroupAlias"):
        need(2, 3)
        n = _num(interval_seconds(_interval_arg(args[1], tr)))
        sql = f"floor(extract(epoch from {args[0]})/{n})*{n}"
        return sql + (' AS "time"' if name == "timeGroupAlias" else "")
    if name in ("unixEpochGroup", "unixEpochGroupAlias"):
        need(2, 3)
        n = _num(interval_seconds(_interval_arg(args[1], tr)))
        sql = f"floor(({args[0]})/{n})*{n}"
        return sql + (' AS "time"' if name == "unixEpochGroupAlias" else "")
    raise UnknownMacro(f"unknown macro $__{name}(...)")


def _interval_arg(arg: str, tr: TimeRange) -> str:
    return tr.interval if arg.strip() in ("$__interval", "'$__interval'") else arg


_GLOBALS = re.compile(r"\$__(interval_ms|interval|from|to)\b")
_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]|\$(\w+)")


def expand(sql: str, time_range: TimeRange, variables: Mapping[str, str | Sequence[str]] | None = None,
           multi: Sequence[str] = ()) -> str:
    """``sql`` with Grafana's macros and the dashboard's variables expanded (module docstring)."""
    text = _expand_macros(sql, time_range)
    text = _GLOBALS.sub(lambda m: {
        "interval": time_range.interval,
        "interval_ms": _num(interval_seconds(time_range.interval) * 1000),
        "from": str(int(time_range.start.timestamp() * 1000)),
        "to": str(int(time_range.end.timestamp() * 1000)),
    }[m.group(1)], text)
    values = dict(variables or {})
    many = set(multi)

    def var(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3) or m.group(4)
        fmt = m.group(2)
        if name.startswith("__"):
            raise UnknownMacro(f"unknown global variable ${name}")
        if name not in values:
            raise UnknownMacro(f"no value for the variable ${name}")
        value = values[name]
        items = [value] if isinstance(value, str) else list(value)
        if fmt == "raw":
            return ",".join(items)
        if fmt == "csv":
            return ",".join(items)
        if fmt == "sqlstring":
            return ",".join(_literal(v) for v in items)
        if fmt is not None:
            raise UnknownMacro(f"unknown variable format ${{{name}:{fmt}}}")
        if isinstance(value, str) and name not in many:
            return value
        return ",".join(_literal(v) for v in items)

    return _VARIABLE.sub(var, text)
