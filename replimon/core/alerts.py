"""Alerts (docs/rules.md, "Alert records"): the kinds, their severity and category, the record.

An alert's ``alert_id`` is a hash of (group, kind, occurrence key): the key names the occurrence by
facts of the history (an instance, a node and incarnation, the event time a condition began), never
by when or where it was detected, so a live run and a replay of the same events give the same ids.
A wedge is emitted twice under one id: ``firing``, then ``resolved`` when the condition clears.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

CRITICAL, WARNING, INFO = "critical", "warning", "info"
VIOLATION, WEDGE, DATA = "violation", "wedge", "data"
FIRING, RESOLVED = "firing", "resolved"

# kind -> (severity, category), as docs/rules.md ("The alerts") lists them.
KINDS: dict[str, tuple[str, str]] = {
    "EH_OUT_OF_DOMAIN": (CRITICAL, VIOLATION),
    "EH_CHANGE_WITH_OLD_MEMBER": (CRITICAL, VIOLATION),
    "OLD_MEMBER_JOIN_CUSTOM_EH": (CRITICAL, VIOLATION),
    "CONFIG_MISMATCH": (CRITICAL, VIOLATION),
    "CONFIG_DISAGREEMENT": (CRITICAL, VIOLATION),
    "BEYOND_HORIZON": (CRITICAL, VIOLATION),
    "CAN_LEAVE_UNSAFE": (CRITICAL, VIOLATION),
    "DIVERGENT_DECISION": (CRITICAL, VIOLATION),
    "EXECUTION_REGRESSION": (CRITICAL, VIOLATION),
    "CACHE_INVARIANT": (WARNING, VIOLATION),
    "HORIZON_WEDGE": (CRITICAL, WEDGE),
    "NO_PROGRESS": (CRITICAL, WEDGE),
    "PENDING_CONFIG_STUCK": (CRITICAL, WEDGE),
    "NODE_SILENT": (WARNING, WEDGE),
    "QUORUM_AT_RISK": (WARNING, WEDGE),
    "QUORUM_LOST": (CRITICAL, WEDGE),
    "EXECUTOR_LAG": (WARNING, WEDGE),
    "GROUP_SILENT": (CRITICAL, WEDGE),
    "EVENTS_LOST": (WARNING, DATA),
    "INCOMPLETE_HISTORY": (INFO, DATA),
    # Raised by the data-quality sink (replimon.quality, docs/quality.md), not by the monitor:
    # an expectation of a Great Expectations suite failed on a validated micro-batch.
    "DATA_QUALITY_FAILED": (WARNING, DATA),
    "RECONFIG_REFUSED": (INFO, INFO),
    "CONFIG_INSTALLED": (INFO, INFO),
    # A node's clock far ahead of the monitor's (replimon.core.clocks, docs/operations.md "Clocks").
    "CLOCK_SKEW": (WARNING, DATA),
    # An event of another protocol family than its group's (docs/rules.md, "FAMILY_CONFLICT").
    "FAMILY_CONFLICT": (WARNING, DATA),
    # The generations family (docs/families.md 2.4, 2.5).
    "GEN_REGRESSION": (CRITICAL, VIOLATION),
    "GEN_STATE_INCONSISTENT": (CRITICAL, VIOLATION),
    "GEN_MEMBERS_CONFLICT": (CRITICAL, VIOLATION),
    "GEN_VOTE_PROMISE_BROKEN": (CRITICAL, VIOLATION),
    "GEN_ONLINE_INELIGIBLE": (CRITICAL, VIOLATION),
    "GEN_ONLINE_UNRECOVERED": (CRITICAL, VIOLATION),
    "GEN_DONOR_STALE": (CRITICAL, VIOLATION),
    "GEN_BARRIER_BROKEN": (CRITICAL, VIOLATION),
    "GEN_COMMIT_UNPREPARED": (CRITICAL, VIOLATION),
    "GEN_XACT_DIVERGENT": (CRITICAL, VIOLATION),
    "GEN_NO_ONLINE": (CRITICAL, WEDGE),
    "GEN_RECOVERY_STUCK": (CRITICAL, WEDGE),
    "GEN_VOTE_STUCK": (WARNING, WEDGE),
    "GEN_ELECTED": (INFO, INFO),
    # The quorum-log family (docs/families.md 3.4, 3.5).
    "QLOG_DIVERGENT_DECREE": (CRITICAL, VIOLATION),
    "QLOG_RECONF_WITHOUT_OLD_QUORUM": (CRITICAL, VIOLATION),
    "QLOG_DECREE_WITHOUT_QUORUM": (CRITICAL, VIOLATION),
    "QLOG_OBSOLETE_DECREE_EXECUTED": (CRITICAL, VIOLATION),
    "QLOG_RECOVER_UNSAFE": (CRITICAL, VIOLATION),
    "QLOG_RECOVER_UNSYNCED": (CRITICAL, VIOLATION),
    "QLOG_LEGISLATURE_REGRESSION": (CRITICAL, VIOLATION),
    "QLOG_NO_LEADER": (CRITICAL, WEDGE),
    "QLOG_RECOVER_STUCK": (WARNING, WEDGE),
    "QLOG_RECONFIGURED": (INFO, INFO),
    # The chain family (docs/families.md 4.4, 4.5).
    "CHAIN_EPOCH_REGRESSION": (CRITICAL, VIOLATION),
    "CHAIN_VIEW_NOT_CAS": (CRITICAL, VIOLATION),
    "CHAIN_STALE_EPOCH_WRITE": (CRITICAL, VIOLATION),
    "CHAIN_APPEND_NOT_CAS": (CRITICAL, VIOLATION),
    "CHAIN_WEDGED_WRITE": (CRITICAL, VIOLATION),
    "CHAIN_VIEW_CONFLICT": (CRITICAL, VIOLATION),
    "CHAIN_TWO_HEADS": (CRITICAL, VIOLATION),
    "CHAIN_LOG_DIVERGENCE": (CRITICAL, VIOLATION),
    "CHAIN_ADD_NOT_AT_TAIL": (WARNING, VIOLATION),
    "CHAIN_WEDGE_NOT_REPLACED": (CRITICAL, WEDGE),
    "CHAIN_LEASE_EXPIRED": (WARNING, WEDGE),
    "CHAIN_VIEW_STALE": (CRITICAL, WEDGE),
    "CHAIN_VIEW_INSTALLED": (INFO, INFO),
    # Raised by the streaming job (replimon.streaming.data_loss, docs/operations.md "Data loss"),
    # not by the core: a partition of an input topic moved back, the group's history was cut.
    "DATA_LOST": (WARNING, DATA),
}
VIOLATIONS = frozenset(k for k, (_, cat) in KINDS.items() if cat == VIOLATION)
WEDGES = frozenset(k for k, (_, cat) in KINDS.items() if cat == WEDGE)
FIELDS = (
    "alert_id", "group", "kind", "severity", "category", "status", "instance", "node",
    "event_ts_ms", "detected_ts_ms", "message", "evidence",
)


def alert_id(group: str, kind: str, key: object) -> str:
    """Deterministic id of one occurrence: the same history gives the same id, live or replay."""
    raw = f"{group}\x1f{kind}\x1f{key}".encode()
    return hashlib.blake2b(raw, digest_size=10).hexdigest()


_QLOG_KEYS = ("num", "leg", "new_leg", "members", "ballot", "acked", "recovery", "phase", "old",
              "new", "relocated", "synced_with", "watermark", "leader")
_CHAIN_KEYS = ("from_epoch", "epoch", "chain", "pos", "reason", "suspect", "assumed", "origin",
               "wedged", "stable", "ttl_ms")


def ref(event: dict[str, Any], src: dict[str, Any] | None = None) -> dict[str, Any]:
    """Evidence: the identifying fields of an event, plus where it was read (topic/partition/offset
    or file/line) when known."""
    out: dict[str, Any] = {
        "type": event["type"], "node": event["node"], "ts_ms": event["ts_ms"],
        "incarnation": event["incarnation"], "seq": event["seq"],
    }
    for key in ("instance", "count", "kind", "executed", "decided", "window_base", "outcome",
                "start", "event_horizon", "digest", "cache_size"):
        if key in event:
            out[key] = event[key]
    if "view" in event:
        out["view"] = event["view"]
    if "suspects" in event:
        out["suspects"] = event["suspects"]
    if event["type"].startswith("qlog."):  # the quorum log's own fields (docs/families.md 3.2)
        for key in _QLOG_KEYS:
            if key in event:
                out[key] = event[key]
    elif event["type"].startswith("chain."):  # the chain family's own (docs/families.md 4.2)
        for key in _CHAIN_KEYS:
            if key in event:
                out[key] = event[key]
    if src:
        out.update(src)
    return out


@dataclass(slots=True)
class Alert:
    """One alert record with the fields of docs/rules.md, "Alert records"."""

    alert_id: str
    group: str
    kind: str
    status: str
    event_ts_ms: int
    detected_ts_ms: int
    message: str
    instance: int | None = None
    node: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def severity(self) -> str:
        return KINDS[self.kind][0]

    @property
    def category(self) -> str:
        return KINDS[self.kind][1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "alert_id": self.alert_id, "group": self.group, "kind": self.kind,
            "severity": self.severity, "category": self.category, "status": self.status,
            "instance": self.instance, "node": self.node, "event_ts_ms": self.event_ts_ms,
            "detected_ts_ms": self.detected_ts_ms, "message": self.message,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Alert:
        return cls(
            d["alert_id"], d["group"], d["kind"], d["status"], d["event_ts_ms"],
            d["detected_ts_ms"], d["message"], d.get("instance"), d.get("node"),
            list(d.get("evidence") or []),
        )
