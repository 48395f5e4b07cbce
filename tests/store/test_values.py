"""Values crossing into and out of PostgreSQL: exact epoch-ms times, the monitor's -1 as NULL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replimon.store.values import EPOCH, MAX_MS, ms_from_ts, nonneg, ts_from_ms


@given(st.integers(min_value=0, max_value=MAX_MS))
def test_epoch_ms_round_trip_exactly(ms: int) -> None:
    ts = ts_from_ms(ms)
    assert ts is not None and ts.tzinfo is not None
    assert ms_from_ts(ts) == ms


def test_times_are_exact_at_the_millisecond_and_the_ends() -> None:
    assert ts_from_ms(1_767_225_600_123) == datetime(2026, 1, 1, 0, 0, 0, 123_000, tzinfo=UTC)
    assert ts_from_ms(0) == EPOCH and ms_from_ts(EPOCH) == 0
    last = ts_from_ms(MAX_MS)
    assert last == datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    assert ms_from_ts(last) == MAX_MS
    # A time between milliseconds gives the millisecond it is in.
    assert ms_from_ts(EPOCH + timedelta(microseconds=1_999)) == 1


def test_no_time_yet_is_none_and_a_datetime_passes_if_aware() -> None:
    assert ts_from_ms(None) is None and ts_from_ms(-1) is None and ms_from_ts(None) is None
    aware = datetime(2026, 1, 1, 0, 0, 1, 5000, tzinfo=UTC)
    assert ts_from_ms(aware) is aware
    with pytest.raises(ValueError, match="naive datetime"):
        ts_from_ms(datetime(2026, 1, 1))  # noqa: DTZ001 - the naive datetime under test


def test_none_yet_counters_are_null() -> None:
    assert [nonneg(x) for x in (None, -1, -5, 0, 7)] == [None, None, None, 0, 7]
