"""The data-quality suites as code: what each expectation checks, on which columns, and why.

One suite per input topic (contract v1 beyond what the JSON Schema can say), one per generations
event type (``gen.state``, ``gen.xact``, ``gen.heartbeat``: they share the topics), one per
quorum-log event type (``qlog.decree``, ``qlog.passed``, ``qlog.recover``, ``qlog.heartbeat``), one
per chain event type (``chain.view``, ``chain.wedge``, ``chain.append``, ``chain.heartbeat``) and per output
(``monitor.alerts``: alert fields complete; ``monitor.state`` and ``monitor.state.nodes``: state
invariants). Each expectation is a plain Great Expectations 1.x expectation on a column of the
suite's frame; what GX cannot express directly (a node's seq going backwards, a node's clock
against its group's) is first computed into a *derived column* by ``replimon.quality.derive``
(each one is described in ``DERIVED``). Bounds that depend on the configuration or on the clock
are suite parameters (``{"$PARAMETER": name}``), filled in at validation time by ``parameters``.

This module is the source of truth; ``expectations/gx/expectations/`` holds the same suites as
GX JSON, written by ``python -m replimon.quality.project --write`` (``--check`` fails on drift,
as ``tests/quality/test_quality.py`` does). Importing it does not import Great Expectations (a slow
import): only ``to_gx`` and ``write_project`` do.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replimon.core.alerts import KINDS

# -- suite names: one per input topic (the default topic names; a record of a configured topic
# goes to the suite of its event type, replimon.quality.derive.SUITE_OF_TYPE) and per output ------
DECISIONS, EXECUTIONS, HEARTBEATS, CONFIG = (
    "replica.decisions", "replica.executions", "replica.heartbeats", "replica.config")
# The generations family's types share the four topics by role (docs/families.md 1.3), so their
# suites are named after the type, under the same "replica." prefix as the topics' suites.
GEN_STATE, GEN_XACT, GEN_HEARTBEATS = "replica.gen.state", "replica.gen.xact", "replica.gen.heartbeat"
QLOG_DECREE, QLOG_PASSED, QLOG_RECOVER, QLOG_HEARTBEATS = (
    "replica.qlog.decree", "replica.qlog.passed", "replica.qlog.recover", "replica.qlog.heartbeat")
CHAIN_VIEW, CHAIN_WEDGE, CHAIN_APPEND, CHAIN_HEARTBEATS = (
    "replica.chain.view", "replica.chain.wedge", "replica.chain.append", "replica.chain.heartbeat")
ALERTS, STATE, NODES = "monitor.alerts", "monitor.state", "monitor.state.nodes"
XCOM_SUITES = (DECISIONS, EXECUTIONS, HEARTBEATS, CONFIG)
GEN_SUITES = (GEN_STATE, GEN_XACT, GEN_HEARTBEATS)
QLOG_SUITES = (QLOG_DECREE, QLOG_PASSED, QLOG_RECOVER, QLOG_HEARTBEATS)
CHAIN_SUITES = (CHAIN_VIEW, CHAIN_WEDGE, CHAIN_APPEND, CHAIN_HEARTBEATS)
INPUT_SUITES = XCOM_SUITES + GEN_SUITES + QLOG_SUITES + CHAIN_SUITES
OUTPUT_SUITES = (ALERTS, STATE, NODES)
SUITES = INPUT_SUITES + OUTPUT_SUITES
EVENT_TYPE = {DECISIONS: "decision", EXECUTIONS: "execution", HEARTBEATS: "heartbeat", CONFIG: "config",
              GEN_STATE: "gen.state", GEN_XACT: "gen.xact", GEN_HEARTBEATS: "gen.heartbeat",
              QLOG_DECREE: "qlog.decree", QLOG_PASSED: "qlog.passed", QLOG_RECOVER: "qlog.recover",
              QLOG_HEARTBEATS: "qlog.heartbeat", CHAIN_VIEW: "chain.view", CHAIN_WEDGE: "chain.wedge",
              CHAIN_APPEND: "chain.append", CHAIN_HEARTBEATS: "chain.heartbeat"}

# An event time before 2000-01-01 is not epoch milliseconds (most likely seconds, or a zero).
MIN_TS_MS = 946_684_800_000
# XCom's protocol numbers x_1_0 (1) .. x_1_9 (10); 0 is x_unknown_proto. The contract accepts any
# non-negative number (an old protocol is something the rules judge, docs/contract.md).
XCOM_PROTOCOLS = list(range(1, 11))
MAX_MEMBERS = 9  # XCom groups have at most 9 members
REFUSAL_REASONS = ["EVENT_HORIZON_INVALID", "EVENT_HORIZON_UNCHANGEABLE", "OLD_MEMBER_CUSTOM_EH"]
# MySQL server versions as nodes report them ("8.4.3", "8.0.36-commercial").
VERSION_REGEX = r"^[0-9]+\.[0-9]+\.[0-9]+"
ALERT_ID_REGEX = r"^[0-9a-f]{20}$"  # replimon.core.alerts.alert_id: blake2b, 10 bytes, hex
# Generations: a node's status in its generation and its mtm node status (docs/families.md 2.2).
GEN_STATUSES = ["ONLINE", "RECOVERY", "DEAD"]
GEN_NODE_STATUSES = ["online", "recovery", "catchup", "disabled", "isolated"]
XACT_PHASES = ["prepared", "committed", "aborted"]
XACT_ROLES = ["coordinator", "replica", "resolver"]
# Quorum-log: a decree's kind and outcome, a recover request's phase (docs/families.md 3.2).
DECREE_KINDS = ["values", "reconf"]
DECREE_OUTCOMES = ["executed", "skipped"]
RECOVER_PHASES = ["started", "synced", "failed"]
# Chain: a view change's outcome and refusal reason, a wedge's reason, an append run's origin and
# outcome (docs/families.md 4.2; replimon.contract.models_chain).
VIEW_OUTCOMES = ["installed", "rejected"]
VIEW_REASONS = ["WrongEpoch", "Wedged", "BadSequence"]
WEDGE_REASONS = ["suspect_upstream", "suspect_downstream", "command"]
APPEND_ORIGINS = ["client", "upstream"]
APPEND_OUTCOMES = ["accepted", "bad_sequence", "wedged", "wrong_epoch"]

# Identifying columns of every input frame (where the record was read, whose it is).
WHERE = ["source", "partition", "offset"]
ENVELOPE = ["group", "node", "ts_ms", "seq", "incarnation"]

# The columns of each suite's frame, in order (a missing optional field is NULL; every column is
# always present, so an expectation never meets a missing column).
COLUMNS: dict[str, list[str]] = {
    DECISIONS: [*WHERE, *ENVELOPE, "instance", "count", "proposer", "kind", "window_base",
                "config_op", "config_nodes", "seq_step"],
    EXECUTIONS: [*WHERE, *ENVELOPE, "executed", "seq_step"],
    HEARTBEATS: [*WHERE, *ENVELOPE, "executed", "decided", "protocol", "status", "version",
                 "view_members", "seq_step", "clock_offset_ms"],
    CONFIG: [*WHERE, *ENVELOPE, "instance", "outcome", "start", "event_horizon", "members_count",
             "reason", "seq_step"],
    GEN_STATE: [*WHERE, *ENVELOPE, "cause", "status", "gen_num", "gen_members", "gen_configured",
                "members_outside", "last_online_in", "last_vote_num", "seq_step"],
    GEN_XACT: [*WHERE, *ENVELOPE, "gid", "xgen", "phase", "role", "mode", "at_num", "at_status", "seq_step"],
    GEN_HEARTBEATS: [*WHERE, *ENVELOPE, "gen_num", "last_online_in", "last_vote_num", "node_status",
                     "xact_sample", "seq_step", "clock_offset_ms"],
    QLOG_DECREE: [*WHERE, *ENVELOPE, "num", "leg", "kind", "digest", "outcome", "new_leg", "reconf_members",
                  "seq_step"],
    QLOG_PASSED: [*WHERE, *ENVELOPE, "num", "leg", "ballot_n", "ballot_proposer", "acceptors_count",
                  "acked_count", "acked_outside", "kind", "digest", "new_leg", "reconf_members", "recovery",
                  "seq_step"],
    QLOG_RECOVER: [*WHERE, *ENVELOPE, "phase", "leg", "old_count", "new_count", "relocated_outside",
                   "synced_outside", "seq_step"],
    QLOG_HEARTBEATS: [*WHERE, *ENVELOPE, "leg", "leg_members", "watermark", "leader", "leader_outside",
                      "status", "seq_step", "clock_offset_ms"],
    CHAIN_VIEW: [*WHERE, *ENVELOPE, "from_epoch", "epoch", "chain_length", "chain_repeats", "pos", "outcome",
                 "reason", "cas_from_epoch", "seq_step"],
    CHAIN_WEDGE: [*WHERE, *ENVELOPE, "epoch", "reason", "suspect", "suspect_self", "seq_step"],
    CHAIN_APPEND: [*WHERE, *ENVELOPE, "assumed_epoch", "assumed_pos", "epoch", "pos", "count", "origin",
                   "outcome", "node_epoch", "accepted_epoch", "accepted_next", "seq_step"],
    CHAIN_HEARTBEATS: [*WHERE, *ENVELOPE, "epoch", "chain_length", "chain_repeats", "wedged", "pos", "stable",
                       "ttl_ms", "status", "seq_step", "clock_offset_ms"],
    ALERTS: ["alert_id", "group", "kind", "severity", "category", "status", "instance", "node",
             "event_ts_ms", "detected_ts_ms", "message", "kind_class"],
    STATE: ["group", "clock_ms", "decided", "executed_majority", "effective_horizon",
            "active_start", "pending", "active_configs"],
    NODES: ["group", "node", "member", "executed", "decided", "effective_horizon"],
}

# What each derived column means (docs/quality.md repeats this table).
DERIVED: dict[str, str] = {
    "seq_step": "seq minus the previous seq of the same (group, node, incarnation) on the same "
                "topic partition, in offset (arrival) order; NULL for the first one in the sample. "
                "Negative: the node's seq went backwards within an incarnation.",
    "clock_offset_ms": "heartbeats: the node's median, over its heartbeats in the sample, of "
                       "ts_ms minus the group's reference time when it arrived: the median of "
                       "the latest ts_ms of every node of the group seen so far on that "
                       "partition (its own included), leaving out a node not heard within the "
                       "group's last 2 x nodes heartbeats (it has left). A node whose clock runs 10 minutes ahead "
                       "shows +600000; with 3 or more nodes the others stay near 0.",
    "config_nodes": "decisions: the number of nodes a config command names (NULL otherwise).",
    "view_members": "heartbeats: the number of members in the node's reported view (NULL "
                    "without a view).",
    "members_count": "config: the number of members of an installed configuration (NULL for "
                     "a refusal).",
    "reconf_members": "qlog.decree, qlog.passed: the number of members a Reconf names (NULL for "
                      "values).",
    "leg_members": "qlog.heartbeat: the number of members of the replica's legislature.",
    "acceptors_count": "qlog.passed: the number of acceptors the proposer proposed to.",
    "acked_count": "qlog.passed: the number of acceptors whose acks it counted.",
    "acked_outside": "qlog.passed: how many of the acked nodes are not among its acceptors.",
    "ballot_n": "qlog.passed: ballot.n.",
    "ballot_proposer": "qlog.passed: ballot.proposer.",
    "old_count": "qlog.recover: the number of members when the request arrived.",
    "new_count": "qlog.recover: the number of members requested.",
    "relocated_outside": "qlog.recover: how many relocations name a node outside the requested "
                         "membership or seed it from a node outside the old one.",
    "synced_outside": "qlog.recover: how many of the acceptors it synced with are not in the "
                      "requested membership (NULL unless synced).",
    "leader_outside": "qlog.heartbeat: 1 when the leader it believes in is not one of its "
                      "members, else 0 (NULL without a leader).",
    "chain_length": "chain.view, chain.heartbeat: the number of nodes the chain names.",
    "chain_repeats": "chain.view, chain.heartbeat: how many entries of the chain name a node an "
                     "earlier entry names (0: each node once).",
    "cas_from_epoch": "chain.view: from_epoch of an installed view change (NULL for a rejected "
                      "one and for the bootstrap self-view, epoch 0 from 0, which is no CAS).",
    "suspect_self": "chain.wedge: 1 when the replica names itself as the suspect, else 0 (NULL "
                    "without a suspect).",
    "assumed_epoch": "chain.append: assumed.epoch, the epoch of the log head the run's first "
                     "append assumed.",
    "assumed_pos": "chain.append: assumed.pos, the position of that log head.",
    "node_epoch": "chain.append: the highest epoch the node stated before the run (lower seq, same "
                  "incarnation) by an installed view, a heartbeat or an accepted append, on any "
                  "topic of the sample (NULL: none).",
    "accepted_epoch": "chain.append: assumed.epoch of an accepted run (NULL for a refused one and "
                      "for a stale write, epoch < node_epoch: CHAIN_STALE_EPOCH_WRITE's).",
    "accepted_next": "chain.append: assumed.pos + 1 of an accepted run (NULL for a refused one and "
                     "for a stale write).",
    "gen_num": "generations: gen.num of a gen.state, gen_num of a gen.heartbeat (the node's "
               "current generation).",
    "last_vote_num": "generations: last_vote.num of a gen.state, last_vote_num of a gen.heartbeat.",
    "gen_members": "gen.state: the number of members of the reported generation.",
    "gen_configured": "gen.state: the number of configured nodes of the reported generation.",
    "members_outside": "gen.state: how many of the generation's members are not among its "
                       "configured nodes.",
    "kind_class": "alerts: 'KIND severity category' as the alert carries them.",
    "active_configs": "state: how many configurations of the snapshot (the active one and the "
                      "pending ones) claim the group's next instance (decided + 1): those whose "
                      "start is at most that instance and not below the active one's start. "
                      "NULL when the group has no configuration map yet.",
}


@dataclass(frozen=True)
class Spec:
    """One expectation: its GX type, arguments and why it is there (``notes``, shown in the data
    docs). ``name`` is what ``dq_results.expectation`` says: the type with its columns."""

    suite: str
    type: str
    kwargs: Mapping[str, Any]
    notes: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        k = self.kwargs
        if "column" in k:
            return [k["column"]]
        if "column_A" in k:
            return [k["column_A"], k["column_B"]]
        return list(k.get("column_list", []))

    @property
    def name(self) -> str:
        return f"{self.type}({','.join(self.columns)})"


def _p(name: str) -> dict[str, str]:
    return {"$PARAMETER": name}


def _envelope(suite: str) -> list[Spec]:
    """What every input topic's suite checks."""
    return [
        Spec(suite, "expect_column_values_to_be_between",
             {"column": "ts_ms", "min_value": MIN_TS_MS, "max_value": _p("max_ts_ms")},
             "No event time in the future (beyond quality.future_tolerance_s of the validating "
             "machine's clock) and none before 2000 (seconds or zero instead of epoch ms)."),
        Spec(suite, "expect_column_values_to_be_between", {"column": "seq_step", "min_value": 0},
             "Per node, seq never goes backwards within an incarnation (derived column "
             "seq_step; a repeat is a redelivery the monitor ignores, a gap is EVENTS_LOST)."),
    ]


def _clock(suite: str) -> Spec:
    """Heartbeats of either family: the node's clock against its group's."""
    return Spec(suite, "expect_column_values_to_be_between",
                {"column": "clock_offset_ms", "min_value": _p("min_clock_offset_ms"),
                 "max_value": _p("max_clock_offset_ms")},
                "A node's clock agrees with its group's within quality.max_clock_skew_s "
                "(derived column clock_offset_ms).")


def _online_in(suite: str) -> Spec:
    """Generations: the last generation a node was ONLINE in is at most its current one."""
    return Spec(suite, "expect_column_pair_values_a_to_be_greater_than_b",
                {"column_A": "gen_num", "column_B": "last_online_in", "or_equal": True,
                 "ignore_row_if": "either_value_is_missing"},
                "A node was last ONLINE in its current generation or an earlier one: "
                "last_online_in <= gen.num (mtm switches generation before it goes ONLINE in it; "
                "docs/families.md 2.1). A larger last_online_in is a publisher reading the wrong "
                "field or generation.")


def _nonneg(suite: str, column: str, what: str) -> Spec:
    return Spec(suite, "expect_column_values_to_be_between", {"column": column, "min_value": 0},
                f"{what} is a non-negative number (contract v1 says so too; the suite repeats it for "
                "a source that skipped parsing).")


def _in_set(suite: str, column: str, values: list[str], why: str) -> Spec:
    return Spec(suite, "expect_column_values_to_be_in_set", {"column": column, "value_set": values}, why)


def _opens_newer(suite: str) -> Spec:
    """Quorum-log: a Reconf passed in legislature l opens a later one."""
    return Spec(suite, "expect_column_pair_values_a_to_be_greater_than_b",
                {"column_A": "new_leg", "column_B": "leg", "or_equal": False,
                 "ignore_row_if": "either_value_is_missing"},
                "A Reconf passed in legislature l opens a later legislature: new_leg > leg "
                "(`Internal.hs` proposes Reconf(l + 1, ...); docs/families.md 3.1). A teleported "
                "decree (no leg) is not judged; whether a replica executes it is "
                "QLOG_OBSOLETE_DECREE_EXECUTED's business.")


def _none_outside(suite: str, column: str, why: str) -> Spec:
    return Spec(suite, "expect_column_values_to_be_between", {"column": column, "min_value": 0, "max_value": 0},
                f"{why} (derived column {column}).")


def qlog_specs() -> dict[str, list[Spec]]:
    """The quorum-log suites (docs/families.md 3.2): what a publisher gets wrong in its fields.
    Whether a decree had a quorum, a recovery was safe or a legislature went back is the rules'
    (docs/rules.md, "The quorum-log family"), not data quality."""
    return {
        QLOG_DECREE: [
            *_envelope(QLOG_DECREE),
            _nonneg(QLOG_DECREE, "num", "A decree number"),
            _in_set(QLOG_DECREE, "kind", DECREE_KINDS, "A decree holds client values or a Reconf."),
            _in_set(QLOG_DECREE, "outcome", DECREE_OUTCOMES,
                    "A replica executed the decree or (a Reconf opening no newer legislature) skipped it."),
            _opens_newer(QLOG_DECREE),
        ],
        QLOG_PASSED: [
            *_envelope(QLOG_PASSED),
            _nonneg(QLOG_PASSED, "ballot_n", "A ballot number"),
            _in_set(QLOG_PASSED, "kind", DECREE_KINDS, "A decree holds client values or a Reconf."),
            _none_outside(QLOG_PASSED, "acked_outside",
                          "A proposer counts acks of the acceptors it proposed to only: acked is within "
                          "acceptors (a majority or not is the quorum rules' business)"),
            Spec(QLOG_PASSED, "expect_column_pair_values_to_be_equal",
                 {"column_A": "node", "column_B": "ballot_proposer", "ignore_row_if": "either_value_is_missing"},
                 "The node that reports a passed decree is its ballot's proposer (BasicPaxos "
                 "`propose` returns to the proposer that owns the ballot)."),
            _opens_newer(QLOG_PASSED),
        ],
        QLOG_RECOVER: [
            *_envelope(QLOG_RECOVER),
            _nonneg(QLOG_RECOVER, "leg", "A legislature"),
            _in_set(QLOG_RECOVER, "phase", RECOVER_PHASES, "A recover request is started, synced or failed."),
            _none_outside(QLOG_RECOVER, "relocated_outside",
                          "A relocated replica is one of the requested members, seeded from one of "
                          "the old ones"),
            _none_outside(QLOG_RECOVER, "synced_outside",
                          "prl_sync runs with the acceptors of the requested membership: synced_with "
                          "is within new"),
        ],
        QLOG_HEARTBEATS: [
            *_envelope(QLOG_HEARTBEATS),
            _clock(QLOG_HEARTBEATS),
            _nonneg(QLOG_HEARTBEATS, "watermark", "A watermark"),
            _none_outside(QLOG_HEARTBEATS, "leader_outside",
                          "The leader a replica believes in is one of its members (`getLeader`: the "
                          "head of its replica list while the lease lasts)"),
        ],
    }


def _chain_once(suite: str) -> Spec:
    return _none_outside(suite, "chain_repeats",
                         "A chain is an ordered list head..tail that names each node once "
                         "(docs/families.md 1.2, duty 3; contract v1 says so too)")


def chain_specs() -> dict[str, list[Spec]]:
    """The chain suites (docs/families.md 4.2): what a publisher gets wrong in its fields. Whether
    an append or a view change was a CAS from the replica's log head, an epoch went back or two
    heads wrote is the rules' (docs/rules.md, "The chain family"): the suites check only what one
    record says of itself."""
    return {
        CHAIN_VIEW: [
            *_envelope(CHAIN_VIEW),
            _nonneg(CHAIN_VIEW, "from_epoch", "An epoch"),
            _nonneg(CHAIN_VIEW, "epoch", "An epoch"),
            _nonneg(CHAIN_VIEW, "pos", "A log position"),
            _in_set(CHAIN_VIEW, "outcome", VIEW_OUTCOMES, "A view change is installed or rejected."),
            _in_set(CHAIN_VIEW, "reason", VIEW_REASONS,
                    "A rejected view change fails as WrongEpoch, Wedged or BadSequence (views.rs, "
                    "store.rs); an installed one has no reason."),
            _chain_once(CHAIN_VIEW),
            Spec(CHAIN_VIEW, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "epoch", "column_B": "cas_from_epoch", "or_equal": False,
                  "ignore_row_if": "either_value_is_missing"},
                 "An installed view change moves to a higher epoch: epoch > from_epoch (seed "
                 "``viewChanged``: ``next_epoch <= self.current_epoch`` is WrongEpoch; derived "
                 "column cas_from_epoch). The bootstrap self-view (epoch 0 from 0) is no change "
                 "and not judged; whether from_epoch is the replica's own epoch is "
                 "CHAIN_VIEW_NOT_CAS's business."),
        ],
        CHAIN_WEDGE: [
            *_envelope(CHAIN_WEDGE),
            _nonneg(CHAIN_WEDGE, "epoch", "An epoch"),
            _in_set(CHAIN_WEDGE, "reason", WEDGE_REASONS,
                    "A replica wedges because it suspects its upstream or downstream, or on command."),
            _none_outside(CHAIN_WEDGE, "suspect_self",
                          "A replica suspects its upstream or downstream, never itself"),
        ],
        CHAIN_APPEND: [
            *_envelope(CHAIN_APPEND),
            _nonneg(CHAIN_APPEND, "assumed_epoch", "An epoch"),
            _nonneg(CHAIN_APPEND, "assumed_pos", "A log position"),
            _nonneg(CHAIN_APPEND, "epoch", "An epoch"),
            _nonneg(CHAIN_APPEND, "pos", "A log position"),
            Spec(CHAIN_APPEND, "expect_column_values_to_be_between", {"column": "count", "min_value": 1},
                 "A run holds at least one entry (contract v1 says so too; the suite repeats it for "
                 "a source that skipped parsing)."),
            _in_set(CHAIN_APPEND, "origin", APPEND_ORIGINS,
                    "A run comes from a client (at the head) or from the replica's upstream."),
            _in_set(CHAIN_APPEND, "outcome", APPEND_OUTCOMES,
                    "store.rs ``append_entry`` accepts a run or refuses it as bad_sequence, wedged "
                    "or wrong_epoch."),
            Spec(CHAIN_APPEND, "expect_column_pair_values_to_be_equal",
                 {"column_A": "pos", "column_B": "accepted_next", "ignore_row_if": "either_value_is_missing"},
                 "An accepted run starts right after the position its first append assumed: pos = "
                 "assumed.pos + 1 (store.rs ``append_entry`` writes at ``current_head.next()``; "
                 "derived column accepted_next). Whether assumed is the replica's log head is "
                 "CHAIN_APPEND_NOT_CAS's business, a run of an older epoch than the entry it "
                 "follows CHAIN_STALE_EPOCH_WRITE's (not judged here)."),
            Spec(CHAIN_APPEND, "expect_column_pair_values_to_be_equal",
                 {"column_A": "epoch", "column_B": "accepted_epoch", "ignore_row_if": "either_value_is_missing"},
                 "An accepted run of data keeps the epoch of the entry it follows: epoch = "
                 "assumed.epoch (seed: data appends keep their epoch, E' = E; a new epoch starts "
                 "with its ViewChange entry, a chain.view; derived column accepted_epoch). A run "
                 "of an older epoch is a stale write, CHAIN_STALE_EPOCH_WRITE's business (docs/"
                 "families.md 4.4: CHAIN_APPEND_NOT_CAS is 'not a stale write'): not judged."),
        ],
        CHAIN_HEARTBEATS: [
            *_envelope(CHAIN_HEARTBEATS),
            _clock(CHAIN_HEARTBEATS),
            _nonneg(CHAIN_HEARTBEATS, "epoch", "An epoch"),
            _nonneg(CHAIN_HEARTBEATS, "pos", "A log position"),
            _nonneg(CHAIN_HEARTBEATS, "stable", "The tail's acknowledged position"),
            Spec(CHAIN_HEARTBEATS, "expect_column_values_to_be_between", {"column": "ttl_ms", "min_value": 1},
                 "A lease has a positive TTL (etcd.rs grants it with a TTL; contract v1 says so too)."),
            _chain_once(CHAIN_HEARTBEATS),
        ],
    }


def specs() -> dict[str, list[Spec]]:
    """Every suite's expectations, by suite name."""
    triples = sorted(f"{k} {sev} {cat}" for k, (sev, cat) in KINDS.items())
    return {
        DECISIONS: [
            *_envelope(DECISIONS),
            Spec(DECISIONS, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "instance", "column_B": "window_base", "or_equal": True,
                  "ignore_row_if": "either_value_is_missing"},
                 "A proposer reserves instances above its last executed one: instance >= "
                 "window_base (equal only at the boot, decided at 0 with nothing executed)."),
            Spec(DECISIONS, "expect_column_values_to_be_between",
                 {"column": "config_nodes", "min_value": 1, "max_value": MAX_MEMBERS},
                 "A config command names 1 to 9 nodes (XCom's group size limit)."),
        ],
        EXECUTIONS: _envelope(EXECUTIONS),
        HEARTBEATS: [
            *_envelope(HEARTBEATS),
            _clock(HEARTBEATS),
            Spec(HEARTBEATS, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "decided", "column_B": "executed", "or_equal": True,
                  "ignore_row_if": "either_value_is_missing"},
                 "A node cannot have executed past the highest instance it knows decided."),
            Spec(HEARTBEATS, "expect_column_values_to_be_in_set",
                 {"column": "protocol", "value_set": XCOM_PROTOCOLS},
                 "XCom protocol numbers are x_1_0 (1) to x_1_9 (10); 0 (x_unknown_proto) or a "
                 "larger number is a wrong field."),
            Spec(HEARTBEATS, "expect_column_values_to_be_between",
                 {"column": "view_members", "min_value": 1, "max_value": MAX_MEMBERS},
                 "A view has 1 to 9 members."),
            Spec(HEARTBEATS, "expect_column_values_to_match_regex",
                 {"column": "version", "regex": VERSION_REGEX},
                 "The server version looks like MySQL's (major.minor.patch)."),
        ],
        CONFIG: [
            *_envelope(CONFIG),
            Spec(CONFIG, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "start", "column_B": "instance", "or_equal": True,
                  "ignore_row_if": "either_value_is_missing"},
                 "An installed configuration starts after the instance that decided it (the "
                 "boot command, decided at 0, starts at 0)."),
            Spec(CONFIG, "expect_column_values_to_be_between",
                 {"column": "members_count", "min_value": 1, "max_value": MAX_MEMBERS},
                 "An installed configuration has 1 to 9 members."),
            Spec(CONFIG, "expect_column_values_to_be_in_set",
                 {"column": "reason", "value_set": REFUSAL_REASONS},
                 "A refusal names one of the three reasons XCom logs; the contract allows free "
                 "text, which usually means an integration that drifted."),
        ],
        GEN_STATE: [
            *_envelope(GEN_STATE),
            _online_in(GEN_STATE),
            Spec(GEN_STATE, "expect_column_values_to_be_in_set",
                 {"column": "status", "value_set": GEN_STATUSES},
                 "A node's status in its generation is ONLINE, RECOVERY or DEAD (mtm's "
                 "MtmGetCurrentStatusInGen; docs/families.md 2.2)."),
            Spec(GEN_STATE, "expect_column_values_to_be_between",
                 {"column": "members_outside", "min_value": 0, "max_value": 0},
                 "A generation's members are among its configured nodes (docs/families.md 2.1; "
                 "derived column members_outside)."),
        ],
        GEN_XACT: [
            *_envelope(GEN_XACT),
            Spec(GEN_XACT, "expect_column_values_to_be_in_set",
                 {"column": "phase", "value_set": XACT_PHASES},
                 "A sampled transaction's step is prepared, committed or aborted."),
            Spec(GEN_XACT, "expect_column_values_to_be_in_set",
                 {"column": "role", "value_set": XACT_ROLES},
                 "A node takes part in a transaction as its coordinator, a replica or a resolver."),
        ],
        GEN_HEARTBEATS: [
            *_envelope(GEN_HEARTBEATS),
            _clock(GEN_HEARTBEATS),
            _online_in(GEN_HEARTBEATS),
            Spec(GEN_HEARTBEATS, "expect_column_values_to_be_in_set",
                 {"column": "node_status", "value_set": GEN_NODE_STATUSES},
                 "mtm's node status is one of online, recovery, catchup, disabled, isolated."),
        ],
        **qlog_specs(),
        **chain_specs(),
        ALERTS: [
            *(Spec(ALERTS, "expect_column_values_to_not_be_null", {"column": c},
                   f"Every alert has its {c} (docs/rules.md, \"Alert records\").")
              for c in ("alert_id", "group", "kind", "severity", "category", "status",
                        "event_ts_ms", "detected_ts_ms", "message")),
            Spec(ALERTS, "expect_column_values_to_match_regex",
                 {"column": "alert_id", "regex": ALERT_ID_REGEX},
                 "alert_id is the deterministic hash of replimon.core.alerts.alert_id."),
            Spec(ALERTS, "expect_column_values_to_be_in_set",
                 {"column": "kind_class", "value_set": triples},
                 "The kind is in the catalogue with the severity and category it gives it "
                 "(derived column kind_class)."),
            Spec(ALERTS, "expect_column_values_to_be_in_set",
                 {"column": "status", "value_set": ["firing", "resolved"]},
                 "An alert is firing or resolved."),
            Spec(ALERTS, "expect_column_value_lengths_to_be_between",
                 {"column": "message", "min_value": 1},
                 "The message is a sentence, not empty."),
            Spec(ALERTS, "expect_compound_columns_to_be_unique",
                 {"column_list": ["alert_id", "status"]},
                 "A batch emits each (alert_id, status) once."),
        ],
        STATE: [
            Spec(STATE, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "effective_horizon", "column_B": "executed_majority",
                  "or_equal": True, "ignore_row_if": "either_value_is_missing"},
                 "The group's effective horizon is at or above its executed frontier (the "
                 "majority's) where both exist (docs/rules.md, \"The configuration map\")."),
            Spec(STATE, "expect_column_values_to_be_between",
                 {"column": "active_configs", "min_value": 1, "max_value": 1},
                 "Exactly one configuration is active per group (derived column "
                 "active_configs)."),
        ],
        NODES: [
            Spec(NODES, "expect_column_pair_values_a_to_be_greater_than_b",
                 {"column_A": "effective_horizon", "column_B": "executed", "or_equal": True,
                  "ignore_row_if": "either_value_is_missing"},
                 "A node's effective horizon is at or above its executed frontier where both "
                 "exist."),
        ],
    }


_COLUMN_ARGS = ("column", "column_A", "column_B", "column_list")


def spec_of(name: str, type_: str, kwargs: Mapping[str, Any]) -> Spec:
    """The Spec of suite ``name`` with this GX type and these columns (GX results and stored
    expectations carry their type and kwargs, not our Spec)."""
    for spec in specs()[name]:
        if spec.type == type_ and all(kwargs.get(k) == spec.kwargs.get(k) for k in _COLUMN_ARGS):
            return spec
    raise KeyError(f"{name}: no expectation {type_} {dict(kwargs)}")


def spec_of_name(name: str, expectation: str) -> Spec:
    """The Spec of suite ``name`` whose ``Spec.name`` is ``expectation``."""
    for spec in specs()[name]:
        if spec.name == expectation:
            return spec
    raise KeyError(f"{name}: no expectation {expectation}")


def parameters(settings: Any, now_ms: int) -> dict[str, int]:
    """The suite parameters: bounds from the ``quality`` settings and the validating clock."""
    q = settings.quality
    skew = int(q.max_clock_skew_s * 1000)
    return {"max_ts_ms": now_ms + int(q.future_tolerance_s * 1000),
            "min_clock_offset_ms": -skew, "max_clock_offset_ms": skew}


# -- Great Expectations objects -------------------------------------------------------------------
# "replimon" in hex and a fixed tail: the seed of every expectation's id (changing it renames all).
_NAMESPACE = uuid.UUID("7265706c-696d-6f6e-0000-000000000007")


def spec_id(spec: Spec) -> str:
    """A stable id for an expectation (GX gives random ones; checked-in JSON must not churn)."""
    return str(uuid.uuid5(_NAMESPACE, f"{spec.suite}/{spec.name}"))


def suite_id(name: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, name))


def to_gx(name: str) -> Any:
    """The suite ``name`` as a ``great_expectations.ExpectationSuite`` (no ids: GX refuses
    expectations that carry one when a suite is created; ``write_project`` sets stable ids)."""
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )
    from great_expectations.expectations.metadata_types import FailureSeverity

    expectations = [
        ExpectationConfiguration(type=s.type, kwargs=dict(s.kwargs), notes=s.notes,
                                 meta=dict(s.meta), severity=FailureSeverity.WARNING).to_domain_obj()
        for s in specs()[name]]
    return gx.ExpectationSuite(name=name, expectations=expectations,
                               meta={"columns": COLUMNS[name],
                                     "derived": {c: DERIVED[c] for c in COLUMNS[name] if c in DERIVED}})
