"""`kinesim sql` and kinesim.analytics: Spark SQL over what Firehose delivered, through a real server.

One server (Firehose intervals scaled by 0.01) delivers known click events through four delivery
streams into one bucket: GZIP JSON lines, Parquet (DataFormatConversionConfiguration), dynamic
partitioning into Hive-style `page=<page>/` directories, and ZIP with records written back to
back (no newline) under the default YYYY/MM/dd/HH/ prefix. Bad records make error output next to
the data, which no table may count. One SparkSession serves the in-process tests; the command
itself runs as a subprocess (its own JVM) for the end-to-end checks.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter

import pytest

from conftest import client_for, start_server
from kinesim.analytics import sql_cli, view_tree
from kinesim.analytics.table_sources import DeliveredObject, Source, find_objects, stream_source, table_name

ROLE = "arn:aws:iam::000000000000:role/firehose"
BUCKET = "lake"
PAGES = ["home", "home", "home", "cart", "cart", "search", "checkout"]
EVENTS = [{"page": PAGES[i % len(PAGES)], "user": f"u{i % 4}", "ms": i} for i in range(350)]
EXPECTED = dict(Counter(e["page"] for e in EVENTS))
STREAMS = {"clicks-gz": "clicks_gz", "clicks-parquet": "clicks_parquet", "clicks-by-page": "clicks_by_page",
           "clicks.zip": "clicks_zip"}
BAD = {"clicks-parquet": [b"not json"], "clicks-by-page": [b'{"no_page": 1}']}   # -> error output


def _dest(**extra) -> dict:
    return {"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{BUCKET}", **extra}


def _metrics(url: str, name: str) -> dict:
    with urllib.request.urlopen(f"{url}/_kinesim/firehose/{name}/metrics", timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def delivered(server):
    """The four delivery streams, every event delivered (and every bad record in the error output)."""
    fh = client_for(server.url, "firehose")
    client_for(server.url, "s3", s3={"addressing_style": "path"}).create_bucket(Bucket=BUCKET)
    now = {"BufferingHints": {"IntervalInSeconds": 0}}
    fh.create_delivery_stream(DeliveryStreamName="clicks-gz", ExtendedS3DestinationConfiguration=_dest(
        Prefix="gz/", ErrorOutputPrefix="gz-errors/", CompressionFormat="GZIP", **now))
    fh.create_delivery_stream(DeliveryStreamName="clicks-parquet", ExtendedS3DestinationConfiguration=_dest(
        Prefix="parquet/", ErrorOutputPrefix="parquet-errors/",
        BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 0},
        DataFormatConversionConfiguration={
            "Enabled": True,
            "SchemaConfiguration": {"RoleARN": ROLE, "DatabaseName": "web", "TableName": "clicks"},
            "InputFormatConfiguration": {"Deserializer": {"OpenXJsonSerDe": {}}},
            "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {}}}}))
    fh.create_delivery_stream(DeliveryStreamName="clicks-by-page", ExtendedS3DestinationConfiguration=_dest(
        Prefix="pages/page=!{partitionKeyFromQuery:page}/", ErrorOutputPrefix="pages/!{firehose:error-output-type}/",
        BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 0}, DynamicPartitioningConfiguration={"Enabled": True},
        ProcessingConfiguration={"Enabled": True, "Processors": [
            {"Type": "MetadataExtraction", "Parameters": [
                {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{page: .page}"},
                {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]},
            {"Type": "AppendDelimiterToRecord"}]}))
    # No Prefix: objects under YYYY/MM/dd/HH/ at the bucket's root, beside the other streams' prefixes.
    fh.create_delivery_stream(DeliveryStreamName="clicks.zip", ExtendedS3DestinationConfiguration=_dest(
        CompressionFormat="ZIP", **now))
    fh.create_delivery_stream(DeliveryStreamName="clicks-idle", ExtendedS3DestinationConfiguration=_dest(
        Prefix="idle/"))
    for name in STREAMS:
        newline = b"" if name == "clicks.zip" or name == "clicks-by-page" else b"\n"
        records = [json.dumps(e).encode() + newline for e in EVENTS]
        for i in range(0, len(records), 120):  # several batches: several objects
            fh.put_record_batch(DeliveryStreamName=name, Records=[{"Data": r} for r in records[i:i + 120]])
        for bad in BAD.get(name, []):
            fh.put_record_batch(DeliveryStreamName=name, Records=[{"Data": bad}])
    deadline = time.monotonic() + 60
    for name in STREAMS:
        while True:
            m = _metrics(server.url, name)
            if m["DeliveryToS3.Records"] == len(EVENTS) and m["ErrorOutput.Records"] == len(BAD.get(name, [])):
                break
            assert time.monotonic() < deadline, f"{name} not delivered: {m}"
            time.sleep(0.1)
    return server.url


@pytest.fixture(scope="session")
def spark():
    from kinesim.analytics import spark_session
    session = spark_session("local[2]", "kinesim-tests", **{"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


def _kinesim_sql(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinesim", "sql", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _args(*argv: str) -> argparse.Namespace:
    return sql_cli.configure(argparse.ArgumentParser()).parse_args(list(argv))


PER_PAGE = " UNION ALL ".join(
    f"SELECT '{view}' AS source, page, count(*) AS n FROM {view} GROUP BY page" for view in STREAMS.values())


# ------------------------------------------------------------------ the command, as a user runs it

@pytest.mark.slow
def test_kinesim_sql_counts_what_was_delivered_then_stops_at_an_sql_error(delivered):
    proc = _kinesim_sql("--endpoint-url", delivered, "--format", "json", "--master", "local[2]",
                        f"{PER_PAGE} ORDER BY source, page; SELECT nope FROM clicks_gz; SELECT 1")
    assert proc.returncode == 1, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    counts = {(r["source"], r["page"]): r["n"] for r in rows}
    assert counts == {(view, page): n for view in STREAMS.values() for page, n in EXPECTED.items()}, proc.stderr
    assert len(rows) == len(counts)  # and the statement after the error did not run
    # The error is Spark's message, once, without a Python or Java stack trace.
    assert "kinesim sql: error: [UNRESOLVED_COLUMN.WITH_SUGGESTION]" in proc.stderr
    assert "`nope` cannot be resolved" in proc.stderr
    assert "Traceback" not in proc.stderr and "\tat org.apache" not in proc.stderr
    assert "WARNING: Using incubator modules" not in proc.stderr and "log4j" not in proc.stderr


@pytest.mark.slow
def test_missing_java_is_a_clear_message(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path / "nowhere"), "JAVA_HOME": str(tmp_path / "no-java")}
    proc = _kinesim_sql("--endpoint-url", "http://127.0.0.1:9", "SELECT 1", env=env, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("kinesim sql: Spark needs Java 17+: install it, e.g. "
                                  "`apt install openjdk-17-jre-headless`, or set JAVA_HOME")
    assert "Traceback" not in proc.stderr
    env.pop("JAVA_HOME")
    proc = _kinesim_sql("SELECT 1", env=env, timeout=60)
    assert proc.returncode == 1 and "no `java` on PATH" in proc.stderr


def test_unreachable_server_fails_before_spark_starts():
    started = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    assert sql_cli.run(_args("--endpoint-url", "http://127.0.0.1:9", "SELECT 1"), out, err) == 1
    assert "cannot reach kinesim at http://127.0.0.1:9" in err.getvalue()
    assert time.monotonic() - started < 5


# ------------------------------------------------------------------ in process: the Python API and the CLI's parts

@pytest.mark.slow
def test_python_api_registers_every_delivery_stream(delivered, spark):
    from kinesim.analytics import register_tables
    catalog = register_tables(spark, delivered)
    by_name = {t.name: t for t in catalog.tables}
    assert set(by_name) == set(STREAMS.values())
    assert catalog.empty == ["clicks_idle"]
    assert by_name["clicks_parquet"].format == "parquet" and by_name["clicks_gz"].format == "json"
    assert by_name["clicks_by_page"].partition_columns == ["page"]
    assert by_name["clicks_zip"].decompressed == by_name["clicks_zip"].files >= 1
    for view in STREAMS.values():
        rows = spark.sql(f"SELECT page, count(*) AS n, sum(ms) AS total FROM {view} GROUP BY page").collect()
        assert {r.page: r.n for r in rows} == EXPECTED, view
        assert sum(r.total for r in rows) == sum(e["ms"] for e in EVENTS), view
    # Parquet keeps the conversion's column types.
    assert dict(spark.table("clicks_parquet").dtypes) == {"page": "string", "user": "string", "ms": "bigint"}
    # `connect` gives the running session with the same tables.
    from kinesim.analytics import connect
    assert connect(delivered) is spark
    assert spark.sql("SELECT count(*) FROM clicks_by_page WHERE page = 'cart'").first()[0] == EXPECTED["cart"]


@pytest.mark.slow
def test_table_option_registers_a_bucket_prefix(delivered, spark, tmp_path):
    from kinesim.analytics import register_tables
    catalog = register_tables(spark, delivered, streams=False, tables={"raw_pages": f"s3://{BUCKET}/pages/"})
    [table] = catalog.tables
    assert table.partition_columns == ["page"]
    # Every object under the prefix but the error output (pages/processing-failed/...).
    assert spark.sql("SELECT count(*) FROM raw_pages").first()[0] == len(EVENTS)
    with pytest.raises(LookupError, match="kinesim has no bucket nope"):
        register_tables(spark, delivered, streams=False, tables={"x": "s3://nope/a/"})


@pytest.mark.slow
def test_every_compression_format_reads_as_json_lines(spark, tmp_path):
    from firehose import compression
    from kinesim.analytics import register_tables
    lines = [json.dumps({"page": p, "n": i}).encode() + b"\n" for i, p in enumerate(PAGES * 5)]
    objects = {"a/hadoop.snappy": ("HADOOP_SNAPPY", lines[:10]),     # Spark's own codec
               "b/java.snappy": ("Snappy", lines[10:15]),              # snappy-java: same extension, other format
               "c/archive.zip": ("ZIP", lines[15:20]),
               "d/custom.json": ("GZIP", lines[20:25]),                # gzip under a custom FileExtension
               "e/plain": (None, [line.rstrip(b"\n") for line in lines[25:]])}   # records back to back
    for key, (fmt, records) in objects.items():
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(compression.compress(b"".join(records), fmt))
    catalog = register_tables(spark, streams=False, tables={"mixed": str(tmp_path)}, cache_dir=str(tmp_path / ".c"))
    [table] = catalog.tables
    assert (table.format, table.files, table.decompressed) == ("json", 5, 4)
    rows = spark.sql("SELECT n, page FROM mixed ORDER BY n").collect()
    assert [(r.n, r.page) for r in rows] == [(i, p) for i, p in enumerate(PAGES * 5)]


@pytest.mark.slow
def test_orc_objects_are_found_by_their_magic_bytes(spark, tmp_path):
    from firehose import conversion
    from kinesim.analytics import register_tables
    orc = {"Enabled": True, "OutputFormatConfiguration": {"Serializer": {"OrcSerDe": {}}}}
    for day, n in (("2024-05-01", 3), ("2024-05-02", 4)):
        body, errors = conversion.convert([json.dumps({"n": i}).encode() for i in range(n)], orc)
        assert not errors
        (tmp_path / f"day={day}").mkdir()
        (tmp_path / f"day={day}" / "s-1-2024-05-01-10-00-00-x.orc").write_bytes(body)
    [table] = register_tables(spark, streams=False, tables={"events": str(tmp_path)}).tables
    assert (table.format, table.partition_columns) == ("orc", ["day"])
    rows = spark.sql("SELECT CAST(day AS STRING) AS day, count(*) AS c FROM events GROUP BY day ORDER BY day").collect()
    assert [(r.day, r.c) for r in rows] == [("2024-05-01", 3), ("2024-05-02", 4)]


@pytest.mark.slow
def test_output_parquet_csv_json_and_table(delivered, spark, tmp_path):
    import pyarrow.parquet as pq
    query = "SELECT page, count(*) AS n FROM clicks_gz GROUP BY page ORDER BY page"
    expected = sorted(EXPECTED.items())
    target = tmp_path / "pages.parquet"
    out, err = io.StringIO(), io.StringIO()
    assert sql_cli.run(_args("--endpoint-url", delivered, "--output", str(target), query), out, err) == 0
    assert pq.read_table(target).to_pylist() == [{"page": p, "n": n} for p, n in expected]
    assert out.getvalue() == "" and f"wrote {len(expected)} rows to {target}" in err.getvalue()

    csv_target = tmp_path / "pages.txt"
    assert sql_cli.run(_args("--endpoint-url", delivered, "--output", str(csv_target), "--output-format", "csv",
                             query), io.StringIO(), io.StringIO()) == 0
    assert csv_target.read_text() == "page,n\n" + "".join(f"{p},{n}\n" for p, n in expected)

    out = io.StringIO()
    assert sql_cli.run(_args("--endpoint-url", delivered, "--format", "table", query), out, io.StringIO()) == 0
    width = max(len(p) for p, _ in expected + [("page", 0)])
    n_width = max(len(str(n)) for _, n in expected)
    lines = out.getvalue().splitlines()
    assert lines[1] == f"| {'page'.ljust(width)} | {'n'.ljust(n_width)} |"
    assert lines[3] == f"| {expected[0][0].ljust(width)} | {expected[0][1]:>{n_width}} |"  # numbers to the right
    assert lines[0] == lines[2] == lines[-1] and len(lines) == len(expected) + 4

    assert sql_cli.run(_args("--output", str(tmp_path / "x.xlsx"), query), io.StringIO(), err) == 2


@pytest.mark.slow
def test_shell_runs_statements_lists_tables_and_survives_errors(delivered, spark):
    script = ("\\tables\n"
              "SELECT count(*) AS n\n"
              "  FROM clicks_gz;  SELECT 'a;b' AS s;\n"
              "SELEC 1;\n"
              ".tables\n"
              "SELECT max(ms) AS m FROM clicks_zip\n")      # the last statement needs no ';'
    out, err = io.StringIO(), io.StringIO()
    code = sql_cli.run(_args("--endpoint-url", delivered, "--shell", "--format", "json"), out, err, io.StringIO(script))
    assert code == 1  # a statement failed (not interactive: the exit code says so)
    text = out.getvalue()
    assert text.count("| clicks_by_page ") == 2 and "| page " in text and "nothing delivered yet" in text
    results = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert results == [{"n": len(EVENTS)}, {"s": "a;b"}, {"m": len(EVENTS) - 1}]
    assert "error: [PARSE_SYNTAX_ERROR]" in err.getvalue()


def test_health_reports_where_buckets_are(server):
    with urllib.request.urlopen(server.url + "/_kinesim/health") as resp:
        health = json.loads(resp.read())
    assert health["s3_root"] == os.path.realpath(os.path.join(health["data_dir"], "s3"))


@pytest.mark.slow
def test_in_memory_server_without_delivery_streams(tmp_path_factory, spark):
    memory = start_server(tmp_path_factory, in_memory=True)
    try:
        with urllib.request.urlopen(memory.url + "/_kinesim/health") as resp:
            health = json.loads(resp.read())
        assert health["data_dir"] is None and os.path.isdir(health["s3_root"])  # its temp directory
        out, err = io.StringIO(), io.StringIO()
        assert sql_cli.run(_args("--endpoint-url", memory.url, "--format", "json", "SELECT 1 AS one"), out, err) == 0
        assert out.getvalue() == '{"one": 1}\n'
        assert "kinesim sql: no delivery streams have delivered anything yet;" in err.getvalue()
    finally:
        memory.stop()


# ------------------------------------------------------------------ pure parts

def test_table_names():
    assert table_name("clicks-archive") == "clicks_archive"
    assert table_name("web.clicks_v2") == "web_clicks_v2"


def test_statement_splitting():
    split = sql_cli.split_statements
    assert split("SELECT 1; SELECT ';' AS x;\nSELECT 2") == (["SELECT 1", "SELECT ';' AS x"], "\nSELECT 2")
    assert split("SELECT 'it\\'s;' -- a ; comment\n; /* ; */ SELECT `a;b`;") == (
        ["SELECT 'it\\'s;' -- a ; comment", "/* ; */ SELECT `a;b`"], "")
    assert split("-- only a comment;\n;") == ([], "")


def _description(name: str, **dest) -> dict:
    return {"DeliveryStreamName": name, "Destinations": [{"ExtendedS3DestinationDescription": {
        "BucketARN": "arn:aws:s3:::b", **dest}}]}


def _put(root, key: str, data: bytes = b'{"a":1}\n') -> None:
    path = root / "b" / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _keys(objects: list[DeliveredObject]) -> list[str]:
    return sorted(o.key for o in objects)


def test_objects_of_a_stream_leave_out_errors_backups_and_other_streams(tmp_path):
    suffix = "-1-2024-05-01-10-00-00-0b1c2d3e-aaaa-bbbb-cccc-000000000001"
    mine = ["2024/05/01/10/s" + suffix, "2024/05/01/11/s" + suffix + ".gz"]
    for key in mine + [
        "2024/05/01/10/other" + suffix,                        # another stream, same layout
        "processing-failed/2024/05/01/10/s" + suffix,          # error output (no ErrorOutputPrefix)
        "backup/2024/05/01/10/s" + suffix,                     # S3 backup in the same bucket
        "2024/05/01/10/notes.txt",                             # not a Firehose object
    ]:
        _put(tmp_path, key)
    source = stream_source(_description(
        "s", S3BackupMode="Enabled", S3BackupDescription={"BucketARN": "arn:aws:s3:::b", "Prefix": "backup/"}),
        str(tmp_path))
    assert isinstance(source, Source)
    assert _keys(find_objects(source)) == mine
    assert all(o.partitions == [] for o in find_objects(source))


def test_partition_columns_from_hive_directories_and_dynamic_keys(tmp_path):
    suffix = "-1-2024-05-01-10-00-00-0b1c2d3e-aaaa-bbbb-cccc-000000000001"
    _put(tmp_path, "t/customer=c 1/home/2024/s" + suffix)
    _put(tmp_path, "t/customer=c2/a:b/2024/s" + suffix)
    _put(tmp_path, "errors/processing-failed/s" + suffix)
    source = stream_source(_description(
        "s", Prefix="t/customer=!{partitionKeyFromQuery:customer}/!{partitionKeyFromLambda:page}/!{timestamp:yyyy}/",
        ErrorOutputPrefix="errors/!{firehose:error-output-type}/"), str(tmp_path))
    objects = sorted(find_objects(source), key=lambda o: o.key)
    assert [o.partitions for o in objects] == [["customer=c 1", "page=home"], ["customer=c2", "page=a%3Ab"]]


def test_records_written_back_to_back_are_split_into_lines(tmp_path):
    assert view_tree._back_to_back(b'{"a": 1}{"a": 2}')
    assert view_tree._back_to_back(b'{"a": 1} {"a": "}{"}\n')
    assert not view_tree._back_to_back(b'{"a": 1}\n{"a": 2}\n')
    assert not view_tree._back_to_back(b'{"a": "' + b"x" * 100)  # cannot tell: leave it to Spark
    assert view_tree._json_lines(b'{"a":1}{"b":[1,2]}\n{"c":"}{"}') == b'{"a":1}\n{"b":[1,2]}\n{"c":"}{"}\n'


# ------------------------------------------------------------------ JSON schemas kept between commands

def _struct(**fields):
    from pyspark.sql.types import StructField, StructType
    return StructType([StructField(name, t, True) for name, t in fields.items()])


def test_schemas_merge_as_spark_infers_or_not_at_all():
    from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType
    from kinesim.analytics.json_schemas import merge
    old = _struct(a=LongType(), s=_struct(x=StringType()), tags=ArrayType(_struct(k=LongType())))
    new = _struct(B=StringType(), a=LongType(), s=_struct(w=LongType()), tags=ArrayType(_struct(j=StringType())))
    # Fields are unioned at every depth, sorted by name as Spark sorts them (Java's order: "B" < "a").
    assert merge(old, new) == _struct(B=StringType(), a=LongType(), s=_struct(w=LongType(), x=StringType()),
                                      tags=ArrayType(_struct(j=StringType(), k=LongType())))
    # Where Spark would widen (long + double) or fall back to string, no merge: infer everything again.
    assert merge(old, _struct(a=DoubleType())) is None
    assert merge(_struct(a=StringType()), _struct(a=LongType())) is None   # a field null so far, now a number
    assert merge(old, _struct(s=StringType())) is None


def test_kept_schema_infers_only_new_objects_and_starts_over_when_one_is_gone(tmp_path):
    from pyspark.sql.types import DoubleType, LongType, StringType
    from kinesim.analytics.json_schemas import SchemaCache
    cache, calls = SchemaCache(str(tmp_path)), []
    answers = {("k1",): _struct(a=LongType()), ("k2",): _struct(b=StringType()), ("k3",): _struct(a=DoubleType()),
               None: _struct(a=DoubleType(), b=StringType())}

    def infer(keys):
        calls.append(keys)
        return answers[tuple(keys) if keys else None]
    assert cache.schema("t", {"k1": [1, 1]}, lambda keys: _struct(a=LongType())) == _struct(a=LongType())
    assert cache.schema("t", {"k1": [1, 1]}, infer) == _struct(a=LongType()) and calls == []   # nothing new
    assert cache.schema("t", {"k1": [1, 1], "k2": [1, 1]}, infer) == _struct(a=LongType(), b=StringType())
    assert calls == [["k2"]]                                                   # the new object only
    assert cache.schema("t", {"k1": [1, 1], "k2": [1, 1], "k3": [1, 1]}, infer) == answers[None]
    assert calls[1:] == [["k3"], None]                                        # a type conflict: everything
    calls.clear()
    cache.schema("t", {"k2": [1, 1], "k3": [1, 1]}, infer)                    # k1 deleted
    cache.schema("t", {"k2": [1, 1], "k3": [2, 1]}, infer)                    # k3 rewritten
    assert calls == [None, None]
    assert cache.schema("other", {"k2": [1, 1], "k3": [2, 1]}, infer) and calls[-1] is None   # another table
    assert SchemaCache(str(tmp_path), "spark.sql.x=1").schema("t", {"k2": [1, 1], "k3": [2, 1]}, infer) \
        and calls[-1] is None                                                 # other Spark settings


@pytest.mark.slow
def test_kept_schemas_give_what_spark_infers(spark, tmp_path):
    """The views read with a kept schema have the columns Spark's own inference gives, in its order,
    as objects come (new fields, conflicting types) and go; also with partition directories whose
    column is a record field too."""
    from kinesim.analytics.json_schemas import SchemaCache
    from kinesim.analytics.table_sources import prefix_source
    from kinesim.analytics.tables import Catalog, register_sources
    data, cache = tmp_path / "data", SchemaCache(str(tmp_path / "schemas"))
    suffix = "-1-2024-05-01-10-00-00-0b1c2d3e-aaaa-bbbb-cccc-00000000000"

    def put(n: int, page: str, *records: dict) -> None:
        path = data / f"page={page}" / f"s{suffix}{n}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))

    def check(rows: int) -> None:
        catalog = register_sources(spark, [prefix_source("evolving", str(data), None)], Catalog(), schemas=cache)
        assert [t.partition_columns for t in catalog.tables] == [["page"]], catalog.notes
        assert spark.table("evolving").schema == spark.read.json(str(data)).schema
        assert spark.table("evolving").count() == rows
    put(1, "home", {"page": "home", "z": 1, "a": {"x": 1}})
    check(1)
    put(2, "cart", {"page": "cart", "b": "new", "a": {"y": [1]}}, {"page": "cart", "z": 2})
    check(3)
    assert spark.sql("SELECT count(b), count(a.y) FROM evolving").first() == (1, 1)
    put(3, "home", {"page": "home", "z": 2.5})         # long, then double: Spark widens
    check(4)
    (data / "page=home" / f"s{suffix}1").unlink()
    check(3)
