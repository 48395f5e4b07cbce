"""The job's processor as it stored its state before the family field (state ``monitor_v5``,
lines ``name<TAB>next<TAB>floors<TAB>[due<TAB>]json``): to write a checkpoint of the old shape
that today's job must carry on (``tests/streaming/test_state_migration.py``). Shipped to Spark's
Python workers by value (``register_pickle_by_value``), as the tests' package is not on their path.
"""

from __future__ import annotations

from typing import Any

from replimon.core.limits import Limits
from replimon.streaming.bucket_state import LEGACY_STATE_NAME, STATE_SCHEMA, Groups, migrate_value
from replimon.streaming.processor import DEFAULT_BUCKETS, MonitorLogic, pandas_processor


def format_v5(groups: Groups) -> str:
    """The old code's ``format_groups`` (the family item, index 3, was not stored)."""
    return "\n".join(
        f"{name}\t{'' if g[1] is None else g[1]}\t{g[2]}\t"
        + (f"{g[4]}\t{g[0]}" if len(g) > 4 and g[4] is not None else g[0])
        for name, g in groups.items())


class V5Logic(MonitorLogic):
    """Today's logic over the old stored shape (replay mode: no clock rows)."""

    def read(self, state: Any) -> Any:
        value = state.get()
        return None if value is None else migrate_value(value)

    def save(self, state: Any, groups: Groups, timer: int | None, clock: tuple[int, int] | None) -> None:
        state.update((format_v5(groups), timer, self.buckets, *(clock or (None, None))))


def v5_pandas_processor(limits: Limits, time_mode: str, buckets: int = DEFAULT_BUCKETS, **options: Any) -> Any:
    """A Pandas-API processor that keeps its state under ``monitor_v5`` in the old shape."""
    options.pop("migrate_from", None)
    proc = pandas_processor(limits, time_mode, buckets, **options)
    proc.logic = V5Logic(limits, time_mode, buckets, **options)

    def init(handle: Any) -> None:
        proc.handle = handle
        proc.state = handle.getValueState(LEGACY_STATE_NAME, STATE_SCHEMA)

    proc.init = init
    return proc
