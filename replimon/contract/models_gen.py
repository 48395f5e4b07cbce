"""Event contract v1, the generations family (Postgres multimaster, ``gen.*``): strict models.

The tables are docs/families.md 2.2 (what each field means, which mtm function it is read in);
docs/contract.md "Protocol families" repeats them for integrators. The envelope and the strictness
are contract v1's (``base.py``): no coercion, no unknown fields, no nulls, ids
``[A-Za-z0-9._:-]{1,128}``, integers non-negative 64-bit. Node lists are sets (docs/families.md
1.2, duty 3), so a list naming a node twice is malformed.

Cross-field rules, as model validators and as ``if``/``then`` clauses of the JSON Schema:

* gen.state: ``via`` is present iff ``cause == "online"``; ``source`` only with cause ``online``
  (optional there: a publisher that does not know the sender leaves it out and GEN_ONLINE_UNRECOVERED
  (b) is not checked, docs/families.md 1.2); ``vote`` is present iff ``cause == "vote"``.
* gen.xact: ``at`` only with phase ``prepared``; ``mode`` only with role ``replica``;
  ``prepared_by`` only for a coordinator's ``committed``; ``xmembers`` only for a coordinator.
  These are optional where allowed: no rule depends on a missing field (docs/families.md 2.2).

Values that are well-formed but unsafe are accepted: ``last_vote.num < gen.num``, empty
``donors``, status ONLINE with ``last_online_in != gen.num``, a member set that is not a
majority. They are what GEN_STATE_INCONSISTENT and the other rules of docs/families.md 2.4 catch.
What cannot mean anything is refused: a generation numbered 0 (mtm numbers them from 1), a
generation with no member or no configured node, a node named twice in a set.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from replimon.contract.base import Id, NonNeg, Positive, _Envelope, _Strict

GEN_TYPES = ("gen.state", "gen.xact", "gen.heartbeat")
GEN_CAUSES = ("load", "switch", "online", "vote", "bump")
GEN_STATUSES = ("ONLINE", "RECOVERY", "DEAD")
GEN_VIA = ("parallel_safe", "prepare")
XACT_PHASES = ("prepared", "committed", "aborted")
XACT_ROLES = ("coordinator", "replica", "resolver")
XACT_MODES = ("normal", "recovery")
NODE_STATUSES = ("online", "recovery", "catchup", "disabled", "isolated")

# A set of node ids: uniqueness is checked by the validators below and said by the schema.
IdSet = Annotated[list[Id], Field(json_schema_extra={"uniqueItems": True})]
NonEmptyIdSet = Annotated[list[Id], Field(min_length=1, json_schema_extra={"uniqueItems": True})]
Gid = Annotated[str, Field(min_length=1, max_length=256)]


class _Sets(_Strict):
    """Every list of a gen model is a set of node ids (docs/families.md 1.2, duty 3)."""

    @model_validator(mode="after")
    def _no_repeats(self) -> _Sets:
        for name in type(self).model_fields:
            ids = getattr(self, name)
            if isinstance(ids, list) and len(set(ids)) != len(ids):
                raise ValueError(f"{name} lists a node twice")
        return self


class Generation(_Sets):
    """A generation ``(num, members, configured)``: ``current_gen`` as a node stores it."""

    num: Positive
    members: NonEmptyIdSet
    configured: NonEmptyIdSet


class LastVote(_Sets):
    """``last_vote``: the highest generation the node voted for. After a bump (``CampaignTour``
    raising the number on VoteGenNumTooLow) ``members`` and ``configured`` are empty."""

    num: NonNeg
    members: IdSet
    configured: IdSet


class GrantedVote(Generation):
    """What a cause-``vote`` event granted, and to whom (``HandleGenVoteRequest``; the candidate is
    the node itself when ``CampaignMyself`` voted for itself)."""

    candidate: Id


class XactAt(_Strict):
    """Where a node stood when it wrote a PREPARE: ``current_gen.num`` and its status in it."""

    num: Positive
    status: Literal["ONLINE", "RECOVERY", "DEAD"]


class GenState(_Envelope, _Sets):
    """The node's persisted generation state changed (one event per completed transition, sent
    after its last ``MtmStateSave()``, still under GenLock)."""

    type: Literal["gen.state"]
    cause: Literal["load", "switch", "online", "vote", "bump"]
    gen: Generation
    donors: IdSet
    last_online_in: NonNeg
    last_vote: LastVote
    status: Literal["ONLINE", "RECOVERY", "DEAD"]
    via: Literal["parallel_safe", "prepare"] | None = None
    source: Id | None = None
    vote: GrantedVote | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"cause": {"const": "online"}}},
                    "then": {"required": ["via"]},
                    "else": {"allOf": [{"not": {"required": ["via"]}},
                                       {"not": {"required": ["source"]}}]},
                },
                {
                    "if": {"properties": {"cause": {"const": "vote"}}},
                    "then": {"required": ["vote"]},
                    "else": {"not": {"required": ["vote"]}},
                },
            ]
        }
    )

    @model_validator(mode="after")
    def _cause_fields(self) -> GenState:
        online = self.cause == "online"
        if online != (self.via is not None):
            raise ValueError("via is required iff cause is 'online'")
        if self.source is not None and not online:
            raise ValueError("source is allowed only when cause is 'online'")
        if (self.cause == "vote") != (self.vote is not None):
            raise ValueError("vote is required iff cause is 'vote'")
        return self


class GenXact(_Envelope, _Sets):
    """A sampled two-phase transaction's step on this node (every node traces the gids whose
    ``crc32(gid) % xact_sample == 0``)."""

    type: Literal["gen.xact"]
    gid: Gid
    xgen: Positive
    phase: Literal["prepared", "committed", "aborted"]
    role: Literal["coordinator", "replica", "resolver"]
    mode: Literal["normal", "recovery"] | None = None
    at: XactAt | None = None
    prepared_by: IdSet | None = None
    xmembers: NonEmptyIdSet | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "if": {"not": {"properties": {"phase": {"const": "prepared"}}}},
                    "then": {"not": {"required": ["at"]}},
                },
                {
                    "if": {"not": {"properties": {"role": {"const": "replica"}}}},
                    "then": {"not": {"required": ["mode"]}},
                },
                {
                    "if": {"not": {"properties": {"role": {"const": "coordinator"},
                                                  "phase": {"const": "committed"}}}},
                    "then": {"not": {"required": ["prepared_by"]}},
                },
                {
                    "if": {"not": {"properties": {"role": {"const": "coordinator"}}}},
                    "then": {"not": {"required": ["xmembers"]}},
                },
            ]
        }
    )

    @model_validator(mode="after")
    def _phase_fields(self) -> GenXact:
        if self.at is not None and self.phase != "prepared":
            raise ValueError("at is allowed only when phase is 'prepared'")
        if self.mode is not None and self.role != "replica":
            raise ValueError("mode is allowed only when role is 'replica'")
        if self.prepared_by is not None and (self.role, self.phase) != ("coordinator", "committed"):
            raise ValueError("prepared_by is allowed only on a coordinator's 'committed'")
        if self.xmembers is not None and self.role != "coordinator":
            raise ValueError("xmembers is allowed only when role is 'coordinator'")
        return self


class GenHeartbeat(_Envelope, _Sets):
    """A node's periodic report (every second), read under GenLock and vote_lock in shared mode.
    ``gen_num`` may be 0: a node that has not loaded its state yet."""

    type: Literal["gen.heartbeat"]
    gen_num: NonNeg
    last_online_in: NonNeg
    last_vote_num: NonNeg
    node_status: Literal["online", "recovery", "catchup", "disabled", "isolated"]
    suspects: IdSet
    xact_sample: NonNeg


GenEvent = GenState | GenXact | GenHeartbeat

