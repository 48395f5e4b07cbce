"""The stored shape of a state bucket (``processor.py``): its name, its schema, its group lines,
and the migration of the shape before it.

One ValueState per bucket, ``STATE_NAME`` (``STATE_SCHEMA``): its groups as text, one line a
group, the time of the bucket's registered timer, the bucket count (pinned in the checkpoint) and
the input clock of its last batch. A group's line is

    name<TAB>next<TAB>floors<TAB>family<TAB>due<TAB>json

``json`` the core's ``to_state()`` (``replimon/core/codec.py``; "" for a group with no state yet),
``next`` its ``next_timer()``, ``floors`` (replay only, else "") JSON ``{topic: {partition:
offset}}`` below which its events are already in its state (docs/replay.md), ``family`` its
protocol family (``FamilyRules.name``: "xcom", "gen", "qlog" or "chain"; "" while it has no state), ``due`` the processing time its pending
live snapshot is due at ("" when its last snapshot is current). JSON text has no raw tab or
newline, nor have group ids, so a batch parses and re-serialises only the groups it touches and
the others' text passes through.

In memory a bucket is ``Groups``: name -> ``[json, next, floors, family]``, plus ``due`` as a
fifth item when a snapshot is pending.

Why the family is a field of the line and not always a key of the JSON: the JSON is the core's
codec shape, which is also what checkpoint records carry to ``monitor.state`` and replays read
back (an XCom group's state has no ``family`` key, as every earlier version wrote); a field costs
a few bytes a line and no parsing, so the family of every group of a bucket can be read (here and
with ``spark.read.format("statestore")``) without decoding any group's state.

The shape before (``LEGACY_STATE_NAME``, ``monitor_v5``) had no family field
(``name<TAB>next<TAB>floors<TAB>[due<TAB>]json``). A checkpoint whose last run kept that state
(``legacy_in``) is migrated bucket by bucket the first time a bucket is read
(``migrate_text``): each line gains its group's family (the ``family`` key of its JSON, else
xcom), everything else, the registered timer included, carries over (docs/streaming.md, "State,
timers and time").
"""

from __future__ import annotations

import json
import os
from typing import Any

from replimon.core.codec import family_of_state

STATE_NAME = "monitor_v6"
LEGACY_STATE_NAME = "monitor_v5"
STATE_SCHEMA = "groups STRING, timer LONG, buckets INT, clock_batch LONG, clock LONG"

Groups = dict[str, list[Any]]


def parse_groups(text: str) -> Groups:
    groups: Groups = {}
    for line in text.split("\n") if text else ():
        name, when, floors, family, due, kept = line.split("\t", 5)
        groups[name] = [kept, int(when) if when else None, floors, family]
        if due:
            groups[name].append(int(due))
    return groups


def format_groups(groups: Groups) -> str:
    """``parse_groups`` read back. A group's list may stop after its floors (a group reset to no
    state: ``data_loss.py``): its family is then ""."""
    return "\n".join(
        f"{name}\t{'' if g[1] is None else g[1]}\t{g[2]}\t{g[3] if len(g) > 3 else ''}\t"
        f"{g[4] if len(g) > 4 and g[4] is not None else ''}\t{g[0]}"
        for name, g in groups.items())


def snapshot_due(kept: list[Any]) -> int | None:
    """When a group's pending snapshot is due (processing time), or None: its last one is current."""
    return kept[4] if len(kept) > 4 else None


def migrate_text(text: str) -> str:
    """A ``monitor_v5`` bucket's groups in today's shape: each group gains its family, read from its
    state (XCom's has no ``family`` key); a group without state has none ("")."""
    groups: Groups = {}
    for line in text.split("\n") if text else ():
        name, when, floors, kept = line.split("\t", 3)
        due = None
        if "\t" in kept:  # "due<TAB>json": JSON text never holds a raw tab
            snap, kept = kept.split("\t", 1)
            due = int(snap)
        family = family_of_state(json.loads(kept)) if kept else ""
        groups[name] = [kept, int(when) if when else None, floors, family]
        if due is not None:
            groups[name].append(due)
    return format_groups(groups)


def migrate_value(value: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``monitor_v5`` bucket value in today's shape (the timer, count and clock unchanged)."""
    return (migrate_text(value[0] or ""), *tuple(value)[1:])


def legacy_in(spark: Any, checkpoint: str) -> str | None:
    """``LEGACY_STATE_NAME`` when the checkpoint's operator still holds state under it (a checkpoint
    written before the family field, not yet fully migrated), else None.

    Spark 4.3 lets a transformWithState query add and drop state variables between runs of one
    checkpoint (avro encoding, which the session sets): the variables of the last run are in the
    operator's metadata (``state-metadata``), and a dropped one's rows are gone from then on. So the
    old variable is registered (and read) only while it still holds a bucket that was not read
    since the upgrade; a new checkpoint, or a migrated one, pays nothing for it."""
    location = checkpoint.removeprefix("file://")
    if "://" not in location and not os.path.isdir(os.path.join(location, "state")):
        return None  # a new checkpoint: no state yet
    try:
        meta = spark.read.format("state-metadata").load(checkpoint).collect()
    except Exception:  # noqa: BLE001 - no operator metadata: nothing to migrate
        return None
    names: set[str | None] = set()
    for row in meta:
        props = json.loads(row.operatorProperties or "{}")
        names.update(v.get("stateName") for v in props.get("stateVariables", []))
    if LEGACY_STATE_NAME not in names:
        return None
    left = (spark.read.format("statestore").option("stateVarName", LEGACY_STATE_NAME).load(checkpoint)
            .where("value IS NOT NULL").limit(1).count())
    return LEGACY_STATE_NAME if left else None


def pinned_buckets(spark: Any, checkpoint: str) -> int | None:
    """The bucket count the checkpoint's state was written with (None: a new checkpoint, or no
    bucket stored yet). Groups are shuffled to their bucket's key before the operator reads the
    state, so a restarted query must bucket as the checkpoint did: ``streaming.runner`` takes this
    count over the settings' (as Spark keeps a checkpoint's ``spark.sql.shuffle.partitions``)."""
    location = checkpoint.removeprefix("file://")
    if "://" not in location and not os.path.isdir(os.path.join(location, "state")):
        return None
    for name in (STATE_NAME, LEGACY_STATE_NAME):
        try:
            rows = (spark.read.format("statestore").option("stateVarName", name).load(checkpoint)
                    .where("value IS NOT NULL").select("value.buckets").limit(1).collect())
        except Exception:  # noqa: BLE001 - no such state variable in this checkpoint
            continue
        if rows and rows[0][0] is not None:
            return int(rows[0][0])
    return None
