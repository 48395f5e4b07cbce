"""``replimon validate``: the suites over a JSONL capture or a window of the topics (library side).

The input suites get the contract-valid events (a line or record that breaks contract v1 is
counted and named, not validated: it is a dead letter); the output suites get what the monitor
says about those events (``Monitor`` over them in file order, or in event-time order for a window
of the four topics, as ``replimon check --sort-by-time`` does): its alerts and each group's final
snapshot. With ``docs`` GX's data docs of the validation are written to that folder.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replimon.contract import Invalid, parse_event
from replimon.contract.parse import event_to_dict
from replimon.quality import engine
from replimon.quality.derive import FILE_PARTITION, Record, alert_frame, input_frames, state_frames
from replimon.quality.engine import Outcome
from replimon.quality.suites import ALERTS, parameters, spec_of_name

MAX_BAD_SHOWN = 10


class ValidateError(ValueError):
    """An input that cannot be validated (one line, for the CLI)."""


@dataclass
class Validation:
    """The result of one ``replimon validate``."""

    source: str  # what was validated, in words
    outcomes: list[Outcome]
    events: int  # contract-valid events validated
    groups: int
    invalid: list[str] = field(default_factory=list)  # "where: reason" of records not validated
    invalid_count: int = 0
    alerts: int = 0  # alerts the monitor raised over the events
    docs: Path | None = None  # the data docs' index page
    seconds: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.success]


def _frames(records: list[Record], settings: Any, *, by_time: bool) -> tuple[dict[str, Any], int]:
    """Input frames of ``records`` and output frames of the monitor run over them."""
    from replimon.core import Monitor
    from replimon.core.limits import Limits

    monitor = Monitor(Limits.from_settings(settings))
    ordered = sorted(records, key=lambda r: r.event["ts_ms"]) if by_time else records
    alerts = [a.to_dict() for r in ordered for a in monitor.process(dict(r.event), r.where())]
    alerts += [a.to_dict() for a in monitor.finish()]
    frames = input_frames(records)
    if alerts:
        frames[ALERTS] = alert_frame(alerts)
    frames.update(state_frames([g.snapshot() for g in monitor.groups.values()]))
    return frames, len(alerts)


def _run(source: str, records: list[Record], settings: Any, *, by_time: bool, invalid: list[str],
         invalid_count: int, docs: Path | None, now_ms: int | None, started: float) -> Validation:
    frames, alerts = _frames(records, settings, by_time=by_time)
    params = parameters(settings, now_ms if now_ms is not None else int(time.time() * 1000))
    outcomes = engine.validate(frames, params, sample_rows=settings.quality.sample_rows)
    index = None
    if docs is not None:
        index = engine.build_docs(frames, params, docs, run_name="replimon-validate")
    groups = len({r.event["group"] for r in records})
    return Validation(source, outcomes, len(records), groups, invalid[:MAX_BAD_SHOWN], invalid_count,
                      alerts, index, time.monotonic() - started)


def validate_files(settings: Any, paths: Sequence[str | Path], *, docs: Path | None = None,
                   now_ms: int | None = None) -> Validation:
    """Validate JSONL files of contract-v1 events (one event per line, in arrival order)."""
    started = time.monotonic()
    records: list[Record] = []
    invalid: list[str] = []
    count = 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    line = line.rstrip(b"\r\n")
                    if not line.strip():
                        continue
                    parsed = parse_event(line)
                    if isinstance(parsed, Invalid):
                        count += 1
                        invalid.append(f"{path}:{n}: {parsed.reason}")
                        continue
                    records.append(Record(str(path), FILE_PARTITION, n, event_to_dict(parsed)))
        except OSError as exc:
            raise ValidateError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not records:
        raise ValidateError(f"no contract-valid event in {', '.join(map(str, paths))}"
                            + (f" ({count} line(s) break contract v1)" if count else ""))
    return _run(", ".join(map(str, paths)), records, settings, by_time=False, invalid=invalid,
                invalid_count=count, docs=docs, now_ms=now_ms, started=started)


def validate_window(settings: Any, from_ms: int, to_ms: int, *, docs: Path | None = None,
                    max_records: int = 1_000_000, now_ms: int | None = None) -> Validation:
    """Validate the records the four input topics hold between two record times (the replay's
    window: ``replimon.replay.window.plan_window``); at most ``max_records`` of them, whole
    groups (``replimon.quality.records``). ``ReplayError`` for a window that cannot be read."""
    from replimon.quality.records import read_sample
    from replimon.replay import iso
    from replimon.replay.window import plan_window, time_index_dir

    started = time.monotonic()
    types = settings.kafka.topics.input_families
    bootstrap = settings.kafka.bootstrap_servers
    window = plan_window(bootstrap, list(types), from_ms, to_ms, index_dir=time_index_dir(settings))
    spans = {tp: (window.start[tp], window.until[tp]) for tp in window.start
             if window.until[tp] > window.start[tp]}
    sample = read_sample(bootstrap, spans, types, limit=max_records, salt=0)
    if not sample.complete:
        raise ValidateError(f"could not read the window's records from {bootstrap}")
    if not sample.records:
        raise ValidateError(f"no contract-valid event between {iso(from_ms)} and {iso(to_ms)}")
    what = (f"{', '.join(types)} from {iso(from_ms)} to {iso(to_ms)} "
            f"({sample.read} records" + (f", {sample.groups} groups sampled" if sample.read > max_records else "")
            + ")")
    invalid = [f"{sample.invalid} record(s) of the window break contract v1 (dead letters)"] if sample.invalid else []
    return _run(what, sample.records, settings, by_time=True, invalid=invalid, invalid_count=sample.invalid,
                docs=docs, now_ms=now_ms, started=started)


# -- the summary -----------------------------------------------------------------------------------
def sample_text(suite: str, expectation: str, samples: Iterable[dict[str, Any]], limit: int = 2) -> str:
    """The first failing rows, short: who, when, where, and the values checked."""
    from replimon.replay import evidence_line

    spec = spec_of_name(suite, expectation)
    out = []
    for s in list(samples)[:limit]:
        values = " ".join(f"{c}={s.get(c)}" for c in spec.columns)
        who = evidence_line(s) if "type" in s else " ".join(
            f"{k}={s[k]}" for k in ("group", "node", "kind", "alert_id") if s.get(k) is not None)
        group = f"{s['group']} " if "type" in s and s.get("group") else ""
        out.append(f"{group}{who}: {values}")
    return "; ".join(out)


def summary_rows(v: Validation) -> list[tuple[str, str, str, str, str, str]]:
    """(suite, expectation, result, evaluated, unexpected, samples), failures first."""
    rows = []
    for o in sorted(v.outcomes, key=lambda o: (o.success, o.suite, o.expectation)):
        result = "pass" if o.success else ("ERROR" if o.error else "FAIL")
        samples = o.error or sample_text(o.suite, o.expectation, o.samples)
        rows.append((o.suite, o.expectation, result, "" if o.evaluated is None else str(o.evaluated),
                     "" if o.unexpected is None else str(o.unexpected), samples))
    return rows


def headline(v: Validation) -> str:
    bad = f"; {v.invalid_count} not validated (break contract v1)" if v.invalid_count else ""
    return (f"{v.events} events of {v.groups} group(s) from {v.source}{bad}; the monitor raised "
            f"{v.alerts} alert row(s); {len(v.outcomes)} expectations in {v.seconds:.1f} s")


def verdict(v: Validation) -> str:
    return (f"FAILED: {len(v.failed)} of {len(v.outcomes)} expectations" if v.failed
            else f"ok: all {len(v.outcomes)} expectations passed")
