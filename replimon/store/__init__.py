"""replimon's PostgreSQL store: the schema, its migrations, and every read of the stored runs.

Modules, by what they do (docs/postgres.md has the tables, keys and conventions):

- `replimon.store.schema`: the versioned migrations (``migrations/NNN_name.sql``, shipped as
  package data) and `migrate`, which applies the pending ones exactly once;
- `replimon.store.values`: how values cross the boundary (epoch ms <-> ``timestamptz``, the
  monitor's "none yet" -1 <-> NULL);
- `replimon.store.writes`: what the two writers share: the exactly-once guard statement and the
  alert insert with its row builder (the streaming job's ``PostgresSink`` and the data-quality
  results writer, ``replimon.quality.results``);
- `replimon.store.runs`: run ids (``live`` and replays), which runs exist, where a pipeline's
  guard stands, a replay's ``replay_runs`` row;
- `replimon.store.reads`: a run's alerts and group states, and `RunReader`, those reads bound to
  one run;
- `replimon.store.report_reads`: the aggregates a run report shows.

The writer of the streaming job's micro-batches is not here: it is the job's sink,
``streaming/sinks/postgres.py``, built on this package. Nothing here imports pyspark or
``replimon.streaming``.
"""
