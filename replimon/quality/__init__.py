"""Data quality with Great Expectations (docs/quality.md).

Suites for each input topic and for the monitor's outputs, run by the streaming job on sampled
micro-batches and by ``replimon validate`` on a capture or a window of the topics.

* ``suites``: the suites as code (expectations, frame columns, derived-column definitions,
  parameters); the source of truth for the checked-in GX project (``project``).
* ``derive``: pandas frames with the derived columns GX cannot compute (seq order per node, a
  node's clock against its group's, counts of nested lists, the alert class, active configs).
* ``engine``: Great Expectations 1.x over those frames (one ephemeral context per process) and
  the data docs builder.
* ``records``: a micro-batch's input read back from Kafka, sampled by whole groups.
* ``results``: ``dq_results`` rows and DATA_QUALITY_FAILED alerts, written once per batch.
* ``command``: the library side of ``replimon validate``.

In the streaming job these run in the data-quality sink, ``replimon.streaming.sinks.quality``
(``QualitySink``: cadence, sample, validate, write), one of the writer's sinks.

Importing this package (or ``suites``, ``derive``, ``records``, ``results``) does not import Great
Expectations, which takes seconds: ``engine`` imports it on first use.
"""
