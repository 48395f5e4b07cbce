"""How much of each partition a micro-batch capped by ``maxOffsetsPerTrigger`` admits.

Two rules, both pure (no Kafka call, no clock but a duration for the log):

* `rate_limit`: Spark's rule. The cap is shared in proportion to each partition's backlog. Every
  partition moves on at the same pace in offsets, so partitions (and topics) of different
  densities are cut at different record times.
* `plan_aligned` (option ``alignTimestamps``): every partition is cut at one record timestamp T.
  Each partition ends at its first offset whose record timestamp is > T: all records with
  timestamp <= T are in, none later. T is the largest timestamp for which the batch holds at most
  the cap, i.e. one less than the (cap+1)-th smallest timestamp of the backlog, so batches stay
  near the cap. A replayed backlog is then read as consecutive time slices of all topics, which a
  consumer that only tolerates a small cross-topic disorder needs (docs/kafka-source.md).

The aligned rule needs record timestamps at given offsets, which only a fetch can tell (Tansu, the
embedded broker, ignores timestamp lookups, and an offset-for-time answer would not give the
(cap+1)-th timestamp anyway). It gets them from a *probe*: one call reads the record at one offset
of each of several partitions (one fetch round on the driver, `KafkaClient.record_timestamps`) and
returns every record that fetch brought, so the last steps of a search usually need no fetch.
What the probes learn stays in a `TimestampIndex` for the next batches. A probe that cannot read
an offset (data loss under way) raises `RecordsUnavailable`, as a probe without an answer does.

Search (`_Plan`): T lies between a feasible and an infeasible timestamp. A pivot is chosen by
interpolating the known (offset, timestamp) points (safeguarded by bisection), and decided by
probing the midpoints of the partitions whose cut is still uncertain, all partitions in one round,
until the known points bound the batch size on one side of the cap. After each decision the known
points alone tighten both ends. Probes are logarithmic: about log2(backlog / records per fetch)
rounds per pivot and a few pivots per batch (counted in `AlignStats`).

Timestamps within a partition are nondecreasing for LogAppendTime and, for CreateTime, nearly so.
Where they are not, every binary search still ends at *a* boundary (a record <= T followed by one
> T), the batch still holds between 1 and cap offsets, and every record is still read exactly once;
only "nothing later than T" may then not hold for the out-of-order records.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from replimon.kafka import TP, RecordsUnavailable

# probe({tp: offset}) -> {tp: [(offset, timestamp), ...]}: the first point is the wanted offset
# (with the timestamp of the record at it or, when there is none, of the next one, or INF), then
# any records after it that the same fetch brought.
Probe = Callable[[Mapping[TP, int]], Mapping[TP, Sequence[tuple[int, int]]]]

MAX_PIVOTS = 200  # never reached with nondecreasing timestamps (64-bit bisection ends sooner)
MAX_ROUNDS = 1000  # likewise; a guard against pathological out-of-order timestamps


def rate_limit(starts: Mapping[TP, int], ends: Mapping[TP, int], max_rows: int) -> dict[TP, int]:
    """Cap the total of ``ends - starts`` at ``max_rows``, shared in proportion to each
    partition's backlog (largest remainders get the leftover rows, ties by topic-partition).
    Partitions without a backlog keep their end. Deterministic."""
    lags = {tp: ends[tp] - starts[tp] for tp in ends if tp in starts and ends[tp] > starts[tp]}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(ends)
    shares = {tp: max_rows * lag // total for tp, lag in lags.items()}
    left = max_rows - sum(shares.values())
    for tp in sorted(lags, key=lambda k: (-(max_rows * lags[k] % total), k)):
        if left <= 0:
            break
        if shares[tp] < lags[tp]:
            shares[tp] += 1
            left -= 1
    out = dict(ends)
    for tp, share in shares.items():
        out[tp] = starts[tp] + share
    return out


class TimestampIndex:
    """Record timestamps the probes have seen: per partition, sorted offsets and their timestamps.

    An offset without a record (compaction, transaction markers) carries the next record's
    timestamp, INF when none follows before the planned end: cutting before it or before that
    record admits the same records. Bounded: `prune` drops what lies before the next batch's start
    (never needed again) and everything of a partition whose start moved back (its offsets may now
    hold other records); past ``max_points`` it starts over.
    """

    def __init__(self, max_points: int = 1_000_000) -> None:
        self.max_points = max_points
        self._offs: dict[TP, list[int]] = {}
        self._tss: dict[TP, list[int]] = {}
        self._floor: dict[TP, int] = {}

    def __len__(self) -> int:
        return sum(len(o) for o in self._offs.values())

    def prune(self, starts: Mapping[TP, int]) -> None:
        for tp in list(self._offs):
            start = starts.get(tp)
            if start is None or start < self._floor.get(tp, start):
                self._drop(tp)
                continue
            k = bisect_left(self._offs[tp], start)
            del self._offs[tp][:k]
            del self._tss[tp][:k]
        self._floor = {tp: starts[tp] for tp in self._offs}
        if len(self) > self.max_points:
            for tp in list(self._offs):
                self._drop(tp)

    def _drop(self, tp: TP) -> None:
        self._offs.pop(tp, None)
        self._tss.pop(tp, None)
        self._floor.pop(tp, None)

    def add(self, tp: TP, points: Iterable[tuple[int, int]]) -> None:
        new = sorted(dict(points).items())
        if not new:
            return
        offs = self._offs.setdefault(tp, [])
        tss = self._tss.setdefault(tp, [])
        i, j = bisect_left(offs, new[0][0]), bisect_right(offs, new[-1][0])
        if i < j:  # overlaps what is known: merge that window only
            window = dict(zip(offs[i:j], tss[i:j], strict=True))
            window.update(new)
            new = sorted(window.items())
        offs[i:j] = [o for o, _ in new]
        tss[i:j] = [t for _, t in new]

    def get(self, tp: TP, offset: int) -> int | None:
        offs = self._offs.get(tp)
        if not offs:
            return None
        k = bisect_left(offs, offset)
        return self._tss[tp][k] if k < len(offs) and offs[k] == offset else None

    def bounds(self, tp: TP, v: int, lo: int, hi: int) -> tuple[int, int, int | None, int | None]:
        """(a, b, ts(a-1), ts(b)): the first offset in [lo, hi] whose record is > v lies in
        [a, b], by the known points (a binary search over them: with out-of-order timestamps,
        some boundary). No known point lies in [a, b); ts(a-1) / ts(b) are None at lo / hi."""
        offs = self._offs.get(tp)
        if not offs:
            return lo, hi, None, None
        tss = self._tss[tp]
        i0, i1 = bisect_left(offs, lo), bisect_left(offs, hi)
        k = bisect_right(tss, v, i0, i1)
        if k > i0:
            a, t1 = offs[k - 1] + 1, tss[k - 1]
        else:
            a, t1 = lo, None
        if k < i1:
            b, t2 = offs[k], tss[k]
        else:
            b, t2 = hi, None
        return a, b, t1, t2


@dataclass(frozen=True)
class AlignStats:
    """What planning one micro-batch cost and gave (logged; tests read it)."""

    capped: bool  # False: the backlog fitted under the cap, nothing was probed
    timestamp: int | None  # T: admitted records are <= T, later ones > T
    records: int  # offsets admitted
    backlog: int  # offsets available
    probes: int  # (partition, offset) lookups that needed a fetch
    rounds: int  # fetch rounds (one per probe call, all partitions at once)
    pivots: int  # candidate timestamps decided
    tie_split: bool  # the earliest timestamp alone held more than the cap: cut proportionally
    fallback: str | None  # why the proportional rule was used instead, if it was
    seconds: float


def plan_aligned(starts: Mapping[TP, int], ends: Mapping[TP, int], cap: int,
                 index: TimestampIndex, probe: Probe) -> tuple[dict[TP, int], AlignStats]:
    """End offsets cutting every partition at one record timestamp T (module docstring).

    Guarantees: every end is within [start, end]; the batch holds at most ``cap`` offsets and,
    when there is a backlog, at least one; with nondecreasing timestamps per partition, every
    record with timestamp <= T is in, every later one is not, and T is the largest such timestamp
    under the cap. If the earliest timestamp of the backlog alone holds more than ``cap`` records,
    those records are shared proportionally (`rate_limit`): all admitted records then have that
    timestamp and no later record is admitted (``tie_split``). When the backlog fits under the
    cap, ``ends`` is returned untouched without a probe.
    """
    return _Plan(starts, ends, cap, index, probe).run()


class _Plan:
    def __init__(self, starts: Mapping[TP, int], ends: Mapping[TP, int], cap: int,
                 index: TimestampIndex, probe: Probe) -> None:
        self.starts, self.ends, self.cap = dict(starts), dict(ends), cap
        self.parts = sorted(tp for tp in ends if tp in starts and ends[tp] > starts[tp])
        self.index, self.probe = index, probe
        self.backlog = sum(ends[tp] - starts[tp] for tp in self.parts)
        self.probes = self.rounds = self.pivots = 0
        self.began = time.monotonic()

    def stats(self, out: Mapping[TP, int], timestamp: int | None, *, capped: bool = True,
              tie_split: bool = False, fallback: str | None = None) -> AlignStats:
        return AlignStats(capped, timestamp, sum(out[tp] - self.starts[tp] for tp in self.parts),
                          self.backlog, self.probes, self.rounds, self.pivots, tie_split, fallback,
                          time.monotonic() - self.began)

    # -- probing ----------------------------------------------------------------------------------

    def fetch(self, wanted: Mapping[TP, int]) -> None:
        todo = {tp: off for tp, off in wanted.items() if self.index.get(tp, off) is None}
        if not todo:
            return
        if self.rounds >= MAX_ROUNDS:
            raise _GiveUp(f"more than {MAX_ROUNDS} probe rounds")
        self.rounds += 1
        self.probes += len(todo)
        got = self.probe(todo)
        for tp, off in sorted(todo.items()):
            points = list(got.get(tp, ()))
            if not points or points[0][0] != off:
                raise RecordsUnavailable(f"no timestamp for {tp[0]}-{tp[1]} offset {off}")
            self.index.add(tp, points)

    def ts(self, tp: TP, off: int) -> int:
        known = self.index.get(tp, off)
        assert known is not None
        return known

    # -- what the known points say about a timestamp v -------------------------------------------

    def bounds(self, v: int) -> dict[TP, tuple[int, int, int | None, int | None]]:
        return {tp: self.index.bounds(tp, v, self.starts[tp], self.ends[tp]) for tp in self.parts}

    def counts(self, v: int) -> tuple[int, int]:
        """(at least, at most) offsets the batch holds if T = v."""
        low = high = 0
        for tp in self.parts:
            a, b, _, _ = self.index.bounds(tp, v, self.starts[tp], self.ends[tp])
            low += a - self.starts[tp]
            high += b - self.starts[tp]
        return low, high

    def estimate(self, v: int, lo_t: int, hi_t: int) -> float:
        """Offsets the batch would hold if T = v, interpolating between the known points."""
        total = 0.0
        for tp, (a, b, t1, t2) in self.bounds(v).items():
            total += a - self.starts[tp]
            if b > a:
                left = lo_t if t1 is None else t1
                right = hi_t if t2 is None else t2
                frac = 0.5 if right <= left else (v - left) / (right - left)
                total += (b - a) * min(max(frac, 0.0), 1.0)
        return total

    def narrow(self, v: int, until: Callable[[], bool]) -> None:
        """Probe, all uncertain partitions at once, the middle of their uncertainty about v,
        until ``until()`` holds (or nothing is uncertain)."""
        while not until():
            wanted = {tp: (a + b) // 2 for tp, (a, b, _, _) in self.bounds(v).items() if a < b}
            if not wanted:
                return
            self.fetch(wanted)

    def decide(self, v: int) -> bool:
        """Does T = v keep the batch within the cap? Probes until the known points tell."""
        verdict: list[bool] = []

        def told() -> bool:
            low, high = self.counts(v)
            if high <= self.cap:
                verdict.append(True)
            elif low > self.cap:
                verdict.append(False)
            return bool(verdict)

        self.narrow(v, told)
        if not verdict:  # everything around v is known: low == high
            verdict.append(self.counts(v)[1] <= self.cap)
        return verdict[-1]

    def exact(self, v: int) -> dict[TP, int]:
        """Each partition's first offset whose record is > v (probing until known)."""
        self.narrow(v, lambda: False)
        out = dict(self.ends)
        for tp, (a, _b, _, _) in self.bounds(v).items():
            out[tp] = a
        return out

    def tighten(self, lo_t: int, hi_t: int) -> tuple[int, int]:
        """Move both ends as far as the known points alone allow (no probe)."""
        lo, hi = lo_t, hi_t - 1
        while lo < hi:  # the largest v whose batch surely fits
            mid = (lo + hi + 1) // 2
            if self.counts(mid)[1] <= self.cap:
                lo = mid
            else:
                hi = mid - 1
        lo_t = lo
        lo, hi = lo_t + 1, hi_t
        while lo < hi:  # the smallest v whose batch surely does not fit
            mid = (lo + hi) // 2
            if self.counts(mid)[0] > self.cap:
                hi = mid
            else:
                lo = mid + 1
        return lo_t, max(lo, lo_t + 1)

    def pivot(self, lo_t: int, hi_t: int, bisect: bool) -> int:
        """The next candidate in (lo_t, hi_t): where the interpolated batch size reaches the cap,
        or the middle when interpolation stopped halving the interval."""
        if bisect:
            return lo_t + (hi_t - lo_t) // 2
        lo, hi = lo_t + 1, hi_t - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.estimate(mid, lo_t, hi_t) <= self.cap:
                lo = mid
            else:
                hi = mid - 1
        return lo

    # -- the plan ---------------------------------------------------------------------------------

    def run(self) -> tuple[dict[TP, int], AlignStats]:
        if self.backlog <= self.cap:
            return dict(self.ends), self.stats(self.ends, None, capped=False)
        try:
            return self.search()
        except _GiveUp as exc:
            out = rate_limit(self.starts, self.ends, self.cap)
            return out, self.stats(out, None, fallback=str(exc))

    def search(self) -> tuple[dict[TP, int], AlignStats]:
        self.fetch({tp: self.starts[tp] for tp in self.parts})
        t0 = min(self.ts(tp, self.starts[tp]) for tp in self.parts)
        if not self.decide(t0):  # one timestamp holds more than the cap: share it out
            out = rate_limit(self.starts, self.exact(t0), self.cap)
            return out, self.stats(out, t0, tie_split=True)
        self.fetch({tp: self.ends[tp] - 1 for tp in self.parts})
        lo_t = t0  # fits
        hi_t = max(t0 + 1, max(self.ts(tp, self.ends[tp] - 1) for tp in self.parts))  # does not
        widths: list[int] = []
        while True:
            lo_t, hi_t = self.tighten(lo_t, hi_t)
            if hi_t - lo_t <= 1:
                break
            if self.pivots >= MAX_PIVOTS:
                raise _GiveUp(f"more than {MAX_PIVOTS} pivots")
            # Safeguard (as in Brent's method): bisect when two steps did not halve the interval.
            stalled = len(widths) >= 2 and hi_t - lo_t > widths[-2] // 2
            widths.append(hi_t - lo_t)
            v = self.pivot(lo_t, hi_t, stalled)
            self.pivots += 1
            if self.decide(v):
                lo_t = v
            else:
                hi_t = v
        out = self.exact(lo_t)
        admitted = sum(out[tp] - self.starts[tp] for tp in self.parts)
        if admitted > self.cap:  # only with out-of-order timestamps
            out = rate_limit(self.starts, out, self.cap)
            return out, self.stats(out, lo_t, fallback="out-of-order timestamps exceeded the cap")
        if admitted < 1:  # likewise
            out = rate_limit(self.starts, self.ends, self.cap)
            return out, self.stats(out, None, fallback="out-of-order timestamps admitted nothing")
        return out, self.stats(out, lo_t)


class _GiveUp(Exception):
    pass
