"""The streaming job's per-event work without Spark, Kafka and PostgreSQL ("the core chain"),
as the job does it now and as it did before events were parsed once, so ``bench/core.py`` and
``bench/pipeline.py`` can give the saving as a ratio measured in the same run.

* ``parse_once`` (the job since the decode stage): ``decode_event(raw)`` in the decode stage, the
  decoded dicts packed per group with ``streaming/rows.py``'s ``pack`` and unpacked by the
  processor, then ``Monitor.process(event)``.
* ``parse_twice`` (the job before): ``parse_event(raw)`` (the pydantic models) validated the
  message and the typed result was dropped; the raw JSON texts were joined into one JSON array per
  group, which the processor parsed again with ``json.loads`` before ``Monitor.process``.

Both take the messages in packs of ``PACK`` (a group's events of one micro-batch arrive as one
packed row; the benchmarks' traces interleave groups, so a fixed pack size stands in for it).
Neither includes Arrow conversion, task scheduling or the state store: ``bench/floor.py`` measures
those inside Spark.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from replimon.contract import Invalid, parse_event
from replimon.core import Monitor

PACK = 50

Process = Callable[[dict[str, Any]], object]


def parse_once(raws: Sequence[bytes], process: Process) -> None:
    """Every message through the job's path since events are decoded once."""
    # Imported here: bench/versions.py also times trees from before decode_event and packed rows.
    from replimon.contract import decode_event
    from replimon.streaming.rows import pack, unpack

    for i in range(0, len(raws), PACK):
        items = []
        for raw in raws[i:i + PACK]:
            ev = decode_event(raw)
            if not isinstance(ev, Invalid):
                items.append(ev)
        for ev in unpack(pack(items)):
            process(ev)


def parse_twice(raws: Sequence[bytes], process: Process) -> None:
    """Every message through the job's path before: validated by the models, parsed again."""
    loads = json.loads
    for i in range(0, len(raws), PACK):
        texts = [raw.decode() for raw in raws[i:i + PACK] if not isinstance(parse_event(raw), Invalid)]
        for ev in loads("[" + ",".join(texts) + "]"):
            process(ev)


def decode_only(raws: Sequence[bytes]) -> None:
    """The decode stage's contract check alone (no monitor)."""
    from replimon.contract import decode_event

    for raw in raws:
        decode_event(raw)


# -- the ceiling: events/s of each on one thread --------------------------------------------------------------------------------
def ceiling(raws: list[bytes], repeat: int) -> dict[str, Any]:
    """Events/s on one thread: the job's per-event chain (``bench/chain.py``: decode once, pack,
    unpack, Monitor.process), the same as it was before parsing once, Monitor.process alone and
    decode_event alone."""
    events = [json.loads(r) for r in raws]
    n = len(raws)
    rates: dict[str, list[float]] = {"chain": [], "chain_parse_twice": [], "monitor": [], "decode_event": []}

    def timed(run: Callable[[], object]) -> float:
        gc.collect()
        t = time.perf_counter()
        run()
        return n / (time.perf_counter() - t)

    def monitor_alone() -> None:
        process = Monitor().process
        for ev in events:
            process(ev)

    gc.collect()
    gc.freeze()
    try:
        for _ in range(repeat):
            rates["chain"].append(timed(lambda: parse_once(raws, Monitor().process)))
            rates["chain_parse_twice"].append(timed(lambda: parse_twice(raws, Monitor().process)))
            rates["monitor"].append(timed(monitor_alone))
            rates["decode_event"].append(timed(lambda: decode_only(raws)))
    finally:
        gc.unfreeze()
    return {"events": n, "repeat": repeat,
            "events_per_s": {k: {"median": round(statistics.median(v)), "min": round(min(v)),
                                 "max": round(max(v)), "runs": [round(x) for x in v]} for k, v in rates.items()},
            "chain_to_chain_parse_twice": round(statistics.median(
                [x / y for x, y in zip(rates["chain"], rates["chain_parse_twice"], strict=True)]), 3)}
