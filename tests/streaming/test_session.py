"""The session builder's logging (docs/operations.md, "Logs"): the driver JVM gets the quiet
log4j2 configuration unless Python's ``pyspark`` logger is at INFO (``replimon run --verbose``),
and the configuration's own java options are kept."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from replimon.streaming.session import QUIET_LOG4J, quiet_jvm, spark_conf, verbose_jvm


def test_quiet_jvm_adds_the_quiet_configuration_and_keeps_given_options() -> None:
    conf = spark_conf()
    quiet_jvm(conf)
    assert conf["spark.driver.extraJavaOptions"] == f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"
    given = spark_conf(**{"spark.driver.extraJavaOptions": "-Dx=1"})
    quiet_jvm(given)
    assert given["spark.driver.extraJavaOptions"].split() == [
        "-Dx=1", f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"]
    text = QUIET_LOG4J.read_text(encoding="utf-8")
    assert "rootLogger.level = error" in text and "SYSTEM_ERR" in text


def test_verbose_follows_the_pyspark_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("pyspark")
    monkeypatch.setattr(logger, "level", logging.CRITICAL)
    assert not verbose_jvm()
    monkeypatch.setattr(logger, "level", logging.INFO)
    assert verbose_jvm()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_session_starts_without_third_party_lines() -> None:
    """A new JVM (a process of its own: the tests' session is running already) prints nothing
    at start but the JVM's own incubator-module notice, which no log setting reaches."""
    code = ("from replimon.streaming.session import get_session\n"
            "s = get_session()\ns.range(3).count()\ns.stop()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [ln for ln in (done.stdout + done.stderr).splitlines()
             if ln.strip() and not ln.startswith("WARNING: Using incubator modules")]
    assert lines == []
