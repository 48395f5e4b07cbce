"""Checkpoint writes without a chmod process per file (``streaming/localfs.py``,
docs/streaming.md "Checkpoint writes").

Hadoop's local file system without libhadoop runs ``chmod`` for every file it creates. The test
puts a ``chmod`` that logs its calls first on PATH of a new JVM (Hadoop finds the program on
PATH), runs a stateful streaming query (RocksDB state store, the offset and commit logs) through
``get_session``, and asserts that nothing under its checkpoint was chmod-ed, while a file created
in the same JVM through Hadoop's own ``LocalFileSystem`` was: the logger is seen, so the silence
means something."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from replimon.streaming import localfs

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from replimon.streaming.session import get_session

    root = Path(sys.argv[1])
    spark = get_session()
    spark.conf.set("spark.sql.streaming.stateStore.encodingFormat", "unsaferow")  # avro: not for aggregations
    (root / "in").mkdir()
    (root / "in" / "a.json").write_text("\\n".join(json.dumps({"k": i % 3}) for i in range(30)))
    df = spark.readStream.schema("k INT").json(str(root / "in")).groupBy("k").count()
    q = (df.writeStream.format("noop").outputMode("update")
         .option("checkpointLocation", str(root / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(300)
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration()
    conf.set("fs.file.impl", "org.apache.hadoop.fs.LocalFileSystem")
    conf.setBoolean("fs.file.impl.disable.cache", True)
    target = jvm.org.apache.hadoop.fs.Path((root / "hadoop" / "f").as_uri())
    fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(target.toUri(), conf)
    fs.create(target).close()
    print(spark.sparkContext.getConf().get("spark.hadoop.fs.file.impl"))
    spark.stop()
""")


@pytest.mark.timeout(600)
def test_checkpoint_files_are_created_without_a_chmod_process(tmp_path: Path) -> None:
    assert localfs.javac() is not None, "a JDK's javac is needed (Java 17 is on these machines)"
    assert localfs.jar() is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "chmod.log"
    fake = bin_dir / "chmod"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec /bin/chmod "$@"\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == localfs.CLASS
    ckpt = tmp_path / "ckpt"
    written = [p for p in ckpt.rglob("*") if p.is_file()]
    assert (ckpt / "offsets" / "0").exists() and (ckpt / "commits" / "0").exists()
    assert any("state" in p.parts for p in written), "the query wrote no state store file"
    logged = calls.read_text().splitlines() if calls.exists() else []
    assert any(str(tmp_path / "hadoop") in line for line in logged), (
        "Hadoop's LocalFileSystem ran no chmod: the logger is not seen, the test proves nothing")
    assert [line for line in logged if str(ckpt) in line] == []


def test_the_file_system_compiles_from_its_source(tmp_path: Path) -> None:
    """What a fresh machine does at its first session (the user's cache may hold the jar here)."""
    compiler = localfs.javac()
    assert compiler is not None, "a JDK's javac is needed (Java 17 is on these machines)"
    target = tmp_path / localfs.jar_name(localfs.spark_jars())
    localfs.build(target, localfs.spark_jars(), compiler)
    with zipfile.ZipFile(target) as z:
        names = set(z.namelist())
    assert {"replimon/hadoop/NioLocalFileSystem.class", "replimon/hadoop/NioLocalFileSystem$Raw.class"} <= names
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no build directory left behind


def test_a_failed_compile_names_its_first_error(tmp_path: Path) -> None:
    """Without Hadoop's jars the source does not compile: one line, the compiler's first error."""
    compiler = localfs.javac()
    assert compiler is not None
    with pytest.raises(RuntimeError, match=r"NioLocalFileSystem\.java:\d+: error: ") as caught:
        localfs.build(tmp_path / "x.jar", tmp_path, compiler)
    assert "\n" not in str(caught.value) and not str(caught.value).startswith("[")
    assert not (tmp_path / "x.jar").exists()
