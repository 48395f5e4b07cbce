"""What the report tests of a family share (docs/report.md): a one-group run of the family beside
an XCom group, its monitor outputs written through the job's PostgreSQL writer and read back as
the report reads any run, and one group's section of the rendered page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from replimon.producers.simulator import SimOptions, Simulator, parse_injection
from replimon.replay.report_data import RunData, load_run
from replimon.store.schema import migrate
from replimon.streaming.sinks.postgres import PostgresSink
from tests.support import delete_run
from tests.support.outputs import outputs_of


def beside_xcom(sim: Any, faults: tuple[str, ...], seconds: int) -> list[dict[str, Any]]:
    """One group of ``sim``'s family (a simulator package) with ``faults`` and g1, an XCom group
    with a silent node, beside it, for ``seconds`` (seed 3), in time order."""
    events: list[dict[str, Any]] = []
    sim.Simulator(sim.SimOptions(groups=1, duration_ms=seconds * 1000, seed=3),
                  [sim.parse_injection(f) for f in faults], events.append).run()
    Simulator(SimOptions(groups=1, duration_ms=seconds * 1000, seed=3), [parse_injection("node_silent:g1@30s")],
              events.append).run()
    return sorted(events, key=lambda e: e["ts_ms"])


@contextmanager
def stored_run(dsn: str, run_id: str, events: list[dict[str, Any]]) -> Iterator[tuple[RunData, list[dict[str, Any]]]]:
    """``events`` (in order) through the monitor, their alerts and snapshots written as one batch
    of run ``run_id``: the run as ``load_run`` reads it, and the alert payloads; the run is
    deleted afterwards."""
    alerts, snaps = outputs_of(events)
    migrate(dsn)
    with PostgresSink(dsn, run_id=run_id) as sink:
        sink.write_batch(0, alerts=alerts, snapshots=snaps, dead_letters=[], metrics=None)
    try:
        yield load_run(dsn, run_id), alerts
    finally:
        delete_run(dsn, run_id)


def section(html: str, group: str) -> str:
    """The page's section of ``group`` (its timeline, listings and alerts)."""
    m = re.search(rf'<section class="group" id="tl-\d+" data-group="{group}">(.*?)</section>', html, re.S)
    assert m, group
    return m.group(1)
