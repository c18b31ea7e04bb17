"""Continuous SQL over live streams: named Structured Streaming queries kept in the warm Spark.

    kinesim sql --continuous "SELECT page, window.start AS minute, count(*) AS views
                              FROM STREAM clicks GROUP BY window(ts, '1 minute'), page" \\
        --event-time ts --watermark "1 minute" --into page-views --name views-per-minute

How a query is planned (`plan`):

* every ``STREAM name`` after FROM or JOIN is a Kinesis stream read by the "kinesim" source
  (`streaming`); each record's data is parsed as JSON with the schema given (``--schema``, Spark
  DDL) or the one Spark infers from a sample of the stream (up to SAMPLE_RECORDS records), and the
  rows carry the record's own columns plus ``_partition_key``, ``_sequence_number``, ``_shard_id``
  and ``_arrival_time`` (when Kinesis received it). A record that is not JSON gives a row of nulls,
  as Spark's ``from_json`` does;
* ``--event-time F`` makes F a timestamp (a JSON number is Unix seconds, text is ISO 8601) and
  puts the watermark on it (``--watermark``, default 0 s): rows later than the watermark are
  dropped and a window is emitted once the watermark passes its end, as Spark documents for
  event-time windows. Windows are Spark SQL's own: ``window(ts, '1 minute')`` (tumbling),
  ``window(ts, '10 minutes', '1 minute')`` (hopping), ``session_window(ts, '5 minutes')``;
* the delivered tables of `kinesim sql` that the query names are registered too, for
  stream-table joins (taken when the query starts or resumes, with their kept schemas);
* the result goes to the kinesim sink (`sink`: a Kinesis stream through PutRecords, a delivery
  stream through PutRecordBatch; each row as a JSON object), exactly once per micro-batch.

Named queries run in one Spark Connect session of the warm server (`connect_server`), so they
outlive the command that started them, and stop with the Spark server, that is with the kinesim
server; the supervisor resumes those left running when Spark starts again (`resume_all`). Their
state is ``<data dir>/spark-connect/queries/NAME/``: ``query.json`` (the query as planned first,
inferred schemas included, so that a resume makes the plan its Spark checkpoint expects) and
``checkpoint/`` (Spark's offsets and state, and the sink's ledger).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

SAMPLE_RECORDS = 1000
QUERY_FILE = "query.json"
SESSION_FILE = "session"
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
# `FROM STREAM clicks`, `JOIN STREAM "clicks-enriched"`, with backquotes for any name.
STREAM_REF = re.compile(r"\b(FROM|JOIN)(\s+)STREAM\s+(`[^`]+`|[A-Za-z0-9_.:/-]+)", re.IGNORECASE)
OUTPUT_MODES = ("append", "update", "complete")
LOG_TAIL_BYTES = 4 << 20
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d [A-Z]+ ")          # a new line of Spark's log (connect_server's layout)
PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*: ")
# State partitions of a new query (Spark keeps the number in its checkpoint). Spark's default, 200,
# is for clusters: here each micro-batch of a windowed count committed 200 state stores, 30 s.
SHUFFLE_PARTITIONS = "4"
METADATA = {"partitionKey": "_partition_key", "sequenceNumber": "_sequence_number", "shardId": "_shard_id",
            "approximateArrivalTimestamp": "_arrival_time"}


class QueryError(ValueError):
    """A continuous query that cannot be planned or run, with what to do about it."""


@dataclass
class Query:
    name: str
    sql: str
    endpoint_url: str
    into: str | None = None
    into_kind: str | None = None          # "stream" or "deliveryStream"
    schemas: dict[str, str] = field(default_factory=dict)   # stream -> DDL, or StructType JSON when inferred
    event_time: str | None = None
    watermark: str | None = None
    starting_position: str = "LATEST"
    output_mode: str = "append"
    trigger: str | None = None            # a processing-time interval; none: as soon as the last batch ends
    partition_key: str | None = None
    tables: dict[str, str] = field(default_factory=dict)
    running: bool = True                  # what the user asked for last (start/resume or stop)
    query_id: str | None = None           # Spark's id (kept in the checkpoint) and this run's
    run_id: str | None = None
    error: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Query":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


# ---------------------------------------------------------------------------- where queries live

def queries_dir(spark_state: str) -> str:
    """Where named queries live, in the warm Spark server's directory (`connect_server.state_dir`)."""
    return os.path.join(spark_state, "queries")


def check_name(name: str) -> str:
    if not NAME.match(name or ""):
        raise QueryError(f"query name {name!r}: use 1-64 letters, digits, '-' or '_', starting with a letter")
    return name


def load(directory: str, name: str) -> Query:
    try:
        with open(os.path.join(directory, check_name(name), QUERY_FILE)) as f:
            return Query.from_json(json.load(f))
    except FileNotFoundError:
        raise QueryError(f"no continuous query named {name!r} (`kinesim queries` lists them)") from None


def save(directory: str, query: Query) -> None:
    path = os.path.join(directory, query.name)
    os.makedirs(path, exist_ok=True)
    tmp = os.path.join(path, f"{QUERY_FILE}.{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(asdict(query), f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(path, QUERY_FILE))


def names(directory: str) -> list[str]:
    try:
        entries = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    return [n for n in entries if os.path.isfile(os.path.join(directory, n, QUERY_FILE))]


def checkpoint_dir(directory: str, name: str) -> str:
    return os.path.join(directory, name, "checkpoint")


def remove(directory: str, name: str) -> None:
    shutil.rmtree(os.path.join(directory, check_name(name)), ignore_errors=True)


def session(address: str, directory: str) -> Any:
    """The Spark Connect session the named queries run in: one id per data directory, kept in a
    file, so every command reaches the same queries (Spark keeps a session's streaming queries)."""
    from .remote import remote_session
    from .streaming import register
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, SESSION_FILE)
    try:
        with open(path) as f:
            session_id = str(uuid.UUID(f.read().strip()))
    except (OSError, ValueError):
        session_id = str(uuid.uuid4())
        with open(path, "w") as f:
            f.write(session_id)
    spark = remote_session(f"{address}/;session_id={session_id}", {}, keep=True)
    register(spark)
    return spark


# ---------------------------------------------------------------------------- planning

def stream_refs(sql: str) -> list[str]:
    """The streams a query reads, in order of appearance, each once."""
    out: list[str] = []
    for match in STREAM_REF.finditer(sql):
        name = match[3].strip("`")
        if name not in out:
            out.append(name)
    return out


def view_name(stream: str) -> str:
    return "__stream_" + re.sub(r"[^A-Za-z0-9_]", "_", stream)


def names_table(sql: str, name: str) -> bool:
    """Whether `name` appears in the query as a word (a table it may read; a word of a string or
    a column of that name only costs the table's registration)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", sql, re.IGNORECASE) is not None


def rewrite(sql: str) -> str:
    """The query with each ``STREAM name`` replaced by the view that reads it."""
    return STREAM_REF.sub(lambda m: f"{m[1]}{m[2]}{view_name(m[3].strip('`'))}", sql)


def source_options(query: Query, stream: str) -> dict[str, str]:
    return {"stream": stream, "endpointUrl": query.endpoint_url, "startingPosition": query.starting_position}


def sample_records(query: Query, stream: str) -> list[bytes]:
    """Up to SAMPLE_RECORDS records from the start of the stream's open shards."""
    from .streaming import Connection, client, is_open, list_shards
    conn = Connection.from_options(source_options(query, stream))
    kinesis = client(conn)
    out: list[bytes] = []
    for shard in sorted(list_shards(conn), key=is_open):  # closed (older) shards first
        iterator = kinesis.get_shard_iterator(**conn.stream_ref(), ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator and len(out) < SAMPLE_RECORDS:
            page = kinesis.get_records(ShardIterator=iterator, Limit=SAMPLE_RECORDS - len(out))
            out += [r["Data"] for r in page["Records"]]
            if not page["Records"] or page.get("MillisBehindLatest", 0) == 0:
                break
            iterator = page.get("NextShardIterator")
        if len(out) >= SAMPLE_RECORDS:
            break
    return out


def infer_schema(spark: Any, query: Query, stream: str, directory: str) -> str:
    """Spark's own JSON schema inference over a sample of the stream, as StructType JSON."""
    records = [r for r in sample_records(query, stream) if r.strip()]
    if not records:
        raise QueryError(f"stream {stream!r} has no records to infer their schema from: put some first, or give "
                         f"it with --schema, e.g. --schema \"page STRING, ts DOUBLE\"")
    # The Spark server reads the sample itself: a file beside the query (same machine).
    path = os.path.join(directory, query.name, f"sample-{view_name(stream)}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\n".join(r.replace(b"\n", b" ") for r in records) + b"\n")
    schema = spark.read.option("mode", "DROPMALFORMED").json(path).schema
    os.unlink(path)
    fields = [f for f in schema.fields if f.name != "_corrupt_record"]
    if not fields:
        raise QueryError(f"the records of stream {stream!r} are not JSON objects; give --schema")
    return type(schema)(fields).json()


def parsed_schema(text: str) -> Any:
    """A schema as `from_json` takes it: a DDL string, or the StructType stored as JSON."""
    if text.lstrip().startswith("{"):
        from pyspark.sql.types import StructType
        return StructType.fromJson(json.loads(text))
    return text


def stream_frame(spark: Any, query: Query, stream: str) -> Any:
    """The stream's records as rows: the JSON fields, the Kinesis metadata, event time and watermark."""
    reader = spark.readStream.format("kinesim")
    for key, value in source_options(query, stream).items():
        reader = reader.option(key, value)
    return parse_records(reader.load(), query, stream)


def parse_records(raw: Any, query: Query, stream: str) -> Any:
    """`stream_frame` from the kinesim source's rows (the warm-up gives rows of its own, `warmup_stream`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType, StringType, TimestampType
    parsed = raw.select(F.from_json(F.col("data").cast("string"), parsed_schema(query.schemas[stream])).alias("_r"),
                        *(F.col(k).alias(v) for k, v in METADATA.items()))
    frame = parsed.select("_r.*", *METADATA.values())
    if query.event_time:
        column = query.event_time
        types = {f.name: f.dataType for f in frame.schema.fields}
        if column not in types:
            raise QueryError(f"--event-time {column}: stream {stream!r} has no such field (fields: "
                             f"{', '.join(types)})")
        kind = types[column]
        if isinstance(kind, NumericType):
            frame = frame.withColumn(column, F.timestamp_seconds(F.col(column)))
        elif isinstance(kind, StringType):
            frame = frame.withColumn(column, F.to_timestamp(F.col(column)))
        elif not isinstance(kind, TimestampType):
            raise QueryError(f"--event-time {column} is a {kind.simpleString()}: it must be a timestamp, a number "
                             f"(Unix seconds) or ISO 8601 text")
        frame = frame.withWatermark(column, query.watermark or "0 seconds")
    return frame


def check_streams(query: Query) -> None:
    """Every stream the query reads exists (else a one-line answer, not a Spark stack trace)."""
    from botocore.exceptions import ClientError
    from .streaming import Connection, client
    for stream in stream_refs(query.sql):
        conn = Connection.from_options(source_options(query, stream))
        try:
            client(conn).describe_stream_summary(**conn.stream_ref())
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            raise QueryError(f"FROM STREAM {stream}: no such Kinesis stream at {query.endpoint_url}") from None


def plan(spark: Any, query: Query, directory: str) -> Any:
    """The query's streaming DataFrame, its streams and tables registered as views first."""
    from .tables import plan_tables, register_sources
    streams = stream_refs(query.sql)
    if not streams:
        raise QueryError("a continuous query reads at least one stream: write FROM STREAM name (or JOIN STREAM name)")
    check_streams(query)
    for stream in streams:
        if stream not in query.schemas:
            query.schemas[stream] = infer_schema(spark, query, stream, directory)
    sources, catalog = plan_tables(query.endpoint_url, tables=query.tables, streams=True)
    # Only the tables the query names, with their kept schemas: registering every delivered table
    # inferred each one's schema again, reading all its records (at a million, seconds on a quiet
    # machine, most of a minute on a busy one) for a query that joins none.
    sources = [s for s in sources if names_table(query.sql, s.name)]
    schemas = None
    if catalog.s3_root and sources:
        from .state import schema_cache
        schemas = schema_cache(catalog.s3_root)
    # The views' link tree lives with the query, not with the command that started it.
    register_sources(spark, sources, catalog, tree_root=os.path.join(directory, query.name, "tables"),
                     schemas=schemas)
    for stream in streams:
        stream_frame(spark, query, stream).createOrReplaceTempView(view_name(stream))
    frame = spark.sql(rewrite(query.sql))
    if not frame.isStreaming:
        raise QueryError("the query does not read a stream")
    return frame


# ---------------------------------------------------------------------------- running

def target_kind(endpoint_url: str, name: str) -> str:
    """Whether `name` is a Kinesis stream or a Firehose delivery stream of the server."""
    from botocore.exceptions import ClientError
    from .streaming import Connection, client
    conn = Connection.from_options({"stream": name, "endpointUrl": endpoint_url})
    kinesis = client(conn)
    try:
        kinesis.describe_stream_summary(**conn.stream_ref())
        return "stream"
    except ClientError as err:
        if err.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    firehose = client(conn, "firehose")
    try:
        firehose.describe_delivery_stream(DeliveryStreamName=name)
        return "deliveryStream"
    except ClientError as err:
        if err.response["Error"]["Code"] != "ResourceNotFoundException":
            raise
    raise QueryError(f"--into {name}: no Kinesis stream or delivery stream has that name; create it first")


def start(spark: Any, query: Query, directory: str) -> Any:
    """Start (or resume, from its checkpoint) a named query writing to its target."""
    spark.conf.set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
    frame = plan(spark, query, directory)
    checkpoint = checkpoint_dir(directory, query.name)
    writer = (frame.writeStream.format("kinesim").queryName(query.name).outputMode(query.output_mode)
              .option(query.into_kind, query.into).option("endpointUrl", query.endpoint_url)
              .option("checkpointLocation", checkpoint))
    if query.partition_key:
        writer = writer.option("partitionKeyColumn", query.partition_key)
    if query.trigger:
        writer = writer.trigger(processingTime=query.trigger)
    return writer.start()


def active(spark: Any) -> dict[str, Any]:
    """The session's running queries by name."""
    return {q.name: q for q in spark.streams.active if q.name}


def failure(spark_state: str, query: Query) -> str | None:
    """Why a query that should be running ended, from the warm Spark's log (Spark Connect does not
    hand a terminated query to a later client): the error's own line, for a Python error the
    exception at the end of its traceback."""
    try:
        with open(os.path.join(spark_state, "spark.log"), "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    marker = f"Query {query.name} [id = {query.query_id}, runId = {query.run_id}]"
    at = text.rfind(marker)
    if not query.query_id or at < 0 or "terminated with error" not in text[at:at + 300].split("\n", 1)[0]:
        return None
    lines = []
    for line in text[at:].split("\n")[1:]:
        if line.startswith("\tat ") or LOG_LINE.match(line):
            break
        lines.append(line.rstrip())
    if any(line.startswith("Traceback") or "Traceback (most recent call last)" in line for line in lines):
        raised = [line for line in lines if PYTHON_ERROR.match(line)]
        if raised:
            return raised[-1]
    return next((line for line in lines if line.strip()), None)


def wait_started(handle: Any, timeout: float = 180.0) -> None:
    """Until the query finished its first micro-batch; its error if it failed before."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not handle.isActive:
            error = handle.exception()
            raise QueryError(f"the query stopped: {error}" if error else "the query stopped")
        if handle.lastProgress is not None:
            return
        time.sleep(0.2)


def stop(spark: Any, directory: str, name: str) -> bool:
    """Stop a named query (it can be resumed); whether it was running."""
    query = load(directory, name)
    handle = active(spark).get(name)
    if handle is not None:
        handle.stop()
    query.running = False
    save(directory, query)
    return handle is not None


@contextlib.contextmanager
def starting(directory: str, name: str) -> Iterator[None]:
    """One start of a query at a time: `kinesim queries resume` and the supervisor's `resume_all`
    may both find it stopped when Spark has just started."""
    os.makedirs(os.path.join(directory, name), exist_ok=True)
    with open(os.path.join(directory, name, "start.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def resume(spark: Any, directory: str, name: str) -> bool:
    """Start a named query again from its checkpoint; False when it runs already."""
    with starting(directory, name):
        if name in active(spark):
            return False
        query = load(directory, name)
        query.running, query.error = True, None
        try:
            handle = start(spark, query, directory)
            query.query_id, query.run_id = str(handle.id), str(handle.runId)
            wait_started(handle)
        except Exception as error:
            query.error = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise
        finally:
            save(directory, query)
        return True


def resume_all(address: str, directory: str, log: Callable[[str], None] = print) -> None:
    """Start again every query that was running when Spark stopped (the supervisor calls this)."""
    wanted = [n for n in names(directory) if load(directory, n).running]
    if not wanted:
        return
    spark = session(address, directory)
    for name in wanted:
        try:
            if resume(spark, directory, name):
                log(f"resumed continuous query {name}")
        except Exception as error:  # noqa: BLE001 - one query's failure must not stop the others
            log(f"could not resume continuous query {name}: {error}")
