"""The SparkSession the job and the tests use, configured as PySpark 4.3's Python
``transformWithState`` needs on these machines (docs/streaming.md): RocksDB state store with
changelog checkpointing (the default store fails at run time), avro state encoding pinned on a
checkpoint's first run (state schema evolution needs it), few shuffle partitions (pinned in the
checkpoint; each is a Python task and a RocksDB store per batch), no UI, the driver's Python for
workers (another python3 from PATH may lack the project's packages), and checkpoint files written
without starting a chmod process per file (``localfs.py``).

The JVM logs errors only (``log4j2-quiet.properties`` beside this module) unless Python's
``pyspark`` logger is at INFO or below, as ``replimon run --verbose`` sets it (``console.quiet_logs``):
then Spark's default profile and its WARN level (docs/operations.md, "Logs").

Under ``spark-submit`` (``docs/cluster.md``) the JVM is already running when Python starts, and its
``--master`` is the one that counts: ``streaming.master`` is then not applied.

When this process starts the JVM (``jvm_launch``), the JVM dies with it, whatever kills it (the
kernel sends it SIGTERM: ``PR_SET_PDEATHSIG``), and one interrupted while the JVM starts stops it;
its output goes through a filter that drops PySpark's "Streaming TransformWithStateInPandas Python
worker ..." lines (printed by the stateful operator's Python worker on every start, untimestamped,
through the JVM's stderr) and passes everything else on (docs/operations.md, "Logs")."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")


def spark_conf(master: str = "local[2]", shuffle_partitions: int = 2, **extra: Any) -> dict[str, str]:
    conf = {
        "spark.master": master,
        "spark.app.name": "replimon",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.stateStore.encodingFormat": "avro",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": "1g",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        # query.stop() waits at most this long for the micro-batch thread (Spark's default is
        # forever): a task blocked on a broker that is gone would otherwise hold a stop for good
        # (the runner then stops the JVM: docs/operations.md, "Stopping")
        "spark.sql.streaming.stopTimeout": "15s",
    }
    conf.update({k: str(v) for k, v in extra.items()})
    return conf


def verbose_jvm() -> bool:
    """Whether the JVM may log as Spark does by default: Python's ``pyspark`` logger is at INFO
    or below (``replimon run --verbose``); else errors only."""
    return logging.getLogger("pyspark").getEffectiveLevel() <= logging.INFO


def quiet_jvm(conf: dict[str, str]) -> None:
    """Point the driver JVM at ``log4j2-quiet.properties`` (kept with any java options the
    configuration gives): Spark's startup lines and WARNs go, its errors stay. It applies when
    this process starts the JVM (the builder passes it to the launcher); under spark-submit the
    JVM is running already and spark-submit's own options count."""
    key = "spark.driver.extraJavaOptions"
    option = f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
    conf[key] = f"{conf[key]} {option}" if conf.get(key) else option


def use_nio_fs(conf: dict[str, str], given: dict[str, Any]) -> None:
    """Checkpoint files written without a chmod process each (``localfs.py``), unless the
    configuration names its own ``file:`` file system (``spark.hadoop.fs.file.impl``, e.g.
    ``org.apache.hadoop.fs.LocalFileSystem``: Hadoop's, as before) or checkpoint file manager.
    Our jar goes before a class path the configuration gives. Only where this process starts the
    JVM: under spark-submit the class path is fixed already."""
    if "spark.hadoop.fs.file.impl" in given or "spark.sql.streaming.checkpointFileManagerClass" in given:
        return
    from replimon.streaming import localfs

    for key, value in localfs.conf().items():
        if key == "spark.driver.extraClassPath" and conf.get(key):
            value = f"{value}{os.pathsep}{conf[key]}"
        conf[key] = value


def prepare_env() -> None:
    """Environment the JVM and the Python workers must see before the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def launched_by_spark_submit() -> bool:
    """True when spark-submit started this Python process: PySpark then connects to the JVM that
    spark-submit already started (it passes the gateway's port in this variable), with the master
    and the ``--conf`` values spark-submit resolved."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_session(master: str = "local[2]", shuffle_partitions: int = 2, **extra: Any) -> Any:
    """A SparkSession (created once per process), with the replimon data sources registered.

    ``master`` applies only when this process starts its own JVM; under spark-submit the builder
    would override spark-submit's ``--master`` with it, so it is left out there."""
    prepare_env()
    from pyspark.sql import SparkSession

    conf = spark_conf(master, shuffle_partitions, **extra)
    verbose = verbose_jvm()
    if launched_by_spark_submit():
        del conf["spark.master"]
    else:
        use_nio_fs(conf, extra)
        if not verbose:
            quiet_jvm(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with jvm_launch():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    register_sources(spark)
    return spark


def register_sources(spark: Any) -> None:
    try:
        from replimon.streaming.sources.kafka import KafkaDataSource
    except ImportError:  # pragma: no cover - until the source exists
        return
    spark.dataSource.register(KafkaDataSource)


# What PySpark's Python workers print on the JVM's output and nobody needs (module docstring).
# The JVM's own "WARNING: Using incubator modules: jdk.incubator.vector" (Spark 4 loads that module)
# goes too: no log setting reaches it.
CHATTER = (b"TransformWithStateInPandas Python worker", b"TransformWithStateInPySpark Python worker",
           b"WARNING: Using incubator modules")
_PR_SET_PDEATHSIG = 1


def _die_with_this_process() -> None:
    """In the JVM's child process before it runs: the kernel sends it SIGTERM when the thread
    that started it ends (this process's main thread: the process). Linux only; elsewhere the
    JVM still ends on its stdin's EOF as PySpark arranges."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


MUTED = threading.Event()  # set: the JVM's output is dropped (it is being stopped: ``mute_jvm``)


def mute_jvm() -> None:
    """Drop the JVM's output from now on: a JVM stopped while it starts (Ctrl-C then) logs the
    errors of its half-made SparkContext, which say nothing to whoever stopped it."""
    MUTED.set()


def forward(src: IO[bytes], fd: int, drop: tuple[bytes, ...] = CHATTER) -> threading.Thread:
    """Copy ``src`` line by line to file descriptor ``fd`` in a daemon thread, leaving out the
    lines that hold one of ``drop`` and the empty line each is printed with (and everything once
    ``mute_jvm`` was called)."""

    def copy() -> None:
        skipped = False
        with contextlib.suppress(OSError, ValueError):
            for line in iter(src.readline, b""):
                if MUTED.is_set() or any(d in line for d in drop):
                    skipped = True
                    continue
                if skipped and not line.strip():
                    skipped = False
                    continue
                skipped = False
                os.write(fd, line)

    thread = threading.Thread(target=copy, name=f"jvm-output-{fd}", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def jvm_launch() -> Iterator[list[subprocess.Popen[bytes]]]:
    """While PySpark starts its JVM: the JVM dies with this process, its output is filtered
    (``forward``), and an exception meanwhile (a KeyboardInterrupt, a stop request) stops it
    instead of leaving it running (module docstring). Yields the processes started (none when
    the JVM runs already)."""
    from pyspark import java_gateway

    real = java_gateway.Popen
    started: list[subprocess.Popen[bytes]] = []
    main = threading.current_thread() is threading.main_thread()

    def popen(cmd: Any, **kw: Any) -> subprocess.Popen[bytes]:
        inner = kw.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            if main:  # the signal follows the starting thread: only the main thread lasts
                _die_with_this_process()

        kw["preexec_fn"] = preexec
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
        proc = real(cmd, **kw)
        started.append(proc)
        assert proc.stdout is not None and proc.stderr is not None
        forward(proc.stdout, 1)
        forward(proc.stderr, 2)
        return proc

    java_gateway.Popen = popen
    from pyspark.core import context

    # SparkContext installs a SIGINT handler of its own (cancel the jobs, raise KeyboardInterrupt,
    # inside whatever Py4J call runs then: Py4J's traces). The caller's handlers stay: `replimon
    # run` stops between batches, everyone else gets Python's KeyboardInterrupt as before.
    context.signal = _KeepHandlers()  # type: ignore[attr-defined]
    try:
        yield started
    except BaseException:
        mute_jvm()
        for proc in started:
            stop_process(proc)
        raise
    finally:
        java_gateway.Popen = real
        context.signal = signal  # type: ignore[attr-defined]


class _KeepHandlers:
    """The ``signal`` module as ``pyspark.core.context`` sees it while a session starts:
    installing a handler is left undone (``jvm_launch``)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    @staticmethod
    def signal(signum: int, _handler: Any) -> Any:
        return signal.getsignal(signum)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; waits for the process."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def jvm_process() -> Any:
    """The JVM this process started (a ``Popen``), None under spark-submit or before a session."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return getattr(gateway, "proc", None) if gateway is not None else None
