"""A chain group in the report (docs/report.md, "Timelines"): its timeline has a chain lane (each
epoch's view as a segment labelled ``epoch N · head..tail`` from its CHAIN_VIEW_INSTALLED event,
the stretches its epoch was wedged, the wedge no view replaced and the lease expiries, clickable
to their evidence), listed under the picture too, written through the job's PostgreSQL writer
into real PostgreSQL and read back as the report reads any run; an XCom group beside it keeps its
configurations lane."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from replimon.producers import simulator_chain
from replimon.replay import iso
from replimon.replay.report import render_html
from replimon.replay.report_chain import view_steps, wedged_spans
from replimon.replay.report_data import RunData
from replimon.replay.report_series import event_series
from tests.support.reports import beside_xcom, section, stored_run

pytestmark = pytest.mark.postgres

RUN = "report-chain"


def chain_events() -> list[dict[str, Any]]:
    """ch1: a wedge the stalled view manager does not replace for 20 s (CHAIN_WEDGE_NOT_REPLACED,
    then resolved by the next epoch), then the tail's heartbeater blocked 5 s
    (CHAIN_LEASE_EXPIRED, resolved by its renewal), replicas replaced under new ids (new epochs);
    g1, an XCom group with a silent node, beside it."""
    return beside_xcom(simulator_chain, ("chain_wedge_not_replaced:ch1@15s", "chain_lease_expired:ch1@60s"), 100)


@pytest.fixture(scope="module")
def run(postgres: Any) -> Iterator[tuple[RunData, list[dict[str, Any]]]]:
    events = chain_events()
    with stored_run(postgres.dsn, RUN, events) as (data, alerts):
        kinds = {a["kind"] for a in alerts if a["group"] == "ch1"}
        assert {"CHAIN_WEDGE_NOT_REPLACED", "CHAIN_LEASE_EXPIRED", "CHAIN_VIEW_INSTALLED"} <= kinds
        yield data, events


def test_a_chain_group_has_a_views_lane(run: tuple[RunData, list[dict[str, Any]]]) -> None:
    data, events = run
    t = next(t for t in data.timelines if t.group == "ch1")
    assert t.family == "chain"
    # Each epoch installed is a step, in time and epoch order, its chain from the install's evidence.
    installs = sorted((a for a in t.alerts if a.kind == "CHAIN_VIEW_INSTALLED"), key=lambda a: a.event_ms)
    steps = view_steps(t)
    assert len(steps) >= 3 and [s.alert_id for s in steps] == [a.alert_id for a in installs if a.instance]
    assert [s.epoch for s in steps] == sorted({s.epoch for s in steps})
    assert all(2 <= len(s.chain) <= 3 for s in steps)  # a replica dropped, then its replacement at the tail

    # The event series as the report computes it: whether the epoch is wedged on every point.
    t0, t1 = events[0]["ts_ms"], events[-1]["ts_ms"]
    series = event_series(events, ["ch1", "g1"], t0, t1)
    t.series_points, t.series_nodes = series.points["ch1"], series.nodes["ch1"]
    assert all("wedged" in p for p in t.series_points)
    wedge = next(a for a in t.alerts if a.kind == "CHAIN_WEDGE_NOT_REPLACED" and a.status == "firing")
    replaced = next(a for a in t.alerts if a.kind == "CHAIN_WEDGE_NOT_REPLACED" and a.status == "resolved")
    spans = wedged_spans(t.series_points)
    assert any(w.ts <= wedge.event_ms + 1_000 and w.end is not None and w.end >= replaced.event_ms
               for w in spans), (spans, wedge.event_ms, replaced.event_ms)

    html = render_html(data)
    ch1 = section(html, "ch1")
    assert ">view</text>" in ch1 and ">wedge / lease</text>" in ch1 and ">installed</text>" not in ch1
    drawn = re.findall(r'<g class="mk cfg viewstep" data-alert="(\w+)" tabindex="0" data-epoch="(\d+)">', ch1)
    assert [int(e) for _, e in drawn] == [s.epoch for s in steps]
    assert [a for a, _ in drawn] == [s.alert_id for s in steps]  # a click opens its evidence
    labels = [f"epoch {s.epoch} · {s.chain[0]}..{s.chain[-1]}" for s in steps]
    assert any(f">{label}</text>" in ch1 for label in labels)
    assert f'<g class="mk wedge" data-alert="{wedge.alert_id}"' in ch1
    lease = next(a for a in t.alerts if a.kind == "CHAIN_LEASE_EXPIRED")
    assert f'<g class="mk lease" data-alert="{lease.alert_id}"' in ch1
    assert ch1.count('<rect class="wedged"') == len(spans) >= 1
    listed = re.search(r'<p class="views">Views: (.*?)</p>', ch1)
    assert listed and listed.group(1).startswith(
        f"epoch {steps[0].epoch} [{' &gt; '.join(steps[0].chain)}] from {iso(steps[0].ts)}")
    assert f"CHAIN_WEDGE_NOT_REPLACED epoch {wedge.instance} from {iso(wedge.event_ms)} to " \
           f"{iso(replaced.event_ms)}" in listed.group(1)
    assert f"CHAIN_LEASE_EXPIRED {lease.node} from {iso(lease.event_ms)}" in listed.group(1)
    assert "genstep" not in ch1 and 'class="gens"' not in ch1 and "legstep" not in ch1


def test_an_xcom_group_beside_it_keeps_its_configurations(run: tuple[RunData, list[dict[str, Any]]]) -> None:
    data, _ = run
    assert next(t for t in data.timelines if t.group == "g1").family == "xcom"
    g1 = section(render_html(data), "g1")
    assert ">installed</text>" in g1 and "viewstep" not in g1 and 'class="views"' not in g1
