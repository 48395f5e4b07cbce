"""pandas frames for the suites, with the derived columns GX cannot compute itself.

Input records become one frame per input suite (``replimon.quality.suites.COLUMNS``); alerts and
group snapshots of a micro-batch become the output frames. Only contract-valid events are
validated: a record that breaks contract v1 is a dead letter already (its own table and panel),
so the suites judge what the schema lets through. Derived columns are defined in
``replimon.quality.suites.DERIVED``; the two that need an order are computed per topic partition
in offset order, which is the order the job reads (the arrival order of each group's events:
a group's events share a partition, docs/contract.md). A JSONL file stands for one partition in
line order.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from replimon.quality.suites import (
    ALERTS,
    CHAIN_APPEND,
    CHAIN_HEARTBEATS,
    CHAIN_VIEW,
    CHAIN_WEDGE,
    COLUMNS,
    DECISIONS,
    EVENT_TYPE,
    EXECUTIONS,
    GEN_HEARTBEATS,
    GEN_STATE,
    GEN_XACT,
    HEARTBEATS,
    INPUT_SUITES,
    NODES,
    QLOG_DECREE,
    QLOG_HEARTBEATS,
    QLOG_PASSED,
    QLOG_RECOVER,
    STATE,
)

SUITE_OF_TYPE = {t: s for s, t in EVENT_TYPE.items()}
FILE_PARTITION = -1  # the partition of a record read from a file (its offset is the line number)
_NUMERIC = {"partition", "offset", "ts_ms", "seq", "incarnation", "instance", "count", "window_base",
            "config_nodes", "executed", "decided", "protocol", "view_members", "start",
            "event_horizon", "members_count", "seq_step", "clock_offset_ms", "event_ts_ms",
            "detected_ts_ms", "clock_ms", "executed_majority",
            "effective_horizon", "active_start", "pending", "active_configs",
            "gen_num", "gen_members", "gen_configured", "members_outside", "last_online_in",
            "last_vote_num", "xgen", "at_num", "xact_sample",
            "num", "leg", "new_leg", "reconf_members", "ballot_n", "acceptors_count", "acked_count",
            "acked_outside", "old_count", "new_count", "relocated_outside", "synced_outside",
            "leg_members", "watermark", "leader_outside",
            "from_epoch", "epoch", "pos", "chain_length", "chain_repeats", "cas_from_epoch", "suspect_self",
            "assumed_epoch", "assumed_pos", "accepted_epoch", "accepted_next", "node_epoch", "stable", "ttl_ms"}


@dataclass(frozen=True)
class Record:
    """A contract-valid event and where it was read: a topic partition and offset, or a file
    (``partition`` = ``FILE_PARTITION``) and a line number."""

    source: str
    partition: int
    offset: int
    event: Mapping[str, Any]

    def where(self) -> dict[str, Any]:
        if self.partition == FILE_PARTITION:
            return {"file": self.source, "line": self.offset}
        return {"topic": self.source, "partition": self.partition, "offset": self.offset}


def _opt_len(value: Any) -> int | None:
    return None if value is None else len(value)


def _outside(ids: Any, within: Any) -> int | None:
    """How many of ``ids`` are not in ``within`` (None when there are no ``ids``)."""
    return None if ids is None else len(set(ids) - set(within or ()))


def _qlog_value(e: Mapping[str, Any]) -> dict[str, Any]:
    return {"num": e.get("num"), "leg": e.get("leg"), "kind": e.get("kind"), "digest": e.get("digest"),
            "new_leg": e.get("new_leg"), "reconf_members": _opt_len(e.get("members"))}


def _qlog_passed(e: Mapping[str, Any]) -> dict[str, Any]:
    ballot = e.get("ballot") or {}
    return {**_qlog_value(e), "ballot_n": ballot.get("n"), "ballot_proposer": ballot.get("proposer"),
            "acceptors_count": _opt_len(e.get("acceptors")), "acked_count": _opt_len(e.get("acked")),
            "acked_outside": _outside(e.get("acked"), e.get("acceptors")), "recovery": e.get("recovery")}


def _qlog_recover(e: Mapping[str, Any]) -> dict[str, Any]:
    relocated = e.get("relocated") or []
    new, old = set(e.get("new") or ()), set(e.get("old") or ())
    return {"phase": e.get("phase"), "leg": e.get("leg"), "old_count": _opt_len(e.get("old")),
            "new_count": _opt_len(e.get("new")),
            "relocated_outside": sum(1 for r in relocated if r.get("node") not in new or r.get("from") not in old),
            "synced_outside": _outside(e.get("synced_with"), new)}


def _qlog_heartbeat(e: Mapping[str, Any]) -> dict[str, Any]:
    leader, members = e.get("leader"), e.get("members") or []
    return {"leg": e.get("leg"), "leg_members": len(members), "watermark": e.get("watermark"),
            "leader": leader, "leader_outside": None if leader is None else int(leader not in members),
            "status": e.get("status")}


# The quorum-log types' rows (docs/families.md 3.2), by suite.
_QLOG_ROWS = {QLOG_DECREE: lambda e: {**_qlog_value(e), "outcome": e.get("outcome")},
              QLOG_PASSED: _qlog_passed, QLOG_RECOVER: _qlog_recover, QLOG_HEARTBEATS: _qlog_heartbeat}


def _repeats(chain: Any) -> int | None:
    """How many entries of ``chain`` name a node an earlier entry names (None without a chain)."""
    return None if chain is None else len(chain) - len(set(chain))


def _chain_view(e: Mapping[str, Any]) -> dict[str, Any]:
    epoch, from_epoch = e.get("epoch"), e.get("from_epoch")
    cas = e.get("outcome") == "installed" and not (epoch == from_epoch == 0)
    return {"from_epoch": from_epoch, "epoch": epoch, "chain_length": _opt_len(e.get("chain")),
            "chain_repeats": _repeats(e.get("chain")), "pos": e.get("pos"), "outcome": e.get("outcome"),
            "reason": e.get("reason"), "cas_from_epoch": from_epoch if cas else None}


def _chain_wedge(e: Mapping[str, Any]) -> dict[str, Any]:
    suspect = e.get("suspect")
    return {"epoch": e.get("epoch"), "reason": e.get("reason"), "suspect": suspect,
            "suspect_self": None if suspect is None else int(suspect == e.get("node"))}


def _chain_append(e: Mapping[str, Any]) -> dict[str, Any]:
    assumed = e.get("assumed") or {}
    a_epoch, a_pos, epoch = assumed.get("epoch"), assumed.get("pos"), e.get("epoch")
    accepted = e.get("outcome") == "accepted"
    return {"assumed_epoch": a_epoch, "assumed_pos": a_pos, "epoch": epoch, "pos": e.get("pos"),
            "count": e.get("count"), "origin": e.get("origin"), "outcome": e.get("outcome"),
            "accepted_epoch": a_epoch if accepted else None,
            "accepted_next": a_pos + 1 if accepted and isinstance(a_pos, int) else None}


def _chain_heartbeat(e: Mapping[str, Any]) -> dict[str, Any]:
    return {"epoch": e.get("epoch"), "chain_length": _opt_len(e.get("chain")),
            "chain_repeats": _repeats(e.get("chain")), "wedged": e.get("wedged"), "pos": e.get("pos"),
            "stable": e.get("stable"), "ttl_ms": e.get("ttl_ms"), "status": e.get("status")}


# The chain types' rows (docs/families.md 4.2), by suite.
_CHAIN_ROWS = {CHAIN_VIEW: _chain_view, CHAIN_WEDGE: _chain_wedge, CHAIN_APPEND: _chain_append,
               CHAIN_HEARTBEATS: _chain_heartbeat}


def _row(rec: Record, suite: str) -> dict[str, Any]:
    e = rec.event
    row: dict[str, Any] = {"source": rec.source, "partition": rec.partition, "offset": rec.offset,
                           **{k: e.get(k) for k in ("group", "node", "ts_ms", "seq", "incarnation")}}
    if suite == DECISIONS:
        cfg = e.get("config") or {}
        row.update(instance=e.get("instance"), count=e.get("count", 1), proposer=e.get("proposer"),
                   kind=e.get("kind"), window_base=e.get("window_base"), config_op=cfg.get("op"),
                   config_nodes=_opt_len(cfg.get("nodes")))
    elif suite == EXECUTIONS:
        row.update(executed=e.get("executed"))
    elif suite == HEARTBEATS:
        view = e.get("view") or {}
        row.update(executed=e.get("executed"), decided=e.get("decided"), protocol=e.get("protocol"),
                   status=e.get("status"), version=e.get("version"),
                   view_members=_opt_len(view.get("members")))
    elif suite == GEN_STATE:
        gen = e.get("gen") or {}
        members, configured = gen.get("members") or [], gen.get("configured") or []
        row.update(cause=e.get("cause"), status=e.get("status"), gen_num=gen.get("num"),
                   gen_members=len(members), gen_configured=len(configured),
                   members_outside=len(set(members) - set(configured)),
                   last_online_in=e.get("last_online_in"),
                   last_vote_num=(e.get("last_vote") or {}).get("num"))
    elif suite == GEN_XACT:
        at = e.get("at") or {}
        row.update(gid=e.get("gid"), xgen=e.get("xgen"), phase=e.get("phase"), role=e.get("role"),
                   mode=e.get("mode"), at_num=at.get("num"), at_status=at.get("status"))
    elif suite == GEN_HEARTBEATS:
        row.update(gen_num=e.get("gen_num"), last_online_in=e.get("last_online_in"),
                   last_vote_num=e.get("last_vote_num"), node_status=e.get("node_status"),
                   xact_sample=e.get("xact_sample"))
    elif suite in _QLOG_ROWS:
        row.update(_QLOG_ROWS[suite](e))
    elif suite in _CHAIN_ROWS:
        row.update(_CHAIN_ROWS[suite](e))
    else:
        row.update(instance=e.get("instance"), outcome=e.get("outcome"), start=e.get("start"),
                   event_horizon=e.get("event_horizon"), members_count=_opt_len(e.get("members")),
                   reason=e.get("reason"))
    return row


def _frame(rows: list[dict[str, Any]], suite: str) -> pd.DataFrame:
    """A suite's frame with every column present and the numeric ones numeric (NULL as NaN)."""
    df = pd.DataFrame(rows, columns=COLUMNS[suite])
    for col in df.columns:
        if col in _NUMERIC:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def node_epochs(events: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """``node_epoch`` of each chain.append (``DERIVED``), by ``id`` of the event: the highest epoch
    its node stated before it (lower seq, same group, node and incarnation) by an installed view, a
    heartbeat or an accepted append, across the topics (seq counts all of a node's events)."""
    chain = sorted((e for e in events if str(e.get("type")).startswith("chain.")),
                   key=lambda e: (str(e.get("group")), str(e.get("node")), e.get("incarnation") or 0, e.get("seq") or 0))
    out: dict[int, int] = {}
    high: dict[tuple[Any, Any, Any], int] = {}
    for e in chain:
        key, epoch = (e.get("group"), e.get("node"), e.get("incarnation")), e.get("epoch")
        if e.get("type") == "chain.append" and key in high:
            out[id(e)] = high[key]
        states = (e.get("type") == "chain.heartbeat" or e.get("outcome") in ("installed", "accepted"))
        if states and isinstance(epoch, int) and not isinstance(epoch, bool):
            high[key] = max(high.get(key, epoch), epoch)
    return out


def _stale(row: dict[str, Any], node_epoch: int | None) -> None:
    """An accepted run of an older epoch than its node was in is a stale write: the rules'
    (CHAIN_STALE_EPOCH_WRITE), whatever its positions say; the run checks leave it out."""
    row["node_epoch"] = node_epoch
    epoch = row.get("epoch")
    if node_epoch is not None and isinstance(epoch, int) and epoch < node_epoch:
        row["accepted_epoch"] = row["accepted_next"] = None


def input_frames(records: Iterable[Record]) -> dict[str, pd.DataFrame]:
    """One frame per input suite (empty suites left out), with ``seq_step`` and, for every
    family's heartbeats, ``clock_offset_ms``; rows in (source, partition, offset) order."""
    records = list(records)
    epochs = node_epochs(rec.event for rec in records)
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in INPUT_SUITES}
    for rec in records:
        suite = SUITE_OF_TYPE.get(str(rec.event.get("type")))
        if suite is not None:
            row = _row(rec, suite)
            if suite == CHAIN_APPEND:
                _stale(row, epochs.get(id(rec.event)))
            rows[suite].append(row)
    out = {}
    for suite, items in rows.items():
        if not items:
            continue
        items.sort(key=lambda r: (r["source"], r["partition"], r["offset"]))
        df = _frame(items, suite)
        df["seq_step"] = seq_steps(df)
        if suite in (HEARTBEATS, GEN_HEARTBEATS, QLOG_HEARTBEATS, CHAIN_HEARTBEATS):
            df["clock_offset_ms"] = clock_offsets(df)
        out[suite] = df
    return out


def seq_steps(df: pd.DataFrame) -> pd.Series:
    """``seq_step`` of each row (``DERIVED``); ``df`` is in offset order within each partition."""
    keys = ["source", "partition", "group", "node", "incarnation"]
    return df.groupby(keys, sort=False, dropna=False)["seq"].diff()


def clock_offsets(df: pd.DataFrame) -> pd.Series:
    """``clock_offset_ms`` of each heartbeat (``DERIVED``); ``df`` is in offset order within
    each partition. A median over the nodes' latest times is robust to one wrong clock (with 3
    or more nodes), and the per-node median over its heartbeats to one late record (the first
    heartbeat after a silence of the whole group is compared with the others' old times). A node
    not heard within the group's last ``2 x nodes`` heartbeats (every live node sends one a
    second, whatever its clock says) has left: a membership change that removes several nodes
    must not make the ones that stay look ahead of their old peers' last times."""
    latest: dict[tuple[Any, Any, Any], dict[Any, tuple[float, int]]] = {}
    arrivals: dict[tuple[Any, Any, Any], int] = {}
    diffs: dict[tuple[Any, Any, Any, Any], list[float]] = {}
    keys: list[tuple[Any, Any, Any, Any]] = []
    for source, partition, group, node, ts in zip(df["source"], df["partition"], df["group"],
                                                  df["node"], df["ts_ms"], strict=True):
        where = (source, partition, group)
        n = arrivals[where] = arrivals.get(where, 0) + 1
        seen = latest.setdefault(where, {})
        seen[node] = (ts, n)
        recent = [t for t, at in seen.values() if n - at < 2 * len(seen)]
        key = (source, partition, group, node)
        diffs.setdefault(key, []).append(ts - statistics.median(recent))
        keys.append(key)
    medians = {k: statistics.median(v) for k, v in diffs.items()}
    return pd.Series([medians[k] for k in keys], index=df.index, dtype="float64")


# -- outputs ---------------------------------------------------------------------------------------
def alert_frame(alerts: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The batch's alert payloads (``Alert.to_dict``), one row each."""
    rows = []
    for a in alerts:
        row = {c: a.get(c) for c in COLUMNS[ALERTS] if c != "kind_class"}
        row["kind_class"] = f"{a.get('kind')} {a.get('severity')} {a.get('category')}"
        rows.append(row)
    return _frame(rows, ALERTS)


def _nonneg(x: Any) -> Any:
    """The monitor's -1 ("none yet") as NULL, as the PostgreSQL tables store it."""
    return None if x is None or (isinstance(x, int) and x < 0) else x


def active_configs(snapshot: Mapping[str, Any]) -> int | None:
    """``active_configs`` of a snapshot (``DERIVED``)."""
    active = snapshot.get("active")
    if active is None:
        return None
    nxt = max(int(snapshot.get("decided", -1)), -1) + 1
    configs = [active, *(snapshot.get("pending") or [])]
    return sum(1 for c in configs if active["start"] <= c["start"] <= nxt)


def state_frames(snapshots: Sequence[Mapping[str, Any]]) -> dict[str, pd.DataFrame]:
    """The batch's latest snapshot per group (what ``group_state`` and ``node_state`` keep) as
    the state and the state-nodes frames; both left out when there is no snapshot."""
    latest: dict[str, Mapping[str, Any]] = {}
    for s in snapshots:
        latest[s["group"]] = s
    if not latest:
        return {}
    groups, nodes = [], []
    for s in latest.values():
        active = s.get("active")
        groups.append({"group": s["group"], "clock_ms": _nonneg(s.get("clock_ms")),
                       "decided": _nonneg(s.get("decided")),
                       "executed_majority": s.get("executed_majority"),
                       "effective_horizon": s.get("effective_horizon"),
                       "active_start": None if active is None else active["start"],
                       "pending": len(s.get("pending") or []), "active_configs": active_configs(s)})
        for node, n in (s.get("nodes") or {}).items():
            nodes.append({"group": s["group"], "node": node, "member": bool(n.get("member")),
                          "executed": _nonneg(n.get("executed")), "decided": _nonneg(n.get("decided")),
                          "effective_horizon": n.get("effective_horizon")})
    out = {STATE: _frame(groups, STATE)}
    if nodes:
        out[NODES] = _frame(nodes, NODES)
    return out


# -- rows as evidence ------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """A frame value as JSON: NaN as None, whole floats (pandas' NULL-able ints) as int."""
    if value is None:
        return None
    if isinstance(value, float):
        if value != value:  # NaN
            return None
        return int(value) if value.is_integer() else value
    if hasattr(value, "item"):  # numpy scalars
        return _plain(value.item())
    return value


def evidence(suite: str, row: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """A failing row as alert evidence and dq_results sample: who and where (the keys
    ``replimon.replay.evidence_line`` prints) plus the checked columns' values."""
    if suite in INPUT_SUITES:
        out: dict[str, Any] = {"type": EVENT_TYPE[suite]}
        for k in ("group", "node", "ts_ms", "seq", "incarnation"):
            out[k] = _plain(row.get(k))
        partition = _plain(row.get("partition"))
        if partition == FILE_PARTITION:
            out.update(file=row.get("source"), line=_plain(row.get("offset")))
        else:
            out.update(topic=row.get("source"), partition=partition, offset=_plain(row.get("offset")))
    elif suite == ALERTS:
        out = {k: _plain(row.get(k)) for k in ("alert_id", "group", "kind", "status", "event_ts_ms")}
    elif suite == STATE:
        out = {k: _plain(row.get(k)) for k in ("group", "clock_ms")}
    else:
        out = {k: _plain(row.get(k)) for k in ("group", "node")}
    for c in columns:
        out[c] = _plain(row.get(c))
    return out


def row_key(suite: str, sample: Mapping[str, Any]) -> str:
    """Facts that name a failing row (for a deterministic alert id): where an input record was
    read, an alert's id and status, a group's clock."""
    if suite in INPUT_SUITES:
        if "file" in sample:
            return f"{sample['file']}:{sample['line']}"
        return f"{sample['topic']}:{sample['partition']}:{sample['offset']}"
    if suite == ALERTS:
        return f"{sample.get('alert_id')}:{sample.get('status')}"
    return ":".join(str(sample.get(k)) for k in ("group", "node", "clock_ms") if k in sample)
