"""Benchmark of the Spark streaming source (kinesim/analytics/streaming.py): records/s that a
Trigger.AvailableNow query reads from a preloaded stream into Spark's `noop` sink, next to what
Spark's own start-up costs. A benchmark, not a test: it exits 0 whatever the figures are.

    .venv/bin/python bench/spark_stream.py                       # 200k x 100 B records, 4 shards
    .venv/bin/python bench/spark_stream.py --records 50000 --json bench/results/spark_stream.json

See bench/README.md ("Spark streaming source") for what each figure means.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from client import Client, dumps, loads  # noqa: E402  (bench/client.py: lean keep-alive client)
from peers import Server  # noqa: E402  (bench/peers.py: a kinesim subprocess on a free port, durable)

STREAM = "bench-spark"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def preload(endpoint: str, records: int, record_bytes: int, connections: int = 4) -> float:
    """PutRecords of 500 records (distinct keys, so the shards fill evenly); returns records/s."""
    data = base64.b64encode(bytes(i & 255 for i in range(record_bytes))).decode()
    batches = [(start, min(500, records - start)) for start in range(0, records, 500)]

    def put(share: list[tuple[int, int]]) -> int:
        client, acked = Client(endpoint), 0
        for start, n in share:
            body = dumps({"StreamName": STREAM,
                          "Records": [{"Data": data, "PartitionKey": f"k{start + j}"} for j in range(n)]})
            answer = loads(client.raw("PutRecords", body))
            if answer["FailedRecordCount"]:
                raise RuntimeError(f"{answer['FailedRecordCount']} records failed during the preload")
            acked += n
        client.close()
        return acked

    began = time.perf_counter()
    with ThreadPoolExecutor(connections) as pool:
        acked = sum(pool.map(put, [batches[i::connections] for i in range(connections)]))
    assert acked == records
    return records / (time.perf_counter() - began)


def run_query(spark, endpoint: str, checkpoint: str, options: dict[str, str]) -> dict:
    """One AvailableNow query from TRIM_HORIZON to the noop sink: wall time, rows, and where the
    time went per Spark's progress reports (latestOffset: the driver finding each shard's end;
    addBatch: the executors reading the records)."""
    reader = spark.readStream.format("kinesim").option("stream", STREAM).option("endpointUrl", endpoint)
    for key, value in options.items():
        reader = reader.option(key, value)
    began = time.perf_counter()
    query = (reader.load().writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    wall = time.perf_counter() - began
    progress = query.recentProgress

    def seconds(key: str) -> float:
        return sum(p["durationMs"].get(key, 0) for p in progress) / 1000

    rows = sum(p["numInputRows"] for p in progress)
    triggers = seconds("triggerExecution")
    return {"rows": rows, "batches": sum(1 for p in progress if p["numInputRows"]), "wall_s": wall,
            "records_per_s": rows / wall, "latest_offset_s": seconds("latestOffset"),
            "add_batch_s": seconds("addBatch"),
            "other_trigger_s": triggers - seconds("latestOffset") - seconds("addBatch"),
            "start_stop_s": wall - triggers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--small-trigger", type=int, default=10_000,
                        help="maxRecordsPerTrigger of the last run (records per shard per micro-batch)")
    parser.add_argument("--json", help="also save the figures to this file")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kinesim-spark-bench-") as tmp:
        server = Server("kinesim", Path(tmp)).start()
        try:
            figures = bench(server.endpoint, tmp, args)
        finally:
            server.stop()
    report(figures, args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2))


def bench(endpoint: str, tmp: str, args: argparse.Namespace) -> dict:
    Client(endpoint).call("CreateStream", {"StreamName": STREAM, "ShardCount": args.shards})
    log(f"preloading {args.records} x {args.record_bytes} B records into {args.shards} shards ...")
    figures: dict = {"records": args.records, "shards": args.shards, "record_bytes": args.record_bytes,
                     "preload_records_per_s": preload(endpoint, args.records, args.record_bytes)}

    began = time.perf_counter()
    from kinesim.analytics import spark_session
    from kinesim.analytics.streaming import register
    spark = spark_session("local[2]", "kinesim-bench")
    register(spark)
    figures["session_start_s"] = time.perf_counter() - began
    try:
        runs = [("cold: first query of the session, 100,000/shard a batch", {}),
                ("warm: the same query again", {}),
                (f"warm, maxRecordsPerTrigger {args.small_trigger:,}",
                 {"maxRecordsPerTrigger": str(args.small_trigger)})]
        figures["runs"] = []
        for i, (name, options) in enumerate(runs):
            log(f"run: {name} ...")
            figures["runs"].append({"name": name, **run_query(spark, endpoint, f"{tmp}/ck{i}", options)})
        log("batch read: spark.read ... count() ...")
        began = time.perf_counter()
        count = spark.read.format("kinesim").option("stream", STREAM).option("endpointUrl", endpoint).load().count()
        wall = time.perf_counter() - began
        figures["batch_read"] = {"rows": count, "wall_s": wall, "records_per_s": count / wall}
    finally:
        spark.stop()
    return figures


def report(f: dict, args: argparse.Namespace) -> None:
    print(f"stream: {f['records']} records x {f['record_bytes']} B in {f['shards']} shards "
          f"(preloaded at {f['preload_records_per_s']:,.0f} records/s)")
    print(f"Spark session start (JVM, SparkContext, data source registered): {f['session_start_s']:.1f} s")
    print()
    print(f"{'run':<58} {'rows':>7} {'batches':>7} {'wall s':>6} {'records/s':>9} "
          f"{'latestOffset':>12} {'addBatch':>8} {'other':>5} {'start/stop':>10}")
    for r in f["runs"]:
        check = "" if r["rows"] == f["records"] else f"  MISMATCH: expected {f['records']}"
        print(f"{r['name']:<58} {r['rows']:>7} {r['batches']:>7} {r['wall_s']:>6.1f} {r['records_per_s']:>9,.0f} "
              f"{r['latest_offset_s']:>12.1f} {r['add_batch_s']:>8.1f} {r['other_trigger_s']:>5.1f} "
              f"{r['start_stop_s']:>10.1f}{check}")
    b = f["batch_read"]
    check = "" if b["rows"] == f["records"] else f"  MISMATCH: expected {f['records']}"
    print(f"{'batch: spark.read.format(kinesim).load().count()':<58} {b['rows']:>7} {'':>7} {b['wall_s']:>6.1f} "
          f"{b['records_per_s']:>9,.0f}{check}")
    print("(seconds; latestOffset: the driver finding each shard's end; addBatch: the executors reading the\n"
          " records into the sink; other: offset log, commit log, planning; start/stop: outside any trigger)")
    first = f["runs"][0]
    print()
    print(f"session start + first query: {f['session_start_s'] + first['wall_s']:.1f} s for {first['rows']} records "
          f"= {first['rows'] / (f['session_start_s'] + first['wall_s']):,.0f} records/s end to end")


if __name__ == "__main__":
    main()
