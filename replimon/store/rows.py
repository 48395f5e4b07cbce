"""The rows a group's snapshot becomes in PostgreSQL, for every protocol family.

`group_row`, `node_rows`, `series_row` and `node_series_rows` turn one
``GroupMonitor.snapshot()`` into the parameters of the streaming sink's statements
(``streaming/sinks/postgres.py``) for ``group_state``, ``node_state``, ``group_timeseries`` and
``node_timeseries``; `dead_letter_row` does the same for a dead letter.

Guarantees (docs/postgres.md, "Tables"):

* every family fills the family-neutral columns: ``family``, ``config`` (the snapshot's
  ``config``, the family's configuration as JSON), ``node_state.family_state`` (the node's
  fields beyond those every family has) and ``config_version`` (XCom: the active
  configuration's start; generations: the generation number; quorum-log: the legislature;
  chain: the epoch);
* XCom's flattened columns (active start and horizon, members, pending, effective horizon,
  window use, executed and decided frontiers, protocol, configuration text) hold XCom's values
  for an XCom group and NULL for any other family: a generations, quorum-log or chain group
  never looks like an XCom group without a configuration (no ``pending = []``, no
  ``pending = 0``); the frontiers every family can have (the group's ``decided`` and
  ``executed_majority``, a node's ``executed``) are filled when the snapshot has them
  (quorum-log: the highest contiguous decree executed, and the one a majority of the
  legislature executed; chain: the head's log position, and the one a majority of the chain
  holds);
* a snapshot without ``family`` (written before families existed) is XCom's;
* a row is a pure function of the snapshot, the run and the batch id, so a replayed batch
  gives the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from psycopg.types.json import Jsonb

from replimon.core.rules.family import XCOM
from replimon.store.values import config_text, nonneg, ts_from_ms

# The node fields every family's snapshot has (the node_state columns of schema version 1);
# anything else a node carries is its family's and goes to node_state.family_state.
COMMON_NODE_FIELDS = frozenset({"member", "incarnation", "status", "last_ts_ms", "suspects", "silent"})


def family(s: Mapping[str, Any]) -> str:
    """The snapshot's family (``xcom`` for a snapshot older than families)."""
    return str(s.get("family") or XCOM)


def _jsonb(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value)


def family_state(n: Mapping[str, Any]) -> dict[str, Any]:
    """A node's family-specific fields (generations: gen, node_status, last_online_in,
    last_vote; quorum-log: executed, legislature, watermark, leader; chain: executed, epoch,
    pos, stable, wedged, wedged_epoch, lease_remaining_ms; XCom: executed, decided, protocol,
    effective_horizon)."""
    return {k: v for k, v in n.items() if k not in COMMON_NODE_FIELDS}


def group_row(s: Mapping[str, Any], run_id: str, batch_id: int) -> tuple[Any, ...]:
    """``group_state``'s parameters (the sink's ``_GROUP``)."""
    xcom = family(s) == XCOM
    active = s.get("active") if xcom else None
    pending = Jsonb(list(s.get("pending") or [])) if xcom else None
    return (run_id, s["group"], s["history"], s["trusted"], ts_from_ms(s.get("clock_ms")),
            nonneg(s.get("decided")),
            None if active is None else active["start"],
            None if active is None else active["event_horizon"],
            None if active is None else Jsonb(active["members"]),
            pending, s.get("effective_horizon"),
            s.get("executed_majority"), s.get("window_use"), s.get("window_fraction"),
            family(s), _jsonb(s.get("config")),
            Jsonb(list(s.get("open_alerts") or [])), Jsonb(dict(s)), batch_id)


def node_rows(s: Mapping[str, Any], run_id: str, batch_id: int) -> Iterable[tuple[Any, ...]]:
    """``node_state``'s parameters, one per node of the snapshot (the sink's ``_NODE``)."""
    for node, n in (s.get("nodes") or {}).items():
        yield (run_id, s["group"], node, n["member"], nonneg(n.get("executed")),
               nonneg(n.get("decided")), nonneg(n.get("incarnation")),
               nonneg(n.get("protocol")), n.get("status") or None, ts_from_ms(n.get("last_ts_ms")),
               Jsonb(list(n.get("suspects") or [])), n.get("effective_horizon"),
               bool(n.get("silent")), Jsonb(family_state(n)), batch_id)


def series_values(s: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot's ``group_timeseries`` values after (run_id, group_id, ts), by column, in the
    table's order (also the report's points, ``replimon.replay.report_series``). ``members``
    counts the current configuration's members whatever the family (a generation's members for
    generations, the legislature's for quorum-log, the chain's for chain); the horizon, window,
    pending count and configuration texts are XCom's."""
    config = s.get("config")
    if family(s) != XCOM:
        return {"decided": nonneg(s.get("decided")), "executed_majority": s.get("executed_majority"),
                "effective_horizon": None, "event_horizon": None, "window_use": None,
                "window_fraction": None,
                "members": config_members(config),
                "pending": None, "active_start": None, "active_config": None, "pending_configs": None,
                "config_version": s.get("config_version")}
    active = s.get("active")
    pending = list(s.get("pending") or [])
    return {"decided": nonneg(s.get("decided")), "executed_majority": s.get("executed_majority"),
            "effective_horizon": s.get("effective_horizon"),
            "event_horizon": None if active is None else active["event_horizon"],
            "window_use": s.get("window_use"), "window_fraction": s.get("window_fraction"),
            "members": None if active is None else len(active["members"]), "pending": len(pending),
            "active_start": None if active is None else active["start"],
            "active_config": None if active is None else config_text(active),
            "pending_configs": " | ".join(config_text(c) for c in pending) or None,
            # the active start; a snapshot older than families has no config_version
            "config_version": s.get("config_version", None if active is None else active["start"])}


def config_members(config: Any) -> int | None:
    """How many members a family's configuration has: its ``members`` (generations,
    quorum-log) or its ``chain`` (chain replication: the view's chain, head..tail); None
    without a configuration."""
    if not isinstance(config, Mapping):
        return None
    return len(config.get("members") or config.get("chain") or [])


def series_row(s: Mapping[str, Any], run_id: str) -> tuple[Any, ...] | None:
    """``group_timeseries``' parameters (the sink's ``_SERIES``); None before the group's first
    event (no point in time to put it at)."""
    ts = ts_from_ms(s.get("clock_ms"))
    if ts is None:
        return None
    return (run_id, s["group"], ts, *series_values(s).values())


def node_series_rows(s: Mapping[str, Any], run_id: str) -> Iterable[tuple[Any, ...]]:
    """``node_timeseries``' parameters, one per node (the sink's ``_NODE_SERIES``)."""
    clock = s.get("clock_ms")
    if clock is None:
        return
    ts = ts_from_ms(clock)
    for node, n in (s.get("nodes") or {}).items():
        last = n.get("last_ts_ms")
        yield (run_id, s["group"], node, ts, n["member"], nonneg(n.get("decided")),
               nonneg(n.get("executed")), ts_from_ms(last),
               None if last is None or last < 0 else max(0, clock - last), bool(n.get("silent")))


def dead_letter_row(d: Mapping[str, Any], run_id: str, batch_id: int) -> tuple[Any, ...]:
    """``dead_letters``' parameters (raw bytes kept as they were read)."""
    raw = d.get("raw")
    if isinstance(raw, str):
        raw = raw.encode()
    return (run_id, d["topic"], d["partition"], d["offset"],
            None if raw is None else bytes(raw), d["reason"], ts_from_ms(d.get("kafka_ts")),
            batch_id)
