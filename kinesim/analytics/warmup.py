"""The warm Spark's first queries, run by its supervisor (`connect_server`), so that the user's
commands do not pay a new JVM's first-query costs.

A new JVM's first queries are several times slower than later ones (class loading, the JIT,
Janino compiling generated code, Hadoop's file system and codec set-up, the first shuffle, the
first Arrow batch): measured here, the first `kinesim sql` after `kinesim serve --spark` took
17-22 s where the next ones took 3 s. ``python -m kinesim.analytics.warmup sc://HOST:PORT DIR ENDPOINT``
runs what a command runs, through the same code, over a few hundred records it writes under
``DIR/warmup/`` (ENDPOINT: the kinesim server): a JSON lines + GZIP table registered (its schema inferred, then read with a kept
one, then merged with a later object's), counts, a GROUP BY with distinct counts and averages,
rows fetched as `kinesim sql` fetches them (collect, toLocalIterator), and a statement Spark
refuses (the error path). Then it registers the kinesim server's own tables as a command does,
which infers and keeps their JSON schemas (`json_schemas`): the first command reads only what
was delivered since. The supervisor runs it before it records Spark ready only when nobody waits
for Spark (`kinesim serve --spark`; see connect_server).

``python -m kinesim.analytics.warmup sc://HOST:PORT DIR ENDPOINT streaming`` runs a continuous
query's first micro-batches instead (`warmup_stream`): the supervisor runs it once Spark is ready
and idle, so that the first `kinesim sql --continuous` finds Spark's streaming side warm.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys

PAGES = ["/", "/search", "/cart", "/checkout", "/help"]


def _sample(directory: str, name: str, first: int, count: int, extra: dict | None = None) -> None:
    """An object as a delivery stream would write it (name, YYYY/MM/dd/HH/ prefix, GZIP)."""
    hour = os.path.join(directory, "2024", "05", "01", "10")
    os.makedirs(hour, exist_ok=True)
    lines = [json.dumps({"ts": f"2024-05-01T10:00:{i % 60:02d}.000Z", "user_id": f"u{i % 37}",
                         "page": PAGES[i % len(PAGES)], "duration_ms": i * 7 % 3000, "ratio": i / 7,
                         "tags": [f"t{i % 3}"], "geo": {"country": "DE", "city": f"c{i % 5}"}, **(extra or {})})
             for i in range(first, first + count)]
    with gzip.open(os.path.join(hour, f"warmup-1-2024-05-01-10-00-0{first % 10}-{name}.gz"), "wt") as f:
        f.write("\n".join(lines) + "\n")


def warm_up_stream(address: str) -> None:
    from .remote import remote_session
    from .warmup_stream import warm_up_streaming
    spark = remote_session(address, {})
    try:
        warm_up_streaming(spark)
    finally:
        spark.stop()


def warm_up(address: str, directory: str, endpoint_url: str) -> None:
    from .remote import remote_session
    from .state import schema_cache
    from .json_schemas import SchemaCache
    from .results import print_result, spark_error, spark_errors
    from .table_sources import prefix_source
    from .tables import Catalog, plan_tables, register_sources

    root = os.path.join(directory, "warmup")
    shutil.rmtree(root, ignore_errors=True)
    data, trees = os.path.join(root, "data"), os.path.join(root, "trees")
    schemas = SchemaCache(os.path.join(root, "schemas"))
    spark = remote_session(address, {})
    try:
        _sample(data, "a", 0, 400)
        for extra in (None, {"campaign": "spring"}):  # inferred; kept; merged with a new object's
            if extra:
                _sample(data, "b", 400, 200, extra)
            catalog = register_sources(spark, [prefix_source("warmup", data, None)], Catalog(), tree_root=trees,
                                       schemas=schemas)
            for query in ("SELECT count(*) AS n FROM warmup",
                          "SELECT page, count(*) AS views, count(DISTINCT user_id) AS users, avg(duration_ms) AS ms "
                          "FROM warmup GROUP BY page ORDER BY views DESC"):
                with open(os.devnull, "w") as null:
                    for fmt in ("table", "json"):
                        print_result(spark.sql(query), fmt, null)
        spark.sql("SELECT 1 AS one").collect()
        for bad in ("SELEC 1", "SELECT nope FROM warmup"):
            try:
                spark.sql(bad).collect()
            except spark_errors() as error:
                spark_error(error)
        assert catalog.tables, catalog.notes
        sources, catalog = plan_tables(endpoint_url)
        if catalog.s3_root:
            register_sources(spark, sources, catalog, schemas=schema_cache(catalog.s3_root))
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[4:5] == ["streaming"]:
        warm_up_stream(sys.argv[1])
    else:
        warm_up(*sys.argv[1:4])
    sys.stdout.flush()
    os._exit(0)  # as the supervisor: a Spark Connect client's threads must not hold the exit up
