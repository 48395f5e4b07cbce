"""What the writer reads from a query's checkpoint: the records a micro-batch read (its log line,
docs/operations.md "Logs")."""

from __future__ import annotations

import json
from pathlib import Path

from replimon.streaming.checkpoint import Checkpoint


def _offsets(folder: Path, batch: int, value: dict[str, dict[str, int]]) -> None:
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(value)}\n')


def test_records_in_is_the_offset_difference(tmp_path: Path) -> None:
    _offsets(tmp_path, 0, {"a": {"0": 10, "1": 5}})
    _offsets(tmp_path, 1, {"a": {"0": 110, "1": 123}})
    _offsets(tmp_path, 2, {"a": {"0": 110, "1": 123}, "b": {"0": 7}})
    ckpt = Checkpoint(str(tmp_path))
    assert ckpt.records_in(1) == 218
    assert ckpt.records_in(0) is None  # where batch 0 started is not in the log
    assert ckpt.records_in(2) is None  # a partition new in this batch: unknown, not a guess
    assert ckpt.records_in(3) is None  # no such batch
