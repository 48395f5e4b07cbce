"""A node whose clock is off gets one DATA_QUALITY_FAILED while it stays off, not one per
validated batch (docs/operations.md "Clocks", docs/quality.md "In the streaming job").

Two expectations judge a node's clock: every input suite's time bound (``ts_ms`` at most
``quality.future_tolerance_s`` ahead of the validating machine's clock: only rows *ahead* count
here, a time before 2000 is a unit bug and is alerted as before) and the heartbeat suites'
``clock_offset_ms`` (within ``quality.max_clock_skew_s`` of its group's). A clock that is off stays
off batch after batch, so these are reported per node, like CLOCK_SKEW:

- a node with a clock row in the validated sample and not reported yet gets one alert naming it,
  its evidence its clock rows (at most ``quality.sample_rows``);
- a reported node is reported again only after a validation saw its records and none was a clock
  row (it came back within tolerance), and a later one finds it off again;
- the clock rows leave the two expectations' ordinary alerts; what else fails them (another
  node's row that is not a clock row, a time before 2000) is alerted as before. Every other
  expectation's alerts, and every ``dq_results`` row, are unchanged.

`judge` is pure: the reported nodes go in and the next set comes out, for the sink to keep once
its results are written (a failed write leaves the state as it was). The state lives in the
sink's memory: a restart of the job reports a node that is still off once more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from replimon.core.alerts import FIRING, Alert, alert_id
from replimon.quality.derive import evidence, row_key
from replimon.quality.engine import Outcome
from replimon.quality.results import KIND, alerts_for
from replimon.quality.suites import INPUT_SUITES, MIN_TS_MS

Node = tuple[str, str]  # (group, node)
TS = "expect_column_values_to_be_between(ts_ms)"
OFFSET = "expect_column_values_to_be_between(clock_offset_ms)"
COLUMN = {TS: "ts_ms", OFFSET: "clock_offset_ms"}


@dataclass(frozen=True)
class Verdict:
    """One validation's alerts and the nodes reported as off after it."""

    alerts: list[dict[str, Any]]
    reported: frozenset[Node]


def clock_rows(df: pd.DataFrame, expectation: str, params: Mapping[str, int]) -> pd.Series:
    """Which rows of an input suite's frame fail ``expectation`` because of the node's clock (the
    suite's bounds, ``suites.parameters``)."""
    if expectation == TS:
        return df["ts_ms"] > params["max_ts_ms"]
    if "clock_offset_ms" not in df:
        return pd.Series(False, index=df.index)
    off = df["clock_offset_ms"]
    return off.notna() & ((off < params["min_clock_offset_ms"]) | (off > params["max_clock_offset_ms"]))


def _is_clock_row(sample: Mapping[str, Any], expectation: str, params: Mapping[str, int]) -> bool:
    value = sample.get(COLUMN[expectation])
    if value is None:
        return False
    if expectation == TS:
        return bool(value > params["max_ts_ms"])
    return not params["min_clock_offset_ms"] <= value <= params["max_clock_offset_ms"]


def judge(reported: frozenset[Node], frames: Mapping[str, pd.DataFrame], outcomes: Sequence[Outcome],
          params: Mapping[str, int], now_ms: int, sample_rows: int) -> Verdict:
    """The validation's DATA_QUALITY_FAILED payloads (``results.alerts_for`` with the clock rows
    reported per node instead; module docstring) and the nodes reported as off after it."""
    seen: set[Node] = set()
    off: dict[Node, list[dict[str, Any]]] = {}  # node -> its clock rows as evidence, frame order
    failed: dict[tuple[str, str], int] = {}  # (suite, expectation) -> its clock rows
    for suite in INPUT_SUITES:
        df = frames.get(suite)
        if df is None or df.empty:
            continue
        seen.update(zip(df["group"].astype(str), df["node"].astype(str), strict=True))
        for expectation in (TS, OFFSET):
            rows = df[clock_rows(df, expectation, params)]
            failed[(suite, expectation)] = len(rows)
            for row in rows.to_dict("records"):
                found = off.setdefault((str(row["group"]), str(row["node"])), [])
                if len(found) < sample_rows:
                    found.append({**evidence(suite, row, [COLUMN[expectation]]), "suite": suite,
                                  "expectation": expectation})
    rest = []
    for o in outcomes:
        n = failed.get((o.suite, o.expectation), 0)
        if o.success or o.error or not n:
            rest.append(o)
            continue
        samples = [s for s in o.samples if not _is_clock_row(s, o.expectation, params)]
        df = frames[o.suite]
        if not samples and (o.unexpected or 0) > n and o.expectation == TS:  # past the kept sample
            early = df[df["ts_ms"] < MIN_TS_MS].head(sample_rows).to_dict("records")
            samples = [evidence(o.suite, row, ["ts_ms"]) for row in early]
        if samples:  # what else failed it is alerted as before
            rest.append(replace(o, samples=samples, unexpected=max(0, (o.unexpected or 0) - n)))
    alerts = alerts_for(rest, now_ms)
    new = [node for node in off if node not in reported]
    alerts.extend(_node_alert(node, off[node], now_ms) for node in new)
    back = {node for node in reported if node in seen and node not in off}
    return Verdict(alerts, frozenset((reported - back) | set(new)))


def _node_alert(node: Node, rows: list[dict[str, Any]], now_ms: int) -> dict[str, Any]:
    """One node's clock found off: its first clock row names it (the id: facts of the data)."""
    group, name = node
    first = rows[0]
    column = COLUMN[first["expectation"]]
    checks = ", ".join(sorted({f"{r['expectation']} on {r['suite']}" for r in rows}))
    message = (f"Data quality: the clock of node {name} of group {group} is off ({checks}), e.g. "
               f"{first['type']} seq {first.get('seq')} {column}={first.get(column)}; reported once "
               f"until its records come back within quality.future_tolerance_s of the validating "
               f"clock and quality.max_clock_skew_s of its group's.")
    alert = Alert(alert_id(group, KIND, f"clock|{name}|{row_key(first['suite'], first)}"), group, KIND,
                  FIRING, min(int(first.get("ts_ms") or now_ms), now_ms), now_ms, message, node=name,
                  evidence=rows)
    return alert.to_dict()
