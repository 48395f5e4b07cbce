"""Live = check (docs/streaming.md, "Live = check, and the tail"): the same events through the
live Spark job and through ``replimon check`` give the same alert ids
(``tests/streaming/test_job.py`` shows it for replay).

The live query (``timeMode="ProcessingTime"``, 1 s processing-time trigger) runs in this process
on the session's Spark; the simulator publishes a trace with six kinds of fault in real time
through the product's publisher (events stamped with the wall clock, as replicas would); the same
events, written to a JSONL file, go through the ``replimon check`` CLI with the same config file.

The tail. ``check`` has no clock beyond the last event it reads, so it never says a group went
silent after the end of its input; live mode does, from processing time, GROUP_SILENT for every
group ``group_silent + skew`` after its last event (docs/rules.md, "GROUP_SILENT": it fires with
no input arriving at all). Those are the only alerts live may add, and their ids are known in advance (the group and
its last event time), so the test waits for them and asserts live = check + exactly these, each
detected no earlier than its deadline. Mid-trace, check fires group g3's GROUP_SILENT (its fault:
25 s without an event) because the other groups' events move its clock past the deadline; live
fires the same id from processing time, provided a micro-batch starts between the deadline and the
end of the silence. ``group_silent_s`` is 11 s here instead of 15 so that window is 12 s wide, not
8 (a loaded machine can take 8 s a batch). The other way round, a batch reads everything published
before it starts and its timers run at its start time, so only a batch slower than 13 s (group
silence + skew) could report a silence that is not there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replimon.core.alerts import alert_id
from replimon.producers.publisher import Publisher
from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from tests.support import eventually, job_config

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(600)]

SECONDS = 35
FAULTS = ("node_silent:g1@3s", "group_silent:g3@3s", "divergent_decision:g2@5s",
          "events_lost:g2@12s", "beyond_horizon:g1@18s", "execution_regression:g2@20s")
GROUP_SILENT_S = 11
CHECKPOINT_S = 10  # checkpoint records every 10 s of event time, for the replay at the end
REPLAY_FROM_S, REPLAY_TO_S = 14, 30  # a window of the live run, replayed from those records


def check_cli(config: Path, trace: Path, cwd: Path) -> Counter[tuple[str, str]]:
    """(alert_id, status) of every alert ``replimon check`` prints for the trace."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
    done = subprocess.run([sys.executable, "-m", "replimon.cli", "--config", str(config), "check",
                           "--fail-on", "never", str(trace)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return Counter((a["alert_id"], a["status"]) for a in map(json.loads, done.stdout.splitlines()))


def test_live_equals_check(spark: Any, broker: Any, postgres: Any, topic_prefix: str, tmp_path: Path,
                           clean_env: None) -> None:
    from replimon.store.reads import RunReader
    from replimon.streaming.runner import start_query
    from replimon.streaming.sinks.postgres import PostgresSink

    # clean_env: no REPLIMON_* variables, so the query and the check CLI read the same config file.
    config, settings = job_config(broker, postgres, topic_prefix, tmp_path,
                                  thresholds={"group_silent_s": GROUP_SILENT_S},
                                  streaming={"replay_checkpoint_s": CHECKPOINT_S})
    lim = settings.thresholds
    run_id = f"livecheck-{uuid.uuid4().hex[:8]}"
    pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
    stored = RunReader(settings.postgres.dsn, run_id)
    # (batch id, wall clock at its end, that - its newest event) in s: how far behind the job is
    lags: list[tuple[int, float, float]] = []

    def observe(result: Any) -> None:
        clocks = [s["clock_ms"] for s in result.snapshots if s.get("clock_ms", -1) >= 0]
        now = time.time()
        lags.append((result.batch_id, now, now - max(clocks) / 1000 if clocks else -1.0))

    query = start_query(spark, settings, run_id=run_id, pg=pg, observers=[observe], trigger_s=1.0)
    try:
        def running(done: Any) -> Any:
            assert query.isActive, query.exception()
            return done()

        # the query is up and idle before the first event
        eventually(lambda: running(lambda: lags), timeout=300, what="a first batch of the live query")
        # -- the replicas: the simulator in real time through the product's publisher ------------
        events: list[dict[str, Any]] = []
        with Publisher.from_settings(settings) as publisher:
            def send(ev: dict[str, Any]) -> None:
                events.append(ev)
                publisher.send(ev)

            started = time.time()
            Simulator(SimOptions(duration_ms=SECONDS * 1000, groups=3, seed=4, start_ms=int(started * 1000)),
                      [parse_injection(f) for f in FAULTS], send).run(realtime=True)
            assert publisher.flush(60) == 0
            ended = time.time()
        trace = tmp_path / "trace.jsonl"
        trace.write_text("".join(json.dumps(ev, separators=(",", ":")) + "\n" for ev in events), encoding="utf-8")
        want = check_cli(config, trace, tmp_path)
        # -- the tail: GROUP_SILENT of every group from processing time, ids known in advance -----
        last = {g: max(ev["ts_ms"] for ev in events if ev["group"] == g) for g in {ev["group"] for ev in events}}
        due = {alert_id(g, "GROUP_SILENT", ("last", ts)): ts + int((lim.group_silent_s + lim.skew_s) * 1000)
               for g, ts in last.items()}
        tail = Counter((aid, "firing") for aid in due)
        assert not set(tail) & set(want)
        eventually(lambda: running(lambda: set(tail) <= {(a["alert_id"], a["status"]) for a in stored.alerts()}),
                   timeout=240, interval=0.5, what=f"the tail silences (batches: id, wall, lag s: {lags})")
        got_alerts = stored.alerts()
        got = Counter((a["alert_id"], a["status"]) for a in got_alerts)
        processed = sum(s["counts"]["events"] for s in stored.group_snapshots().values())
        assert processed == len(events)
        assert got == want + tail, (f"check only: {sorted(set(want + tail) - set(got))}; live only: "
                                    f"{[(a['kind'], a['group'], a['status']) for a in got_alerts if (a['alert_id'], a['status']) not in want + tail]}; "
                                    f"batches (id, wall, lag s): {lags}")
        for a in got_alerts:
            if a["alert_id"] in due:  # fired from processing time, never before its deadline
                assert a["detected_ts_ms"] >= due[a["alert_id"]], a
        kinds = {a["kind"] for a in got_alerts}
        assert {"NODE_SILENT", "GROUP_SILENT", "DIVERGENT_DECISION", "EVENTS_LOST", "BEYOND_HORIZON",
                "EXECUTION_REGRESSION"} <= kinds
        live = [lag for _, at, lag in lags if started < at <= ended and lag >= 0]  # batches with data
        # -- a replay of a window the live job processed gives the live run's alerts ------------
        # (docs/replay.md, "Deterministic, and equal to the live run")
        from replimon.replay.diff import diff_runs
        from replimon.streaming.replay import replay

        lo, hi = int(started * 1000) + REPLAY_FROM_S * 1000, int(started * 1000) + REPLAY_TO_S * 1000
        rerun = replay(settings, lo, hi, spark=spark, checkpoints_of=run_id)
        assert sorted(rerun.start.checkpoints) == sorted(last)  # every group from a live record
        same = diff_runs(settings.postgres.dsn, run_id, rerun.run_id, window=(lo, hi))
        assert same.same, same.lines()
        assert [a for a in got_alerts if lo <= a["event_ts_ms"] < hi]  # ... and there was something to compare
        print(f"\n{len(events)} events in {SECONDS} s live; {len(lags)} batches, {len(live)} while publishing, "
              f"{min(live):.1f}..{max(live):.1f} s behind the newest event; {sum(want.values())} alert rows as check, plus "
              f"{len(tail)} tail GROUP_SILENT, {max(a['detected_ts_ms'] - due[a['alert_id']] for a in got_alerts if a['alert_id'] in due) / 1000:.1f} s "
              f"after their deadline at most")
    finally:
        query.stop()
        query.awaitTermination(60)
        pg.close()
