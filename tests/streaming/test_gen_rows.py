"""A generations group's snapshot makes the PostgreSQL sink's rows as an XCom group's does (its
family and generation are in the snapshot's JSON; docs/families.md, "Status")."""

from __future__ import annotations

from replimon.core import Monitor
from replimon.streaming.sinks.postgres import _group_row, _node_rows, _node_series_rows, _series_row
from tests.core.test_gen_simulated import sim_events


def test_a_generations_snapshot_makes_every_row() -> None:
    mon = Monitor()
    mon.run(sim_events(None))
    snap = mon.groups["pg1"].snapshot()
    group = _group_row(snap, "run", 1)
    assert group[1] == "pg1" and group[5] is None and group[6] is None  # no decided, no XCom map
    assert group[-2].obj["family"] == "gen" and group[-2].obj["config"]["num"] >= 1
    nodes = list(_node_rows(snap, "run", 1))
    assert [(n[2], n[3]) for n in nodes] == [("n1", True), ("n2", True), ("n3", True)]
    assert _series_row(snap, "run") is not None
    assert len(list(_node_series_rows(snap, "run"))) == 3
