"""How values cross into and out of PostgreSQL: times and the monitor's "none yet".

Event times are stored as ``timestamptz`` converted exactly from epoch milliseconds (integer
arithmetic on a ``timedelta``, no float rounding), so `ms_from_ts(ts_from_ms(ms)) == ms` for every
millisecond time from the epoch to `MAX_MS`. The monitor's "none yet" (-1 for a frontier, a
counter, a protocol or a clock) is stored as NULL (docs/postgres.md, "Tables", the conventions).
An info alert's row has the status ``event`` where its payload says ``firing`` (`stored_status`,
`payload_status`): it happened, it is never a problem and never resolves (schema version 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from replimon.core.alerts import FIRING, INFO

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The last millisecond timestamptz and Python's datetime can both hold (9999-12-31T23:59:59.999Z).
MAX_MS = 253_402_300_799_999


def ts_from_ms(ms: int | float | datetime | None) -> datetime | None:
    """Epoch milliseconds (or an aware datetime) as an aware UTC datetime; None and negative
    (the monitor's "no time yet") give None."""
    if ms is None:
        return None
    if isinstance(ms, datetime):
        if ms.tzinfo is None:
            raise ValueError(f"naive datetime {ms!r}: give epoch ms or an aware datetime")
        return ms
    if ms < 0:
        return None
    return EPOCH + timedelta(milliseconds=ms)


def ms_from_ts(ts: datetime | None) -> int | None:
    """The inverse of `ts_from_ms` (exact for millisecond times)."""
    return None if ts is None else (ts - EPOCH) // timedelta(milliseconds=1)


def nonneg(x: int | None) -> int | None:
    """A frontier, counter or protocol with the monitor's -1 for "none yet" mapped to NULL."""
    return None if x is None or x < 0 else x


# The stored status of an info alert's one row (CONFIG_INSTALLED, RECONFIG_REFUSED,
# INCOMPLETE_HISTORY, ...): an event, so that `status = 'firing'` only ever means a problem.
EVENT = "event"


def stored_status(severity: str, status: str) -> str:
    """The ``alerts.status`` of an alert payload's row: ``event`` for an info alert, else the
    payload's own status (``firing`` or ``resolved``)."""
    return EVENT if severity == INFO else status


def payload_status(status: str) -> str:
    """The inverse of `stored_status`: the status the monitor emitted for a stored row."""
    return FIRING if status == EVENT else status


def config_text(c: Mapping[str, Any]) -> str:
    """A configuration (a snapshot's ``active`` or ``pending`` entry) as the dashboards and the
    report show it: 'start 1201 · eh 10 · n1 n2 n3'."""
    return (f"start {c['start']} · eh {c['event_horizon']} · "
            + " ".join(str(m["id"]) for m in c["members"]))
