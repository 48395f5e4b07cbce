"""Where a report's event series come from: the run's window of the input topics, read back from
Kafka, turned into series by `replimon.replay.report_series` (docs/report.md, "Timelines").

Which records:

- a replay: the offsets its ``replay_runs`` row recorded, from the window's start
  (``params.window_offsets``, else ``starting_offsets``) to ``ending_offsets``, sampled over
  ``[from_ms, to_ms)``. Groups start empty at the window's start (the checkpoint states the replay
  started from are not re-read): a frontier appears with a node's first event in the window;
- any other run (``live``, ``replimon run --replay``, the tests' end-to-end run): the records of
  the input topics whose timestamps (the events' times, docs/replay.md) lie in the run's
  event-time span, found by timestamp as a replay plans its window.

Guarantees: only the records of the drawn groups are decoded and kept (a fleet of 1,000 groups
costs one pass over the window, not memory); at most ``max_records`` records are read (the note
says the series then end early); a broker that cannot be reached, records gone to retention or
a span with no record give no series and a one-line note saying why, never a failed report.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from replimon.contract import Invalid, decode_event
from replimon.core import Limits
from replimon.kafka import TP, KafkaClient, RecordsUnavailable, offsets_from_json
from replimon.replay.report_series import Series, event_series
from replimon.replay.run import input_topics
from replimon.replay.window import ReplayError, plan_window

MAX_RECORDS = 5_000_000
# librdkafka's own log lines off: a broker the report cannot reach is said once, in its note.
QUIET = {"log_level": "0"}


@dataclass(frozen=True)
class EventSource:
    """The broker and input topics a report reads a run's events from (the CLI passes the
    settings'; a replay's own offsets name its topics)."""

    bootstrap: str
    topics: Sequence[str]
    timeout_s: float = 30.0
    max_records: int = MAX_RECORDS
    limits: Limits | None = None  # the thresholds the silent flags use (default: Limits())

    @classmethod
    def from_settings(cls, settings: Any) -> EventSource:
        """The settings' broker, input topics and thresholds."""
        return cls(settings.kafka.bootstrap_servers, input_topics(settings),
                   limits=Limits.from_settings(settings))


@dataclass
class EventSeries:
    """The series, or None with the reason in ``note``; ``note`` also says what was read."""

    series: Series | None
    note: str
    records: int = 0


def replay_spans(params: Mapping[str, Any]) -> tuple[dict[TP, tuple[int, int]], int, int] | None:
    """A replay's window from its ``replay_runs.params``: spans, from, to; None when the row
    lacks the offsets or the window."""
    start = params.get("window_offsets") or params.get("starting_offsets")
    end = params.get("ending_offsets")
    if not start or not end or "from_ms" not in params or "to_ms" not in params:
        return None
    starts, ends = offsets_from_json(start), offsets_from_json(end)
    spans = {tp: (starts[tp], ends[tp]) for tp in ends if tp in starts and ends[tp] > starts[tp]}
    return spans, int(params["from_ms"]), int(params["to_ms"]) - 1


def load_series(source: EventSource, groups: Collection[str], span: tuple[int, int] | None,
                replay: Mapping[str, Any] | None) -> EventSeries:
    """The drawn ``groups``' series for a run (module docstring); ``span``: the run's event-time
    span, ``replay``: its ``replay_runs`` row (None: not a replay)."""
    if not groups:
        return EventSeries(None, "no group to draw")
    try:
        planned = replay_spans((replay or {}).get("params") or {}) if replay else None
        if planned is None:
            if span is None:
                return EventSeries(None, "the run's tables hold no event time")
            window = plan_window(source.bootstrap, source.topics, span[0], span[1] + 1,
                                 QUIET, timeout_s=source.timeout_s)
            planned = ({tp: (window.start[tp], window.until[tp]) for tp in window.start
                        if window.until[tp] > window.start[tp]}, span[0], span[1])
        spans, t0, t1 = planned
        events, read, full = _read(source, spans, frozenset(groups))
    except (KafkaException, TimeoutError, RecordsUnavailable, ReplayError) as exc:
        err: Any = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
        text = err.str() if hasattr(err, "str") else str(exc)  # librdkafka's words, not its repr
        reason = text.splitlines()[0] if text else type(exc).__name__
        return EventSeries(None, f"the run's events could not be read from {source.bootstrap}: "
                                 f"{reason}")
    series = event_series(events, groups, t0, t1, limits=source.limits)
    note = (f"{read:,} records of {len(spans)} partitions read, {series.events:,} events of "
            f"the drawn groups, a point every {series.step_ms / 1000:g} s")
    if not full:
        note += f" (stopped at {source.max_records:,} records: the series end early)"
    return EventSeries(series, note, read)


def _read(source: EventSource, spans: Mapping[TP, tuple[int, int]],
          groups: frozenset[str]) -> tuple[list[dict[str, Any]], int, bool]:
    """The drawn groups' events in ``spans``, the records read, whether all were read."""
    events: list[dict[str, Any]] = []
    read = 0
    config = {"bootstrap.servers": source.bootstrap, "group.id": "replimon-report", **QUIET}
    with KafkaClient(config, timeout_s=source.timeout_s) as client:
        for msgs in client.read(dict(spans)):
            for msg in msgs:
                raw = msg.value()
                # The group is looked at before the event is validated: other groups' records
                # cost a JSON parse only.
                try:
                    head = json.loads(raw) if raw else None
                except ValueError:
                    continue  # a dead letter: the job did not take it either
                if not isinstance(head, dict) or head.get("group") not in groups:
                    continue
                ev = decode_event(raw)
                if not isinstance(ev, Invalid):
                    events.append(ev)
            read += len(msgs)
            if read >= source.max_records:
                return events, read, False
    return events, read, True
