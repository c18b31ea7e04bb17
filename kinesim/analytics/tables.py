"""Delivery streams as Spark tables: what Firehose delivered, found on disk and registered as views.

``register_tables(spark, endpoint_url=None, *, tables=None, streams=True, cache_dir=None) -> Catalog``

1. Ask the server. ``GET /_kinesim/health`` gives ``s3_root``, the directory that holds the
   buckets (``<s3_root>/<bucket>/<key>``, plain files; a temp directory for ``--in-memory``
   servers); Firehose's ListDeliveryStreams / DescribeDeliveryStream (json_client, against the
   endpoint) give each delivery stream's bucket, Prefix, ErrorOutputPrefix, S3 backup and
   DataFormatConversionConfiguration.
2. Find its objects. A key belongs to a delivery stream when it has the shape Firehose gives it:
   the Prefix (each ``!{...}`` expression one or more path segments; with no expression,
   ``YYYY/MM/dd/HH/`` after it) then ``<stream>-<version>-<YYYY-MM-dd-HH-mm-ss>-<uuid><ext>``.
   Error output (``processing-failed/``, ``format-conversion-failed/``, ... under the
   ErrorOutputPrefix), S3 backup objects and other delivery streams' objects in the same bucket
   are left out.
3. Read them as one table, a temp view named after the stream (``clicks-archive`` ->
   ``clicks_archive``):

   - format: Parquet or ORC when DataFormatConversionConfiguration is enabled (the schema is the
     one in the files: the conversion's columns, batches merged with ``mergeSchema``), else
     the files' first bytes decide (``PAR1``, ``ORC``), else JSON lines with the schema
     inferred by Spark;
   - compression: GZIP (``.gz``) and HADOOP_SNAPPY (``.snappy``, Hadoop's block format) are read
     by Spark itself. ZIP, Snappy (snappy-java's stream format, which Hadoop's SnappyCodec
     cannot read although it shares the ``.snappy`` extension) and gzip under a custom
     FileExtension are decompressed with `firehose.layout.decompress` into a cache
     directory first, and so are objects whose records were written back to back without a
     newline (``{"a":1}{"a":2}``, what Firehose delivers when producers add no delimiter):
     those are rewritten one JSON object per line;
   - partitions: every ``name=value/`` segment of a key (Hive style, e.g. a Prefix
     ``page=!{partitionKeyFromQuery:page}/`` or a literal ``customer=abc/``) becomes a column
     through Spark's partition discovery, and so does each ``!{partitionKeyFromQuery:k}`` /
     ``!{partitionKeyFromLambda:k}`` that fills a segment of its own (``!{...:k}/`` -> column
     ``k``). Other directories (the default ``YYYY/MM/dd/HH/``) are not columns: the files are
     read as if Spark listed them recursively (``recursiveFileLookup``).

   Spark reads a "view tree" per table in a temporary directory: ``<table>/<k=v>/.../<file>``,
   each file a symbolic link to the delivered object (or its decompressed copy). That is how
   exactly one stream's objects are selected, and how dynamic partitions that are not
   ``k=v`` directories become columns.

``tables={"name": "s3://bucket/prefix"}`` (``--table NAME=s3://bucket/prefix``) registers any
prefix of a kinesim bucket (every object under it, minus error-output directories and hidden
``_``/``.`` files; a local directory path works too). A table is a snapshot: objects delivered
after registration are not in it until `register_tables` runs again (`kinesim sql` registers
per command; it keeps JSON tables' schemas between commands, see `json_schemas`). Views of delivery streams
that delivered nothing yet are not created (Spark has no schema for them); `Catalog.empty` names
them.

Kinesis channels' outputs are tables too, named after the channel: `channel_tables.py` says
which keys are a channel's and how its record format is read (JSON, or STRING as text).

Real S3 from a real cluster: this module reads kinesim's files; Spark reads real buckets itself
with the ``s3a://`` file system (see the package docstring).

The parts: `table_sources` (which keys are a table's, the objects found and their kinds),
`view_tree` (the directory Spark reads, decompressed copies); this module asks the server and
registers the views.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ..protocol.json_client import CallError, call
from .channel_tables import channel_source, describe_channels
from .json_schemas import SchemaCache, read_json, read_with, table_schema
from .table_cache import WarmTables
from .table_sources import ServerUnreachable, Source, find_objects, prefix_source, stream_source, table_name
from .view_tree import build_view_tree

log = logging.getLogger("kinesim.analytics")

DEFAULT_ENDPOINT = "http://localhost:4566"


@dataclass
class Table:
    """A registered view."""
    name: str
    location: str
    format: str                     # json | parquet | orc
    files: int
    partition_columns: list[str]
    stream: str | None = None
    decompressed: int = 0           # objects read from a decompressed / rewritten copy
    skipped: int = 0                # objects left out (another format than the table's)
    kept: str = ""                  # in the warm Spark's memory: "kept", "kept+fresh", "new", "not kept" (table_cache)


@dataclass
class Catalog:
    tables: list[Table] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)     # sources with nothing readable yet
    notes: list[str] = field(default_factory=list)     # what was skipped, and why
    s3_root: str | None = None

# ------------------------------------------------------------------ asking the server

def server_info(endpoint_url: str) -> dict[str, Any]:
    """The health document, with `s3_root` (older servers: derived from `data_dir`)."""
    url = endpoint_url.rstrip("/") + "/_kinesim/health"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            info = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ServerUnreachable(f"cannot reach kinesim at {endpoint_url} ({reason}); is `kinesim serve` running?") \
            from None
    if not info.get("s3_root") and info.get("data_dir"):
        info["s3_root"] = os.path.join(info["data_dir"], "s3")
    return info


def describe_delivery_streams(endpoint_url: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """DeliveryStreamDescription of every delivery stream, through the Firehose API."""
    def firehose(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return call(endpoint_url, f"Firehose_20150804.{operation}", params, "firehose", region)

    names: list[str] = []
    params: dict[str, Any] = {"Limit": 10000}
    while True:
        page = firehose("ListDeliveryStreams", params)
        names += page["DeliveryStreamNames"]
        if not page.get("HasMoreDeliveryStreams") or not page["DeliveryStreamNames"]:
            break
        params["ExclusiveStartDeliveryStreamName"] = page["DeliveryStreamNames"][-1]
    out = []
    for name in names:
        try:
            out.append(firehose("DescribeDeliveryStream", {"DeliveryStreamName": name})["DeliveryStreamDescription"])
        except CallError as err:
            if err.code != "ResourceNotFoundException":  # deleted meanwhile
                raise
    return out


# ------------------------------------------------------------------ registration

def _family(kind: str) -> str:
    return kind if kind in ("parquet", "orc") else "json"


def _temp_dir() -> str:
    path = tempfile.mkdtemp(prefix="kinesim-sql-")
    atexit.register(shutil.rmtree, path, True)
    return path


def _read(spark: Any, path: str, family: str):
    reader = spark.read
    if family in ("parquet", "orc"):
        # Each delivered batch may carry its own inferred schema: merge them.
        return reader.option("mergeSchema", "true").format(family).load(path)
    return reader.text(path)  # a STRING channel: one row per record, column `value`


def register_source(spark: Any, source: Source, tree_root: str, cache_dir: str, catalog: Catalog,
                    schemas: SchemaCache | None = None, warm: WarmTables | None = None) -> Table | None:
    """Register one source as a temp view (None, noted in `catalog`, when it has nothing to read);
    a JSON table's schema is kept in `schemas` (see `json_schemas`), its rows in the warm Spark's
    memory with `warm` (see `table_cache`)."""
    objects = find_objects(source)
    if not objects:
        catalog.empty.append(source.name)
        return None
    family = source.format or _family(objects[-1].kind)
    chosen = [o for o in objects if _family(o.kind) == ("json" if family == "text" else family)]
    skipped = len(objects) - len(chosen)
    if skipped:
        catalog.notes.append(f"{source.name}: {skipped} of {len(objects)} objects are not {family} "
                             f"(written before the format changed?); left out")
    if not chosen:
        catalog.empty.append(source.name)
        return None
    layouts = {tuple(p.split("=", 1)[0] for p in o.partitions) for o in chosen}
    if len(layouts) > 1:
        # Spark's partition discovery needs one directory layout (a Prefix changed by UpdateDestination?).
        catalog.notes.append(f"{source.name}: objects have different partition directories "
                             f"({' / '.join(sorted('/'.join(l) or '(none)' for l in layouts))}); read without "
                             "partition columns")
        for o in chosen:
            o.partitions = []
    root, copied, links = build_view_tree(source.name, chosen, tree_root, cache_dir, family)
    partition_columns = [p.split("=", 1)[0] for p in chosen[0].partitions]
    kept = ""
    try:
        identity = json.dumps([source.name, source.location, source.pattern and source.pattern.pattern])
        files = {o.key: [o.size, o.mtime_ns] for o in chosen}
        if warm is not None and (family != "json" or schemas is not None):
            # How the objects are read: for JSON the records' schema (a base read with another is not used).
            how = table_schema(spark, root, links, files, identity, schemas).json() if family == "json" else family

            def make(tree: str, how: str) -> Any:
                if family == "json":
                    from pyspark.sql.types import StructType
                    return read_with(spark, tree, StructType.fromJson(json.loads(how)), partition_columns)
                return _read(spark, tree, family)
            result = warm.frame(source.name, json.dumps([identity, family, partition_columns]), chosen, how, make,
                                lambda objects, parent: build_view_tree(source.name, objects, parent, cache_dir,
                                                                        family)[0],
                                os.path.join(tree_root, ".fresh"))
            df, kept = result.frame, result.state
        elif family == "json":
            df = read_json(spark, root, links, files, identity, partition_columns, schemas)
        else:
            df = _read(spark, root, family)
        df.createOrReplaceTempView(source.name)
    except Exception as err:  # one unreadable table must not take the others with it
        message = (err.getMessage() if hasattr(err, "getMessage") else str(err)).strip() or type(err).__name__
        catalog.notes.append(f"{source.name}: Spark cannot read {source.location}: {message.splitlines()[0]}")
        return None
    return Table(source.name, source.location, family, len(chosen), partition_columns, source.stream, copied,
                 skipped, kept)


def plan_tables(endpoint_url: str | None = None, *, tables: dict[str, str] | None = None,
                streams: bool = True) -> tuple[list[Source], Catalog]:
    """What to register, without Spark: each delivery stream's Source (when `streams`) and one per
    `tables` entry (name -> s3://bucket/prefix or a local directory). Asks the server only when
    something needs it (ServerUnreachable if it does not answer)."""
    endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT
    catalog = Catalog()
    needs_server = streams or any(re.match(r"s3[an]?://", url) for url in (tables or {}).values())
    info: dict[str, Any] = {}
    if needs_server:
        info = server_info(endpoint_url)
        catalog.s3_root = info.get("s3_root")
        if not catalog.s3_root:
            raise ServerUnreachable(f"kinesim at {endpoint_url} does not say where its buckets are (no s3_root)")
    sources: list[Source] = []
    if streams:
        for description in describe_delivery_streams(endpoint_url, info.get("region") or "us-east-1"):
            source = stream_source(description, catalog.s3_root)
            if isinstance(source, str):
                catalog.notes.append(source)
            else:
                sources.append(source)
        # Kinesis channels' outputs too, each a table named after its channel.
        for description in describe_channels(endpoint_url, info.get("region") or "us-east-1"):
            source = channel_source(description, catalog.s3_root, Source, table_name)
            if isinstance(source, str):
                catalog.notes.append(source)
            else:
                sources.append(source)
    for name, location in (tables or {}).items():
        sources = [s for s in sources if s.name != name]  # an explicit table wins over a stream's
        sources.append(prefix_source(name, location, catalog.s3_root))
    return sources, catalog


def register_sources(spark: Any, sources: list[Source], catalog: Catalog, cache_dir: str | None = None,
                     tree_root: str | None = None, schemas: SchemaCache | None = None,
                     warm: WarmTables | None = None) -> Catalog:
    """Register planned sources as temp views of `spark`, recording them in `catalog`. The views
    read a tree of links under `tree_root` (default: a temporary directory removed when this
    process exits; a continuous query, which outlives it, gives its own). JSON tables' schemas
    are kept in `schemas` between calls (none: Spark infers them every time); with `warm`, the
    tables' rows are kept in the warm Spark's memory (`table_cache`)."""
    if tree_root:
        shutil.rmtree(tree_root, ignore_errors=True)
        os.makedirs(tree_root)
    else:
        tree_root = _temp_dir()
    # A kept table's tree links to its decompressed copies after this process is gone.
    cache_dir = cache_dir or (warm.copies if warm is not None else os.path.join(tree_root, ".decompressed"))
    os.makedirs(cache_dir, exist_ok=True)
    for source in sources:
        table = register_source(spark, source, tree_root, cache_dir, catalog, schemas, warm)
        if table is not None:
            catalog.tables.append(table)
    return catalog


def register_tables(spark: Any, endpoint_url: str | None = None, *, tables: dict[str, str] | None = None,
                    streams: bool = True, cache_dir: str | None = None) -> Catalog:
    """Register every delivery stream's output (and `tables`: name -> s3://bucket/prefix) as temp
    views of `spark`; see the module docstring. Notes on what was left out are logged too."""
    sources, catalog = plan_tables(endpoint_url, tables=tables, streams=streams)
    register_sources(spark, sources, catalog, cache_dir)
    for note in catalog.notes:
        log.warning("%s", note)
    return catalog
