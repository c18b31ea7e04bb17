"""Analytics: Spark SQL over what Firehose delivered.

From the command line, ``kinesim sql "SELECT ..."`` (`sql_cli`). From Python::

    from kinesim.analytics import connect
    spark = connect()                        # or connect("http://localhost:4566", tables={...})
    spark.sql("SELECT page, count(*) FROM clicks_archive GROUP BY page").show()

- ``connect(endpoint_url=None, *, tables=None, streams=True, master=None, remote=None, memory=None,
  app_name="kinesim", cache_dir=None, **conf) -> SparkSession``: a client session of kinesim's warm
  Spark Connect server (or, with ``master``, a classic session in this process) with every
  delivery stream of the server registered as a temp view (`tables.register_tables`), plus
  ``tables`` ({name: "s3://bucket/prefix"}). Needs Java 17+ (`session.JavaNotFoundError`
  otherwise) and a running server (`tables.ServerUnreachable`).
- ``spark_session(master="local[*]", app_name="kinesim", **conf)``: just the session.
- ``register_tables(spark, endpoint_url=None, *, tables=None, streams=True, cache_dir=None)``:
  register (again: tables are snapshots) into any session; returns a `tables.Catalog`.

How tables are found and read (formats, compression, partition columns, what is left out) is in
`tables`' docstring. `streaming` is the other half of analytics: a Spark source that reads a
Kinesis stream's shards (``spark.readStream.format("kinesim")``), documented there.

Reading real S3 (a real cluster, or Spark against kinesim's S3 API)
-------------------------------------------------------------------
kinesim's tables are local files (``file://``); Spark reads real buckets itself through Hadoop's
``s3a://`` file system, which is not in PySpark's jars: it needs ``hadoop-aws`` of the same
version as PySpark's Hadoop (``hadoop-client-api-<version>.jar`` in ``pyspark/jars``; 3.5.0 for
PySpark 4.3) and the AWS SDK v2 bundle it depends on, fetched by ``spark.jars.packages`` from
Maven Central (or given as jar paths with ``spark.jars`` where that is not reachable)::

    spark = spark_session(**{
        "spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0",
        # credentials: the SDK's default chain (environment, ~/.aws, instance/pod role)
        "spark.hadoop.fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
    })
    spark.read.json("s3a://my-bucket/2024/05/").createOrReplaceTempView("clicks")
    spark.read.parquet("s3a://my-bucket/tables/clicks/").createOrReplaceTempView("clicks_parquet")

On a cluster the same settings go to ``spark-submit --packages org.apache.hadoop:hadoop-aws:<v>
--conf spark.hadoop.fs.s3a....`` (EMR and Databricks ship s3a already). The same client reads
kinesim's own S3 API (path-style, plain HTTP, any credentials)::

    "spark.hadoop.fs.s3a.endpoint": "http://localhost:4566",
    "spark.hadoop.fs.s3a.path.style.access": "true",
    "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
    "spark.hadoop.fs.s3a.access.key": "test", "spark.hadoop.fs.s3a.secret.key": "test",

``kinesim sql --conf KEY=VALUE`` passes such settings too. s3a does not decompress ZIP or
snappy-java objects and knows nothing of delivery streams: point it at a prefix holding one
stream's data objects (not its error output) in a format Spark reads (JSON lines, gzip,
hadoop-snappy, Parquet, ORC).
"""
from __future__ import annotations

import os
from typing import Any


def spark_session(master: str = "local[*]", app_name: str = "kinesim", **conf: Any):
    """A local SparkSession set up for kinesim (see `session`)."""
    from .spark_extra import require
    require("kinesim.analytics.spark_session()")
    from .session import spark_session as make
    return make(master, app_name, **conf)


def register_tables(spark: Any, endpoint_url: str | None = None, **kwargs: Any):
    """Register delivery streams (and ``tables=``) as temp views (see `tables`)."""
    from .tables import register_tables as register
    return register(spark, endpoint_url, **kwargs)


def connect(endpoint_url: str | None = None, *, tables: dict[str, str] | None = None, streams: bool = True,
            master: str | None = None, remote: str | None = None, memory: str | None = None,
            app_name: str = "kinesim", cache_dir: str | None = None, **conf: Any):
    """A SparkSession with every delivery stream (and ``tables``) registered as a temp view.

    By default a client of kinesim's warm Spark Connect server (`connect_server`: started when none
    runs, ~20-40 s once, then seconds), the one `kinesim sql` uses; ``remote="sc://..."`` another
    Spark Connect server; ``master="local[*]"`` (or a cluster's) a classic Spark in this process,
    as when this process already runs one (PySpark cannot mix the two).
    ``memory`` is the warm server's driver memory when this call starts it. Every session reads
    streams too: ``spark.readStream.format("kinesim")``."""
    import logging
    from .spark_extra import require
    require("kinesim.analytics.connect()")  # SparkMissing (an ImportError), saying how to add Spark
    from .tables import plan_tables, register_sources
    log = logging.getLogger("kinesim.analytics")
    sources, catalog = plan_tables(endpoint_url, tables=tables, streams=streams)  # fails fast, before Spark starts
    from .remote import local_spark_running, remote_session, scratch_root
    warm = None
    if (master or local_spark_running()) and not remote:
        from .session import spark_session as make
        spark = make(master or "local[*]", app_name, **conf)
    else:
        from .connect_server import ensure
        from .streaming import register
        from .tables import DEFAULT_ENDPOINT
        endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT
        address = remote or ensure(endpoint, catalog.s3_root or scratch_root(), memory, log.warning)
        spark = remote_session(address, {k: str(v) for k, v in conf.items()})
        register(spark)
        if not remote and catalog.s3_root:   # tables kept in the warm Spark's memory (table_cache)
            from .state import warm_tables
            warm = warm_tables(catalog.s3_root, {k: str(v) for k, v in conf.items()})
    from .state import schema_cache
    schemas = schema_cache(catalog.s3_root, {k: str(v) for k, v in conf.items()}) if catalog.s3_root else None
    register_sources(spark, sources, catalog, cache_dir, schemas=schemas, warm=warm)
    for note in catalog.notes:
        log.warning("%s", note)
    return spark
