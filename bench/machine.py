"""What a benchmark result records about the machine and the code it measured (commit, uncommitted
changes, a digest of the sources, load average)."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent


def git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(BENCH_DIR.parent), *args], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def sources_digest() -> str:
    """A digest of the sources this process imported (contract, core, streaming)."""
    import replimon.contract
    import replimon.core
    import replimon.streaming

    h = hashlib.sha256()
    for mod in (replimon.contract, replimon.core, replimon.streaming):
        root = Path(mod.__file__).resolve().parent
        for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.sql")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        mem_gb = None
    dirty = git("status", "--porcelain", "--", "replimon", "streaming", "producers")
    return {"cpu_count": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)), "cpu_model": model,
            "memory_gb": mem_gb, "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"), "load_average_at_start_1_5_15": load_average(),
            "git_commit": git("rev-parse", "HEAD"),
            "uncommitted_changes_in_replimon_streaming_producers": None if dirty is None else bool(dirty),
            "sources_sha256_16": sources_digest()}
