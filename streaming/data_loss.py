"""Data loss on the input topics: the groups it cuts are flagged and restart as an incomplete
history (docs/operations.md, "Data loss").

The source (``dataLossMarkers``, ``streaming/sources/kafka/markers.py``) puts a marker row in
the micro-batch that sees a partition's offsets move back (a topic re-created, a broker restarted
without its data) or records deleted from its front before they were read (retention); the decode stage sends each marker to every state bucket under `LOSS_KEY`
(``decode.py``); here the processor turns them, per bucket, into:

* one DATA_LOST alert per group that has state (a data alert naming the partitions, the offset
  the job had read up to and the new log's offsets), with the markers as its evidence;
* a resolved record for each wedge the group had open ("the history was cut"): the state that
  held it is gone, and a wedge left ``firing`` would never be closed;
* the group's saved state dropped (its floors kept): its next event starts a fresh monitor,
  which raises INCOMPLETE_HISTORY as any monitor that joins a history mid-stream does, and
  judges only what it sees from there. So state from before the loss neither raises alerts on
  events it never saw the predecessors of, nor hides faults behind stale frontiers.

Which groups: all that have state. A partition of a replica topic carries the events of many
groups (keyed by group), every group publishes to every replica topic, and the losses this
handles move every partition of a topic or of the broker at once; the state does not keep which
partitions a group's events came from. A single partition moved back therefore also resets the
groups of the topic's other partitions (their history restarts: nothing false, but a fault that
spans the reset is judged on the part after it only).

Determinism: the markers come from the batch's offsets, the alert id from the group and the
markers, so a re-run batch emits the same records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from replimon.core import GroupMonitor
from replimon.core.alerts import FIRING, RESOLVED, Alert, alert_id
from replimon.streaming.rows import unpack
from replimon.streaming.sources.kafka.markers import RECREATED, TRUNCATED

LOSS_KEY = "#data-loss"  # never a group id (contract ids are [A-Za-z0-9._:-])
KIND = "DATA_LOST"


def describe(loss: dict[str, Any]) -> str:
    """One marker in words."""
    if loss.get("cause") == TRUNCATED:
        return (f"{loss['topic']}-{loss['partition']} lost offsets {loss['from']}.."
                f"{loss['to'] - 1} (deleted before they were read: retention or deleted records; "
                f"read on from {loss['earliest']})")
    if loss.get("cause") == RECREATED:
        return (f"{loss['topic']}-{loss['partition']} is a new log already past offset "
                f"{loss['from']} (offsets {loss['from']}.. of the old log were never read; the "
                f"new log is read from {loss['earliest']})")
    return (f"{loss['topic']}-{loss['partition']} moved back from offset {loss['from']} to "
            f"{loss['to']} (offsets {loss['from']}.. of the old log were never read; the new log "
            f"is read from {loss['earliest']})")


def lost_alerts(gm: GroupMonitor, losses: list[dict[str, Any]], now: int) -> list[Alert]:
    """The records for one group whose history the ``losses`` cut: its open wedges resolved,
    then one DATA_LOST."""
    at = gm.clock if gm.clock >= 0 else now
    out = [Alert(a.alert_id, a.group, a.kind, RESOLVED, at, now,
                 "Resolved: the group's history was cut by data loss on the input (DATA_LOST); "
                 "its state restarts", a.instance, a.node, a.evidence)
           for _cond, a in sorted(gm.open.items())]
    key = ";".join(f"{x['topic']}:{x['partition']}:{x['from']}:{x['to']}" for x in losses)
    message = ("events of this group may be lost: " + "; ".join(describe(x) for x in losses)
               + ". The group's state restarts as an incomplete history")
    out.append(Alert(alert_id(gm.group, KIND, key), gm.group, KIND, FIRING, at, now, message,
                     evidence=[dict(x) for x in losses]))
    return out


def take(logic: Any, state: Any, rows: Iterable[tuple[str, bytes]],
         now: int) -> tuple[list[tuple[str, bytes]], list[tuple[Any, ...]]]:
    """Split a bucket's rows into the other rows and, when markers are among them, the output
    rows of the reset (``MonitorLogic``'s ``load``/``save``/``rows`` on ``state``); the reset
    is saved before the batch's events are fed."""
    rest: list[tuple[str, bytes]] = []
    losses: list[dict[str, Any]] = []
    for group, items in rows:
        if group == LOSS_KEY:
            losses.append(unpack(items))
        else:
            rest.append((group, items))
    if not losses:
        return rest, []
    losses.sort(key=lambda x: (x["topic"], x["partition"], x["from"], x["to"]))
    uniq = [x for i, x in enumerate(losses) if i == 0 or x != losses[i - 1]]  # one per Arrow batch
    groups, timer, clock = logic.load(state)
    out: list[tuple[Any, ...]] = []
    for name in sorted(groups):
        kept = groups[name]
        if not kept[0]:
            continue
        gm = GroupMonitor.from_state(json.loads(kept[0]), logic.limits)
        out.extend(logic.rows(gm, lost_alerts(gm, uniq, now), snapshot=False))
        groups[name] = ["", None, kept[2]]
    if out:  # a bucket without state stays without
        logic.save(state, groups, timer, clock)
    return rest, out
