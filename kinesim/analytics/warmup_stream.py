"""The streaming half of the warm Spark's warm-up (`warmup`): a continuous query's first
micro-batches, planned as `kinesim sql --continuous` plans one (`continuous.parse_records`: JSON
records, event time and watermark; a window count over the continuous queries' state partitions)
but read from a source that makes clicks up and written to a sink that keeps nothing
(`streaming.WarmUpSource`): no Kinesis stream is needed, and nothing shows outside Spark.

What it warms is Spark's side of streaming in the JVM: Structured Streaming's classes, the state
store, the code generated for a stateful aggregation, the Java side of PySpark's data source
runners. Measured without it (bench/README.md, "Spark waits"), a warm Spark's first continuous
query took 13-28 s to start and the next 7-11 s; with it, 6-8 s each. Python's side cannot be kept
warm: PySpark starts new Python processes to plan each query.
"""
from __future__ import annotations

import shutil
import tempfile
from typing import Any

QUERY = ("SELECT page, window.start AS minute, count(*) AS views FROM __warmup_clicks "
         "GROUP BY window(ts, '1 minute'), page")


def warm_up_streaming(spark: Any, timeout: float = 300.0) -> int:
    """Run the warm-up query to its end in `spark` (a Spark Connect session); its micro-batches."""
    from .continuous import SHUFFLE_PARTITIONS, Query, parse_records
    # Its source and sink live in streaming.py, the module Spark's Python workers import for the
    # kinesim source (tests/test_install_extras.py: only Spark's modules import pyspark at load).
    from .streaming import WARM_UP_SOURCE, WarmUpSource
    spark.dataSource.register(WarmUpSource)
    spark.conf.set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
    query = Query(name="warmup", sql=QUERY, endpoint_url="", event_time="ts", watermark="1 minute",
                  schemas={"clicks": "page STRING, ts BIGINT"})
    parse_records(spark.readStream.format(WARM_UP_SOURCE).load(), query, "clicks").createOrReplaceTempView("__warmup_clicks")
    checkpoint = tempfile.mkdtemp(prefix="kinesim-warmup-")
    try:
        handle = (spark.sql(QUERY).writeStream.format(WARM_UP_SOURCE).outputMode("append")
                  .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        if not handle.awaitTermination(timeout):
            handle.stop()
        error = handle.exception()
        if error:
            raise RuntimeError(f"the streaming warm-up failed: {error}")
        return len(handle.recentProgress)
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
