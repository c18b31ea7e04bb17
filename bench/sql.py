#!/usr/bin/env python3
"""Spark SQL over 1M delivered click records: JSON lines + GZIP against Parquet, wall time of each step.

    .venv/bin/python bench/sql.py                        # 1M records (~1-2 min of generation first)
    .venv/bin/python bench/sql.py --records 200000 --rounds 1
    .venv/bin/python bench/sql.py --json bench/results/sql.json

The delivered objects are written directly, not through a server (a million records through
PutRecordBatch and the flush loop would take minutes and measure Firehose, not Spark), but with
Firehose's own code, so they are the objects a delivery stream would write: `firehose.keys`
names them (default `YYYY/MM/dd/HH/` prefix, `<stream>-1-<time>-<uuid>` names), a GZIP stream's
records are cut at its default 5 MiB buffer and compressed with `firehose.compression`, and a
Parquet stream's at the 128 MiB buffer AWS uses with format conversion and converted by
`firehose.conversion` (OpenX JSON SerDe, Parquet SerDe, SNAPPY) with the table's Glue columns.

Measured, wall time on this machine: the SparkSession's start (a JVM, once), then per format and
round the table's registration (`kinesim.analytics.tables`: finding the objects, the view tree,
Spark's schema inference, which for JSON reads every record) and a GROUP BY query run twice
(cold, warm). A benchmark, not a test: it exits 0 whatever the figures are. See bench/README.md,
section "Spark SQL over delivered data".
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from firehose import compression, conversion, keys  # noqa: E402
from kinesim.analytics.session import spark_session  # noqa: E402
from kinesim.analytics.tables import Catalog, register_sources, stream_source  # noqa: E402

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="registration + queries per format (default 2)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--json", metavar="PATH", help="also save the figures as JSON")
    parser.add_argument("--formats", default="json,parquet",
                        help="formats to measure, in this order (default json,parquet; run one per process "
                             "to see each one's cold figures)")
    parser.add_argument("--keep", metavar="DIR", help="write the objects here and keep them; a later run with the "
                                                      "same DIR and --records reuses them (default: a temp dir)")
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    if not formats or set(formats) - {"json", "parquet"}:
        parser.error("--formats: a comma list of json, parquet")

    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kinesim-bench-sql-"))
    s3_root = root / "s3"
    marker = root / "delivered.json"
    try:
        done = json.loads(marker.read_text()) if marker.exists() else {}
        if done.get("records") == args.records:
            raw, stats = done["raw_bytes"], done["objects"]
            log(f"reusing the {args.records:,} records delivered under {root}")
        else:
            log(f"generating {args.records:,} click records and delivering them as Firehose would ...")
            records = click_records(args.records)
            raw = sum(len(r) for r in records)
            log(f"  {raw / 1e6:.1f} MB of JSON records")
            shutil.rmtree(s3_root / BUCKET, ignore_errors=True)
            stats = deliver(s3_root / BUCKET, records)
            del records
            marker.write_text(json.dumps({"records": args.records, "raw_bytes": raw, "objects": stats}))

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
        for round_ in range(1, args.rounds + 1):
            for fmt, source in sources.items():
                catalog = Catalog(s3_root=str(s3_root))
                register_s, _ = timed(lambda: register_sources(spark, [source], catalog))
                [table] = catalog.tables
                query = QUERY.format(table=table.name)
                cold_s, rows = timed(lambda: spark.sql(query).collect())
                warm_s, _ = timed(lambda: spark.sql(query).collect())
                assert sum(r.views for r in rows) == args.records, "a record went missing"
                results.append({"round": round_, "format": fmt, "objects": table.files, "register_s": register_s,
                                "query_cold_s": cold_s, "query_warm_s": warm_s})
                log(f"  round {round_} {fmt}: register {register_s:.1f} s, query {cold_s:.1f} s / {warm_s:.1f} s")
        spark.stop()
        print_report(args, raw, stats, start_s, results)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps({
                "records": args.records, "raw_bytes": raw, "objects": stats, "session_start_s": start_s,
                "master": args.master, "cpus": os.cpu_count(), "runs": results}, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def print_report(args, raw: int, stats: dict, start_s: float, results: list[dict]) -> None:
    print(f"\nSpark SQL over {args.records:,} delivered click records ({raw / 1e6:.0f} MB of JSON), "
          f"{args.master}, {os.cpu_count()} cores\n")
    print(f"{'format':<22}{'objects':>8}{'MB':>8}")
    for name, label in (("clicks-json", "JSON lines + GZIP"), ("clicks-parquet", "Parquet (SNAPPY)")):
        print(f"{label:<22}{stats[name]['objects']:>8}{stats[name]['bytes'] / 1e6:>8.1f}")
    print(f"\nSparkSession start: {start_s:.1f} s (once per process: `kinesim sql` pays it on every run)\n")
    header = f"{'round':>5}  {'format':<8}{'register s':>11}{'query s':>9}{'again s':>9}"
    print(header)
    print("-" * len(header))
    for r in results:
        print(f"{r['round']:>5}  {r['format']:<8}{r['register_s']:>11.1f}{r['query_cold_s']:>9.1f}"
              f"{r['query_warm_s']:>9.1f}")
    first = results[0]
    total = start_s + first["register_s"] + first["query_cold_s"]
    print(f"\nA fresh process (`kinesim sql`) over the {first['format']} table, start to answer: {total:.1f} s, "
          f"of which Spark's start-up {start_s:.1f} s ({100 * start_s / total:.0f}%). Later rows ran in a warm JVM.")
    print("register: objects found, view tree, schema (JSON: Spark reads every record to infer it; Parquet: "
          "footers only). query / again: the GROUP BY, cold then warm.")


if __name__ == "__main__":
    sys.exit(main())
