"""Row API vs Pandas API of transformWithState for the monitor, on the whole job (replay).

Publishes one simulator trace to the embedded broker, then replays it (availableNow, event time)
through the full job (Kafka source, validation, the stateful monitor, PostgreSQL and Kafka sinks)
with each API, alternating, several times; prints a table and writes JSON. The baseline in the
same run is the Row API (ratios are Pandas / Row).

    .venv/bin/python bench/tws_api.py [--groups 50] [--seconds 60] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "tws_api.json"))
    args = ap.parse_args()

    from confluent_kafka import Producer

    from replimon.config import load_settings
    from replimon.embedded import EmbeddedBroker, EmbeddedPostgres
    from replimon.producers.simulator import SimOptions, Simulator
    from replimon.streaming.processor import REPLAY
    from replimon.streaming.runner import start_query
    from replimon.streaming.session import get_session
    from replimon.streaming.sinks.postgres import PostgresSink

    events: list[dict] = []
    Simulator(SimOptions(groups=args.groups, nodes=args.nodes, duration_ms=args.seconds * 1000), [],
              events.append).run()
    results: dict[str, list[float]] = {"row": [], "pandas": []}
    with EmbeddedBroker() as broker, EmbeddedPostgres() as pgserver:
        settings = load_settings(None, kafka={"bootstrap_servers": broker.bootstrap_servers},
                                 postgres={"dsn": pgserver.dsn})
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
        topics = settings.kafka.topics
        for ev in events:
            while True:
                try:
                    p.produce(topics.for_event_type(ev["type"]), key=ev["group"].encode(),
                              value=json.dumps(ev, separators=(",", ":")).encode())
                    break
                except BufferError:
                    p.poll(0.2)
        assert p.flush(120) == 0
        spark = get_session()
        for i in range(args.repeat):
            for api in ("row", "pandas"):
                run_id = f"bench-{api}-{uuid.uuid4().hex[:6]}"
                pg = PostgresSink(settings.postgres.dsn, run_id=run_id)
                ckpt = tempfile.mkdtemp(prefix="replimon-bench-")
                started = time.perf_counter()
                q = start_query(spark, settings, run_id=run_id, time_mode=REPLAY, available_now=True, pg=pg,
                                checkpoint=ckpt, api=api, kafka_out=False)
                q.awaitTermination()
                took = time.perf_counter() - started
                pg.close()
                results[api].append(len(events) / took)
                print(f"run {i + 1} {api:6s} {len(events) / took:10,.0f} events/s ({took:.1f} s)", flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"\n{'api':8s} {'median ev/s':>12s} {'min':>10s} {'max':>10s} {'ratio':>7s}")
    for api, values in results.items():
        print(f"{api:8s} {med[api]:12,.0f} {min(values):10,.0f} {max(values):10,.0f} {med[api] / med['row']:7.2f}")
    out = {"date": datetime.now(UTC).isoformat(), "cpus": os.cpu_count(), "python": platform.python_version(),
           "events": len(events), "groups": args.groups, "nodes": args.nodes, "runs": results, "median": med}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
