"""Event contract v1 (docs/contract.md), as typed, frozen, strict models.

One JSON object per Kafka message, key = group. Strict means what a replica integration would
expect of a contract: no coercion (``"5"`` is not an int, ``true`` is not an int, ``1.0`` is not an
int), no unknown fields (a new field is a new contract version), ids restricted to
``[A-Za-z0-9._:-]{1,128}``, every integer a non-negative 64-bit value (Spark's LongType).

Cross-field rules the table states in words are model validators, and are repeated as
``if``/``then`` clauses in the generated JSON Schema (``replimon/contract/event-v1.schema.json``) so
that an integration team can validate with any JSON Schema tool:

* decision: ``config`` is present iff ``kind == "config"``; a config decision has ``count == 1``;
  ``digest`` only when ``count == 1``; ``window_base`` only when ``node == proposer``.
* decision config: ``boot`` and ``add_nodes`` carry ``nodes`` with protocols, ``remove_nodes``
  carries ``nodes``, ``set_event_horizon`` carries ``event_horizon`` and no ``nodes``.
* config report: ``installed`` carries ``start``, ``event_horizon``, ``members`` and no reason;
  ``refused`` carries ``reason`` and none of the others.

Values that are well-formed but unsafe (an event horizon of 500, an old protocol) are NOT rejected
here: they are what the monitor's rules exist to catch (EH_OUT_OF_DOMAIN and friends).

These are XCom's types; the generations family's are in ``models_gen.py``, the quorum-log
family's in ``models_qlog.py``, the chain family's in ``models_chain.py``. ``Event`` below is the
one union of every family's types (docs/contract.md, "Protocol families").
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from replimon.contract.base import INT64_MAX, Id, NonNeg, Positive, _Envelope, _Strict
from replimon.contract.models_chain import (
    CHAIN_TYPES,
    ChainAppend,
    ChainHeartbeat,
    ChainView,
    ChainWedge,
)
from replimon.contract.models_gen import GEN_TYPES, GenHeartbeat, GenState, GenXact
from replimon.contract.models_qlog import (
    QLOG_TYPES,
    QlogDecree,
    QlogHeartbeat,
    QlogPassed,
    QlogRecover,
)

Digest = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{1,128}$")]

XCOM_TYPES = ("decision", "execution", "heartbeat", "config")
EVENT_TYPES = XCOM_TYPES + GEN_TYPES + QLOG_TYPES + CHAIN_TYPES
# Each type's protocol family (docs/families.md 1.1): the unprefixed types are XCom's, the others
# are ``<family>.<kind>``. The core has its own ``family_of``; the contract must not import it.
EVENT_FAMILIES = {**dict.fromkeys(XCOM_TYPES, "xcom"), **dict.fromkeys(GEN_TYPES, "gen"),
                  **dict.fromkeys(QLOG_TYPES, "qlog"), **dict.fromkeys(CHAIN_TYPES, "chain")}
# Which replica topic carries each type (docs/families.md 1.3), named by its role; the topics'
# names are configuration (``kafka.topics``).
EVENT_TOPICS = {
    "decision": "decisions", "execution": "executions", "heartbeat": "heartbeats", "config": "config",
    "gen.xact": "decisions", "gen.heartbeat": "heartbeats", "gen.state": "config",
    "qlog.passed": "decisions", "qlog.decree": "decisions", "qlog.heartbeat": "heartbeats",
    "qlog.recover": "config",
    "chain.append": "decisions", "chain.heartbeat": "heartbeats", "chain.view": "config",
    "chain.wedge": "config",
}
DECISION_KINDS = ("app", "noop", "config")
CONFIG_OPS = ("boot", "add_nodes", "remove_nodes", "set_event_horizon")
STATUSES = ("ONLINE", "RECOVERING", "OFFLINE", "ERROR", "UNREACHABLE")
REFUSAL_REASONS = ("EVENT_HORIZON_INVALID", "EVENT_HORIZON_UNCHANGEABLE", "OLD_MEMBER_CUSTOM_EH")


def _unique_ids(items: list[Any], what: str) -> None:
    ids = [m.id for m in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{what} lists a node twice")


class Member(_Strict):
    """A member of a configuration, with the XCom protocol number it speaks."""

    id: Id
    protocol: NonNeg


class NodeRef(_Strict):
    """A node named by a config command; ``protocol`` is required when adding (and booting)."""

    id: Id
    protocol: NonNeg | None = None


class ConfigCommand(_Strict):
    """The decided value of a config decision."""

    op: Literal["boot", "add_nodes", "remove_nodes", "set_event_horizon"]
    nodes: list[NodeRef] | None = None
    event_horizon: NonNeg | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"op": {"const": "set_event_horizon"}}},
                    "then": {"required": ["event_horizon"], "not": {"required": ["nodes"]}},
                    "else": {
                        "required": ["nodes"],
                        "properties": {"nodes": {"minItems": 1}},
                    },
                },
                {
                    "if": {"properties": {"op": {"enum": ["add_nodes", "remove_nodes"]}}},
                    "then": {"not": {"required": ["event_horizon"]}},
                },
                {
                    "if": {"properties": {"op": {"enum": ["boot", "add_nodes"]}}},
                    "then": {
                        "properties": {
                            "nodes": {"items": {"required": ["id", "protocol"]}},
                        }
                    },
                },
            ]
        }
    )

    @model_validator(mode="after")
    def _op_fields(self) -> ConfigCommand:
        if self.op == "set_event_horizon":
            if self.event_horizon is None:
                raise ValueError("set_event_horizon needs event_horizon")
            if self.nodes is not None:
                raise ValueError("set_event_horizon takes no nodes")
            return self
        if not self.nodes:
            raise ValueError(f"{self.op} needs a non-empty nodes list")
        _unique_ids(self.nodes, "nodes")
        if self.op in ("add_nodes", "remove_nodes") and self.event_horizon is not None:
            raise ValueError(f"{self.op} takes no event_horizon")
        if self.op in ("boot", "add_nodes") and any(n.protocol is None for n in self.nodes):
            raise ValueError(f"{self.op} needs the protocol of every node")
        return self


class View(_Strict):
    """A node's active configuration, as it reports it in heartbeats."""

    start: NonNeg
    event_horizon: NonNeg
    members: Annotated[list[Member], Field(min_length=1)]

    @model_validator(mode="after")
    def _members_unique(self) -> View:
        _unique_ids(self.members, "members")
        return self


class Decision(_Envelope):
    """A node learned the decision of a consensus instance (or a run of ``count`` of them)."""

    type: Literal["decision"]
    instance: NonNeg
    count: Positive = 1
    proposer: Id
    kind: Literal["app", "noop", "config"]
    digest: Digest | None = None
    window_base: NonNeg | None = None
    config: ConfigCommand | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "config"}}},
                    "then": {
                        "required": ["config"],
                        "properties": {"count": {"const": 1}},
                    },
                    "else": {"not": {"required": ["config"]}},
                },
                {
                    "if": {"required": ["count"], "properties": {"count": {"minimum": 2}}},
                    "then": {"not": {"required": ["digest"]}},
                },
            ],
            "description": "window_base is allowed only when node == proposer (not expressible "
            "in JSON Schema; enforced by the parser)",
        }
    )

    @property
    def last(self) -> int:
        """The last instance of the run."""
        return self.instance + self.count - 1

    @model_validator(mode="after")
    def _rules(self) -> Decision:
        if (self.kind == "config") != (self.config is not None):
            raise ValueError("config is required iff kind is 'config'")
        if self.kind == "config" and self.count != 1:
            raise ValueError("a config decision has count 1")
        if self.digest is not None and self.count != 1:
            raise ValueError("digest is allowed only when count is 1")
        if self.window_base is not None and self.node != self.proposer:
            raise ValueError("window_base is allowed only when node == proposer")
        if self.instance + self.count - 1 > INT64_MAX:
            raise ValueError("instance + count - 1 overflows 64 bits")
        return self


class Execution(_Envelope):
    """A node's last executed instance (never decreases within an incarnation)."""

    type: Literal["execution"]
    executed: NonNeg


class Heartbeat(_Envelope):
    """A node's periodic report of where it stands."""

    type: Literal["heartbeat"]
    executed: NonNeg
    decided: NonNeg
    protocol: NonNeg
    status: Literal["ONLINE", "RECOVERING", "OFFLINE", "ERROR", "UNREACHABLE"]
    view: View | None = None
    cache_size: NonNeg | None = None
    suspects: list[Id] | None = None
    version: Annotated[str, Field(min_length=1, max_length=64)] | None = None


class ConfigReport(_Envelope):
    """A node executed a config command and reports what it did with it."""

    type: Literal["config"]
    instance: NonNeg
    outcome: Literal["installed", "refused"]
    start: NonNeg | None = None
    event_horizon: NonNeg | None = None
    members: Annotated[list[Member], Field(min_length=1)] | None = None
    reason: Annotated[str, Field(min_length=1, max_length=256)] | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "if": {"properties": {"outcome": {"const": "installed"}}},
            "then": {
                "required": ["start", "event_horizon", "members"],
                "not": {"required": ["reason"]},
            },
            "else": {
                "required": ["reason"],
                "allOf": [
                    {"not": {"required": ["start"]}},
                    {"not": {"required": ["event_horizon"]}},
                    {"not": {"required": ["members"]}},
                ],
            },
        }
    )

    @model_validator(mode="after")
    def _outcome_fields(self) -> ConfigReport:
        if self.outcome == "installed":
            if self.start is None or self.event_horizon is None or self.members is None:
                raise ValueError("an installed config needs start, event_horizon and members")
            if self.reason is not None:
                raise ValueError("an installed config has no reason")
            _unique_ids(self.members, "members")
        else:
            if self.reason is None:
                raise ValueError("a refused config needs a reason")
            if self.start is not None or self.event_horizon is not None or self.members is not None:
                raise ValueError("a refused config has no start, event_horizon or members")
        return self


Event = Annotated[
    Decision | Execution | Heartbeat | ConfigReport | GenState | GenXact | GenHeartbeat
    | QlogDecree | QlogPassed | QlogRecover | QlogHeartbeat
    | ChainView | ChainWedge | ChainAppend | ChainHeartbeat,
    Field(discriminator="type"),
]
