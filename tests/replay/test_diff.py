"""``replimon.replay.diff.diff_runs`` (docs/report.md) on the end-to-end run's tables.

A run compared with itself agrees. A second run is made from the e2e run's rows (plain SQL into
the real tables, under a run id of its own) and then changed in known ways: one alert removed,
one added, one alert's evidence changed, one wedge's resolution removed, one group's state
changed and another group's ignored bookkeeping (``snapshot.counts``) changed. The diff must
report exactly those differences, both ways round, and with a window only those in the window.
The copied runs are deleted afterwards, so other tests of the session never see them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from replimon.replay.diff import RunDiff, diff_runs
from replimon.store.reads import RunReader
from replimon.store.values import ms_from_ts
from tests.support import copy_run, delete_run

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

@pytest.fixture
def scratch_runs(e2e: Any) -> Iterator[list[str]]:
    """A list to put run ids in; each is deleted from every table at the end of the test."""
    runs: list[str] = []
    yield runs
    for run in runs:
        delete_run(e2e.settings.postgres.dsn, run)


def test_a_run_is_the_same_as_itself(e2e: Any) -> None:
    dsn, run = e2e.settings.postgres.dsn, e2e.run_id
    result = diff_runs(dsn, run, run)
    assert result.same
    assert not (result.only_a or result.only_b or result.changed or result.groups_changed)
    with psycopg.connect(dsn) as conn:
        n_alerts, n_rows = conn.execute("SELECT count(DISTINCT alert_id), count(*) FROM alerts"
                                        " WHERE run_id = %s", (run,)).fetchone() or (0, 0)
        (n_groups,) = conn.execute("SELECT count(*) FROM group_state WHERE run_id = %s",
                                   (run,)).fetchone() or (0,)
    assert n_alerts > 100 and n_groups == len(e2e.group_states)  # the e2e run: every fault's alerts
    assert result.counts["a"] == result.counts["b"] == {"alerts": n_alerts, "alert_rows": n_rows,
                                                         "groups": n_groups}
    assert result.counts["identical_alerts"] == n_alerts
    assert result.counts["identical_groups"] == n_groups
    assert result.lines()[-1] == "same: the runs agree"
    assert result.to_dict()["same"] is True
    json.dumps(result.to_dict())  # JSON-able as it is (replimon diff --json)


def test_unknown_run_raises_naming_the_known_runs(e2e: Any) -> None:
    dsn = e2e.settings.postgres.dsn
    for a, b in (("no-such-run", e2e.run_id), (e2e.run_id, "no-such-run")):
        with pytest.raises(ValueError, match=r"^no run 'no-such-run' in PostgreSQL \(known: ") as exc:
            diff_runs(dsn, a, b)
        assert e2e.run_id in str(exc.value)


def _mutate(dsn: str, run: str) -> dict[str, Any]:
    """Change run ``run`` in known ways; return what was changed."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT alert_id, kind, category, status, event_ts, evidence FROM alerts"
            " WHERE run_id = %s AND severity <> 'info' ORDER BY event_ts, alert_id, status",
            (run,)).fetchall()
        violations = [r for r in rows if r[2] == "violation" and r[5] and "offset" in r[5][0]]
        wedges = sorted({r[0] for r in rows if r[3] == "resolved"})
        removed, evidence_changed = violations[0][0], violations[1][0]
        ev = violations[1][5][0]
        where = f"{ev['topic']}/{ev['partition']}/"
        unresolved = wedges[0]
        # One alert removed (all its rows).
        conn.execute("DELETE FROM alerts WHERE run_id = %s AND alert_id = %s", (run, removed))
        # One alert added: a copy of another violation's row under a new id, an hour later.
        added = "added" + uuid.uuid4().hex[:10]
        conn.execute(
            "INSERT INTO alerts (run_id, alert_id, status, group_id, kind, severity, category,"
            " instance, node, event_ts, detected_ts, message, evidence, batch_id)"
            " SELECT run_id, %s, status, group_id, kind, severity, category, instance, node,"
            " event_ts + interval '1 hour', detected_ts + interval '1 hour', message, evidence,"
            " batch_id FROM alerts WHERE run_id = %s AND alert_id = %s",
            (added, run, violations[2][0]))
        # One alert's evidence changed: its first event read at another offset.
        conn.execute(
            "UPDATE alerts SET evidence = jsonb_set(evidence, '{0,offset}',"
            " to_jsonb((evidence->0->>'offset')::bigint + 7))"
            " WHERE run_id = %s AND alert_id = %s", (run, evidence_changed))
        # One wedge's resolution gone: same id, statuses differ.
        conn.execute("DELETE FROM alerts WHERE run_id = %s AND alert_id = %s AND status = 'resolved'",
                     (run, unresolved))
        # Things that legitimately differ between two runs and must not count: detection time
        # and message of an alert, batch ids, the monitor's counts.
        conn.execute("UPDATE alerts SET detected_ts = detected_ts + interval '3 s',"
                     " message = message || ' (later)', batch_id = batch_id + 5"
                     " WHERE run_id = %s AND alert_id <> %s", (run, added))
        groups = [g for (g,) in conn.execute(
            "SELECT group_id FROM group_state WHERE run_id = %s ORDER BY group_id", (run,))]
        changed_group, counted_group = groups[0], groups[1]
        conn.execute("UPDATE group_state SET snapshot = jsonb_set(snapshot, '{decided}',"
                     " to_jsonb((snapshot->>'decided')::bigint + 1)), batch_id = batch_id + 9"
                     " WHERE run_id = %s AND group_id = %s", (run, changed_group))
        conn.execute("UPDATE group_state SET snapshot = jsonb_set(snapshot, '{counts,events}',"
                     " to_jsonb((snapshot->'counts'->>'events')::bigint + 100))"
                     " WHERE run_id = %s AND group_id = %s", (run, counted_group))
        times = {r[0]: ms_from_ts(r[4]) for r in rows}
    return {"removed": removed, "added": added, "evidence": evidence_changed,
            "read_at": (where + str(ev["offset"]), where + str(ev["offset"] + 7)),
            "unresolved": unresolved, "group": changed_group, "times": times}


def test_differences_are_reported_exactly(e2e: Any, scratch_runs: list[str]) -> None:
    dsn, run = e2e.settings.postgres.dsn, e2e.run_id
    other = f"diff-{uuid.uuid4().hex[:8]}"
    scratch_runs.append(other)
    copy_run(dsn, run, other)
    assert diff_runs(dsn, run, other).same  # the copy agrees before it is changed
    m = _mutate(dsn, other)

    result = diff_runs(dsn, run, other)
    assert not result.same
    assert [a["alert_id"] for a in result.only_a] == [m["removed"]]
    assert [a["alert_id"] for a in result.only_b] == [m["added"]]
    changed = {c.alert_id: [d["field"] for d in c.differences] for c in result.changed}
    assert changed == {m["evidence"]: ["evidence (firing)"], m["unresolved"]: ["status"]}
    status = next(c for c in result.changed if c.alert_id == m["unresolved"]).differences[0]
    assert (status["a"], status["b"]) == (["firing", "resolved"], ["firing"])
    assert [g.group for g in result.groups_changed] == [m["group"]]
    assert [d["path"] for d in result.groups_changed[0].differences] == ["decided"]
    assert not result.groups_only_a and not result.groups_only_b
    n = len(RunReader(dsn, run).alert_ids())
    assert result.counts["a"]["alerts"] == n and result.counts["b"]["alerts"] == n
    assert result.counts["identical_alerts"] == n - 3  # removed, evidence, unresolved

    text = "\n".join(result.lines())
    for key in ("removed", "added", "evidence", "unresolved", "group"):
        assert m[key] in text, key
    # The changed evidence event, where each run read it: topic/partition/offset.
    line = next(x for x in result.lines() if m["evidence"] in x)
    assert re.search(rf"only in A: [^;]*{re.escape(m['read_at'][0])}\b", line), line
    assert re.search(rf"only in B: [^;]*{re.escape(m['read_at'][1])}\b", line), line
    assert text.endswith("different: the runs disagree")
    as_json = json.loads(json.dumps(result.to_dict()))
    assert as_json["same"] is False
    assert [a["alert_id"] for a in as_json["alerts_only_b"]] == [m["added"]]

    # The other way round: A and B swap places.
    back = diff_runs(dsn, other, run)
    assert [a["alert_id"] for a in back.only_a] == [m["added"]]
    assert [a["alert_id"] for a in back.only_b] == [m["removed"]]
    assert {c.alert_id for c in back.changed} == {m["evidence"], m["unresolved"]}


def test_window_compares_alerts_in_it_only(e2e: Any, scratch_runs: list[str]) -> None:
    dsn, run = e2e.settings.postgres.dsn, e2e.run_id
    other = f"diff-{uuid.uuid4().hex[:8]}"
    scratch_runs.append(other)
    copy_run(dsn, run, other)
    m = _mutate(dsn, other)
    t = m["times"][m["removed"]]
    # A window of one millisecond around the removed alert: that alert is all that differs
    # there (unless another changed alert has the very same event time).
    result = diff_runs(dsn, run, other, window=(t, t + 1))
    assert not result.states_compared and not result.groups_changed
    assert [a["alert_id"] for a in result.only_a] == [m["removed"]]
    assert all(m["times"].get(c.alert_id) == t for c in result.changed)
    assert any("not compared" in line for line in result.lines())
    # A window before every changed alert: the runs agree there.
    first = min(m["times"][m[k]] for k in ("removed", "evidence", "unresolved"))
    with psycopg.connect(dsn) as conn:
        (start,) = conn.execute("SELECT min(event_ts) FROM alerts WHERE run_id = %s",
                                (run,)).fetchone() or (None,)
    assert start is not None and ms_from_ts(start) < first  # the e2e run has earlier alerts
    quiet = diff_runs(dsn, run, other, window=(ms_from_ts(start), first))
    assert quiet.same and quiet.counts["a"]["alerts"] > 0
    # The CLI's open end (--from without --to) is 2**62: past what timestamps can hold.
    late = diff_runs(dsn, run, other, window=(first, 2**62))
    assert {a["alert_id"] for a in late.only_b} == {m["added"]}
    with pytest.raises(ValueError, match="empty window"):
        diff_runs(dsn, run, other, window=(t, t))


def test_result_type_is_what_the_cli_uses(e2e: Any) -> None:
    result = diff_runs(e2e.settings.postgres.dsn, e2e.run_id, e2e.run_id)
    assert isinstance(result, RunDiff)
    assert all(isinstance(line, str) for line in result.lines())
