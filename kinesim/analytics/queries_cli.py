"""`kinesim queries`: the continuous queries `kinesim sql --continuous ... --into ... --name NAME`
started, kept running in kinesim's warm Spark.

  kinesim queries                       # list them: name, state, into, rows/s in, rows/s done,
                                        #   last batch, watermark
  kinesim queries show NAME             # the query, its target and last progress
  kinesim queries stop NAME             # stop it; it keeps its checkpoint
  kinesim queries resume NAME           # go on from the checkpoint: nothing read twice, nothing skipped
  kinesim queries delete NAME           # stop it and forget it (checkpoint included)

A query stops with the kinesim server (its Spark stops too) and is resumed when Spark starts again
(the next `kinesim sql`, `kinesim queries resume` or `kinesim serve --spark`).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import tempfile
import uuid
from typing import IO, Any

from . import continuous, spark_extra
from .continuous import Query, QueryError
from .remote import remote_session
from .results import ascii_table, pairs, print_result, spark_error, spark_errors

DESCRIPTION = __doc__
DEFAULT_ENDPOINT = "http://localhost:4566"
POLL_S = 0.5
# What `kinesim queries` lists (docs/spark.md names them too). "rows/s in": read from the streams;
# "rows/s done": processed; "last batch": the id of the last micro-batch that ended.
LIST_COLUMNS = ["name", "state", "into", "rows/s in", "rows/s done", "last batch", "watermark"]


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("action", nargs="?", default="list", choices=("list", "show", "stop", "resume", "delete"),
                        help="what to do (default: list)")
    parser.add_argument("name", nargs="?", help="the query (for show, stop, resume, delete)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="how `list` prints")
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT,
                        help=f"the kinesim server (default: $AWS_ENDPOINT_URL, else {DEFAULT_ENDPOINT})")
    return parser


def add_continuous_arguments(parser: argparse.ArgumentParser) -> None:
    """`kinesim sql`'s options for continuous queries."""
    group = parser.add_argument_group(
        "continuous queries", "a Structured Streaming query over live streams: FROM STREAM name reads a Kinesis "
                              "stream's JSON records (see `kinesim queries --help`)")
    group.add_argument("--continuous", action="store_true",
                       help="run the query continuously over the streams it reads with FROM STREAM name")
    group.add_argument("--into", metavar="STREAM",
                       help="put each result row (a JSON object) to this Kinesis stream or delivery stream; the "
                            "query keeps running in kinesim's Spark (needs --name)")
    group.add_argument("--print", action="store_true", help="print result rows as they come until Ctrl-C")
    group.add_argument("--name", help="the query's name, for `kinesim queries` (with --into)")
    group.add_argument("--schema", action="append", default=[], metavar="[STREAM=]DDL",
                       help='the records\' JSON fields, e.g. "page STRING, ts DOUBLE" (default: inferred by Spark '
                            "from up to 1,000 records of the stream); repeatable, one per stream")
    group.add_argument("--event-time", metavar="FIELD",
                       help="the field holding each record's event time (Unix seconds or ISO 8601); "
                            "_arrival_time is when Kinesis received it")
    group.add_argument("--watermark", metavar="DELAY",
                       help='how late an event may be, e.g. "1 minute" (needs --event-time; default 0 seconds)')
    group.add_argument("--starting-position", choices=("LATEST", "TRIM_HORIZON"), default="LATEST",
                       help="where a new query starts reading (default: LATEST, new records only)")
    group.add_argument("--output-mode", choices=continuous.OUTPUT_MODES, default="append",
                       help="append: each window once, when the watermark closes it (default); update: rows as "
                            "they change; complete: the whole result every batch")
    group.add_argument("--trigger", metavar="INTERVAL",
                       help='start a micro-batch every INTERVAL, e.g. "10 seconds" (default: as soon as the '
                            "last one ended)")
    group.add_argument("--partition-key", metavar="COLUMN",
                       help="the result column used as partition key (default: a hash of the row)")


# ---------------------------------------------------------------------------- kinesim sql --continuous

def _schemas(values: list[str], streams: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, ddl = value.partition("=")
        if sep and name.strip() in streams:
            out[name.strip()] = ddl
        elif len(streams) == 1:
            out[streams[0]] = value
        else:
            raise QueryError(f"--schema {value!r}: the query reads several streams; write STREAM=DDL")
    return out


def _query(args: argparse.Namespace, name: str) -> Query:
    if not args.query:
        raise QueryError("give the query: kinesim sql --continuous \"SELECT ... FROM STREAM name ...\"")
    if bool(args.into) == bool(args.print):
        raise QueryError("say where results go: --into STREAM (a named query that keeps running) or --print")
    if args.watermark and not args.event_time:
        raise QueryError("--watermark needs --event-time FIELD (the watermark is on event time)")
    streams = continuous.stream_refs(args.query)
    if not streams:
        raise QueryError("a continuous query reads at least one stream: write FROM STREAM name")
    return Query(name=continuous.check_name(name), sql=args.query, endpoint_url=args.endpoint_url, into=args.into,
                 schemas=_schemas(args.schema, streams), event_time=args.event_time, watermark=args.watermark,
                 starting_position=args.starting_position, output_mode=args.output_mode, trigger=args.trigger,
                 partition_key=args.partition_key, tables=pairs(args.table, "--table"))


def _spark_failure(error: BaseException) -> str:
    text = spark_error(error)
    if "Append output mode not supported" in text or "append output mode" in text.lower():
        text += ("\nhint: an aggregation emits in append mode only with a watermark: add --event-time FIELD "
                 "--watermark DELAY, or use --output-mode update (or complete)")
    return text


def _warm_spark(args: argparse.Namespace, s3_root: str, say: Any) -> str:
    from .connect_server import ensure
    return args.remote or ensure(args.endpoint_url, s3_root, args.spark_memory, say)


def run_continuous(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    """`kinesim sql --continuous`: 0 once a named query runs (or --print ended with Ctrl-C)."""
    from .connect_server import state_dir
    from .tables import ServerUnreachable, server_info

    def say(text: str) -> None:
        err.write(f"kinesim sql: {text}\n")
        err.flush()
    try:
        if args.master and args.into:
            raise QueryError("named queries run in kinesim's warm Spark: drop --master (it works with --print)")
        if args.into and not args.name:
            raise QueryError("--into needs --name NAME (how `kinesim queries` shows, stops and resumes it)")
        query = _query(args, args.name or f"print-{uuid.uuid4().hex[:8]}")
        continuous.check_streams(query)  # before Spark starts: a typo is told at once
        s3_root = server_info(args.endpoint_url)["s3_root"]
        directory = continuous.queries_dir(state_dir(s3_root))
        if args.into:
            if query.name in continuous.names(directory):
                raise QueryError(f"a query named {query.name!r} exists: `kinesim queries resume {query.name}` goes on "
                                 f"with it, `kinesim queries delete {query.name}` frees the name")
            query.into_kind = continuous.target_kind(args.endpoint_url, args.into)
            return _start_named(args, query, directory, s3_root, say, out)
        return _print(args, query, s3_root, say, out)
    except (QueryError, ServerUnreachable, LookupError) as error:
        say(str(error))
        return 2 if isinstance(error, QueryError) else 1
    except spark_errors() as error:
        say(f"error: {_spark_failure(error)}")
        return 1


def _start_named(args: argparse.Namespace, query: Query, directory: str, s3_root: str, say: Any,
                 out: IO[str]) -> int:
    spark = continuous.session(_warm_spark(args, s3_root, say), directory)
    if query.name in continuous.active(spark):
        raise QueryError(f"a query named {query.name!r} already runs in Spark")
    try:
        # As measured with Spark warm on 2 cores (bench/sql_waits.py; bench/README.md "Spark waits").
        say(f"starting continuous query {query.name} (reads {', '.join(continuous.stream_refs(query.sql))}, "
            f"writes {query.into}; its first micro-batch in ~6-8 s with Spark warm)...")
        handle = continuous.start(spark, query, directory)
        query.query_id, query.run_id = str(handle.id), str(handle.runId)
        continuous.wait_started(handle)
    except BaseException:
        continuous.remove(directory, query.name)
        raise
    continuous.save(directory, query)
    out.write(f"continuous query {query.name} is running into {query.into}: `kinesim queries` shows it, "
              f"`kinesim queries stop {query.name}` stops it\n")
    return 0


def _print(args: argparse.Namespace, query: Query, s3_root: str, say: Any, out: IO[str]) -> int:
    """Run the query into a memory table of a session of our own and print what it adds."""
    if args.master:
        from .session import spark_session  # its sessions read and write "kinesim" already
        spark = spark_session(args.master, "kinesim sql --continuous", log_level=args.log_level.upper())
    else:
        from .streaming import register
        spark = remote_session(_warm_spark(args, s3_root, say), {})
        register(spark)
    table = query.name.replace("-", "_")
    spark.conf.set("spark.sql.shuffle.partitions", continuous.SHUFFLE_PARTITIONS)
    with tempfile.TemporaryDirectory(prefix="kinesim-continuous-") as scratch:
        frame = continuous.plan(spark, query, scratch)
        handle = frame.writeStream.format("memory").queryName(table).outputMode(query.output_mode)
        if query.trigger:
            handle = handle.trigger(processingTime=query.trigger)
        handle = handle.start()
        say("running; result rows print as micro-batches produce them (Ctrl-C stops)")
        # Ctrl-C sets a flag rather than raising: a KeyboardInterrupt inside a gRPC call to Spark
        # can be swallowed by the client's retries, and the query must be stopped either way.
        interrupted = threading.Event()
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set()) if main else None
        printed, last_batch = 0, -1
        try:
            while handle.isActive and not interrupted.is_set():
                progress = handle.lastProgress
                batch = progress["batchId"] if progress else -1
                if batch != last_batch:
                    last_batch = batch
                    result = spark.table(table)
                    if query.output_mode == "complete":
                        print_result(result, args.format, out)
                    else:
                        printed += print_result(result.offset(printed), args.format, out)
                    out.flush()
                interrupted.wait(POLL_S)
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        if interrupted.is_set():
            handle.stop()
            say("stopped")
        elif handle.exception():
            raise QueryError(f"the query stopped: {handle.exception()}")
    return 0


# ---------------------------------------------------------------------------- kinesim queries

def describe(query: Query, handle: Any) -> dict[str, Any]:
    """What `list` and `show` say about a query."""
    row: dict[str, Any] = {"name": query.name, "into": query.into, "sql": query.sql}
    if handle is not None:
        progress = handle.lastProgress or {}
        row.update(state="running", batch=progress.get("batchId"),
                   input_rows_per_s=round(progress.get("inputRowsPerSecond") or 0.0, 1),
                   processed_rows_per_s=round(progress.get("processedRowsPerSecond") or 0.0, 1),
                   watermark=(progress.get("eventTime") or {}).get("watermark"), last_progress=progress or None)
    else:
        row.update(state="failed" if query.error else ("stopped" if not query.running else "stopped with Spark"),
                   error=query.error)
    return row


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    from .connect_server import running, state_dir
    from .tables import ServerUnreachable, server_info
    out, err = out or sys.stdout, err or sys.stderr

    def say(text: str) -> None:
        err.write(f"kinesim queries: {text}\n")
        err.flush()
    try:
        if args.action != "list" and not args.name:
            raise QueryError(f"kinesim queries {args.action} NAME: which query?")
        s3_root = server_info(args.endpoint_url)["s3_root"]
        directory = continuous.queries_dir(state_dir(s3_root))
        query = continuous.load(directory, args.name) if args.name else None
        address = running(state_dir(s3_root))
        if (address or args.action == "resume") and spark_extra.missing():
            # Without Spark's client, what is on disk is listed, shown, stopped or deleted all the same.
            err.write(spark_extra.message(f"kinesim queries {args.action}") + "\n")
            return 1
        if args.action == "resume" and not address:
            from .connect_server import ensure
            address = ensure(args.endpoint_url, s3_root, None, say)
        spark = continuous.session(address, directory) if address else None
        handles = continuous.active(spark) if spark is not None else {}
        for name in continuous.names(directory) if spark is not None else []:
            known = continuous.load(directory, name)
            error = continuous.failure(state_dir(s3_root), known) if name not in handles and known.running else None
            if error and error != known.error:  # recorded: `show` tells it even once the log has moved on
                known.error = error
                continuous.save(directory, known)
        if query is not None:
            query = continuous.load(directory, query.name)
        if args.action == "list":
            rows = [describe(continuous.load(directory, n), handles.get(n)) for n in continuous.names(directory)]
            if args.format == "json":
                for row in rows:
                    row.pop("last_progress", None)
                    out.write(json.dumps(row) + "\n")
            elif rows:
                out.write(ascii_table(
                    LIST_COLUMNS,
                    [[r["name"], r["state"], r["into"] or "", _num(r.get("input_rows_per_s")),
                      _num(r.get("processed_rows_per_s")), _num(r.get("batch")), r.get("watermark") or ""]
                     for r in rows], [False, False, False, True, True, True, False]))
            else:
                say("no continuous queries; start one with kinesim sql --continuous \"...\" --into STREAM --name NAME")
        elif args.action == "show":
            out.write(json.dumps(describe(query, handles.get(query.name)) | {"query": vars(query)}, indent=2,
                                 default=str) + "\n")
        elif args.action == "stop":
            was = continuous.stop(spark, directory, query.name) if spark is not None else False
            if spark is None:
                query.running = False
                continuous.save(directory, query)
            say(f"{query.name} stopped" if was else f"{query.name} was not running; it will not be resumed")
        elif args.action == "resume":
            if continuous.resume(spark, directory, query.name):
                say(f"{query.name} resumed from its checkpoint")
            else:
                say(f"{query.name} is running already")
        elif args.action == "delete":
            if query.name in handles:
                handles[query.name].stop()
            continuous.remove(directory, query.name)
            say(f"{query.name} deleted")
        return 0
    except (QueryError, ServerUnreachable) as error:
        say(str(error))
        return 2 if isinstance(error, QueryError) else 1
    except spark_errors() as error:
        say(f"error: {_spark_failure(error)}")
        return 1


def _num(value: Any) -> str:
    return "" if value is None else str(value)
