#!/usr/bin/env python3
"""Spark SQL over delivered click records: `kinesim sql` as a user meets it (a cold first query,
warm ones, in-process `local[*]`), the steps of an in-process Spark (JSON lines + GZIP against
Parquet), and a continuous query over a live stream.

    .venv/bin/python bench/sql.py                        # 20k and 1M records, every part (~15-25 min)
    .venv/bin/python bench/sql.py --records 20000 --parts cli
    .venv/bin/python bench/sql.py --parts continuous --stream-records 200000
    .venv/bin/python bench/sql.py --records 1000000 --parts steps --keep /tmp/clicks --json bench/results/sql.json

Parts (`--parts`, default all):
- cli (bench/sql_warm.py): `kinesim sql --format json "SELECT ... GROUP BY page"` as a subprocess
  against a fresh kinesim server per table size: the cold first query (it starts the warm Spark
  Connect server), the median of the next `--warm` ones, a warm `SELECT 1` (the command's fixed
  cost) and `--master local[*]` (a JVM per command, the way before the warm server).
- steps: in one process, the SparkSession's start (a JVM, once), then per format and round the
  table's registration (`kinesim.analytics.tables`: finding the objects, the view tree, Spark's
  schema inference, which for JSON reads every record) and the GROUP BY run twice (cold, warm).
- continuous (bench/sql_continuous.py): `kinesim sql --continuous ... --into STREAM` over a
  preloaded stream: records/s to every window's result, and put -> window result latency.

The delivered objects are not put through PutRecordBatch (a million records through the flush
loop would take minutes and measure Firehose, not Spark) but written with Firehose's own code, so
they are the objects a delivery stream would write: `firehose.keys` names them (default
`YYYY/MM/dd/HH/` prefix, `<stream>-1-<time>-<uuid>` names), a GZIP stream's records are cut at
its default 5 MiB buffer and compressed with `firehose.compression`, and a Parquet stream's at
the 128 MiB buffer AWS uses with format conversion and converted by `firehose.conversion`
(OpenX JSON SerDe, Parquet SerDe, SNAPPY) with the table's Glue columns. The cli part puts them
into the server through its S3 API, under the prefix of a delivery stream created there.

A benchmark, not a test: it exits 0 whatever the figures are. See bench/README.md, section
"Spark SQL over delivered data".
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # before bench/ (bench/firehose.py)

import sql_continuous  # noqa: E402  (bench/sql_continuous.py: the continuous query's figures)
import sql_warm  # noqa: E402  (bench/sql_warm.py: `kinesim sql` as a subprocess, cold / warm)

from firehose import compression, conversion, keys  # noqa: E402
from kinesim.analytics.session import spark_session  # noqa: E402
from kinesim.analytics.table_sources import stream_source  # noqa: E402
from kinesim.analytics.tables import Catalog, register_sources  # noqa: E402

BUCKET = "lake"
GZIP_BUFFER = 5 * 1024 * 1024          # BufferingHints.SizeInMBs default
PARQUET_BUFFER = 128 * 1024 * 1024     # the default with DataFormatConversionConfiguration
COLUMNS = [{"Name": "ts", "Type": "timestamp"}, {"Name": "user_id", "Type": "string"},
           {"Name": "session", "Type": "string"}, {"Name": "page", "Type": "string"},
           {"Name": "referrer", "Type": "string"}, {"Name": "duration_ms", "Type": "bigint"},
           {"Name": "country", "Type": "string"}]
CONVERSION = {"Enabled": True,
              "SchemaConfiguration": {"RoleARN": "arn:aws:iam::000000000000:role/firehose",
                                      "DatabaseName": "web", "TableName": "clicks"},
              "InputFormatConfiguration": {"Deserializer": {"OpenXJsonSerDe": {}}},
              "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {}}}}
QUERY = ("SELECT page, count(*) AS views, count(DISTINCT user_id) AS users, avg(duration_ms) AS avg_ms "
         "FROM {table} GROUP BY page ORDER BY views DESC")
PAGES = ["/", "/search", "/cart", "/checkout", "/account", "/help"] + [f"/product/{i}" for i in range(60)]
REFERRERS = ["google", "direct", "newsletter", "facebook", "partner", ""]
COUNTRIES = ["US", "DE", "FR", "GB", "BR", "IN", "JP"]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def click_records(n: int, seed: int = 7) -> list[bytes]:
    """n click events as JSON lines (what producers put, one newline-terminated record each)."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
    weights = [40, 15, 8, 4, 3, 2] + [1] * 60
    pages = rng.choices(PAGES, weights, k=n)
    out = []
    for i in range(n):
        when = start + timedelta(milliseconds=i * 3)  # about 50 minutes of traffic for 1M
        out.append(json.dumps({
            "ts": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "user_id": f"u{rng.randrange(50_000)}", "session": f"{rng.getrandbits(64):016x}", "page": pages[i],
            "referrer": rng.choice(REFERRERS), "duration_ms": rng.randrange(20, 30_000),
            "country": rng.choice(COUNTRIES)}, separators=(",", ":")).encode() + b"\n")
    return out


def buffers(records: list[bytes], size: int) -> list[list[bytes]]:
    """The records cut where a delivery stream's buffer of `size` bytes fills."""
    out, current, filled = [], [], 0
    for record in records:
        if current and filled + len(record) > size:
            out.append(current)
            current, filled = [], 0
        current.append(record)
        filled += len(record)
    return out + ([current] if current else [])


def write_object(bucket_dir: Path, key: str, body: bytes) -> None:
    path = bucket_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def deliver(bucket_dir: Path, records: list[bytes]) -> dict[str, dict]:
    """The objects of the two delivery streams; returns their stats by stream name."""
    stats = {}
    when = datetime(2024, 5, 1, 10, tzinfo=timezone.utc)
    started = time.monotonic()
    total = 0
    objects = buffers(records, GZIP_BUFFER)
    for batch in objects:
        body = compression.compress(b"".join(batch), "GZIP")
        key = keys.object_key("json/", "clicks-json", 1, when, extension=compression.extension("GZIP"))
        write_object(bucket_dir, key, body)
        total += len(body)
    stats["clicks-json"] = {"objects": len(objects), "bytes": total, "seconds": time.monotonic() - started}
    log(f"  JSON lines + GZIP: {len(objects)} objects, {total / 1e6:.1f} MB ({stats['clicks-json']['seconds']:.0f} s)")
    started, total = time.monotonic(), 0
    objects = buffers(records, PARQUET_BUFFER)
    for batch in objects:
        body, errors = conversion.convert([r.rstrip(b"\n") for r in batch], CONVERSION, columns=COLUMNS)
        assert body is not None and not errors, errors[:3]
        key = keys.object_key("parquet/", "clicks-parquet", 1, when, extension=conversion.extension(CONVERSION))
        write_object(bucket_dir, key, body)
        total += len(body)
    stats["clicks-parquet"] = {"objects": len(objects), "bytes": total, "seconds": time.monotonic() - started}
    seconds = stats["clicks-parquet"]["seconds"]
    log(f"  Parquet (SNAPPY): {len(objects)} objects, {total / 1e6:.1f} MB ({seconds:.0f} s)")
    return stats


def description(name: str, prefix: str, **extra) -> dict:
    """What DescribeDeliveryStream says of a stream writing these objects."""
    return {"DeliveryStreamName": name, "Destinations": [{"ExtendedS3DestinationDescription": {
        "BucketARN": f"arn:aws:s3:::{BUCKET}", "Prefix": prefix, "ErrorOutputPrefix": "errors/", **extra}}]}


def timed(fn):
    started = time.monotonic()
    result = fn()
    return time.monotonic() - started, result


def prepare(root: Path, records: int) -> tuple[Path, int, dict]:
    """The delivered objects of `records` clicks under `root` (reused when already there)."""
    s3_root = root / f"{records}" / "s3"
    marker = root / f"{records}" / "delivered.json"
    done = json.loads(marker.read_text()) if marker.exists() else {}
    if done.get("records") == records:
        log(f"reusing the {records:,} records delivered under {marker.parent}")
        return s3_root, done["raw_bytes"], done["objects"]
    log(f"generating {records:,} click records and delivering them as Firehose would ...")
    batch = click_records(records)
    raw = sum(len(r) for r in batch)
    log(f"  {raw / 1e6:.1f} MB of JSON records")
    shutil.rmtree(s3_root / BUCKET, ignore_errors=True)
    stats = deliver(s3_root / BUCKET, batch)
    marker.write_text(json.dumps({"records": records, "raw_bytes": raw, "objects": stats}))
    return s3_root, raw, stats


def steps(args, records: int, s3_root: Path, formats: list[str]) -> dict:
    """In-process Spark, step by step: session start, then per round and format the table's
    registration and the GROUP BY twice."""
    every = {
        "json": stream_source(description("clicks-json", "json/", CompressionFormat="GZIP"), str(s3_root)),
        "parquet": stream_source(description("clicks-parquet", "parquet/",
                                             DataFormatConversionConfiguration=CONVERSION), str(s3_root)),
    }
    sources = {fmt: every[fmt] for fmt in formats}
    log("starting Spark ...")
    start_s, spark = timed(lambda: spark_session(args.master, "kinesim-bench-sql",
                                                 **{"spark.driver.memory": args.driver_memory}))
    results = []
    try:
        for round_ in range(1, args.rounds + 1):
            for fmt, source in sources.items():
                catalog = Catalog(s3_root=str(s3_root))
                register_s, _ = timed(lambda: register_sources(spark, [source], catalog))
                [table] = catalog.tables
                query = QUERY.format(table=table.name)
                cold_s, rows = timed(lambda: spark.sql(query).collect())
                warm_s, _ = timed(lambda: spark.sql(query).collect())
                assert sum(r.views for r in rows) == records, "a record went missing"
                results.append({"round": round_, "format": fmt, "objects": table.files, "register_s": register_s,
                                "query_cold_s": cold_s, "query_warm_s": warm_s})
                log(f"  round {round_} {fmt}: register {register_s:.1f} s, query {cold_s:.1f} s / {warm_s:.1f} s")
    finally:
        spark.stop()
    return {"session_start_s": start_s, "master": args.master, "runs": results}


def late_object(fmt: str, records: int = 1000) -> tuple[str, bytes, int]:
    """One more object of the table's delivery stream, an hour after the others, its records with a
    field the others do not have (a JSON table's schema changes); returns (key, body, records)."""
    when = datetime(2024, 5, 1, 11, tzinfo=timezone.utc)
    batch = [json.dumps({**json.loads(r), "campaign": "spring"}).encode() + b"\n"
             for r in click_records(records, seed=8)]
    if fmt == "json":
        return (keys.object_key("json/", "clicks-json", 1, when, extension=compression.extension("GZIP")),
                compression.compress(b"".join(batch), "GZIP"), records)
    body, errors = conversion.convert([r.rstrip(b"\n") for r in batch], CONVERSION, columns=COLUMNS)
    assert body is not None and not errors, errors[:3]
    return keys.object_key("parquet/", "clicks-parquet", 1, when, extension=conversion.extension(CONVERSION)), \
        body, records


def cli(args, records: int, s3_root: Path, fmt: str, work_dir: Path) -> dict:
    """`kinesim sql` as a subprocess against a fresh server: first and warm commands after the warm
    Spark started, a count after one more object, cold, local[*]."""
    stream, prefix = {"json": ("clicks-json", "json/"), "parquet": ("clicks-parquet", "parquet/")}[fmt]
    extra = {"Prefix": prefix, "ErrorOutputPrefix": "errors/"}
    extra.update({"CompressionFormat": "GZIP"} if fmt == "json" else {
        "DataFormatConversionConfiguration": CONVERSION, "BufferingHints": {"SizeInMBs": 128,
                                                                            "IntervalInSeconds": 300}})

    def check(rows: list[dict], total: int) -> None:
        assert sum(r["views"] for r in rows) == total, f"{sum(r['views'] for r in rows)} views, not {total}"
    table = stream.replace("-", "_")
    figures = sql_warm.measure(work_dir, records, s3_root / BUCKET, BUCKET, prefix, stream, extra,
                               QUERY.format(table=table), check, warm=args.warm,
                               spark_memory=args.spark_memory, local=not args.no_local,
                               count_query=f"SELECT count(*) AS n FROM {table}", late=late_object(fmt))
    return {"format": fmt, **figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", default="20000,1000000",
                        help="table sizes, a comma list (default 20000,1000000)")
    parser.add_argument("--parts", default="cli,steps,continuous",
                        help="what to measure, a comma list of cli (`kinesim sql` cold / warm / local[*]), steps "
                             "(in-process Spark step by step), continuous (a continuous query); default all")
    parser.add_argument("--rounds", type=int, default=2, help="steps: registration + queries per format (default 2)")
    parser.add_argument("--master", default="local[*]", help="steps: Spark's master")
    parser.add_argument("--driver-memory", default="2g", help="steps: Spark's driver memory")
    parser.add_argument("--warm", type=int, default=3, help="cli: warm queries after the cold one (default 3)")
    parser.add_argument("--spark-memory", help="cli: memory of the warm Spark server (and of local[*]); "
                                               "default: what `kinesim sql` uses")
    parser.add_argument("--no-local", action="store_true", help="cli: skip the --master local[*] reference run")
    parser.add_argument("--json", metavar="PATH", help="also save the figures as JSON")
    parser.add_argument("--formats", default="json,parquet",
                        help="formats to measure, in this order (default json,parquet; steps: run one per process "
                             "to see each one's cold figures; cli: the first one)")
    parser.add_argument("--keep", metavar="DIR", help="write the objects here and keep them; a later run with the "
                                                      "same DIR reuses them (default: a temp dir)")
    sql_continuous.configure(parser)
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - {"json", "parquet"}:
        parser.error("--formats: a comma list of json, parquet")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or parts - {"cli", "steps", "continuous"}:
        parser.error("--parts: a comma list of cli, steps, continuous")
    try:
        sizes = [int(n.replace("_", "")) for n in args.records.split(",") if n.strip()]
    except ValueError:
        parser.error("--records: a comma list of numbers")

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kinesim-bench-sql-"))
    work_dir = Path(tempfile.mkdtemp(prefix="kinesim-bench-sql-servers-"))
    figures: dict = {"cpus": os.cpu_count(), "sizes": {}}
    try:
        for records in sizes if parts & {"cli", "steps"} else []:
            s3_root, raw, stats = prepare(root, records)
            size = figures["sizes"][records] = {"raw_bytes": raw, "objects": stats}
            if "cli" in parts:
                size["cli"] = run_part(f"cli {records:,}", lambda: cli(args, records, s3_root, formats[0], work_dir))
            if "steps" in parts:
                size["steps"] = run_part(f"steps {records:,}", lambda: steps(args, records, s3_root, formats))
        if "continuous" in parts:
            figures["continuous"] = run_part("continuous", lambda: sql_continuous.measure(args, work_dir))
        for records, size in figures["sizes"].items():
            if "runs" in size.get("steps", {}):
                print_report(records, args.master, size["raw_bytes"], size["objects"], size["steps"])
        cli_runs = [s["cli"] for s in figures["sizes"].values() if "records" in s.get("cli", {})]
        if cli_runs:
            sql_warm.report(cli_runs, formats[0], args.warm)
        if "continuous" in figures:
            sql_continuous.report(figures["continuous"])
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(figures, indent=2))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def run_part(label: str, part) -> dict:
    """A part's figures, or {"error": ...} when it failed (the other parts still run)."""
    try:
        return part()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # a benchmark reports what it could measure
        log(f"{label} FAILED: {type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {e}"}


def print_report(records: int, master: str, raw: int, stats: dict, figures: dict) -> None:
    start_s, results = figures["session_start_s"], figures["runs"]
    print(f"\nSpark SQL in-process, step by step, over {records:,} delivered click records ({raw / 1e6:.0f} MB of "
          f"JSON), {master}, {os.cpu_count()} cores\n")
    print(f"{'format':<22}{'objects':>8}{'MB':>8}")
    for name, label in (("clicks-json", "JSON lines + GZIP"), ("clicks-parquet", "Parquet (SNAPPY)")):
        print(f"{label:<22}{stats[name]['objects']:>8}{stats[name]['bytes'] / 1e6:>8.1f}")
    print(f"\nSparkSession start: {start_s:.1f} s (once per process)\n")
    header = f"{'round':>5}  {'format':<8}{'register s':>11}{'query s':>9}{'again s':>9}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['round']:>5}  {r['format']:<8}{r['register_s']:>11.1f}{r['query_cold_s']:>9.1f}"
              f"{r['query_warm_s']:>9.1f}")
    first = results[0]
    total = start_s + first["register_s"] + first["query_cold_s"]
    print(f"\nA fresh process over the {first['format']} table, start to answer: {total:.1f} s, "
          f"of which Spark's start-up {start_s:.1f} s ({100 * start_s / total:.0f}%). Later rows ran in a warm JVM.")
    print("register: objects found, view tree, schema (JSON: Spark reads every record to infer it; Parquet: "
          "footers only). query / again: the GROUP BY, cold then warm.")


if __name__ == "__main__":
    sys.exit(main())
