"""Page views per minute, from a stream of JSON clicks, with Spark Structured Streaming.

A click is a JSON record such as {"user_id": "u-42", "page": "/products/123", "ts": 1700000000}
(`ts`: Unix time in seconds, the event time). The query counts views per page in one-minute
tumbling windows of event time; a watermark lets Spark drop a window's state once clicks that
late are no longer expected. Counts go to the console as they change (update mode).

    kinesim serve &                                   # or: make serve
    python examples/pageviews_per_minute.py --stream clicks              # runs until Ctrl-C
    python examples/pageviews_per_minute.py --stream clicks --available-now   # what is there, then stop

Restarted with the same --checkpoint directory, the query goes on after the last click it
processed. Needs Java 17+ (Spark).
"""
from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kinesim.analytics.streaming import register

CLICK_SCHEMA = "user_id string, page string, ts double"


def pageviews_per_minute(clicks: DataFrame, watermark: str) -> DataFrame:
    """Views per page and minute of event time, from the source's rows (JSON in `data`)."""
    events = (clicks.select(F.from_json(F.col("data").cast("string"), CLICK_SCHEMA).alias("click"))
              .where("click.page IS NOT NULL AND click.ts IS NOT NULL")    # skip malformed clicks
              .select(F.col("click.page").alias("page"), F.timestamp_seconds("click.ts").alias("event_time")))
    return (events.withWatermark("event_time", watermark)
            .groupBy(F.window("event_time", "1 minute"), "page").count()
            .select(F.col("window.start").alias("minute"), "page", F.col("count").alias("views")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", required=True, help="Kinesis stream of JSON clicks")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL", "http://localhost:4566"))
    parser.add_argument("--starting-position", default="TRIM_HORIZON", choices=["TRIM_HORIZON", "LATEST"])
    parser.add_argument("--watermark", default="2 minutes", help="how late a click may arrive (default 2 minutes)")
    parser.add_argument("--checkpoint", default="./.kinesim-checkpoints/pageviews-per-minute")
    parser.add_argument("--trigger", default="10 seconds", help="micro-batch interval (default 10 seconds)")
    parser.add_argument("--available-now", action="store_true",
                        help="process the clicks in the stream now, then stop")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # Spark's Python workers: this interpreter
    spark = (SparkSession.builder.appName("pageviews-per-minute")
             .config("spark.sql.session.timeZone", "UTC").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)

    clicks = (spark.readStream.format("kinesim").option("stream", args.stream)
              .option("endpointUrl", args.endpoint_url).option("startingPosition", args.starting_position).load())
    writer = (pageviews_per_minute(clicks, args.watermark).writeStream.outputMode("update").format("console")
              .option("truncate", "false").option("numRows", 1000).option("checkpointLocation", args.checkpoint))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime=args.trigger)
    query = writer.start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
