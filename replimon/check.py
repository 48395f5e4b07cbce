"""``replimon check``: run the monitor's rules over captured JSONL events (library side).

Files are read in the order given, each line in file order, as the arrival order (the way a Kafka
consumer of the group's partition would have seen them). Event time is the clock: a timer fires
when the highest event time read so far passes it, so nothing is invented after the last event.
Bad lines are counted with their line numbers and never stop the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from replimon.contract import Invalid, decode_event
from replimon.core import Monitor
from replimon.core.alerts import CRITICAL, FIRING, INFO, VIOLATION, WARNING, Alert
from replimon.core.limits import Limits

SEVERITY_RANK = {INFO: 0, WARNING: 1, CRITICAL: 2}
FAIL_ON = ("critical", "violation", "warning", "never")  # the first is the default


@dataclass
class BadLine:
    source: str
    line: int
    reason: str


@dataclass
class CheckResult:
    """What a check saw and raised."""

    events: int = 0
    bad: list[BadLine] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    groups: int = 0
    duplicates: int = 0
    lost: int = 0
    first_ts: int | None = None
    last_ts: int | None = None

    def firing(self) -> Counter[tuple[str, str, str]]:
        """(kind, severity, category) -> number of firing alerts."""
        return Counter((a.kind, a.severity, a.category) for a in self.alerts if a.status == FIRING)

    def failed(self, fail_on: str = "critical") -> bool:
        """The exit-1 condition: ``critical`` = any critical alert fired, a violation or a wedge
        (default: a CI job must not pass a group that stopped making progress); ``violation`` = a
        critical violation; ``warning`` = any warning or critical; ``never``."""
        firing = [a for a in self.alerts if a.status == FIRING]
        if fail_on == "violation":
            return any(a.category == VIOLATION and a.severity == CRITICAL for a in firing)
        if fail_on == "critical":
            return any(a.severity == CRITICAL for a in firing)
        if fail_on == "warning":
            return any(SEVERITY_RANK[a.severity] >= 1 for a in firing)
        return False


def read_lines(name: str, stream: IO[bytes]) -> Iterator[tuple[str, int, bytes]]:
    for n, line in enumerate(stream, 1):
        line = line.rstrip(b"\r\n")
        if line.strip():
            yield name, n, line


def check(
    sources: Iterable[tuple[str, int, bytes]],
    limits: Limits | None = None,
    *,
    sort_by_time: bool = False,
    on_alert: Callable[[Alert], None] | None = None,
    pins: tuple[tuple[str, str], ...] = (),
) -> CheckResult:
    """Run the rules over ``(source, line number, raw line)`` in order; alerts go to ``on_alert``
    as they are raised (and into the result)."""
    result = CheckResult()
    monitor = Monitor(limits, pins)

    def events() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        for name, n, raw in sources:
            event = decode_event(raw)
            if isinstance(event, Invalid):
                result.bad.append(BadLine(name, n, event.reason))
                continue
            yield event, {"file": name, "line": n}

    stream: Iterable[tuple[dict[str, Any], dict[str, Any]]] = events()
    if sort_by_time:
        stream = sorted(stream, key=lambda item: item[0]["ts_ms"])

    def emit(alerts: list[Alert]) -> None:
        for a in alerts:
            result.alerts.append(a)
            if on_alert is not None:
                on_alert(a)

    for ev, src in stream:
        result.events += 1
        ts = ev["ts_ms"]
        result.first_ts = ts if result.first_ts is None else min(result.first_ts, ts)
        result.last_ts = ts if result.last_ts is None else max(result.last_ts, ts)
        reason = monitor.conflict(ev)
        if reason is not None:  # a dead letter; the monitor raises FAMILY_CONFLICT once
            result.bad.append(BadLine(src["file"], src["line"], reason))
        emit(monitor.process(ev, src))
    emit(monitor.finish())
    result.groups = len(monitor.groups)
    result.duplicates = sum(g.counts["duplicates"] for g in monitor.groups.values())
    result.lost = sum(g.counts["lost"] for g in monitor.groups.values())
    return result
