"""A quorum-log group in the report (docs/report.md, "Timelines"): its timeline has a quorum-log
lane (each membership with the legislature that installed it, the lease renewals to the same set,
the leader along the event series) and its frontier band the group's decree frontier, written
through the job's PostgreSQL writer into real PostgreSQL and read back as the report reads any
run; an XCom group beside it keeps its configurations lane."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from replimon.producers import simulator_qlog
from replimon.replay import iso
from replimon.replay.report import render_html
from replimon.replay.report_data import RunData
from replimon.replay.report_lanes import legislature_steps
from replimon.replay.report_series import event_series
from tests.support.reports import beside_xcom, section, stored_run

pytestmark = pytest.mark.postgres

RUN = "report-qlog"


def qlog_events() -> list[dict[str, Any]]:
    """ql1: a recovery to new hosts (a membership change) and the leader's proposer wedged
    (QLOG_NO_LEADER, then a leader again); g1, an XCom group with a silent node, beside it."""
    return beside_xcom(simulator_qlog, ("qlog_recover_stuck_near_miss:ql1@10s", "qlog_no_leader:ql1@40s"), 90)


@pytest.fixture(scope="module")
def run(postgres: Any) -> Iterator[tuple[RunData, list[dict[str, Any]]]]:
    events = qlog_events()
    with stored_run(postgres.dsn, RUN, events) as (data, alerts):
        assert {"QLOG_NO_LEADER", "QLOG_RECONFIGURED"} <= {a["kind"] for a in alerts if a["group"] == "ql1"}
        yield data, events


def test_a_quorum_log_group_has_a_legislatures_lane(run: tuple[RunData, list[dict[str, Any]]]) -> None:
    data, events = run
    t = next(t for t in data.timelines if t.group == "ql1")
    assert t.family == "qlog"
    # Each membership change is a step, each same-set Reconf a renewal of the step before.
    installs = sorted(
        (a for a in t.alerts if a.kind == "QLOG_RECONFIGURED"), key=lambda a: (a.event_ms, a.instance or 0))
    members = [next(e["members"] for e in a.evidence if "members" in e) for a in installs]
    steps = legislature_steps(t)
    assert len(steps) >= 2  # the recovery moved the group to new hosts
    assert [s.members for s in steps] == [m for i, m in enumerate(members) if i == 0 or set(m) != set(members[i - 1])]
    assert sum(1 + len(s.renewals) for s in steps) == len(installs)
    assert [s.leg for s in steps] == sorted(s.leg for s in steps)

    # The event series as the report computes it: passed and the leader on every point.
    t0, t1 = events[0]["ts_ms"], events[-1]["ts_ms"]
    series = event_series(events, ["ql1", "g1"], t0, t1)
    t.series_points, t.series_nodes = series.points["ql1"], series.nodes["ql1"]
    assert all("passed" in p and "leader" in p for p in t.series_points)
    assert any(p["leader"] is None for p in t.series_points)  # the wedge: nobody holds the lease
    html = render_html(data)
    ql1 = section(html, "ql1")
    assert ">legislature</text>" in ql1 and ">leader</text>" in ql1 and ">installed</text>" not in ql1
    drawn = re.findall(r'<g class="mk cfg legstep" data-alert="(\w+)" tabindex="0" data-leg="(\d+)">', ql1)
    assert [int(leg) for _, leg in drawn] == [s.leg for s in steps]
    assert [a for a, _ in drawn] == [s.alert_id for s in steps]  # a click opens its evidence
    assert ql1.count('class="renewal"') == sum(len(s.renewals) for s in steps)
    assert 'class="decrees passed"' in ql1 and 'class="decrees majority"' in ql1
    assert '<g class="leader"><title>leader from ' in ql1 and ": none</title>" in ql1
    listed = re.search(r'<p class="legs">Legislatures: (.*?)</p>', ql1)
    assert listed and listed.group(1).startswith(
        f"leg {steps[0].leg} [{', '.join(steps[0].members)}] from {iso(steps[0].ts)}")
    assert "genstep" not in ql1 and 'class="gens"' not in ql1


def test_an_xcom_group_beside_it_keeps_its_configurations(run: tuple[RunData, list[dict[str, Any]]]) -> None:
    data, _ = run
    assert next(t for t in data.timelines if t.group == "g1").family == "xcom"
    g1 = section(render_html(data), "g1")
    assert ">installed</text>" in g1 and "legstep" not in g1 and 'class="legs"' not in g1 and "decrees" not in g1
