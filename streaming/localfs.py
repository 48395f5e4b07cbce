"""Checkpoint writes without a process per file (docs/streaming.md, "Checkpoint writes").

PySpark ships Hadoop without its native library, and Hadoop's local file system then sets a new
file's permissions by running ``chmod`` (``RawLocalFileSystem.setPermission``): every file a
micro-batch writes to its checkpoint (the offset log, the commit log, their ``.crc`` files, the
state store's changelog) starts a process from the driver's JVM, 10-20 ms each on these machines.
Spark alone (a ``rate-micro-batch`` source into ``noop``) spent about 75 ms of a 240 ms batch in
``walCommit`` and 85 in ``commitOffsets`` that way.

``NioLocalFileSystem.java`` (beside this module) is the same file system with ``setPermission``
through ``java.nio``. ``conf()`` compiles it once with the JDK's ``javac`` against PySpark's own
Hadoop jars (into the user's cache, named by a digest of the source and the jars, so an upgrade
recompiles), and returns the settings that put it on the driver's class path, make it the
``file:`` file system, and have Spark's checkpoint file manager use that file system
(``FileSystemBasedCheckpointFileManager``: the default one goes through Hadoop's ``FileContext``,
whose local implementation builds its own ``RawLocalFileSystem``). Without ``javac``, or when
compiling fails, it logs why once and returns nothing: the job runs as before, slower.

The checkpoint stays the same files in the same places (the change is how they are created), so
a checkpoint moves freely between sessions with and without it. Renames stay atomic on a local
file system. One guard is weaker: ``FileSystemBasedCheckpointFileManager`` checks that a log
entry does not exist and then renames onto it, where the default manager's rename refuses to
overwrite in one step. Spark refuses a second run of a query within one cluster; two separate
processes started on one checkpoint (a misconfiguration) could overwrite each other's log entry
in that gap. Only the nine permission bits are set (no sticky or set-id bits: checkpoint files
have none).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from functools import cache
from pathlib import Path

log = logging.getLogger("replimon.streaming")

SOURCE = Path(__file__).with_name("java") / "NioLocalFileSystem.java"
CLASS = "replimon.hadoop.NioLocalFileSystem"
MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "replimon"


def javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def jar_name(jars: Path) -> str:
    digest = hashlib.sha256(SOURCE.read_bytes())
    for jar in sorted(jars.glob("hadoop-*.jar")):
        digest.update(jar.name.encode())
    return f"replimon-hadoop-{digest.hexdigest()[:16]}.jar"


def build(target: Path, jars: Path, compiler: str) -> None:
    """Compile the source against ``jars`` into the jar ``target`` (written whole, then renamed:
    a concurrent build leaves one of two identical files)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        out = Path(tmp) / "classes"
        done = subprocess.run(
            [compiler, "--release", "17", "-nowarn", "-cp", str(jars / "*"), "-d", str(out), str(SOURCE)],
            capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            first = next((ln for ln in lines if "error:" in ln), lines[-1] if lines else "")
            raise RuntimeError(first or f"javac exited with {done.returncode}")
        staged = Path(tmp) / target.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(out.rglob("*.class")):
                z.write(f, f.relative_to(out).as_posix())
        os.replace(staged, target)


@cache
def jar() -> Path | None:
    """The compiled jar, built on first use; None (logged once) when it cannot be."""
    jars = spark_jars()
    target = cache_dir() / jar_name(jars)
    if target.exists():
        return target
    compiler = javac()
    if compiler is None:
        log.info("no javac found: Spark's checkpoint writes start a chmod process per file "
                 "(docs/streaming.md, \"Checkpoint writes\")")
        return None
    try:
        build(target, jars, compiler)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        log.warning("could not compile %s (%s): Spark's checkpoint writes start a chmod process per file",
                    SOURCE.name, exc)
        return None
    return target


def conf() -> dict[str, str]:
    """The session settings that use the compiled file system; empty when there is no jar."""
    path = jar()
    if path is None:
        return {}
    return {
        "spark.driver.extraClassPath": str(path),
        "spark.hadoop.fs.file.impl": CLASS,
        "spark.sql.streaming.checkpointFileManagerClass": MANAGER,
    }
