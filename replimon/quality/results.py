"""What a validation leaves behind: ``dq_results`` rows and DATA_QUALITY_FAILED alerts.

One ``dq_results`` row per expectation evaluated (``replimon/store/migrations/002_dashboards.sql``:
run, batch, suite, expectation, when, success, rows evaluated, rows unexpected, details with the
arguments, the observed value and sample rows). One DATA_QUALITY_FAILED alert (warning, data) per
expectation that failed because of the data (an expectation that raised is a bug of ours, logged
and stored, not alerted): its group is the first failing row's, its evidence the sample rows
(each naming its group, node, time, and where it was read), its id ``alert_id(group,
DATA_QUALITY_FAILED, suite|expectation|first failing row)``: facts of the data, so the same
records give the same id, live or replay.

Exactly once: `write_results` writes a validation's rows and alerts in one transaction that first
advances its own guard row in ``pipeline_batches`` (pipeline ``<the job's pipeline>:quality``)
to the batch id, only if that is higher, with the statement the streaming job's sink uses for
the batch itself (``replimon.store.writes.ADVANCE``, docs/postgres.md); its alerts are stored
with the sink's alert insert too. A retried batch that was validated before finds the guard at
its id and writes nothing; all rows are keyed by facts besides (``dq_results`` by run, batch,
suite and expectation; alerts by run, id and status) and inserted ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from replimon.core.alerts import FIRING, Alert, alert_id
from replimon.quality.derive import row_key
from replimon.quality.engine import Outcome
from replimon.quality.suites import spec_of_name
from replimon.store.runs import last_batch_id
from replimon.store.values import ts_from_ms
from replimon.store.writes import ADVANCE, INSERT_ALERT, INSERT_DQ_RESULT, alert_row

KIND = "DATA_QUALITY_FAILED"
GUARD_SUFFIX = ":quality"

def guard_pipeline(pipeline: str) -> str:
    return pipeline + GUARD_SUFFIX


def _shown(sample: dict[str, Any], columns: list[str]) -> str:
    """One failing row in a sentence: who, and the values checked."""
    who = " ".join(f"{k} {sample[k]}" for k in ("group", "node", "kind") if sample.get(k) is not None)
    values = ", ".join(f"{c}={sample.get(c)}" for c in columns if c in sample)
    return f"{who} ({values})" if values else who


def alerts_for(outcomes: Sequence[Outcome], now_ms: int) -> list[dict[str, Any]]:
    """One DATA_QUALITY_FAILED alert payload (``Alert.to_dict``) per expectation that failed on
    the data, in the outcomes' order."""
    out = []
    for o in outcomes:
        if o.success or o.error or not o.samples:
            continue
        first = o.samples[0]
        group = str(first.get("group") or "-")
        spec = spec_of_name(o.suite, o.expectation)
        nodes = {s.get("node") for s in o.samples if s.get("group") == group}
        node = next(iter(nodes)) if len(nodes) == 1 else None
        when = first.get("ts_ms") or first.get("event_ts_ms") or first.get("clock_ms") or now_ms
        notes = spec.notes[:1].lower() + spec.notes[1:].rstrip(".")
        message = (f"Data quality: {o.expectation} failed on {o.suite} for {o.unexpected} of "
                   f"{o.evaluated} rows, e.g. {_shown(first, spec.columns)}; expected: {notes}.")
        # Never dated after its detection: a row stamped in the future (a node's clock far ahead,
        # docs/operations.md "Clocks") is shown as it is in the evidence, not as the alert's time.
        alert = Alert(alert_id(group, KIND, f"{o.suite}|{o.expectation}|{row_key(o.suite, first)}"),
                      group, KIND, FIRING, min(int(when), now_ms), now_ms, message, node=node,
                      evidence=[dict(s) for s in o.samples])
        out.append(alert.to_dict())
    return out


def dq_rows(run_id: str, batch_id: int, outcomes: Sequence[Outcome], now_ms: int) -> list[tuple[Any, ...]]:
    ts = ts_from_ms(now_ms)
    return [(run_id, batch_id, o.suite, o.expectation, ts, o.success, o.evaluated, o.unexpected,
             Jsonb(o.details)) for o in outcomes]


def write_results(dsn: str, run_id: str, pipeline: str, batch_id: int, outcomes: Sequence[Outcome],
                  alerts: Sequence[dict[str, Any]], now_ms: int) -> bool:
    """Write one validation (module docstring); False: this batch was validated and written
    before (a retry), nothing written."""
    rows = dq_rows(run_id, batch_id, outcomes, now_ms)
    alert_rows = [alert_row(a, run_id, batch_id) for a in alerts]
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10,
                         application_name="replimon-quality") as conn:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(ADVANCE, (run_id, guard_pipeline(pipeline), batch_id))
            if cur.fetchone() is None:
                return False
            if rows:
                cur.executemany(INSERT_DQ_RESULT, rows)
            if alert_rows:
                cur.executemany(INSERT_ALERT, alert_rows)
        return True


def validated_before(dsn: str, run_id: str, pipeline: str, batch_id: int) -> bool:
    """True when the quality guard of ``pipeline`` is at or past ``batch_id``."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        last = last_batch_id(conn, run_id, guard_pipeline(pipeline))
    return last is not None and last >= batch_id
