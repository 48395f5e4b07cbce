"""Event contract v1, the quorum-log family (a Paxos replicated log with reconfiguration,
``qlog.*``): strict models.

The tables are docs/families.md 3.2 (what each field means, where halon's replicated log reads
it); the envelope and the strictness are contract v1's (``base.py``): no coercion, no unknown
fields, no nulls, ids ``[A-Za-z0-9._:-]{1,128}``, integers non-negative 64-bit. Node lists are
sets (docs/families.md 1.2, duty 3), so a list naming a node twice is malformed; ``members`` is
also *ordered* (the head is the preferred leader), which the schema cannot say and no rule needs
beyond the leader mark of the live view.

Cross-field rules, as model validators and as ``if``/``then`` clauses of the JSON Schema:

* qlog.decree and qlog.passed: ``new_leg`` and ``members`` are present iff ``kind == "reconf"``.
* qlog.decree: ``outcome == "skipped"`` only for a reconf (halon's "Not executing" branch: a
  Reconf that opens no newer legislature; an unreachable decree is skipped without an event).
* qlog.recover: ``synced_with`` is present iff ``phase == "synced"``.

Values that are well-formed but unsafe are accepted: ``acked`` not a majority (or not a subset)
of ``acceptors``, a recovery membership with too few old replicas, a lower legislature than
before. They are what the rules of docs/families.md 3.4 catch. ``leg`` of ``qlog.decree`` is
optional: a decree replayed or fetched with its legislature unknown is "teleported" (halon's Note
[Teleportation]: legislature maxBound) and is left out. ``status`` of ``qlog.heartbeat`` is a
token the integration chooses (the design names no values); no rule reads it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from replimon.contract.base import Id, NonNeg, _Envelope, _Strict

QLOG_TYPES = ("qlog.decree", "qlog.passed", "qlog.recover", "qlog.heartbeat")
DECREE_KINDS = ("values", "reconf")
DECREE_OUTCOMES = ("executed", "skipped")
RECOVER_PHASES = ("started", "synced", "failed")

QDigest = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{1,128}$")]
IdSet = Annotated[list[Id], Field(json_schema_extra={"uniqueItems": True})]
NonEmptyIdSet = Annotated[list[Id], Field(min_length=1, json_schema_extra={"uniqueItems": True})]

# ``new_leg`` and ``members`` travel together, with kind reconf only (schema and validator).
_RECONF_FIELDS: dict[str, Any] = {
    "if": {"properties": {"kind": {"const": "reconf"}}},
    "then": {"required": ["new_leg", "members"]},
    "else": {"allOf": [{"not": {"required": ["new_leg"]}}, {"not": {"required": ["members"]}}]},
}


class _Sets(_Strict):
    """Every list of ids of a qlog model names each node once (docs/families.md 1.2, duty 3)."""

    @model_validator(mode="after")
    def _no_repeats(self) -> _Sets:
        for name in type(self).model_fields:
            ids = getattr(self, name)
            if isinstance(ids, list) and ids and isinstance(ids[0], str) and len(set(ids)) != len(ids):
                raise ValueError(f"{name} lists a node twice")
        return self


def _reconf_fields(kind: str, new_leg: int | None, members: list[str] | None) -> None:
    if (kind == "reconf") != (new_leg is not None) or (kind == "reconf") != (members is not None):
        raise ValueError("new_leg and members are required iff kind is 'reconf'")


class Ballot(_Strict):
    """A Paxos ballot: its number and the proposer that owns it."""

    n: NonNeg
    proposer: Id


class Relocation(_Strict):
    """A new replica seeded with the state of an old one (RFC: it counts as the old one)."""

    model_config = ConfigDict(serialize_by_alias=True)

    node: Id
    from_: Id = Field(alias="from")


class QlogDecree(_Envelope, _Sets):
    """A replica's watermark passed decree ``num``: it executed it, or (a Reconf opening no newer
    legislature) did not (``Internal.hs`` execute branch: "Executing decree", "Reconfiguring",
    "Not executing")."""

    type: Literal["qlog.decree"]
    num: NonNeg
    leg: NonNeg | None = None
    kind: Literal["values", "reconf"]
    digest: QDigest
    outcome: Literal["executed", "skipped"]
    new_leg: NonNeg | None = None
    members: NonEmptyIdSet | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                _RECONF_FIELDS,
                {
                    "if": {"properties": {"outcome": {"const": "skipped"}}},
                    "then": {"properties": {"kind": {"const": "reconf"}}},
                },
            ]
        }
    )

    @model_validator(mode="after")
    def _kind_fields(self) -> QlogDecree:
        _reconf_fields(self.kind, self.new_leg, self.members)
        if self.outcome == "skipped" and self.kind != "reconf":
            raise ValueError("outcome 'skipped' is allowed only when kind is 'reconf'")
        return self


class QlogPassed(_Envelope, _Sets):
    """A proposer's round succeeded (BasicPaxos ``propose`` returned): decree ``(leg, num)`` has
    the value below, agreed by the acceptors in ``acked`` (the senders of the phase-2 acks it
    counted, which the publisher collects)."""

    type: Literal["qlog.passed"]
    num: NonNeg
    leg: NonNeg
    ballot: Ballot
    acceptors: NonEmptyIdSet
    acked: IdSet
    kind: Literal["values", "reconf"]
    digest: QDigest
    new_leg: NonNeg | None = None
    members: NonEmptyIdSet | None = None
    recovery: bool

    model_config = ConfigDict(json_schema_extra={"allOf": [_RECONF_FIELDS]})

    @model_validator(mode="after")
    def _kind_fields(self) -> QlogPassed:
        _reconf_fields(self.kind, self.new_leg, self.members)
        return self


class QlogRecover(_Envelope, _Sets):
    """The replica serving a Recover request (``Internal.hs`` go/Recover): ``started`` when it
    takes it, ``synced`` once ``prl_sync`` and ``prl_query`` returned without gaps, ``failed``
    when they did not (the client retries)."""

    type: Literal["qlog.recover"]
    phase: Literal["started", "synced", "failed"]
    leg: NonNeg
    old: NonEmptyIdSet
    new: NonEmptyIdSet
    relocated: list[Relocation] | None = None
    synced_with: IdSet | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"phase": {"const": "synced"}}},
                    "then": {"required": ["synced_with"]},
                    "else": {"not": {"required": ["synced_with"]}},
                }
            ]
        }
    )

    @model_validator(mode="after")
    def _phase_fields(self) -> QlogRecover:
        if (self.phase == "synced") != (self.synced_with is not None):
            raise ValueError("synced_with is required iff phase is 'synced'")
        if self.relocated is not None:
            nodes = [r.node for r in self.relocated]
            if len(set(nodes)) != len(nodes):
                raise ValueError("relocated names a node twice")
        return self


class QlogHeartbeat(_Envelope, _Sets):
    """A replica's periodic report (every second): its legislature and membership (``leg`` is the
    legislature ``members`` was installed in), its watermark (the next decree to execute), the
    lease holder it believes in (``getLeader``; absent: none), its status and suspicions."""

    type: Literal["qlog.heartbeat"]
    leg: NonNeg
    members: NonEmptyIdSet
    watermark: NonNeg
    leader: Id | None = None
    status: Id
    suspects: IdSet


QlogEvent = QlogDecree | QlogPassed | QlogRecover | QlogHeartbeat
