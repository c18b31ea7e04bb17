"""How the warm Spark's processes start: its JVM with a class-data-sharing archive of Spark's
classes (half the start-up), and its Python workers importing PySpark's compiled modules.

Python workers (`spark_home`). Spark runs Python in processes of its own: a streaming query's
source runner, the steps that plan a Python data source's read and write (a new process each,
for every query), the tasks. It puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on their
PYTHONPATH, and a zip holds no compiled bytecode (nor can Python write any for it): each of those
processes compiled PySpark's modules from source, 1.0 s of CPU where the installed package's
cached bytecode takes 0.2-0.3 s (2.4 s against 0.5-0.7 s of wall time on the busy 2-core VM).
A continuous query starts five or six of them. So the warm Spark runs with a Spark home of its
own, PySpark's bin/ and jars/ and nothing else: the zip's path then names nothing, and its
workers import the PySpark installed with kinesim (the same version: the zip is built from it).

Class archive.
A new Spark JVM spends most of its first half minute loading, verifying and linking some 20,000
classes from PySpark's jars, before and during its first queries. Java's AppCDS keeps those classes
parsed and verified in an archive file that the next JVM maps in. Measured on the 2-core VM while
other work kept the load at ~5 (issue 33, bench/README.md): from start to Spark Connect listening
10.6-12.9 s without the archive, 5.1-8.3 s with it; the first table registration 6.9-8.7 s
against 2.2-6.8 s. Warm queries are unaffected (the JIT is the same; only class loading changes).

Java 17 writes such an archive when a JVM started with ``-XX:ArchiveClassesAtExit=FILE`` exits
normally (SIGTERM included: the supervisor stops Spark that way), for every class that JVM loaded.
So the first warm Spark on a machine records one (`archive_options`), and the supervisor keeps it
once Spark has exited (`keep_archive`), under ``~/.cache/kinesim/`` (``$XDG_CACHE_HOME``), one per
Java + PySpark installation, ~200 MB; every later warm Spark maps it in. Two safety rules, because
a JVM mapping a truncated archive crashes at start (SIGBUS) rather than ignoring it:

- a recorded archive is kept only after a JVM with the same command line mapped it (``-Xshare:on``,
  which fails instead of silently going without) and exited 0; a half-written one (the JVM was
  killed while dumping) is deleted. The command line is Spark's own, read from /proc: Linux only;
- a Spark that exits before it listens while mapping an archive has the archive deleted, and the
  supervisor starts it again without (`discard_archive`).

``KINESIM_SPARK_CDS=0`` turns the archive off.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile

ENV = "KINESIM_SPARK_CDS"
MAIN_CLASS = "org.apache.spark.deploy.SparkSubmit"   # what spark-submit's java command runs
RECORD = "-XX:ArchiveClassesAtExit="
USE = "-XX:SharedArchiveFile="
# The JVM's own notes on classes it leaves out of an archive (a thousand lines in spark.log), and
# on an archive it cannot use (it then goes without, which is all there is to do).
QUIET = "-Xlog:cds*=off"
CHECK_TIMEOUT_S = 120
# Writing the archive as the JVM exits took 16 s at load 4 on the 2-core VM: a supervisor stopping
# Spark waits up to this long for it (once per installation), not 10 s.
RECORDING_STOP_S = 40.0


def cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "kinesim")


def archive_path(java: str, home: str = "") -> str:
    """The archive for this Java, this PySpark and the Spark home its classpath is under (a JVM
    maps an archive only with the classpath it was recorded with): another records its own."""
    import pyspark
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    try:
        real = os.path.realpath(java)
        identity = [real, str(os.stat(real).st_mtime_ns), pyspark.__version__, home, jars, *sorted(os.listdir(jars))]
    except OSError:
        identity = [java, pyspark.__version__, home, jars]
    digest = hashlib.sha1("\0".join(identity).encode()).hexdigest()[:16]
    return os.path.join(cache_dir(), f"spark-cds-{digest}.jsa")


def spark_home() -> str:
    """The warm Spark's Spark home (see the module's docstring), made once per PySpark install;
    PySpark's own where it cannot be made."""
    import pyspark
    real = os.path.dirname(os.path.abspath(pyspark.__file__))
    home = os.path.join(cache_dir(), f"spark-home-{hashlib.sha1(real.encode()).hexdigest()[:12]}")
    parts = [p for p in ("bin", "jars", "conf") if os.path.isdir(os.path.join(real, p))]
    if all(os.path.realpath(os.path.join(home, p)) == os.path.join(real, p) for p in parts):
        return home
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="spark-home-", dir=cache_dir())
        for part in parts:
            os.symlink(os.path.join(real, part), os.path.join(tmp, part))
        shutil.rmtree(home, ignore_errors=True)
        os.replace(tmp, home)
    except OSError:
        return real if not os.path.isdir(home) else home
    return home


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0" and os.path.isdir("/proc")


def archive_options(java: str, home: str = "") -> tuple[list[str], str | None]:
    """The JVM options for the archive (use it, or record one) of a Spark run from Spark home
    `home` and, when recording, the file the JVM will write at exit (for `keep_archive`)."""
    if not enabled():
        return [], None
    _remove_abandoned()
    path = archive_path(java, home)
    if os.path.isfile(path):
        return [USE + path, QUIET], None
    try:
        os.makedirs(cache_dir(), exist_ok=True)
    except OSError:
        return [], None
    recording = f"{path}.{os.getpid()}.tmp"
    return [RECORD + recording, QUIET], recording


def _remove_abandoned() -> None:
    """Recordings whose supervisor is gone (killed before it could check them): ~200 MB each."""
    for path in glob.glob(os.path.join(cache_dir(), "spark-cds-*.jsa.*.tmp")):
        try:
            os.kill(int(path.rsplit(".", 2)[1]), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                os.unlink(path)
        except (ValueError, PermissionError):
            pass


def jvm_command(pid: int) -> list[str] | None:
    """The command line of a running process (Spark's JVM: spark-submit execs java), or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return None
    return args if MAIN_CLASS in args else None


def keep_archive(recording: str, command: list[str] | None, exited: int | None) -> bool:
    """Once Spark's JVM has exited: keep the archive it recorded if it is whole (a JVM with Spark's
    own options maps it, ``-Xshare:on``, and exits 0), else delete it. `command` is that JVM's
    command line (`jvm_command`), `exited` its exit status."""
    final = recording.rsplit(".", 2)[0]
    try:
        usable = (command is not None and exited is not None and exited >= 0 and os.path.getsize(recording) > 0
                  and _maps(command, recording))
        if usable:
            os.replace(recording, final)
            for other in glob.glob(os.path.join(os.path.dirname(final), "spark-cds-*.jsa")):
                if other != final:  # another Java or PySpark's: one archive is kept
                    os.unlink(other)
        return usable
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(recording)


def _maps(command: list[str], archive: str) -> bool:
    """Whether a JVM with `command`'s options maps `archive` and exits 0 (``-version``)."""
    options = command[1:command.index(MAIN_CLASS)]
    options = [o for o in options if not o.startswith((RECORD, USE, "-Xshare"))]
    # A damaged archive crashes the JVM: no error report or core file left behind for that.
    check = [command[0], *options, "-Xshare:on", USE + archive, "-XX:ErrorFile=/dev/null",
             "-XX:-CreateCoredumpOnCrash", "-version"]
    try:
        done = subprocess.run(check, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S,
                              cwd=os.path.dirname(archive))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and "shared archive" not in done.stderr.lower()


def discard_archive(options: list[str]) -> bool:
    """Delete the archive a JVM started with `options` mapped (it died before it listened);
    whether there was one."""
    for option in options:
        if option.startswith(USE):
            with contextlib.suppress(OSError):
                os.unlink(option[len(USE):])
            return True
    return False
