"""What replimon's two PostgreSQL writers share: the exactly-once guard and the alert row.

The streaming job's sink (``streaming/sinks/postgres.py``, one transaction per micro-batch) and
the data-quality results writer (``replimon.quality.results``, one transaction per validated
batch) both start their transaction with `ADVANCE` on their own pipeline and insert alerts with
`INSERT_ALERT` and `alert_row`, so an alert is stored the same way whoever raised it; the
data-quality writer adds its result rows with `INSERT_DQ_RESULT`.

Guarantee of `ADVANCE`: it moves ``pipeline_batches(run_id, pipeline).last_batch_id`` to the
given batch id only if that is higher, locks the row, and returns a row only then; a writer that
gets no row must write nothing (the batch was committed before: a retry, or an older batch).
Concurrent writers of one pipeline serialize on the row lock (docs/postgres.md "Exactly-once
effect"). `INSERT_ALERT` never changes a stored row: an (alert id, status) row is a fact. Both alert
inserts store an info alert's row with the status ``event`` (``replimon.store.values.stored_status``;
the table's CHECK rejects anything else since schema version 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.types.json import Jsonb

from replimon.store.values import EVENT, stored_status, ts_from_ms

# Parameters: run_id, pipeline, batch_id. RETURNING: a row if and only if the batch is new.
ADVANCE = """
INSERT INTO pipeline_batches AS p (run_id, pipeline, last_batch_id, committed_at)
VALUES (%s, %s, %s, now())
ON CONFLICT (run_id, pipeline) DO UPDATE
    SET last_batch_id = EXCLUDED.last_batch_id, committed_at = EXCLUDED.committed_at
    WHERE p.last_batch_id < EXCLUDED.last_batch_id
RETURNING last_batch_id"""

# Parameters: run_id, batch_id, suite, expectation, ts, success, evaluated, unexpected, details
# (``replimon.quality.results.dq_rows``). A result row is a fact too: a retry adds nothing.
INSERT_DQ_RESULT = """
INSERT INTO dq_results (run_id, batch_id, suite, expectation, ts, success, evaluated, unexpected,
                        details)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, batch_id, suite, expectation) DO NOTHING"""

# Parameters: `alert_row`.
INSERT_ALERT = """
INSERT INTO alerts (run_id, alert_id, status, group_id, kind, severity, category, instance, node,
                    event_ts, detected_ts, message, evidence, batch_id)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (run_id, alert_id, status) DO NOTHING"""


# Parameters: run_id, a JSON array of alert payloads (``Alert.to_dict`` as JSON text), batch_id.
# The alerts as the monitor encoded them, read by PostgreSQL: nothing decodes and re-encodes them
# on the way (an alert is encoded once, in the monitor). Times as alert_row's ts_from_ms, the
# status as its stored_status.
INSERT_ALERTS_JSON = f"""
INSERT INTO alerts (run_id, alert_id, status, group_id, kind, severity, category, instance, node,
                    event_ts, detected_ts, message, evidence, batch_id)
SELECT %(run)s, a->>'alert_id',
       CASE WHEN a->>'severity' = 'info' THEN '{EVENT}' ELSE a->>'status' END, a->>'group', a->>'kind', a->>'severity',
       a->>'category', (a->>'instance')::bigint, a->>'node',
       'epoch'::timestamptz + (a->>'event_ts_ms')::bigint * interval '1 millisecond',
       'epoch'::timestamptz + (a->>'detected_ts_ms')::bigint * interval '1 millisecond',
       a->>'message', coalesce(a->'evidence', '[]'::jsonb), %(batch)s
FROM jsonb_array_elements(%(alerts)s::jsonb) AS a
ON CONFLICT (run_id, alert_id, status) DO NOTHING"""


def json_array(texts: list[str]) -> str:
    """JSON texts as the text of one JSON array (no decoding)."""
    return "[" + ",".join(texts) + "]"


def alert_row(a: Mapping[str, Any], run_id: str, batch_id: int) -> tuple[Any, ...]:
    """An alert payload (``Alert.to_dict``, docs/rules.md "Alert records") as `INSERT_ALERT`'s
    parameters (an info alert's status stored as ``event``)."""
    return (run_id, a["alert_id"], stored_status(a["severity"], a["status"]), a["group"], a["kind"], a["severity"],
            a["category"], a.get("instance"), a.get("node"), ts_from_ms(a["event_ts_ms"]),
            ts_from_ms(a["detected_ts_ms"]), a["message"], Jsonb(list(a.get("evidence") or [])),
            batch_id)
