"""Group detail's rows for the families beside XCom (docs/families.md 5.2, docs/dashboards.md,
"Families"): the generations row, the quorum-log row and the chain row.

Each row's queries read the group's state and time series like the rest of Group detail, and
return rows only for a group of their family and when the ``$family`` variable includes it, so a
group of another family shows empty panels, never another family's values.
"""

from __future__ import annotations

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.models import dashboard as model

from replimon.dashboards import sql
from replimon.dashboards.build import (
    GREEN,
    ORANGE,
    RED,
    stat_panel,
    steps,
    table_panel,
    timeseries_panel,
)
from replimon.dashboards.sql import FAMILY, GROUP, RUN

WHERE = f"run_id = {RUN} AND group_id = {GROUP}"  # latest-state tables of the group


def family_where(family: str) -> str:
    """The group's latest state, only for a group of ``family`` when the variable includes it."""
    return f"{WHERE} AND family = '{family}' AND '{family}' IN ({FAMILY})"


def config_version(family: str, version: str, members: str) -> str:
    """The group's config_version and member count over the range, named for ``family``."""
    return f"""SELECT t.ts AS "time", t.config_version AS {version},
       t.members AS "{members}"
FROM group_timeseries t
JOIN group_state g ON g.run_id = t.run_id AND g.group_id = t.group_id
WHERE t.run_id = {RUN} AND t.group_id = {GROUP} AND $__timeFilter(t.ts)
  AND g.family = '{family}' AND '{family}' IN ({FAMILY})
ORDER BY 1"""


def flag_stat(title: str, flag: str, where: str, description: str, text: str) -> cogbuilder.Builder[model.Panel]:
    """A stat of a boolean of the group's state (``flag``, SQL): "no" green, ``text`` red."""
    return stat_panel(title, f"SELECT CASE WHEN {flag} THEN 1 ELSE 0 END AS {text} FROM group_state WHERE {where}",
                      description, thresholds=steps(GREEN, (1, RED)),
                      mappings=[model.ValueMap(options={
                          "0": model.ValueMappingResult(text="no", color=GREEN, index=0),
                          "1": model.ValueMappingResult(text=text, color=RED, index=1)})], w=6)


def optional_stat(title: str, value: str, alias: str, none: int, where: str,
                  description: str) -> cogbuilder.Builder[model.Panel]:
    """A stat of a number of the group's state that may be absent (``value``, SQL): absent reads
    ``none`` and shows "none" (green), any value above it orange."""
    return stat_panel(title, f"SELECT coalesce({value}, {none}) AS {alias} FROM group_state WHERE {where}",
                      description, thresholds=steps(GREEN, (none + 1, ORANGE)),
                      mappings=[model.ValueMap(options={
                          str(none): model.ValueMappingResult(text="none", color=GREEN, index=0)})], w=6)


# -- the generations family (docs/families.md 5.2): rows only for a gen group and when the
# family variable includes 'gen'.
GEN_WHERE = family_where("gen")

GEN_NODES = f"""SELECT n.node_id AS node, n.member AS configured, n.status AS "status in gen",
       (n.family_state->>'gen')::bigint AS gen,
       n.family_state->>'node_status' AS node_status,
       (n.family_state->>'last_online_in')::bigint AS "last online in",
       (n.family_state->>'last_vote')::bigint AS "last vote",
       n.silent, n.last_ts AS "last event"
FROM node_state n
JOIN group_state g ON g.run_id = n.run_id AND g.group_id = n.group_id
WHERE n.run_id = {RUN} AND n.group_id = {GROUP} AND g.family = 'gen' AND 'gen' IN ({FAMILY})
ORDER BY n.node_id"""

def gen_panels() -> list[cogbuilder.Builder[model.Panel]]:
    """The generations row: where the group's current generation stands, its number over time,
    each node's view."""
    return [
        stat_panel("Generation", f"SELECT (config->>'num')::bigint AS generation FROM group_state WHERE {GEN_WHERE}",
                   "Current generation (the highest one a node switched to; latest state).", w=6),
        stat_panel("Generation members / configured",
                   f"""SELECT jsonb_array_length(config->'members') AS members,
       jsonb_array_length(config->'configured') AS configured
FROM group_state WHERE {GEN_WHERE}""",
                   "Members of the current generation, and the nodes configured (latest state).", w=6),
        flag_stat("Minority generation", "(config->>'minority')::boolean", GEN_WHERE,
                  "Whether the current generation has fewer members than a majority of the "
                  "configured nodes: it cannot commit.", "minority"),
        optional_stat("Open election", "(config->>'election')::bigint", "election", 0, GEN_WHERE,
                      "The generation a majority voted for that the nodes have not switched to yet "
                      "(none: no election open)."),
        timeseries_panel("Generation over time", [sql.series(config_version("gen", "generation", "members of the generation"))],
                         "The current generation number at each snapshot "
                         "(group_timeseries.config_version): each step is a switch to a new "
                         "generation; and how many members it has.", unit="none", w=12),
        table_panel("Generation nodes now", GEN_NODES,
                    "Each node (latest state): configured or not, its status in its generation "
                    "(ONLINE, RECOVERY, DEAD), its generation, mtm's node_status, the generation "
                    "it was last online in and its last vote.", w=12),
    ]


# -- the quorum-log family (docs/families.md 3 and 5.2): rows only for a qlog group and when the
# family variable includes 'qlog'. group_state.config is the snapshot's: legislature, members in
# order ({id, leader}: the head is the preferred leader, ``leader`` true for a member that named
# itself leader), passed and executed decree frontiers, open recover episodes [node, leg, new].
QLOG_WHERE = family_where("qlog")

# A node's position in the legislature's ordered list (1: the preferred leader), NULL outside it.
_POSITION = """(SELECT m.i FROM jsonb_array_elements(g.config->'members') WITH ORDINALITY m(v, i)
        WHERE m.v->>'id' = n.node_id)"""

QLOG_NODES = f"""SELECT n.node_id AS node, {_POSITION} AS position,
       CASE WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(g.config->'members') m
                         WHERE m->>'id' = n.node_id AND (m->>'leader')::boolean)
            THEN 'leader' ELSE '' END AS leader,
       n.member AS "in legislature",
       (n.family_state->>'legislature')::bigint AS legislature,
       (n.family_state->>'watermark')::bigint AS watermark,
       n.executed,
       n.family_state->>'leader' AS "believes leader",
       n.status, n.silent, n.last_ts AS "last event"
FROM node_state n
JOIN group_state g ON g.run_id = n.run_id AND g.group_id = n.group_id
WHERE n.run_id = {RUN} AND n.group_id = {GROUP} AND g.family = 'qlog' AND 'qlog' IN ({FAMILY})
ORDER BY 2 NULLS LAST, n.node_id"""

QLOG_RECOVERIES = f"""SELECT r->>0 AS node, (r->>1)::bigint AS "from legislature",
       (SELECT string_agg(x, ', ') FROM jsonb_array_elements_text(r->2) x) AS "new members"
FROM group_state, jsonb_array_elements(config->'recovering') r
WHERE {QLOG_WHERE}
ORDER BY 1, 2"""


def qlog_panels() -> list[cogbuilder.Builder[model.Panel]]:
    """The quorum-log row: the legislature in force and its leader, the decree frontier, open
    recoveries, the legislature over time, each replica's view."""
    return [
        stat_panel("Legislature", f"SELECT (config->>'legislature')::bigint AS legislature FROM group_state WHERE {QLOG_WHERE}",
                   "The legislature in force (the highest one a replica executed the Reconf "
                   "opening; latest state).", w=6),
        stat_panel("Legislature members / leaders",
                   f"""SELECT jsonb_array_length(config->'members') AS members,
       (SELECT count(*) FROM jsonb_array_elements(config->'members') m
        WHERE (m->>'leader')::boolean) AS leaders
FROM group_state WHERE {QLOG_WHERE}""",
                   "Members of the legislature in force, and how many of them name themselves "
                   "leader in their heartbeats (0 for long: QLOG_NO_LEADER).", w=6),
        stat_panel("Decree frontier",
                   f"""SELECT (config->>'passed')::bigint AS passed,
       (config->>'executed')::bigint AS executed,
       executed_majority AS "executed by a majority"
FROM group_state WHERE {QLOG_WHERE}""",
                   "The highest decree passed, the highest contiguous decree executed by a "
                   "replica, and the decree a majority of the legislature executed (latest state).",
                   unit="none", w=6),
        stat_panel("Open recoveries",
                   f"SELECT jsonb_array_length(coalesce(config->'recovering', '[]')) AS recoveries"
                   f" FROM group_state WHERE {QLOG_WHERE}",
                   "Recover requests started whose Reconf to the new membership is not executed "
                   "yet (60 s: QLOG_RECOVER_STUCK).", thresholds=steps(GREEN, (1, ORANGE)), w=6),
        timeseries_panel("Legislature over time",
                         [sql.series(config_version("qlog", "legislature", "members of the legislature"))],
                         "The legislature in force at each snapshot (group_timeseries."
                         "config_version): each step is an executed Reconf (a lease renewal by a "
                         "same-set Reconf is a step too); and how many members it has.",
                         unit="none", w=12),
        table_panel("Open recoveries now", QLOG_RECOVERIES,
                    "Each open recover episode (latest state): the replica serving the request, "
                    "its legislature when the request came and the requested membership.",
                    w=12, coloured=()),
        table_panel("Quorum-log replicas now", QLOG_NODES,
                    "Each replica (latest state): its position in the legislature's ordered list "
                    "(1: the preferred leader), leader when it names itself leader, whether it is "
                    "a member, the legislature it is at, its watermark (the next decree it will "
                    "execute), its executed frontier, the leader it believes in.", w=24,
                    coloured=()),
    ]


# -- the chain family (docs/families.md 4 and 5.2): rows only for a chain group and when the
# family variable includes 'chain'. group_state.config is the snapshot's: epoch, chain (head..tail),
# head, tail, wedged (the current view is), wedged_epoch (the highest open wedge), view_changed_ts_ms;
# node_state.family_state: epoch, pos, stable, wedged, wedged_epoch, lease_remaining_ms.
CHAIN_WHERE = family_where("chain")


def chain_text(chain: str) -> str:
    """The chain ``chain`` (a JSON array, head first) as text, head..tail, the head marked."""
    return (f"(SELECT string_agg(x.c || CASE WHEN x.i = 1 THEN ' (head)' ELSE '' END, ' > ' ORDER BY x.i)\n"
            f"        FROM jsonb_array_elements_text({chain}) WITH ORDINALITY x(c, i))")


# A node's position in the chain (1: the head), NULL outside it.
_CHAIN_POSITION = """(SELECT x.i FROM jsonb_array_elements_text(g.config->'chain') WITH ORDINALITY x(c, i)
        WHERE x.c = n.node_id)"""

CHAIN_NOW = f"""SELECT {chain_text("config->'chain'")} AS chain,
       config->>'head' AS head, config->>'tail' AS tail
FROM group_state WHERE {CHAIN_WHERE}"""

_CHAIN_NODES_FROM = f"""FROM node_state n
JOIN group_state g ON g.run_id = n.run_id AND g.group_id = n.group_id
WHERE n.run_id = {RUN} AND n.group_id = {GROUP} AND g.family = 'chain' AND 'chain' IN ({FAMILY})"""

CHAIN_LEASES = f"""SELECT n.node_id AS member, {_CHAIN_POSITION} AS position,
       (n.family_state->>'lease_remaining_ms')::bigint AS "lease remaining (ms)"
{_CHAIN_NODES_FROM} AND n.member
ORDER BY 2, 1"""

CHAIN_NODES = f"""SELECT n.node_id AS node, {_CHAIN_POSITION} AS position,
       CASE WHEN n.node_id = g.config->>'head' THEN 'head'
            WHEN n.node_id = g.config->>'tail' THEN 'tail' ELSE '' END AS role,
       n.member AS "in chain",
       (n.family_state->>'epoch')::bigint AS epoch,
       (n.family_state->>'pos')::bigint AS pos,
       (n.family_state->>'stable')::bigint AS stable,
       (n.family_state->>'wedged')::boolean AS wedged,
       (n.family_state->>'wedged_epoch')::bigint AS "wedged epoch",
       (n.family_state->>'lease_remaining_ms')::bigint AS "lease remaining (ms)",
       n.status, n.silent, n.last_ts AS "last event"
{_CHAIN_NODES_FROM}
ORDER BY 2 NULLS LAST, n.node_id"""


def chain_panels() -> list[cogbuilder.Builder[model.Panel]]:
    """The chain row: the epoch in force, its chain head..tail, whether it is wedged, each member's
    lease, the epoch over time, each replica's view."""
    return [
        stat_panel("Epoch", f"SELECT (config->>'epoch')::bigint AS epoch FROM group_state WHERE {CHAIN_WHERE}",
                   "The epoch of the view in force (the highest one a replica installed; latest state).", w=6),
        stat_panel("Chain length",
                   f"SELECT jsonb_array_length(config->'chain') AS replicas FROM group_state WHERE {CHAIN_WHERE}",
                   "How many replicas the chain of the view in force holds (latest state).", w=6),
        flag_stat("Wedged", "(config->>'wedged')::boolean", CHAIN_WHERE,
                  "Whether a replica wedged the view in force: the chain accepts no writes until a "
                  "view with a higher epoch is installed (20 s: CHAIN_WEDGE_NOT_REPLACED).", "wedged"),
        optional_stat("Wedged epoch", "(config->>'wedged_epoch')::bigint", '"wedged epoch"', -1, CHAIN_WHERE,
                      "The highest epoch a replica wedged that no higher view has replaced yet (none: "
                      "no open wedge)."),
        table_panel("Chain now", CHAIN_NOW,
                    "The chain of the view in force, head..tail with the head marked (latest "
                    "state): client writes go to the head, the tail acknowledges.", w=12, h=4, coloured=()),
        table_panel("Leases now", CHAIN_LEASES,
                    "Each member of the chain in chain order (1: the head) and how long its "
                    "view-manager lease has left at the group's clock (latest state; negative: "
                    "expired, CHAIN_LEASE_EXPIRED, then CHAIN_VIEW_STALE if no view leaves it out).",
                    w=12, h=4, coloured=()),
        timeseries_panel("Epoch over time",
                         [sql.series(config_version("chain", "epoch", "members of the chain"))],
                         "The epoch in force at each snapshot (group_timeseries.config_version): "
                         "each step is an installed view (a re-view of the same chain is a step "
                         "too; epochs grow, not by 1); and how many replicas its chain holds.",
                         unit="none", w=12),
        table_panel("Chain replicas now", CHAIN_NODES,
                    "Each replica (latest state): its position in the chain (1: the head), head or "
                    "tail, whether it is in the chain in force, the epoch it is in, its last log "
                    "position, the tail's acknowledged position where it knows it (stable), "
                    "whether it is wedged and which epoch, its lease remaining.", w=12,
                    coloured=()),
    ]


# Panel titles of each family's panels (the tests expand them with a group of that family).
FAMILY_PANELS = {"gen": ("Generation", "Generation members / configured", "Minority generation",
                         "Open election", "Generation over time", "Generation nodes now"),
                 "qlog": ("Legislature", "Legislature members / leaders", "Decree frontier",
                          "Open recoveries", "Legislature over time", "Open recoveries now",
                          "Quorum-log replicas now"),
                 "chain": ("Epoch", "Chain length", "Wedged", "Wedged epoch", "Chain now", "Leases now",
                           "Epoch over time", "Chain replicas now")}
