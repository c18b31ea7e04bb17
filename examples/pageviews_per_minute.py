#!/usr/bin/env python3
"""Page views per minute, from a stream of JSON clicks, with Spark Structured Streaming.

A click is a JSON record with a `page` and its event time `ts`: Unix seconds, as the functions
in lambdas/ expect and `kinesim put clicks --generate clickstream` makes them ({"user_id": "u-42",
"page": "/products/123", "ts": 1700000000.25}), or an ISO 8601 string. The query counts views per page in
one-minute tumbling windows of event time; a watermark lets Spark drop a window's state once
clicks that late are no longer expected. Counts go to the console as they change (update mode).

    make serve &                                          # the server, and .venv with Spark in it
    .venv/bin/kinesim deploy template.yaml                # creates the `clicks` stream
    .venv/bin/kinesim put clicks --generate clickstream --rate 50/s &
    .venv/bin/python examples/pageviews_per_minute.py --stream clicks              # runs until Ctrl-C
    .venv/bin/python examples/pageviews_per_minute.py --stream clicks --available-now   # what is there, then stop

(or, after `. .venv/bin/activate`, `examples/pageviews_per_minute.py --stream clicks`.)

Each run starts from --starting-position; restarted with the same --checkpoint DIR, the query goes
on after the last click it processed instead. Needs Java 17+ (Spark).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import tempfile
import threading

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kinesim.analytics import spark_session
from kinesim.analytics.streaming import register

CLICK_SCHEMA = "page string, ts string"   # ts as text: a JSON number or an ISO 8601 string


def pageviews_per_minute(clicks: DataFrame, watermark: str) -> DataFrame:
    """Views per page and minute of event time, from the source's rows (JSON in `data`)."""
    ts = F.col("click.ts")
    event_time = F.coalesce(F.timestamp_seconds(ts.try_cast("double")), ts.try_cast("timestamp"))
    events = (clicks.select(F.from_json(F.col("data").cast("string"), CLICK_SCHEMA).alias("click"))
              .select(F.col("click.page").alias("page"), event_time.alias("event_time"))
              .where("page IS NOT NULL AND event_time IS NOT NULL"))    # malformed clicks are skipped
    return (events.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), "page").count()
            .select(F.col("window.start").alias("minute"), "page", F.col("count").alias("views")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", required=True, help="Kinesis stream of JSON clicks")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL", "http://localhost:4566"))
    parser.add_argument("--starting-position", default="TRIM_HORIZON", choices=["TRIM_HORIZON", "LATEST"])
    parser.add_argument("--watermark", default="2 minutes", help="how late a click may arrive (default 2 minutes)")
    parser.add_argument("--checkpoint", help="checkpoint directory, to resume where a previous run stopped "
                                             "(default: a new one, removed at the end)")
    parser.add_argument("--trigger", default="10 seconds", help="micro-batch interval (default 10 seconds)")
    parser.add_argument("--available-now", action="store_true",
                        help="process the clicks in the stream now, then stop")
    args = parser.parse_args(argv)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="pageviews-per-minute-")

    # Local Spark with kinesim's defaults: this interpreter for the workers, UTC, quiet logs.
    spark = spark_session(app_name="pageviews-per-minute", **{"spark.sql.shuffle.partitions": "2"})
    register(spark)

    clicks = (spark.readStream.format("kinesim").option("stream", args.stream)
              .option("endpointUrl", args.endpoint_url).option("startingPosition", args.starting_position).load())
    writer = (pageviews_per_minute(clicks, args.watermark).writeStream.outputMode("update").format("console")
              .option("truncate", "false").option("numRows", 1000).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime=args.trigger)
    query = writer.start()
    # Ctrl-C (or SIGTERM) asks the query to stop after its current micro-batch. PySpark's own SIGINT
    # handler would call into the JVM while this thread waits on it, so it is replaced.
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(1)
        query.stop()
    finally:
        spark.stop()
        if not args.checkpoint:
            shutil.rmtree(checkpoint, ignore_errors=True)


if __name__ == "__main__":
    main()
