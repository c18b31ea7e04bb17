"""What keeps kinesim's Spark warm (issue 33) gives the answers Spark gives without it: tables kept
in memory see every new, rewritten or deleted object and every new field; the class archive of
Spark's classes is kept only when whole; Java's version is asked once per java; continuous queries
register only the tables they name; the streaming warm-up runs a continuous query's micro-batches
once Spark idles; Spark's Python workers import the installed PySpark; only statements that cannot
change a session leave it for the next command.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from kinesim.analytics import session, spark_jvm, table_cache  # noqa: E402
from kinesim.analytics.continuous import names_table  # noqa: E402
from kinesim.analytics.json_schemas import SchemaCache  # noqa: E402
from kinesim.analytics.table_cache import WarmTables  # noqa: E402
from kinesim.analytics.table_sources import prefix_source  # noqa: E402
from kinesim.analytics.tables import Catalog, register_sources  # noqa: E402

SUFFIX = "-1-2024-05-01-10-00-00-0b1c2d3e-aaaa-bbbb-cccc-00000000000"


def _in_memory(spark, view: str) -> bool:
    """Whether the view's plan reads rows Spark keeps in memory (a classic session's plan)."""
    return "InMemoryRelation" in spark.table(view)._jdf.queryExecution().withCachedData().toString()


@pytest.mark.slow
def test_kept_tables_answer_from_memory_and_see_every_change(local_spark, tmp_path):
    spark, data = local_spark, tmp_path / "data"
    schemas, warm = SchemaCache(str(tmp_path / "schemas")), WarmTables(str(tmp_path / "warm"))

    def put(n: int, page: str, *records: dict) -> Path:
        path = data / f"page={page}" / f"s{SUFFIX}{n}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path

    def register() -> str:
        catalog = register_sources(spark, [prefix_source("clicks", str(data), None)], Catalog(), schemas=schemas,
                                   warm=warm)
        [table] = catalog.tables
        return table.kept

    def rows() -> list[tuple]:
        return sorted(tuple(r) for r in spark.sql("SELECT page, n, tag FROM clicks").collect()) \
            if "tag" in spark.table("clicks").columns else \
            sorted(tuple(r) for r in spark.sql("SELECT page, n FROM clicks").collect())

    first = put(1, "home", *({"page": "home", "n": i} for i in range(100)))
    assert register() == "new" and spark.table("clicks").count() == 100
    assert register() == "kept" and _in_memory(spark, "clicks") and spark.table("clicks").count() == 100
    # A new object: appended to the kept rows, in the next answer.
    put(2, "cart", {"page": "cart", "n": 100})
    assert register() == "kept+fresh" and _in_memory(spark, "clicks")
    assert rows() == [("cart", 100)] + [("home", i) for i in range(100)]
    # A new field: a new base, read with it (the old one is dropped from memory).
    put(3, "cart", {"page": "cart", "n": 101, "tag": "x"})
    assert register() == "new"
    assert rows()[:2] == [("cart", 100, None), ("cart", 101, "x")] and len(rows()) == 102
    assert register() == "kept"
    # A deleted object, then a rewritten one: a new base each time, the answer without / with it.
    first.unlink()
    assert register() == "new" and rows() == [("cart", 100, None), ("cart", 101, "x")]
    put(2, "cart", {"page": "cart", "n": 200})
    assert register() == "new" and rows() == [("cart", 101, "x"), ("cart", 200, None)]
    # A fresh object whose partition value Spark types otherwise than the base's (7: an int
    # alone, a string with "cart"): a new base, typed as Spark types the whole table.
    for n in range(4, 40):
        put(n, "cart", *({"page": "cart", "n": 300 + n * 10 + i, "tag": "y"} for i in range(10)))
    assert register() == "new"
    put(40, "7", {"page": "7", "n": 1, "tag": "z"})
    assert register() == "new"
    assert spark.sql("SELECT page FROM clicks WHERE n = 1").first()[0] == "7"
    assert dict(spark.table("clicks").dtypes)["page"] == "string"
    assert spark.table("clicks").count() == 2 + 360 + 1
    # Old bases' trees go (one back is kept for queries still reading it).
    assert len(os.listdir(warm.trees)) <= 2


@pytest.mark.slow
def test_large_tables_are_read_as_before(local_spark, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / f"s{SUFFIX}1").write_text("".join(json.dumps({"n": i}) + "\n" for i in range(10)))
    warm = WarmTables(str(tmp_path / "warm"))
    monkeypatch.setattr(table_cache, "MAX_BYTES", 10)
    catalog = register_sources(local_spark, [prefix_source("big", str(data), None)], Catalog(),
                               schemas=SchemaCache(str(tmp_path / "schemas")), warm=warm)
    assert [t.kept for t in catalog.tables] == ["not kept"]
    assert local_spark.table("big").count() == 10 and not _in_memory(local_spark, "big")


def test_class_archive_is_kept_only_when_a_jvm_maps_it(tmp_path, monkeypatch):
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(spark_jvm.ENV, raising=False)
    final = spark_jvm.archive_path(java)
    options, recording = spark_jvm.archive_options(java)
    assert options[0] == spark_jvm.RECORD + recording and recording.startswith(final)
    # A JVM's own archive, recorded at its exit (any main class will do: the launcher's, failing).
    import pyspark
    launcher = next(Path(pyspark.__file__).parent.joinpath("jars").glob("spark-launcher_*.jar"))
    subprocess.run([java, *options, "-cp", str(launcher), "org.apache.spark.launcher.Main"], capture_output=True)
    command = [java, "-cp", str(launcher), *options, spark_jvm.MAIN_CLASS, "spark-internal"]
    assert os.path.getsize(recording) > 0
    good = Path(recording).read_bytes()
    assert spark_jvm.keep_archive(recording, command, 143)
    assert os.path.isfile(final) and not os.path.exists(recording)
    assert spark_jvm.archive_options(java) == ([spark_jvm.USE + final, spark_jvm.QUIET], None)
    # Half written (the JVM was killed while dumping), or from a killed JVM: deleted, not kept.
    os.unlink(final)
    for body, exited in ((good[:len(good) // 2], 143), (good, -9)):
        Path(recording).write_bytes(body)
        assert not spark_jvm.keep_archive(recording, command, exited)
        assert not os.path.exists(recording) and not os.path.exists(final)
    # An archive a JVM died with is deleted; off by the environment.
    Path(final).write_bytes(good)
    assert spark_jvm.discard_archive([spark_jvm.USE + final]) and not os.path.exists(final)
    monkeypatch.setenv(spark_jvm.ENV, "0")
    assert spark_jvm.archive_options(java) == ([], None)


def test_java_version_is_asked_once_per_java(tmp_path, monkeypatch):
    home, calls = tmp_path / "jdk", tmp_path / "calls"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"

    def fake(version: str, mtime: int) -> None:
        java.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'openjdk version \"{version}\" 2025-04-15' >&2\n")
        java.chmod(0o755)
        os.utime(java, ns=(mtime, mtime))   # another mtime: another java
    fake("17.0.9", 10**18)
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setattr(session, "_checked", {})
    monkeypatch.setattr(session, "_known_versions", lambda: str(tmp_path / "versions.json"))
    assert session.check_java() == str(java)
    session._checked.clear()   # another command: the file answers
    assert session.check_java() == str(java) and calls.read_text().count("x") == 1
    fake("11.0.2", 2 * 10**18)
    session._checked.clear()
    with pytest.raises(session.JavaNotFoundError, match="found Java 11"):
        session.check_java()
    assert calls.read_text().count("x") == 2


def test_continuous_queries_register_the_tables_they_name():
    sql = "SELECT c.page, count(*) FROM STREAM clicks c JOIN `pages_archive` p ON c.page = p.page GROUP BY c.page"
    assert names_table(sql, "pages_archive") and names_table(sql.upper(), "pages_archive")
    assert not names_table(sql, "pages") and not names_table(sql, "archive") and not names_table(sql, "clicks_archive")


@pytest.mark.slow
def test_streaming_warm_up_runs_a_continuous_query(local_spark):
    from kinesim.analytics.streaming import WARM_UP_BATCHES as BATCHES
    from kinesim.analytics.warmup_stream import warm_up_streaming
    assert warm_up_streaming(local_spark) >= BATCHES


def test_idle_watch_waits_for_a_quiet_window():
    from kinesim.analytics.connect_server import IdleWatch
    watch = IdleWatch(os.getpid())
    assert not watch.idle_for(3600, 1.0)         # a window as long as an hour has not passed
    busy = IdleWatch(os.getpid())
    deadline = busy.since + 0.5
    while time.monotonic() < deadline:        # this process: a whole core, over any share below one
        pass
    assert not busy.idle_for(0, 0.1)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "S":
            time.sleep(0.05)   # started: asleep in sleep(1), not exec'ing any more
        time.sleep(0.1)
        assert IdleWatch(sleeper.pid).idle_for(0, 0.1)   # no CPU used since the watch began
    finally:
        sleeper.kill()
        sleeper.wait()


def test_warm_spark_home_leaves_pysparks_zip_out(tmp_path, monkeypatch):
    """Spark's Python workers import the installed PySpark (compiled once), not pyspark.zip."""
    import pyspark
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = spark_jvm.spark_home()
    real = os.path.dirname(os.path.abspath(pyspark.__file__))
    assert home.startswith(str(tmp_path)) and spark_jvm.spark_home() == home
    assert os.path.realpath(os.path.join(home, "jars")) == os.path.join(real, "jars")
    assert os.access(os.path.join(home, "bin", "spark-submit"), os.X_OK)
    assert os.path.isfile(os.path.join(real, "python", "lib", "pyspark.zip"))
    assert not os.path.exists(os.path.join(home, "python", "lib", "pyspark.zip"))


def test_only_statements_that_cannot_change_a_session_leave_it_for_the_next_command():
    from kinesim.analytics.sessions import read_only
    for statement in ("SELECT 1", "  select * FROM t", "WITH a AS (SELECT 1) SELECT * FROM a", "(SELECT 1)",
                      "-- a comment\nSHOW TABLES", "/* x */ DESCRIBE t", "EXPLAIN SELECT 1", "VALUES (1)", "TABLE t",
                      "FROM t SELECT *", "desc t"):
        assert read_only(statement), statement
    for statement in ("CREATE TEMP VIEW v AS SELECT 1", "SET spark.sql.ansi.enabled=false", "USE db", "RESET",
                      "DECLARE VARIABLE x INT", "CACHE TABLE t", "DROP VIEW v", "selected", "-- SELECT\nSET x=1",
                      "BEGIN SELECT 1; END"):
        assert not read_only(statement), statement
