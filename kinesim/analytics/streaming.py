"""A Spark source on a Kinesis stream (kinesim's, or AWS's), through PySpark's Python Data Source API.

    from kinesim.analytics.streaming import register
    register(spark)
    clicks = (spark.readStream.format("kinesim").option("stream", "clicks")
              .option("endpointUrl", "http://localhost:4566")
              .option("startingPosition", "TRIM_HORIZON").load())
    snapshot = spark.read.format("kinesim").option("stream", "clicks").load()   # everything in it now

Columns: data (binary), partitionKey, sequenceNumber, shardId (strings), approximateArrivalTimestamp.
The same format name writes: `df.write` / `df.writeStream.format("kinesim")` is sink.py's sink.

Options:
  stream                  name or ARN (required)
  endpointUrl             default AWS_ENDPOINT_URL, else http://localhost:4566
  region                  default AWS_REGION / AWS_DEFAULT_REGION, else us-east-1
  awsAccessKeyId,         default boto3's credential chain without the EC2/container metadata
  awsSecretKey            endpoints, else the dummy pair kinesim/kinesim
  startingPosition        TRIM_HORIZON (default) or LATEST: where a query without a checkpoint starts
  maxRecordsPerTrigger    at most this many records *per shard* in one micro-batch (default
                          100,000: a micro-batch has a fixed cost of 0.3-1 s, so small ones slow a
                          catch-up down; bench/README.md has the figures). Spark hands it back as
                          ReadMaxRows; Trigger.Once asks for everything (ReadAllAvailable).

Trigger.AvailableNow is supported: the run reads up to each shard's newest record at its start.

How a micro-batch is planned (this is what makes a restart from a checkpoint exact):

* An offset is `{"shards": {shardId: sequence number of the last record read, or null}, "closed":
  [shardId, ...]}`. A shard in `closed` was read to its end (closed by a reshard, last record
  consumed, NextShardIterator null). A shard absent from `shards` (or null) is read from
  TRIM_HORIZON.
* latestOffset (driver): ListShards; a shard is *readable* when it is not closed and every parent
  of it still listed is closed in the start offset, so a child is read only in a micro-batch after
  the one that finished its parents and each partition key keeps its order across a split or merge.
  Kinesis has no call that returns a shard's newest sequence number, so for each readable shard the
  driver reads forward from the start offset with GetRecords, up to the per-shard limit or until it
  is caught up (MillisBehindLatest 0), keeping only the last sequence number. The records are read
  twice (driver, then executor): the price of an exact end offset.
* partitions: one per shard that moved, (shardId, after, upto); read (executor, a Python worker):
  GetShardIterator AFTER_SEQUENCE_NUMBER (TRIM_HORIZON when nothing was read yet), GetRecords until
  `upto`, one Arrow batch per page.
* LATEST, Trigger.AvailableNow's target and the batch read's snapshot need the newest sequence
  number of a shard *without* reading all of it: `newest_sequence` bisects arrival times with
  AT_TIMESTAMP iterators and one-record pages, then reads the last hundredth of a second forward.
* commit is a no-op: a raw Kinesis consumer keeps its position itself, here in Spark's checkpoint.
  A checkpoint of a stream that was deleted and created again under the same name is refused
  with that reason (its sequence numbers belong to the old stream).
* The driver's side runs in PySpark's streaming source runner, a Python process per query; it ends
  with the query or with Spark, quietly and at once (source_runner.py).
"""
from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamArrowWriter, DataSourceStreamReader,
                                    DataSourceStreamWriter, DataSourceWriter, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from .sink import KinesimStreamWriter, KinesimWriter
from .source_runner import end_if_jvm_hung_up, end_with_jvm

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = ("data binary, partitionKey string, sequenceNumber string, shardId string, "
          "approximateArrivalTimestamp timestamp")
# boto3 and pyarrow are imported where used (~0.4 s and ~0.25 s here): PySpark starts a new Python process for each
# step of planning a query (create_data_source, write_into_data_source...), and each imports this
# module to unpickle the source; most of them call neither.
GET_RECORDS_LIMIT = 10000          # AWS's maximum records per GetRecords call
DEFAULT_MAX_RECORDS_PER_TRIGGER = 100_000   # per shard
STARTING_POSITIONS = ("TRIM_HORIZON", "LATEST")
# newest_sequence bisects arrival times down to this (s), in at most this many steps.
PROBE_RESOLUTION_S = 0.01
PROBE_MAX_STEPS = 40


# Connection: what an executor needs to reach the stream (picklable, hashable for the client cache).


@dataclass(frozen=True)
class Connection:
    stream: str
    endpoint_url: str
    region: str
    access_key: str | None = None
    secret_key: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "Connection":
        stream = options.get("stream") or options.get("streamName")
        if not stream:
            raise ValueError('The kinesim source needs the stream: .option("stream", NAME_OR_ARN)')
        endpoint = (options.get("endpointUrl") or os.environ.get("AWS_ENDPOINT_URL_KINESIS")
                    or os.environ.get("AWS_ENDPOINT_URL") or "http://localhost:4566")
        region = (options.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                  or "us-east-1")
        return cls(stream, endpoint, region, options.get("awsAccessKeyId"), options.get("awsSecretKey"))

    def stream_ref(self) -> dict[str, str]:
        return {"StreamARN": self.stream} if self.stream.startswith("arn:") else {"StreamName": self.stream}


@functools.lru_cache(maxsize=16)
def client(conn: Connection, service: str = "kinesis", max_attempts: int = 10) -> Any:
    """One boto3 client per connection and process (a client costs ~50 ms to build; Python workers
    are reused across tasks). The sink (sink.py) asks for a "firehose" client too, and for
    max_attempts=1: it retries throttled records itself."""
    import boto3
    import botocore.session
    from botocore.config import Config
    core = botocore.session.get_session()
    # Arrival times stay epoch seconds: botocore's default makes each a datetime in dateutil's
    # tzlocal, which is half the cost of parsing a GetRecords page.
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=epoch_seconds)
    # Credentials from the environment, profiles, SSO or a credential process, never from a metadata
    # endpoint (EC2 instance or container role): no network probe on the way to a local emulator.
    resolver = core.get_component("credential_provider")
    for method in ("container-role", "iam-role"):
        resolver.remove(method)
    session = boto3.session.Session(botocore_session=core)
    key, secret = conn.access_key, conn.secret_key
    if key is None and session.get_credentials() is None:
        key = secret = "kinesim"   # kinesim checks a signature's shape, not the key
    # Standard retry mode retries throttling (ProvisionedThroughputExceededException) with back-off.
    return session.client(service, endpoint_url=conn.endpoint_url, region_name=conn.region,
                          aws_access_key_id=key, aws_secret_access_key=secret,
                          config=Config(retries={"mode": "standard", "max_attempts": max_attempts}))


def epoch_seconds(value: Any) -> float:
    """A timestamp member as epoch seconds (JSON carries a number; anything else, botocore parses)."""
    if isinstance(value, (int, float)):
        return float(value)
    import botocore.utils
    return botocore.utils.parse_timestamp(value).timestamp()


# Reading shards: the Kinesis calls, shared by the driver and the executors.


def list_shards(conn: Connection) -> list[dict[str, Any]]:
    """Every shard of the stream within retention (ListShards, all pages), in shard id order."""
    paginator = client(conn).get_paginator("list_shards")
    return [shard for page in paginator.paginate(**conn.stream_ref()) for shard in page["Shards"]]


def is_open(shard: Mapping[str, Any]) -> bool:
    return "EndingSequenceNumber" not in shard["SequenceNumberRange"]


def shard_iterator(conn: Connection, shard_id: str, after: str | None, at_time: float | None = None) -> str:
    args: dict[str, Any] = {**conn.stream_ref(), "ShardId": shard_id}
    if after is not None:
        args.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
    elif at_time is not None:
        args.update(ShardIteratorType="AT_TIMESTAMP", Timestamp=datetime.fromtimestamp(at_time, timezone.utc))
    else:
        args.update(ShardIteratorType="TRIM_HORIZON")
    kinesis = client(conn)
    try:
        return kinesis.get_shard_iterator(**args)["ShardIterator"]
    except kinesis.exceptions.InvalidArgumentException as error:
        if after is None:
            raise
        # A position from a checkpoint that another stream of the same name wrote.
        raise RuntimeError(f"Sequence number {after} of {shard_id} is not in stream {conn.stream} (was the stream "
                           "deleted and created again since the query's checkpoint was written?): start the query "
                           f"with a new checkpoint location. {error}") from error


@dataclass(frozen=True)
class Progress:
    last: str | None    # sequence number of the last record counted (the `after` given if none)
    ended: bool         # the shard is closed and `last` is its last record (NextShardIterator null)


def read_forward(conn: Connection, shard_id: str, after: str | None, max_records: int | None = None,
                 upto: int | None = None, at_time: float | None = None) -> Progress:
    """How far a shard can be read from `after`: at most `max_records` records, none whose sequence
    number is above `upto`, and no further than the tip (MillisBehindLatest 0). Only the last
    sequence number is kept."""
    kinesis = client(conn)
    iterator: str | None = shard_iterator(conn, shard_id, after, at_time)
    last, left = after, max_records
    while iterator is not None and (left is None or left > 0):
        page = kinesis.get_records(ShardIterator=iterator,
                                   Limit=GET_RECORDS_LIMIT if left is None else min(left, GET_RECORDS_LIMIT))
        for record in page["Records"]:
            if upto is not None and int(record["SequenceNumber"]) > upto:
                return Progress(last, False)
            last = record["SequenceNumber"]
        if left is not None:
            left -= len(page["Records"])
        iterator = page.get("NextShardIterator")
        if page.get("MillisBehindLatest") == 0:
            break
    return Progress(last, iterator is None)


def first_record(conn: Connection, shard_id: str, at_time: float | None) -> dict[str, Any] | None:
    """The first record that arrived at or after `at_time` (from TRIM_HORIZON if None), or None.
    An empty page short of the tip (AWS's sparse shards) is followed to the next."""
    kinesis = client(conn)
    iterator: str | None = shard_iterator(conn, shard_id, None, at_time)
    while iterator is not None:
        page = kinesis.get_records(ShardIterator=iterator, Limit=1)
        if page["Records"]:
            return page["Records"][0]
        if page.get("MillisBehindLatest") == 0:
            return None
        iterator = page.get("NextShardIterator")
    return None


def newest_sequence(conn: Connection, shard_id: str) -> str | None:
    """The sequence number of the shard's newest record, None if it holds none.

    A LATEST iterator is a position, not a number, and reading the whole shard to its tip costs
    the shard. Arrival times grow along a shard, so bisect them instead: with AT_TIMESTAMP
    iterators and one-record pages, narrow [arrival of a record, a time with no record after it]
    down to PROBE_RESOLUTION_S (about log2(age / resolution) calls), then read the last sliver
    forward to the tip. The bisection only decides where that read starts; the read itself is
    what makes the answer exact, whatever the clocks or the timestamps' rounding."""
    first = first_record(conn, shard_id, None)
    if first is None:
        return None
    low, high = first["ApproximateArrivalTimestamp"], time.time()
    for _ in range(PROBE_MAX_STEPS):
        if high - low <= PROBE_RESOLUTION_S:
            break
        middle = (low + high) / 2
        found = first_record(conn, shard_id, middle)
        if found is None:
            high = middle
        else:
            low = max(middle, found["ApproximateArrivalTimestamp"])
    tail = read_forward(conn, shard_id, None, at_time=low - PROBE_RESOLUTION_S).last
    if tail is None:   # cannot happen unless timestamps lie; then pay for reading the whole shard
        tail = read_forward(conn, shard_id, first["SequenceNumber"]).last
    return tail


class ShardRange(InputPartition):
    """One task: the records of `shard_id` after `after` (from TRIM_HORIZON if None) up to and
    including `upto`."""

    def __init__(self, shard_id: str, after: str | None, upto: str):
        super().__init__(shard_id)
        self.shard_id, self.after, self.upto = shard_id, after, upto

    def __repr__(self) -> str:
        return f"ShardRange({self.shard_id}, after={self.after}, upto={self.upto})"


def read_range(conn: Connection, part: ShardRange) -> Iterator[pa.RecordBatch]:
    """The records of a ShardRange, one Arrow batch per GetRecords page."""
    kinesis = client(conn)
    upto = int(part.upto)
    iterator: str | None = shard_iterator(conn, part.shard_id, part.after)
    while iterator is not None:
        page = kinesis.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
        records = page["Records"]
        reached = bool(records) and int(records[-1]["SequenceNumber"]) >= upto
        if reached:
            records = [r for r in records if int(r["SequenceNumber"]) <= upto]
        if records:
            yield arrow_batch(records, part.shard_id)
        # At the tip without reaching `upto` means those records are gone (retention): stop too.
        if reached or page.get("MillisBehindLatest") == 0:
            return
        iterator = page.get("NextShardIterator")


def arrow_batch(records: list[dict[str, Any]], shard_id: str) -> pa.RecordBatch:
    import pyarrow as pa
    return pa.RecordBatch.from_arrays([
        pa.array([r["Data"] for r in records], pa.binary()),
        pa.array([r["PartitionKey"] for r in records], pa.string()),
        pa.array([r["SequenceNumber"] for r in records], pa.string()),
        pa.array([shard_id] * len(records), pa.string()),
        pa.array([round(r["ApproximateArrivalTimestamp"] * 1_000_000) for r in records],
                 pa.timestamp("us", tz="UTC")),
    ], names=["data", "partitionKey", "sequenceNumber", "shardId", "approximateArrivalTimestamp"])


def read_partition(conn: Connection, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # A batch plan with no partitions gets one placeholder, InputPartition(None), from PySpark.
    return read_range(conn, partition) if isinstance(partition, ShardRange) else iter(())


# Offsets


def make_offset(positions: Mapping[str, str | None], closed: Iterable[str]) -> dict[str, Any]:
    """An offset in one canonical form: Spark compares offsets by their JSON text."""
    return {"shards": dict(sorted(positions.items())), "closed": sorted(set(closed))}


def parents_done(shard: Mapping[str, Any], closed: set[str], listed: Mapping[str, Any]) -> bool:
    """Whether every parent of `shard` was read to its end (a parent past retention is no longer
    listed: nothing of it is left to read)."""
    parents = (shard.get("ParentShardId"), shard.get("AdjacentParentShardId"))
    return all(p is None or p in closed or p not in listed for p in parents)


# The Spark side


class KinesimStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]):
        self.conn = Connection.from_options(options)
        self.starting_position = options.get("startingPosition", "TRIM_HORIZON").upper()
        if self.starting_position not in STARTING_POSITIONS:
            raise ValueError(f"startingPosition must be one of {', '.join(STARTING_POSITIONS)}, "
                             f"not {options.get('startingPosition')!r}")
        self.max_records = int(options.get("maxRecordsPerTrigger", DEFAULT_MAX_RECORDS_PER_TRIGGER))
        if self.max_records < 1:
            raise ValueError("maxRecordsPerTrigger must be at least 1")
        # Trigger.AvailableNow: the newest sequence number of each shard when the run started.
        self.target: dict[str, str | None] | None = None
        end_with_jvm()

    def initialOffset(self) -> dict[str, Any]:
        if self.starting_position == "TRIM_HORIZON":
            return make_offset({}, [])
        # LATEST: after each open shard's newest record; closed shards hold only older records.
        shards = list_shards(self.conn)
        return make_offset({s["ShardId"]: newest_sequence(self.conn, s["ShardId"]) for s in shards if is_open(s)},
                           [s["ShardId"] for s in shards if not is_open(s)])

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records)   # per shard: see the module's docstring

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {s["ShardId"]: newest_sequence(self.conn, s["ShardId"]) for s in list_shards(self.conn)}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        shards = list_shards(self.conn)
        listed = {s["ShardId"]: s for s in shards}
        done = set(start["closed"]) & listed.keys()      # readability is judged on the start offset
        closed = set(done)
        positions = {k: v for k, v in start["shards"].items() if k in listed}
        per_shard = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id in done or not parents_done(shard, done, listed):
                continue
            upto = None
            if self.target is not None:
                if shard_id not in self.target:
                    continue                              # born after this AvailableNow run began
                goal = self.target[shard_id]
                if is_open(shard) and positions.get(shard_id) == goal:
                    continue                              # reached the run's target
                upto = 0 if goal is None else int(goal)   # 0: none of its records (it had none)
            progress = read_forward(self.conn, shard_id, positions.get(shard_id), per_shard, upto)
            if progress.last is not None:
                positions[shard_id] = progress.last
            if progress.ended:
                closed.add(shard_id)
        return make_offset(positions, closed)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        before = start["shards"]
        return [ShardRange(shard_id, before.get(shard_id), last) for shard_id, last in end["shards"].items()
                if last is not None and last != before.get(shard_id)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.conn, partition)

    def commit(self, end: dict[str, Any]) -> None:
        pass   # the position lives in Spark's checkpoint; Kinesis keeps no consumer state

    def stop(self) -> None:
        end_if_jvm_hung_up()   # nothing else to free: boto3 clients are per process


class KinesimBatchReader(DataSourceReader):
    """Every record in the stream when the read is planned: each shard up to its newest record."""

    def __init__(self, options: Mapping[str, str]):
        self.conn = Connection.from_options(options)

    def partitions(self) -> list[InputPartition]:
        newest = ((s["ShardId"], newest_sequence(self.conn, s["ShardId"])) for s in list_shards(self.conn))
        return [ShardRange(shard_id, None, upto) for shard_id, upto in newest if upto is not None]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.conn, partition)


class KinesimDataSource(DataSource):
    """`format("kinesim")`: a stream's records, as a batch or a streaming DataFrame; and the sink
    into a stream or a delivery stream (sink.py)."""

    @classmethod
    def name(cls) -> str:
        return "kinesim"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KinesimBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KinesimStreamReader(self.options)

    # Writing: sink.py, with this module's connection (endpoint, region, credentials) and clients.
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KinesimWriter(self.options, schema, overwrite, Connection.from_options, client)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KinesimStreamWriter(self.options, schema, overwrite, Connection.from_options, client)


# The warm Spark's streaming warm-up (warmup_stream.py): a source of made-up clicks and a sink that
# keeps nothing, so that a continuous query's first micro-batches run with no Kinesis stream. Here,
# as this is the module Spark's Python workers import for data sources.

WARM_UP_SOURCE, WARM_UP_BATCHES, WARM_UP_ROWS = "kinesim-warmup", 3, 300


class WarmUpBatch(InputPartition):
    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


class WarmUpReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """WARM_UP_BATCHES micro-batches of WARM_UP_ROWS clicks as JSON records, a minute of event time each."""

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass   # every batch is there from the start

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"batch": min(start["batch"] + 1, WARM_UP_BATCHES)}   # one batch per trigger

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [WarmUpBatch(n) for n in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        n, at = partition.number, 1714557600 + 60 * partition.number   # type: ignore[attr-defined]
        yield arrow_batch([{"Data": b'{"page": "/p%d", "ts": %d}' % (i % 7, at + i % 60), "PartitionKey": f"k{i}",
                            "SequenceNumber": str(n * WARM_UP_ROWS + i), "ApproximateArrivalTimestamp": at}
                           for i in range(WARM_UP_ROWS)], "shardId-000000000000")


class WarmUpWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:   # rows computed, as the kinesim sink's tasks encode them; nothing kept
            pass
        return WriterCommitMessage()

    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass


class WarmUpSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return WARM_UP_SOURCE

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return WarmUpReader()

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return WarmUpWriter()


def register(spark: SparkSession) -> None:
    """Make `format("kinesim")` available in this session."""
    spark.dataSource.register(KinesimDataSource)
