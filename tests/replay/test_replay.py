"""Replays for postmortems (docs/replay.md): ``replimon replay --from --to`` over the real broker, Spark
and PostgreSQL.

One trace with faults is published and run through the job once as the "live" run would see it
(several micro-batches, checkpoint records to ``monitor.state``); then windows of it are replayed:
from the checkpoint records before the window and from the earliest offset, twice, and for a
subset of groups. A replay must give the live run's alerts for its window, the same ids, kinds,
statuses and evidence, and the same replay twice must give identical rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from replimon.replay.run import plan
from replimon.replay.window import ReplayError
from replimon.streaming.replay import replay
from tests.support import settings_for, simulate
from tests.support.replays import Base, alert_rows, live_run

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

SECONDS = 200
FAULTS = ("beyond_horizon:g1@95s", "horizon_wedge:g2@100s", "node_silent:g3@110s",
          "divergent_decision:g4@125s", "eh_out_of_domain:g1@140s")
FROM_S, TO_S = 90, 160  # the window, in seconds of the trace: past the 60 s checkpoints


@pytest.fixture(scope="module")
def base(spark: Any, broker: Any, postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Base]:
    tmp = tmp_path_factory.mktemp("replay")
    settings = settings_for(broker, postgres, f"rp-{uuid.uuid4().hex[:10]}-", tmp)
    yield live_run(spark, settings, simulate(SECONDS, *FAULTS, groups=5, seed=11), tmp)


def test_a_window_from_checkpoint_records_gives_the_runs_alerts(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    window, start = plan(base.settings, lo, hi, checkpoints_of=base.run_id)
    # Every group has a checkpoint record from its clock crossing 60 s, and the replay reads
    # from those records' offsets, before the window.
    assert sorted(start.checkpoints) == sorted({e["group"] for e in base.events})
    assert all(cp.clock_ms < lo for cp in start.checkpoints.values())
    assert sum(start.starting.values()) < sum(window.start.values())
    got = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id)
    assert got.records_read == got.records_total > window.records
    want = alert_rows(base.settings.postgres.dsn, base.run_id, lo, hi)
    kinds = {r[3] for r in want}
    assert {"BEYOND_HORIZON", "HORIZON_WEDGE", "DIVERGENT_DECISION", "EH_OUT_OF_DOMAIN"} <= kinds, kinds
    assert alert_rows(base.settings.postgres.dsn, got.run_id, lo, hi) == want
    # Nothing from before the window (beyond the skew: publishing order), and INCOMPLETE_HISTORY
    # nowhere: every group had its state.
    skew = int(base.settings.thresholds.skew_s * 1000)
    with psycopg.connect(base.settings.postgres.dsn) as conn:
        early, incomplete, status = conn.execute(
            "SELECT count(*) FILTER (WHERE event_ts < to_timestamp(%s / 1000.0)),"
            " count(*) FILTER (WHERE kind = 'INCOMPLETE_HISTORY'),"
            " (SELECT status FROM replay_runs WHERE run_id = %s) FROM alerts WHERE run_id = %s",
            (lo - skew, got.run_id, got.run_id)).fetchone()
    assert (early, incomplete, status) == (0, 0, "done")


def test_the_same_window_twice_and_from_the_earliest_offset_agree(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    dsn = base.settings.postgres.dsn
    a = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id)
    b = replay(base.settings, lo, hi, spark=spark, checkpoints_of=base.run_id)
    c = replay(base.settings, lo, hi, spark=spark, state_from="earliest")
    assert c.records_total > a.records_total  # read from the first record
    rows = [alert_rows(dsn, r.run_id, 0, 10**13) for r in (a, b, c)]
    assert rows[0] == rows[1] == rows[2] and rows[0]
    with psycopg.connect(dsn) as conn:
        states = [conn.execute("SELECT group_id, snapshot - 'counts' FROM group_state WHERE run_id = %s"
                               " ORDER BY group_id", (r.run_id,)).fetchall() for r in (a, b)]
    assert states[0] == states[1] and states[0]


def test_selected_groups_only(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    got = replay(base.settings, lo, hi, groups=["g1"], spark=spark, checkpoints_of=base.run_id)
    want = [r for r in alert_rows(base.settings.postgres.dsn, base.run_id, lo, hi) if r[2] == "g1"]
    assert want and alert_rows(base.settings.postgres.dsn, got.run_id, lo, hi) == want


def test_empty_and_backwards_windows_are_refused(base: Base) -> None:
    late = base.at(SECONDS + 3600)
    with pytest.raises(ReplayError, match="no record was published between"):
        plan(base.settings, late, late + 60_000)
    with pytest.raises(ReplayError, match="must be before"):
        plan(base.settings, base.at(20), base.at(10))


def test_the_cli_says_what_is_wrong_in_one_line(base: Base, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from replimon.cli import main

    k = base.settings.kafka
    monkeypatch.setenv("REPLIMON_KAFKA__BOOTSTRAP_SERVERS", k.bootstrap_servers)
    for name in ("decisions", "executions", "heartbeats", "config", "state"):
        monkeypatch.setenv(f"REPLIMON_KAFKA__TOPICS__{name.upper()}", getattr(k.topics, name))
    monkeypatch.setenv("REPLIMON_POSTGRES__DSN", base.settings.postgres.dsn)
    monkeypatch.chdir(tmp_path)
    late = base.at(SECONDS + 3600)
    assert main(["replay", "--from", str(late), "--to", str(late + 1000)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("replimon: replay: no record was published"), err
    assert main(["replay", "--from", "yesterday", "--to", str(late)]) == 2
    assert "--from: not ISO-8601 or epoch ms" in capsys.readouterr().err


def test_a_window_older_than_retention_is_refused() -> None:
    """Tansu cannot delete records (no DeleteRecords, no retention), so the rule is checked on a
    planned window: a partition trimmed by retention whose oldest record is newer than --from."""
    from replimon.replay.window import Window, check_retention, trimmed

    tp, kept, fresh = ("replica.decisions", 0), ("replica.decisions", 1), ("replica.config", 0)
    w = Window(from_ms=1_000, to_ms=9_000, earliest={tp: 40, kept: 0, fresh: 7},
               end={tp: 90, kept: 30, fresh: 7}, start={tp: 40, kept: 3, fresh: 7}, until={tp: 80, kept: 20, fresh: 7})
    assert trimmed(w) == [tp]  # untrimmed (starts at 0) and empty partitions are not suspects
    check_retention(w, {tp: 1_000})  # its oldest record is at --from: nothing lost
    with pytest.raises(ReplayError, match=r"no longer holds records that old on replica.decisions-0"):
        check_retention(w, {tp: 1_001})


def test_groups_without_a_checkpoint_record_start_empty_and_say_so(spark: Any, base: Base) -> None:
    lo, hi = base.at(FROM_S), base.at(TO_S)
    got = replay(base.settings, lo, hi, spark=spark, checkpoints_of="no-such-run")
    assert not got.start.checkpoints and got.records_total == plan(base.settings, lo, hi)[0].records
    # The window's first records are followed by a few up to the skew older (publishing order):
    # where a node's history begins can be that much before --from.
    skew = int(base.settings.thresholds.skew_s * 1000)
    with psycopg.connect(base.settings.postgres.dsn) as conn:
        incomplete = {r[0] for r in conn.execute(
            "SELECT group_id FROM alerts WHERE run_id = %s AND kind = 'INCOMPLETE_HISTORY'"
            " AND event_ts >= to_timestamp(%s / 1000.0)", (got.run_id, lo - skew))}
    assert incomplete == {e["group"] for e in base.events}
