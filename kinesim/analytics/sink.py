"""A Spark sink into a Kinesis stream or a Firehose delivery stream (kinesim's, or AWS's), through
PySpark's Python Data Source API: the writing half of `format("kinesim")` (streaming.py).

    views.writeStream.format("kinesim").option("stream", "page-views")
         .option("endpointUrl", "http://localhost:4566")
         .option("checkpointLocation", "/tmp/views-ck").start()
    df.write.format("kinesim").option("deliveryStream", "archive").mode("append").save()

Options (strings):
  stream | deliveryStream  exactly one: a Kinesis stream (name or ARN), rows become PutRecords
                           calls (at most 500 records and 5 MiB each); or a Firehose delivery
                           stream, PutRecordBatch calls (500 records, 4 MiB), each record's data
                           ending with "\\n" (JSON lines, as the archive is read back)
  endpointUrl, region,     as the source (streaming.Connection)
  awsAccessKeyId, awsSecretKey
  dataColumn               the column holding each record's data: binary as is, a string as UTF-8,
                           any other type as JSON. Default: the column `data` if there is one, else
                           the whole row as a JSON object (column names as keys, timestamps ISO 8601
                           in UTC, dates ISO, decimals as numbers, binary base64, structs, arrays
                           and maps nested). A null data value is an empty record.
  partitionKeyColumn       the column holding the partition key (Python's str() of a non-string;
                           cast in SQL for Spark's rendering). Default: the column `partitionKey` if
                           there is one, else (and for a null key) the hex MD5 of the data, so a
                           replayed batch puts the same keys.
  ledgerLocation           streaming only: the directory of the exactly-once ledger. Default:
                           `<checkpointLocation>/kinesim-sink` (Spark hands the query's
                           checkpointLocation option to the sink).

A column named in an option that the DataFrame lacks, a missing target, both targets or a batch
`mode("overwrite")` fail when the query starts (the writer's constructor runs there). Output
modes: append and update put each micro-batch's new or changed rows, complete the whole result.

Delivery. Records go in order, a call at a time; records a call did not take (Kinesis: per-record
ProvisionedThroughputExceededException / InternalFailure; Firehose: ServiceUnavailableException)
are sent again, alone, before any later record, with exponential back-off (50 ms doubling to 1 s,
jittered); a whole call refused for throttling, a 5xx or a broken connection is sent again the
same way. After RETRY_FOR_S seconds without any record accepted, the write fails naming the target
and the records left. Botocore's own retries are off for these clients so that the sink alone
decides. Order per partition key is kept except in one case: when a call takes a key's later
record but throttles an earlier one, the earlier one lands after it (PutRecords processes every
entry of a call; only PutRecord's SequenceNumberForOrdering would prevent that, at a call per record).

Batch writes (`df.write`): each task puts its partition's rows itself; commit only reports. A
failed job may have put some partitions: batch writes are at-least-once.

Streaming writes are exactly-once per micro-batch, with one exception below. Spark runs a
micro-batch again when its commit log lacks the batch (the driver died or the query stopped after
the sink's commit); so tasks put nothing: `write` returns the partition's encoded records in its
commit message, and the driver's `commit(messages, batch_id)` (a fresh Python worker each time)
works from the ledger:

  <ledger>/committed            highest batch id completely put (text; -1 when absent)
  <ledger>/query                the Spark query id (`<checkpoint>/metadata`) the ledger belongs to
  <ledger>/batches/<N>.records  batch N's records, sealed: written once (temp file, fsync, rename)
  <ledger>/batches/<N>.acked    how many of them the target acknowledged (rewritten the same way
                                after each successful call)

1. N <= committed: a replay of a batch already put; nothing is sent.
2. Seal N unless sealed already: a replay sends the first attempt's records, in the first attempt's
   order, even if the new attempt computed them in another order or partitioning.
3. Send records[acked:] call by call, recording `acked` after each call.
4. committed = N; the files of batches older than the last KEEP_BATCHES are deleted.

What remains: a kill between a call's answer and the write of `acked` (or during a call's retries
of throttled records) sends that one call's records again on replay: up to 500 duplicates, as
neither PutRecords nor PutRecordBatch is idempotent. A whole call retried after a connection error
whose request did arrive duplicates too. Messages carry a micro-batch's records through the driver: size
micro-batches (maxRecordsPerTrigger, maxFilesPerTrigger...) to what the driver holds. The ledger is
a local directory of the driver (Spark Connect: the Connect server's machine).
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import random
import struct
import time
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import orjson
from pyspark.sql.datasource import (CaseInsensitiveDict, DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import StructType

if TYPE_CHECKING:   # imported where used: see streaming.py (Python processes that plan a query)
    import pyarrow as pa

log = logging.getLogger("kinesim.analytics.sink")

Record = tuple[str, bytes]   # (partition key, data)

MAX_CALL_RECORDS = 500
KINESIS_CALL_BYTES = 5 << 20        # PutRecords: data and partition keys of all records
FIREHOSE_CALL_BYTES = 4 << 20       # PutRecordBatch: data of all records
FIREHOSE_RECORD_BYTES = 1000 << 10  # 1,000 KiB (the Firehose model's Record.Data maximum)
MAX_KEY_CHARS = 256
BACKOFF_START_S, BACKOFF_MAX_S = 0.05, 1.0
RETRY_FOR_S = 300.0
KEEP_BATCHES = 3
# Codes a call's entries fail with that mean "later", per AWS's PutRecords / PutRecordBatch docs.
RETRY_RECORD = {"ProvisionedThroughputExceededException", "InternalFailure", "ServiceUnavailableException",
                "KMSThrottlingException"}
RETRY_CALL = RETRY_RECORD | {"LimitExceededException", "ThrottlingException", "InternalFailureException",
                             "RequestLimitExceeded"}


class SinkError(RuntimeError):
    """Records that cannot be delivered, or options that cannot work."""


# The target: its limits and its one call.


@dataclass(frozen=True)
class Target:
    firehose: bool
    conn: Any                     # streaming.Connection; conn.stream: the stream or delivery stream
    max_record_bytes: int
    # streaming.client: (conn, service, max_attempts) -> a boto3 client, cached per process.
    clients: Callable[..., Any]

    def __str__(self) -> str:
        return f"{'delivery stream' if self.firehose else 'stream'} {self.conn.stream}"

    @property
    def call_bytes(self) -> int:
        return FIREHOSE_CALL_BYTES if self.firehose else KINESIS_CALL_BYTES

    def size(self, record: Record) -> int:
        return len(record[1]) if self.firehose else len(record[1]) + len(record[0].encode())

    def client(self) -> Any:
        return self.clients(self.conn, "firehose" if self.firehose else "kinesis", 1)

    def call(self, records: Sequence[Record]) -> list[str | None]:
        """One PutRecords / PutRecordBatch call: each record's error code, None where it was taken."""
        if self.firehose:
            out = self.client().put_record_batch(DeliveryStreamName=self.conn.stream,
                                                 Records=[{"Data": data} for _, data in records])
            return [r.get("ErrorCode") for r in out["RequestResponses"]]
        out = self.client().put_records(**self.conn.stream_ref(),
                                        Records=[{"PartitionKey": key, "Data": data} for key, data in records])
        return [r.get("ErrorCode") for r in out["Records"]]


Connect = Callable[[Mapping[str, str]], Any]   # streaming.Connection.from_options


def target_from_options(options: Mapping[str, str], connect: Connect, clients: Callable[..., Any]) -> Target:
    """The target named by the options, checked to exist (a clear error when the query starts).
    `connect` and `clients` are streaming.py's, handed in by its KinesimDataSource (this module
    does not import streaming.py, which imports it)."""
    stream, delivery = options.get("stream"), options.get("deliveryStream")
    if bool(stream) == bool(delivery):
        raise SinkError('The kinesim sink needs exactly one target: .option("stream", NAME_OR_ARN) for a Kinesis '
                        'stream or .option("deliveryStream", NAME) for a Firehose delivery stream')
    named = CaseInsensitiveDict(options)
    named["stream"] = stream or delivery
    conn = connect(named)
    target = Target(bool(delivery), conn, FIREHOSE_RECORD_BYTES, clients)
    from botocore.exceptions import ClientError
    try:
        if target.firehose:
            target.client().describe_delivery_stream(DeliveryStreamName=delivery)
            return target
        summary = target.client().describe_stream_summary(**conn.stream_ref())["StreamDescriptionSummary"]
    except ClientError as error:
        raise SinkError(f"The kinesim sink cannot write to {target} at {conn.endpoint_url}: {error}") from error
    # UpdateMaxRecordSize can raise a stream's record limit from 1 MiB up to 10 MiB.
    return Target(False, conn, summary.get("MaxRecordSizeInKiB", 1024) * 1024, clients)


# Sending: chunks of at most one call, throttled records retried before later ones.


def chunked(target: Target, records: Iterable[Record]) -> Iterator[list[Record]]:
    chunk: list[Record] = []
    size = 0
    for record in records:
        n = target.size(record)
        if chunk and (len(chunk) == MAX_CALL_RECORDS or size + n > target.call_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += n
    if chunk:
        yield chunk


def retryable(error: Exception) -> bool:
    from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError, HTTPClientError
    if isinstance(error, (BotoConnectionError, HTTPClientError)):
        return True
    if isinstance(error, ClientError):
        return (error.response.get("Error", {}).get("Code") in RETRY_CALL
                or error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) >= 500)
    return False


def put_chunk(target: Target, chunk: Sequence[Record], retry_for: float = RETRY_FOR_S,
              sleep: Callable[[float], None] = time.sleep) -> None:
    """One call's records, until every one is acknowledged (or SinkError after `retry_for` seconds
    in which none was)."""
    pending = list(chunk)
    delay, progress_at, last = BACKOFF_START_S, time.monotonic(), ""
    while pending:
        try:
            codes = target.call(pending)
        except Exception as error:   # noqa: BLE001 - sorted by `retryable`
            if not retryable(error):
                raise SinkError(f"{target} refused {len(pending)} records: {error}") from error
            last = str(error)
        else:
            refused = {code for code in codes if code is not None and code not in RETRY_RECORD}
            if refused:
                raise SinkError(f"{target} refused records: {', '.join(sorted(refused))}")
            left = [record for record, code in zip(pending, codes) if code is not None]
            if len(left) < len(pending):
                delay, progress_at = BACKOFF_START_S, time.monotonic()
            last = next((code for code in codes if code), "")
            pending = left
            if not pending:
                return
        if time.monotonic() - progress_at > retry_for:
            raise SinkError(f"{target}: {len(pending)} records still not accepted after {retry_for:.0f} s of "
                            f"retries ({last}); the target needs more capacity (shards) for this rate")
        sleep(delay * random.uniform(0.5, 1.0))
        delay = min(delay * 2, BACKOFF_MAX_S)


def put_all(target: Target, records: Iterable[Record], acknowledged: Callable[[int], None] | None = None,
            **retry: Any) -> int:
    """Every record, in order, a call at a time; `acknowledged(n)` after each call (n so far)."""
    done = 0
    for chunk in chunked(target, records):
        put_chunk(target, chunk, **retry)
        done += len(chunk)
        if acknowledged is not None:
            acknowledged(done)
    return done


# Encoding rows (Arrow batches) into records.


def json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:          # TIMESTAMP_NTZ: no zone to convert
            return value.isoformat()
        value = value.astimezone(timezone.utc)
        spec = "seconds" if not value.microsecond else "milliseconds" if not value.microsecond % 1000 else "auto"
        return value.replace(tzinfo=None).isoformat(timespec=spec) + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))   # a JSON number, without a float's rounding
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(value: Any) -> bytes:
    return orjson.dumps(value, default=json_default, option=orjson.OPT_PASSTHROUGH_DATETIME)


def has_map(kind: pa.DataType) -> bool:
    import pyarrow as pa
    if pa.types.is_map(kind):
        return True
    return any(has_map(kind.field(i).type) for i in range(kind.num_fields))


def plain(value: Any, kind: pa.DataType) -> Any:
    """Arrow's Python form of a map is a list of (key, value) pairs: a JSON object instead."""
    import pyarrow as pa
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {str(k): plain(v, kind.item_type) for k, v in value}
    if pa.types.is_struct(kind):
        return {kind.field(i).name: plain(value[kind.field(i).name], kind.field(i).type)
                for i in range(kind.num_fields)}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [plain(v, kind.value_type) for v in value]
    return value


@dataclass(frozen=True)
class Encoder:
    """Rows to records: planned on the driver from the schema, run on executors."""
    target: Target
    data_column: str | None   # None: the whole row as JSON
    key_column: str | None    # None: the MD5 of the data

    @classmethod
    def plan(cls, target: Target, schema: StructType, options: Mapping[str, str]) -> "Encoder":
        names = schema.fieldNames()
        chosen = {}
        for option, default in (("dataColumn", "data"), ("partitionKeyColumn", "partitionKey")):
            column = options.get(option)
            if column is not None and column not in names:
                raise SinkError(f"The kinesim sink's {option} {column!r} is not a column of the DataFrame; its "
                                f"columns are: {', '.join(names)}")
            chosen[option] = column or (default if default in names else None)
        return cls(target, chosen["dataColumn"], chosen["partitionKeyColumn"])

    def records(self, batches: Iterable[pa.RecordBatch]) -> Iterator[Record]:
        for batch in batches:
            datas = self.datas(batch)
            keys = batch.column(self.key_column).to_pylist() if self.key_column else [None] * batch.num_rows
            for key, data in zip(keys, datas):
                yield self.record(key, data)

    def datas(self, batch: pa.RecordBatch) -> list[bytes]:
        import pyarrow as pa
        if self.data_column is None:
            rows, row_type = batch.to_pylist(), pa.struct(list(batch.schema))
            if has_map(row_type):
                rows = [plain(row, row_type) for row in rows]
            return [to_json(row) for row in rows]
        column = batch.column(self.data_column)
        values = column.to_pylist()
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            return [b"" if v is None else v for v in values]
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return [b"" if v is None else v.encode() for v in values]
        return [b"" if v is None else to_json(plain(v, column.type)) for v in values]

    def record(self, key: Any, data: bytes) -> Record:
        if self.target.firehose:
            if not data.endswith(b"\n"):
                data += b"\n"
            key = ""
        elif key is None or key == "":
            key = hashlib.md5(data).hexdigest()
        elif not isinstance(key, str):
            key = str(key)
        if len(key) > MAX_KEY_CHARS:
            raise SinkError(f"A partition key of {len(key)} characters for {self.target}: Kinesis takes at most "
                            f"{MAX_KEY_CHARS} ({key[:40]!r}...)")
        if len(data) > self.target.max_record_bytes:
            raise SinkError(f"A record of {len(data)} bytes for {self.target}, whose records take at most "
                            f"{self.target.max_record_bytes} bytes")
        return key, data


# The exactly-once ledger (see the module's docstring).


def write_atomically(path: str, content: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)   # the rename itself survives a crash
    finally:
        os.close(fd)


def pack(records: Sequence[Record]) -> bytes:
    parts = [struct.pack(">I", len(records))]
    for key, data in records:
        k = key.encode()
        parts += [struct.pack(">HI", len(k), len(data)), k, data]
    return b"".join(parts)


def unpack(blob: bytes) -> list[Record]:
    (count,), at, records = struct.unpack_from(">I", blob), 4, []
    for _ in range(count):
        klen, dlen = struct.unpack_from(">HI", blob, at)
        at += 6
        records.append((blob[at:at + klen].decode(), blob[at + klen:at + klen + dlen]))
        at += klen + dlen
    return records


class Ledger:
    def __init__(self, root: str):
        self.root, self.batches = root, os.path.join(root, "batches")
        os.makedirs(self.batches, exist_ok=True)

    def _read(self, name: str) -> str | None:
        try:
            with open(os.path.join(self.root, name)) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    def claim(self, query_id: str | None) -> None:
        """Refuse a ledger that another query (another checkpoint) wrote: its batch ids are not ours."""
        if query_id is None:
            return
        owner = self._read("query")
        if owner is None:
            write_atomically(os.path.join(self.root, "query"), query_id.encode())
        elif owner != query_id:
            raise SinkError(f"The kinesim sink's ledger {self.root} belongs to query {owner}, not to this query "
                            f"({query_id}): give each checkpoint its own ledgerLocation")

    def committed(self) -> int:
        return int(self._read("committed") or -1)

    def seal(self, batch_id: int, records: Sequence[Record]) -> list[Record]:
        """The batch's records as first sealed; `records` are sealed if it was not."""
        path = os.path.join(self.batches, f"{batch_id}.records")
        try:
            with open(path, "rb") as f:
                return unpack(f.read())
        except FileNotFoundError:
            write_atomically(path, pack(records))
            return list(records)

    def acked(self, batch_id: int) -> int:
        return int(self._read(f"batches/{batch_id}.acked") or 0)

    def ack(self, batch_id: int, count: int) -> None:
        write_atomically(os.path.join(self.batches, f"{batch_id}.acked"), str(count).encode())

    def complete(self, batch_id: int) -> None:
        write_atomically(os.path.join(self.root, "committed"), str(batch_id).encode())
        for name in os.listdir(self.batches):
            stem = name.split(".")[0]
            if name.endswith(".tmp") or (stem.isdigit() and int(stem) <= batch_id - KEEP_BATCHES):
                os.remove(os.path.join(self.batches, name))


def local_path(location: str) -> str | None:
    if location.startswith("file:"):
        return "/" + location[len("file:"):].lstrip("/")
    return None if "://" in location else location


def query_id(checkpoint: str | None) -> str | None:
    """The id Spark keeps in `<checkpoint>/metadata` (written before the first batch)."""
    path = local_path(checkpoint) if checkpoint else None
    try:
        with open(os.path.join(path, "metadata")) as f:   # type: ignore[arg-type]
            return json.loads(f.readline())["id"]
    except (TypeError, OSError, ValueError, KeyError):
        return None


# The Spark side


@dataclass
class Encoded(WriterCommitMessage):
    """A streaming task's records, sent by the driver's commit."""
    records: list[Record]


@dataclass
class Written(WriterCommitMessage):
    """A batch task's count of records put."""
    count: int


class KinesimWriter(DataSourceArrowWriter):
    """`df.write.format("kinesim")`: each task puts its partition."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool, connect: Connect,
                 clients: Callable[..., Any]):
        if overwrite:
            raise SinkError("A stream cannot be overwritten: write to it with .mode(\"append\")")
        self.encoder = Encoder.plan(target_from_options(options, connect, clients), schema, options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return Written(put_all(self.encoder.target, self.encoder.records(iterator)))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        count = sum(m.count for m in messages if isinstance(m, Written))
        log.info("put %d records to %s", count, self.encoder.target)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        count = sum(m.count for m in messages if isinstance(m, Written))
        log.warning("a write to %s failed after %d records were put", self.encoder.target, count)


class KinesimStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("kinesim")`: tasks encode, the driver's commit puts through the ledger."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool, connect: Connect,
                 clients: Callable[..., Any]):
        self.encoder = Encoder.plan(target_from_options(options, connect, clients), schema, options)
        checkpoint = options.get("checkpointLocation")
        location = options.get("ledgerLocation")
        if location is None and checkpoint is not None and local_path(checkpoint) is not None:
            location = os.path.join(local_path(checkpoint), "kinesim-sink")
        if location is None:
            raise SinkError('The kinesim sink needs a local directory for its exactly-once ledger: '
                            '.option("checkpointLocation", DIR) (the ledger goes in DIR/kinesim-sink) or '
                            '.option("ledgerLocation", DIR)')
        self.ledger_location, self.checkpoint = location, checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Encoded:
        return Encoded(list(self.encoder.records(iterator)))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        ledger = Ledger(self.ledger_location)
        ledger.claim(query_id(self.checkpoint))
        if batchId <= ledger.committed():
            log.warning("batch %d was put to %s already (a replay): nothing sent", batchId, self.encoder.target)
            return
        records = ledger.seal(batchId, [r for m in messages if isinstance(m, Encoded) for r in m.records])
        start = ledger.acked(batchId)
        put_all(self.encoder.target, records[start:], lambda n: ledger.ack(batchId, start + n))
        ledger.complete(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass   # nothing was put: tasks only encode
