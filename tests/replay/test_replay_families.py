"""A replay of topics holding quorum-log or chain-replication events (docs/replay.md): a fleet of
the family with faults published to the real broker and run through the job once as the live run
would see it (several micro-batches, checkpoint records to ``monitor.state``); a window of it
replayed from the checkpoint records gives the live run's alerts for the window (same ids, kinds,
statuses, evidence; a wedge's firing and resolution), and its groups' rows are the family's
(family qlog with the legislature, family chain with the epoch, as config_version; no XCom
column, no INCOMPLETE_HISTORY)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest

from replimon.producers import simulator_chain, simulator_qlog
from tests.support import settings_for
from tests.support.replays import Base, replayed_window, simulated_base

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

SECONDS = 200
FROM_S, TO_S = 90, 170  # the window, in seconds of the trace: past the 60 s checkpoints


class Family(NamedTuple):
    sim: Any
    faults: tuple[str, ...]
    version: str  # the config field that is config_version
    kinds: frozenset[str]  # the window's alerts include these
    wedge: str  # ... and this wedge fires and resolves in it


FAMILIES = {
    "qlog": Family(simulator_qlog, ("qlog_reconf_without_old_quorum:ql1@95s", "qlog_no_leader:ql2@100s",
                                    "qlog_divergent_decree:ql3@120s"), "legislature",
                   frozenset({"QLOG_RECONF_WITHOUT_OLD_QUORUM", "QLOG_DIVERGENT_DECREE", "QLOG_RECONFIGURED"}),
                   "QLOG_NO_LEADER"),
    "chain": Family(simulator_chain, ("chain_stale_epoch_write:ch1@95s", "chain_wedge_not_replaced:ch2@100s",
                                      "chain_log_divergence:ch3@120s"), "epoch",
                    frozenset({"CHAIN_STALE_EPOCH_WRITE", "CHAIN_LOG_DIVERGENCE", "CHAIN_VIEW_INSTALLED"}),
                    "CHAIN_WEDGE_NOT_REPLACED"),
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def base(request: pytest.FixtureRequest, spark: Any, broker: Any, postgres: Any,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Base]]:
    family = request.param
    tmp = tmp_path_factory.mktemp(f"replay-{family}")
    settings = settings_for(broker, postgres, f"r{family}-{uuid.uuid4().hex[:10]}-", tmp)
    yield family, simulated_base(spark, settings, FAMILIES[family].sim, FAMILIES[family].faults, SECONDS, tmp)


def test_a_window_from_checkpoint_records_gives_the_runs_alerts(spark: Any, base: tuple[str, Base]) -> None:
    family, run = base
    f = FAMILIES[family]
    w = replayed_window(spark, run, FROM_S, TO_S, f.version)
    kinds = {r[3] for r in w.want}
    assert f.kinds | {f.wedge} <= kinds, kinds
    assert {r[1] for r in w.want if r[3] == f.wedge} == {"firing", "resolved"}
    assert w.got == w.want
    prefix = f.faults[0].partition(":")[2][:2]
    assert [(g, fam) for g, fam, *_ in w.groups] == [(f"{prefix}{i}", family) for i in (1, 2, 3)]
    assert all(v and v > 1 and start is None and pending is None for _, _, v, start, pending in w.groups)
    assert w.steps is not None and w.steps[0] > 1 and w.steps[1] == 0  # the version steps on the timeline
    assert w.incomplete == (0,)  # every group started from its checkpoint record
