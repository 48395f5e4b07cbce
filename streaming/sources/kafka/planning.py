"""Planning the ``replimon-kafka`` source's reads: concrete offsets for the starting and ending
options, and the offset ranges of a batch cut into Spark tasks.

How much of each partition a capped micro-batch admits is ``admission.py``'s; the Kafka calls
(partitions, true ends, timestamp lookups) are ``replimon.kafka``'s. Everything here is
deterministic for given offsets, so a batch planned again after a crash gets the same ranges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from replimon.kafka import TP, KafkaClient
from replimon.streaming.sources.kafka.options import (
    EARLIEST,
    LATEST,
    Endpoint,
    KafkaOptionError,
    Options,
)

Range = tuple[str, int, int, int]  # topic, partition, from (inclusive), until (exclusive)


def _divide(rng: Range, parts: int) -> list[Range]:
    topic, part, start, until = rng
    remaining = until - start
    out = []
    pos = start
    for i in range(parts):
        size = remaining // (parts - i)
        remaining -= size
        end = min(pos + size, until)
        if end > pos:
            out.append((topic, part, pos, end))
        pos = end
    return out


def split_ranges(ranges: Sequence[Range], min_partitions: int | None = None,
                 max_records_per_partition: int | None = None) -> list[Range]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges, cut ranges at
    ``maxRecordsPerPartition``, then split the large ones further in proportion to their size
    until there are about ``minPartitions``. Deterministic for given ranges."""
    out = [r for r in sorted(ranges) if r[3] > r[2]]
    if max_records_per_partition:
        out = [piece for r in out
               for piece in _divide(r, -(-(r[3] - r[2]) // max_records_per_partition))]
    if not min_partitions or len(out) >= min_partitions:
        return out
    total = sum(r[3] - r[2] for r in out)

    def parts_for(size: int, total_size: int, min_parts: int) -> int:
        return max(int(size / total_size * min_parts + 0.5), 1)  # Scala's math.round

    unsplit = [r for r in out if parts_for(r[3] - r[2], total, min_partitions) == 1]
    unsplit_tps = {(r[0], r[1]) for r in unsplit}
    split_total = total - sum(r[3] - r[2] for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    result: list[Range] = []
    for r in out:
        n = 1 if (r[0], r[1]) in unsplit_tps else parts_for(r[3] - r[2], split_total, split_min)
        result.extend(_divide(r, n))
    return result


def pack_ranges(ranges: Sequence[Range], max_partitions: int) -> list[list[Range]]:
    """At most ``max_partitions`` lists of ranges with about equal record counts: the largest
    range first, each onto the lightest list so far (ties: the lowest index). Deterministic."""
    bins: list[list[Range]] = [[] for _ in range(min(max_partitions, len(ranges)))]
    loads = [0] * len(bins)
    for r in sorted(ranges, key=lambda r: (-(r[3] - r[2]), r)):
        i = min(range(len(bins)), key=lambda k: (loads[k], k))
        bins[i].append(r)
        loads[i] += r[3] - r[2]
    return [sorted(b) for b in bins if b]


def resolve(client: KafkaClient, opts: Options, endpoint: Endpoint, which: str,
            tps: Sequence[TP], marks: Mapping[TP, tuple[int, int]],
            ends: Mapping[TP, int]) -> dict[TP, int]:
    """Concrete offsets for a starting/ending option (``which``) over the partitions ``tps``
    with their watermarks and true ends. Partitions an offsets/timestamps JSON leaves out get
    the default: earliest for starting, latest for ending."""
    default_latest = which == "ending"
    kind = endpoint.kind
    if kind == "default":
        kind = "latest" if default_latest else "earliest"
    if kind == "earliest":
        return {tp: marks[tp][0] for tp in tps}
    if kind == "latest":
        return {tp: ends[tp] for tp in tps}
    out: dict[TP, int] = {}
    if kind == "offsets":
        for tp in tps:
            off = endpoint.offsets.get(tp, LATEST if default_latest else EARLIEST)
            out[tp] = marks[tp][0] if off == EARLIEST else ends[tp] if off == LATEST else off
        return out
    if endpoint.timestamp is not None:
        wanted = {tp: endpoint.timestamp for tp in tps}
    else:
        wanted = {tp: ts for tp, ts in endpoint.offsets.items() if tp in marks}
    found = client.timestamp_offsets(wanted, marks, ends)
    for tp in tps:
        if tp not in wanted:
            out[tp] = ends[tp] if default_latest else marks[tp][0]
            continue
        hit = found.get(tp)
        if hit is None:
            if which == "starting" and opts.starting_ts_strategy == "error":
                raise KafkaOptionError(
                    f"Option '{endpoint.option}': no record in {tp[0]}-{tp[1]} has a "
                    f"timestamp >= {wanted[tp]}. Set 'startingOffsetsByTimestampStrategy' "
                    "to 'latest' to start at the end of such partitions instead.")
            hit = ends[tp]
        out[tp] = hit
    return out
