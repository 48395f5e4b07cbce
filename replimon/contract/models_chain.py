"""Event contract v1, the chain-replication family (chain replication with epoch-stamped views,
``chain.*``): strict models.

The tables are docs/families.md 4.2 (what each field means, where cstorey's
chain-replication-experiment reads it: ``store.rs`` ``append_entry``, ``views.rs``,
``messages.in.rs``); the envelope and the strictness are contract v1's (``base.py``): no
coercion, no unknown fields, no nulls, ids ``[A-Za-z0-9._:-]{1,128}``, integers non-negative
64-bit. ``chain`` is an *ordered* list (head..tail) that names each node once (docs/families.md
1.2, duty 3), so a chain naming a node twice is malformed.

Cross-field rules, as model validators and as ``if``/``then`` clauses of the JSON Schema:

* chain.view: ``reason`` is present iff ``outcome == "rejected"``.
* chain.append: ``digest`` only when ``count == 1``; ``pos + count - 1`` fits 64 bits.

Values that are well-formed but unsafe are accepted: a view with ``epoch <= from_epoch``, an
accepted append whose ``assumed`` is not the replica's log head, an epoch lower than before. They
are what the rules of docs/families.md 4.4 catch. ``status`` of ``chain.heartbeat`` is a token the
integration chooses (the design names no values); no rule reads it. ``stable`` (the tail's
acknowledged position) is left out where the replica does not know it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from replimon.contract.base import INT64_MAX, Id, NonNeg, Positive, _Envelope, _Strict

CHAIN_TYPES = ("chain.view", "chain.wedge", "chain.append", "chain.heartbeat")
VIEW_OUTCOMES = ("installed", "rejected")
VIEW_REASONS = ("WrongEpoch", "Wedged", "BadSequence")
WEDGE_REASONS = ("suspect_upstream", "suspect_downstream", "command")
APPEND_ORIGINS = ("client", "upstream")
APPEND_OUTCOMES = ("accepted", "bad_sequence", "wedged", "wrong_epoch")

CDigest = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{1,128}$")]
Chain = Annotated[list[Id], Field(min_length=1, json_schema_extra={"uniqueItems": True})]


def _chain_once(chain: list[str]) -> None:
    if len(set(chain)) != len(chain):
        raise ValueError("chain lists a node twice")


class LogPos(_Strict):
    """A position in a replica's log with the epoch of its entry (the seed's ``(Epoch, LogPos)``
    CAS precondition)."""

    epoch: NonNeg
    pos: NonNeg


class ChainView(_Envelope):
    """A replica installed or refused a view change: the head by ``viewChanged`` (the store CAS
    of ``views.rs``), the others by applying the ``ViewChange`` log entry at ``pos``."""

    type: Literal["chain.view"]
    from_epoch: NonNeg
    epoch: NonNeg
    chain: Chain
    pos: NonNeg
    outcome: Literal["installed", "rejected"]
    reason: Literal["WrongEpoch", "Wedged", "BadSequence"] | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"outcome": {"const": "rejected"}}},
                    "then": {"required": ["reason"]},
                    "else": {"not": {"required": ["reason"]}},
                }
            ]
        }
    )

    @model_validator(mode="after")
    def _outcome_fields(self) -> ChainView:
        _chain_once(self.chain)
        if (self.outcome == "rejected") != (self.reason is not None):
            raise ValueError("reason is required iff outcome is 'rejected'")
        return self


class ChainWedge(_Envelope):
    """The replica recorded its view of ``epoch`` as wedged (it suspects its upstream or
    downstream, or was told to): messages of that epoch then fail as wedged."""

    type: Literal["chain.wedge"]
    epoch: NonNeg
    reason: Literal["suspect_upstream", "suspect_downstream", "command"]
    suspect: Id | None = None


class ChainAppend(_Envelope):
    """A run of ``count`` consecutive data entries ``[pos, pos + count - 1]`` of one epoch handled
    by the replica's store (``store.rs`` ``append_entry``), or by the head's client path, with one
    outcome; ``assumed`` is the CAS precondition of the run's first append."""

    type: Literal["chain.append"]
    assumed: LogPos
    epoch: NonNeg
    pos: NonNeg
    count: Positive
    origin: Literal["client", "upstream"]
    outcome: Literal["accepted", "bad_sequence", "wedged", "wrong_epoch"]
    digest: CDigest | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"required": ["count"], "properties": {"count": {"minimum": 2}}},
                    "then": {"not": {"required": ["digest"]}},
                }
            ],
        }
    )

    @property
    def last(self) -> int:
        """The last position of the run."""
        return self.pos + self.count - 1

    @model_validator(mode="after")
    def _run_fields(self) -> ChainAppend:
        if self.digest is not None and self.count != 1:
            raise ValueError("digest is allowed only when count is 1")
        if self.pos + self.count - 1 > INT64_MAX:
            raise ValueError("pos + count - 1 overflows 64 bits")
        return self


class ChainHeartbeat(_Envelope):
    """A replica's report after each renewal of its view-manager lease (at least every second):
    its view (``epoch``, ``chain``) and whether it is wedged, its last log position, the tail's
    acknowledged position where known, the lease's TTL."""

    type: Literal["chain.heartbeat"]
    epoch: NonNeg
    chain: Chain
    wedged: bool
    pos: NonNeg
    stable: NonNeg | None = None
    ttl_ms: Positive
    status: Id

    @model_validator(mode="after")
    def _chain_unique(self) -> ChainHeartbeat:
        _chain_once(self.chain)
        return self


ChainEvent = ChainView | ChainWedge | ChainAppend | ChainHeartbeat
