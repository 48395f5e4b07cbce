"""The job's entry point for ``spark-submit`` (``docs/cluster.md``): the same job as ``replimon run``.

Pass this file to spark-submit; everything after it is ``replimon run``'s flags, plus the global
``--config FILE`` (``-c``) anywhere among them::

    spark-submit --master spark://HOST:7077 --conf spark.pyspark.python=/opt/replimon/bin/python \\
        "$(/opt/replimon/bin/python -c 'import replimon.streaming.submit as m; print(m.__file__)')" \\
        --config /etc/replimon.yaml --replay --run-id postmortem-1

The settings are read as ``replimon run`` reads them (``--config``, ``REPLIMON_*``, else
``conf/replimon.yaml`` in the working directory); the master is spark-submit's, never
``streaming.master`` (``replimon.streaming.session.get_session``). Exit status as ``replimon run``:
0 after a clean stop, 2 for a wrong flag or config value, 1 when the query failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__" and sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    # Run as a file, Python puts this package's folder first on sys.path, where job.py, session.py
    # and the rest would shadow any top-level module of the same name: take it off.
    del sys.path[0]

GLOBAL_FLAGS = ("--config", "-c")


def cli_args(argv: list[str]) -> list[str]:
    """spark-submit's application arguments -> ``replimon [--config FILE] run ARGS``."""
    args = list(argv)
    if args[:1] == ["run"]:
        args = args[1:]
    config: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in GLOBAL_FLAGS and i + 1 < len(args):
            config = ["--config", args[i + 1]]
            i += 2
            continue
        if arg.startswith("--config="):
            config = [arg]
        else:
            rest.append(arg)
        i += 1
    return [*config, "run", *rest]


def main(argv: list[str] | None = None) -> int:
    import logging

    import replimon
    from replimon.cli import main as cli_main

    args = cli_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("replimon.submit").info(
        "replimon from %s, Python %s", Path(replimon.__file__).parent, sys.executable)
    try:
        return cli_main(args)
    finally:
        stop_session()


def stop_session() -> None:
    """Stop the session before Python exits: SparkContext.stop drains the listener bus while this
    process can still answer it (otherwise the JVM's last onQueryTerminated call fails on a closed
    socket and logs a stack trace after a clean run)."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
