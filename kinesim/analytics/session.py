"""A local SparkSession that is ready to use from kinesim: the right Python, quiet logs, loopback only.

``spark_session(master="local[*]", app_name="kinesim", *, log_level="ERROR", progress=False, **conf)``
returns ``SparkSession.builder.getOrCreate()`` with:

- ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` set to this interpreter (unless already set), so
  Python workers import the same pyspark, pyarrow and kinesim as the driver;
- Java checked first: Spark 4 runs on Java 17+, found as ``$JAVA_HOME/bin/java`` or ``java`` on
  PATH (as Spark's launcher looks for it). Missing or too old: `JavaNotFoundError` with a message
  that says what to install, instead of PySpark's ``JAVA_GATEWAY_EXITED``;
- quiet logging: a log4j2 configuration at ``log_level`` from the JVM's first line (no "Using
  Spark's default log4j profile", no NativeCodeLoader warning), the JVM's "Using incubator
  modules" notice dropped, and PySpark's JSON error logger (which repeats every SQL error with
  a Java stack trace on stderr) silenced: errors still arrive as exceptions;
- the driver bound to 127.0.0.1 and the web UI off (``spark.ui.enabled=true`` turns it back on);
- unless ``SPARK_HOME`` is set, Spark run from kinesim's Spark home (`spark_jvm.spark_home`), so
  that Spark's Python workers import the installed PySpark rather than compile pyspark.zip;
- ``spark.sql.session.timeZone=UTC``, as Firehose keys and timestamps are UTC;
- ``progress=True``: Spark's console progress bar on stderr (``[Stage 1:====>  (3 + 2) / 8]``).

``**conf`` are Spark settings, e.g. ``spark_session(**{"spark.driver.memory": "4g"})``. A
session that already runs in this process is returned as is (Spark has one per JVM), with the
runtime SQL settings of ``conf`` applied.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any

JAVA_HINT = "Spark needs Java 17+: install it, e.g. `apt install openjdk-17-jre-headless`, or set JAVA_HOME"
MIN_JAVA = 17

# log4j2 for the driver JVM: one console appender on stderr, short lines, no stack traces (the
# CLI reports the error itself; `log_level="WARN"` or "INFO" shows more).
_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex{{short.message}}
# As a shell (PySpark counts), Spark applies the level of the class that started it (PySpark's
# gateway), WARN unless configured; equal to the root level, it neither changes it nor prints
# "Setting default log level to ...".
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = {level}
"""
# What the JVM prints itself (not through log4j) on every start.
_JVM_NOISE = (b"WARNING: Using incubator modules: jdk.incubator.vector\n",)


class JavaNotFoundError(RuntimeError):
    """No usable Java for Spark."""


def java_command() -> str:
    """The java Spark's launcher would run, or JavaNotFoundError."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise JavaNotFoundError(f"{JAVA_HINT} (JAVA_HOME={home} has no bin/java)")
        return java
    java = shutil.which("java")
    if java is None:
        raise JavaNotFoundError(f"{JAVA_HINT} (no `java` on PATH)")
    return java


def java_version(java: str) -> int:
    """The major version of a java executable (8 for "1.8.0_392", 17 for "17.0.15")."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as err:
        raise JavaNotFoundError(f"{JAVA_HINT} ({java}: {err.strerror})") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        raise JavaNotFoundError(f"{JAVA_HINT} ({java} -version said: {(out.stderr or out.stdout).strip()[:200]})")
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


_checked: dict[tuple[str, int], int] = {}


def _known_versions() -> str:
    return os.path.join(tempfile.gettempdir(), f"kinesim-java-versions-{os.getuid()}.json")


def check_java() -> str:
    """The java to use, checked to be Java 17 or later; JavaNotFoundError otherwise."""
    java = java_command()
    try:
        identity = (os.path.realpath(java), os.stat(java).st_mtime_ns)
    except OSError:
        identity = (java, 0)
    if identity not in _checked:
        # `java -version` is a JVM start (0.1 s on a quiet machine, up to a second on a busy one),
        # paid by every `kinesim sql`: the answer is kept per java binary (path, mtime) in a file.
        key = f"{identity[0]}\0{identity[1]}"
        try:
            with open(_known_versions()) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = {}
        if not isinstance(known.get(key), int):
            known[key] = java_version(java)
            with contextlib.suppress(OSError):
                tmp = f"{_known_versions()}.{os.getpid()}"
                with open(tmp, "w") as f:
                    json.dump(known, f)
                os.replace(tmp, _known_versions())
        _checked[identity] = known[key]
    version = _checked[identity]
    if version < MIN_JAVA:
        raise JavaNotFoundError(f"{JAVA_HINT} (found Java {version} at {java})")
    return java


def _log4j2_file(level: str) -> str:
    path = os.path.join(tempfile.gettempdir(), f"kinesim-spark-log4j2-{level.lower()}.properties")
    text = _LOG4J2.format(level=level.lower())
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def _forward_jvm_stderr(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ours as it comes (the progress bar redraws with "\\r"), minus the
    lines the JVM prints on every start."""
    out = getattr(sys.stderr, "buffer", None)
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        for noise in _JVM_NOISE:
            chunk = chunk.replace(noise, b"")
        if not chunk:
            continue
        try:
            if out is not None:
                out.write(chunk)
                out.flush()
            else:
                sys.stderr.write(chunk.decode("utf-8", "replace"))
                sys.stderr.flush()
        except (OSError, ValueError):  # our stderr is gone (interpreter exiting)
            return


def _quiet_pyspark_loggers() -> None:
    # PySpark logs every captured SQL error as JSON with the Java stack trace before raising it.
    # The loggers must be PySpark's own class (it passes extra keyword arguments to them).
    from pyspark.logger import PySparkLogger
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


_scratch: list[str] = []


def scratch_dir() -> str:
    """Where Spark's own files go (the SQL warehouse, Derby's metastore_db and derby.log): a
    temporary directory of this process, removed at exit, not the directory the user ran
    `kinesim sql` in (Spark's default, which leaves `spark-warehouse/` behind). kinesim's tables
    are views and the catalog is in memory, so nothing there outlives the session anyway."""
    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="kinesim-spark-"))
        atexit.register(shutil.rmtree, _scratch[0], True)
    return _scratch[0]


def scratch_settings() -> tuple[dict[str, str], str]:
    """The Spark settings and the driver JVM option that keep Spark's files in `scratch_dir()`."""
    home = scratch_dir()
    return ({"spark.sql.warehouse.dir": os.path.join(home, "warehouse")},
            f"-Dderby.system.home={home}")


def spark_session(master: str = "local[*]", app_name: str = "kinesim", *, log_level: str = "ERROR",
                  progress: bool = False, **conf: Any):
    """A SparkSession for kinesim's data; see the module docstring."""
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Which address the driver advertises: without this Spark picks the first non-loopback one.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "SPARK_HOME" not in os.environ:
        # Spark's Python workers then import the installed PySpark, compiled once, not pyspark.zip
        # (compiled again by every worker: ~0.7 s of CPU each; see spark_jvm.spark_home).
        from .spark_jvm import spark_home
        os.environ["SPARK_HOME"] = spark_home()
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    _quiet_pyspark_loggers()
    settings: dict[str, str] = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
        "spark.sql.session.timeZone": "UTC",
    }
    scratch, derby_home = scratch_settings()
    settings.update(scratch)
    settings.update({k: str(v) for k, v in conf.items()})
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j2_file(log_level)} {derby_home}"
    if settings.get("spark.driver.extraJavaOptions"):
        java_opts = f"{settings['spark.driver.extraJavaOptions']} {java_opts}"
    settings["spark.driver.extraJavaOptions"] = java_opts

    if SparkContext._active_spark_context is None:
        spark_conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
        # The JVM's stderr comes through us so that its start-up notice can be dropped.
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(target=_forward_jvm_stderr, args=(gateway.proc.stderr,), daemon=True,
                         name="kinesim-spark-stderr").start()
        SparkContext(conf=spark_conf, gateway=gateway)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level.upper())
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Every kinesim session reads streams too: spark.read(Stream).format("kinesim").
    from .streaming import register
    register(spark)
    return spark
