"""Delivery: one worker thread per delivery stream moves buffered records into S3 objects.

The loop (`Worker.run`): a buffer is flushed when it holds BufferingHints.SizeInMBs, or when its
oldest record has waited IntervalInSeconds (0: at once), whichever comes first; intervals and
retry durations are multiplied by the server's `firehose_interval_scale` (tests use 0.01).

A flush (`Worker.flush`) turns a batch of records into objects (`build_objects`):

1. processing (ProcessingConfiguration), in AWS's order: RecordDeAggregation, the Lambda
   processor (`transform`), MetadataExtraction, AppendDelimiterToRecord (`partitioning`);
   records that fail a step go to the error output (processing-failed);
2. dynamic partitioning groups records by their partition keys, one object per group;
3. data format conversion (`conversion`) or compression (`compression`) makes each body;
4. keys come from `keys.object_key` (Prefix, or ErrorOutputPrefix for failed records);
5. with S3BackupMode Enabled, the source records, untransformed, also go to the backup bucket.

Then every object is written; a write that fails is retried every 5 s (scaled) for the retry
duration (DynamicPartitioningConfiguration.RetryOptions.DurationInSeconds, 300 by default; AWS's
24 hours for S3 without dynamic partitioning), after which the object's records go to the error
output (error-output-type `s3-failed`, a kinesim name: AWS discards them after 24 hours); so do
records whose partition keys make a key the object store refuses ("../x": see `keys.check_storable`
for the prefixes refused at create time). An error output that cannot be written either (its
bucket is gone) is retried for the same duration; then its records are dropped, logged and counted
(`DroppedRecords`), as AWS loses data it could not deliver within its retry time: a delivery
stream is never held forever by records it cannot write. Only after all of a batch's objects are
written (or dropped) does the source forget it (`commit`): the DirectPut buffer deletes the rows, a
Kinesis source moves its checkpoint.

Metrics (what CloudWatch would show: DeliveryToS3.Records/Bytes/Success/DataFreshness, ...) are
kept per worker and served by the edge at /_kinesim/firehose/<name>/metrics.
"""
from __future__ import annotations

import base64
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from kinesim.protocol.errors import AwsError

from . import compression, conversion, keys, partitioning, transform
from .buffers import Buffer, Record
from .jq_runner import JqPool, JqUnavailable
from .source import KinesisSource

log = logging.getLogger("kinesim.firehose")

MiB = 1 << 20
RETRY_EVERY_S = 5.0              # AWS retries a failed S3 delivery every 5 seconds
S3_RETRY_S = 24 * 3600           # ... for up to 24 hours (without dynamic partitioning)
IDLE_WAIT_S = 1.0                # how long an empty worker sleeps between looks (appends wake it)
S3_FAILED = "s3-failed"          # kinesim's error-output-type for records S3 never accepted
CONTENT_TYPE = "application/octet-stream"


class DeliveryError(Exception):
    """An object could not be written: AWS's error code (as its CloudWatch logs name it) and text."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass
class S3Object:
    """One object to write, and the records it holds (for the error output if it never lands)."""
    bucket_arn: str
    key: str
    body: bytes
    records: list[Record]
    encoding: str | None = None
    kind: str = "data"            # data | error | backup
    record_count: int = 0


@dataclass
class Metrics:
    delivered_records: int = 0
    delivered_bytes: int = 0
    delivered_objects: int = 0
    backup_records: int = 0
    backup_objects: int = 0
    error_records: int = 0
    dropped_records: int = 0
    failed_attempts: int = 0
    last_delivery: float | None = None
    last_error: str | None = None
    last_error_time: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


# ------------------------------------------------------------------ writing objects

def bucket_name(bucket_arn: str) -> str:
    return bucket_arn.split(":::", 1)[-1]


class Writer:
    """Writes objects to kinesim's object store, or, for a bucket it does not have, to the S3
    endpoint given with --firehose-s3-endpoint (credentials from the usual AWS environment)."""

    def __init__(self, settings: Any, objects: Any):
        self.settings, self.objects = settings, objects
        self._client = None

    def put(self, obj: S3Object) -> None:
        bucket = bucket_name(obj.bucket_arn)
        headers = {"Content-Encoding": obj.encoding} if obj.encoding else None
        if self.objects is not None and self.objects.bucket_exists(bucket):
            try:
                staged = self.objects.stage(obj.body)
                try:
                    self.objects.commit(bucket, obj.key, staged, content_type=CONTENT_TYPE, headers=headers)
                finally:
                    staged.discard()
            except AwsError as err:
                raise DeliveryError(f"S3.{err.code}", err.message or err.code) from None
            except OSError as err:
                raise DeliveryError("S3.InternalError", str(err)) from None
            return
        if not self.settings.firehose_s3_endpoint:
            raise DeliveryError("S3.NoSuchBucket", "The specified bucket does not exist")
        self._external(bucket, obj, headers)

    def _external(self, bucket: str, obj: S3Object, headers: dict[str, str] | None) -> None:
        import botocore.exceptions
        if self._client is None:
            import boto3
            self._client = boto3.client("s3", endpoint_url=self.settings.firehose_s3_endpoint,
                                        region_name=self.settings.region)
        extra = {"ContentEncoding": headers["Content-Encoding"]} if headers else {}
        try:
            self._client.put_object(Bucket=bucket, Key=obj.key, Body=obj.body, ContentType=CONTENT_TYPE, **extra)
        except botocore.exceptions.ClientError as err:
            error = err.response.get("Error", {})
            raise DeliveryError(f"S3.{error.get('Code', 'InternalError')}", error.get("Message", str(err))) from None
        except (botocore.exceptions.BotoCoreError, OSError) as err:
            raise DeliveryError("S3.InternalError", str(err)) from None


# ------------------------------------------------------------------ records -> objects

@dataclass
class FlushConfig:
    """A delivery stream's configuration as one flush sees it (UpdateDestination may change it)."""
    name: str
    arn: str
    version: int
    dest: dict[str, Any]
    source_arn: str | None


def _when(records: list[Record], dest: dict[str, Any]) -> datetime:
    when = datetime.fromtimestamp(min(r.arrival for r in records), timezone.utc)
    zone = dest.get("CustomTimeZone")
    return when.astimezone(ZoneInfo(zone)) if zone else when


def error_document(record: Record, code: str, message: str, attempts: int) -> bytes:
    """One line of error output, in the shape AWS writes for records it could not deliver."""
    doc = {"attemptsMade": attempts, "arrivalTimestamp": _ms(record.arrival), "errorCode": code,
           "errorMessage": message, "attemptEndingTimestamp": _ms(time.time()),
           "rawData": base64.b64encode(record.data).decode()}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def error_objects(cfg: FlushConfig, failures: list[tuple[Record, bytes]], output_type: str) -> list[S3Object]:
    """Error output: failed records (with their error documents) under ErrorOutputPrefix."""
    if not failures:
        return []
    dest = cfg.dest
    records = [r for r, _ in failures]
    key = keys.object_key(keys.error_prefix_template(dest.get("Prefix"), dest.get("ErrorOutputPrefix")),
                          cfg.name, cfg.version, _when(records, dest), error_output_type=output_type)
    return [S3Object(dest["BucketARN"], key, b"".join(doc for _, doc in failures), records, kind="error",
                     record_count=len(records))]


def _body(dest: dict[str, Any], datas: list[bytes]) -> tuple[bytes, str | None, str]:
    """(object body, Content-Encoding, key extension) for records' bytes."""
    fmt = dest.get("CompressionFormat", "UNCOMPRESSED")
    return compression.compress(b"".join(datas), fmt), compression.content_encoding(fmt), compression.extension(fmt)


@dataclass
class Item:
    """A record on its way through processing: its (possibly transformed) bytes and the
    partition keys found for it (MetadataExtraction: "query", a Lambda's metadata: "lambda")."""
    id: str
    record: Record
    data: bytes
    keys: dict[str, dict[str, str]] = field(default_factory=lambda: {"query": {}, "lambda": {}})


Failures = dict[str, list[tuple[Record, bytes]]]   # error-output-type -> [(record, error document)]


def _processors(dest: dict[str, Any]) -> list[dict[str, Any]]:
    processing = dest.get("ProcessingConfiguration") or {}
    enabled = processing.get("Enabled", bool(processing.get("Processors")))
    return (processing.get("Processors") or []) if enabled else []


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def deaggregate(items: list[Item], processor: dict[str, Any], failures: Failures) -> list[Item]:
    params = partitioning.processor_parameters(processor)
    out = []
    for item in items:
        try:
            parts = partitioning.deaggregate(item.data, params.get("SubRecordType", ""), params.get("Delimiter"))
        except partitioning.PartitioningError as err:
            failures.setdefault(partitioning.ERROR_OUTPUT_TYPE, []).append(
                (item.record, error_document(item.record, err.code, err.message, 1)))
            continue
        out += [Item(f"{item.id}.{n}" if len(parts) > 1 else item.id, item.record, part)
                for n, part in enumerate(parts)]
    return out


def _chunks(items: list[Item], limit: float) -> list[list[Item]]:
    """Items in runs of at most `limit` bytes (a run always holds at least one)."""
    chunks: list[list[Item]] = []
    size = 0
    for item in items:
        if not chunks or (chunks[-1] and size + len(item.data) > limit):
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += len(item.data)
    return chunks


def _invoke(params: transform.LambdaProcessor, invoke: Any, payload: bytes, sent_ids: list[str]):
    """(results or None, attempts made, last (errorCode, errorMessage)): one try plus
    NumberOfRetries retries, as Firehose invokes a processor."""
    error, attempts = transform.FUNCTION_ERROR, 0
    while attempts <= params.number_of_retries:
        attempts += 1
        try:
            if invoke is None:
                raise DeliveryError("Lambda.InvokeFailed", "No function runtime is available in this server.")
            invocation = invoke(params.lambda_arn, payload)
            if invocation.function_error:
                error = transform.FUNCTION_ERROR
                continue
            return transform.parse_response(invocation.payload, sent_ids), attempts, None
        except (transform.TransformationFailed, DeliveryError) as err:
            error = (err.code, err.message)
        except AwsError as err:  # the function does not exist, and the like
            error = (f"Lambda.{err.code}", err.message or err.code)
    return None, attempts, error


def lambda_transform(cfg: FlushConfig, items: list[Item], processor: dict[str, Any], invoke: Any,
                     region: str, failures: Failures) -> list[Item]:
    """The Lambda processor: invoked with at most BufferSizeInMBs of records at a time; records of
    an invocation that never succeeded, and records the function returned as ProcessingFailed,
    go to the error output (processing-failed). BufferIntervalInSeconds is not applied: each
    flush is processed as it happens."""
    params = transform.lambda_parameters(processor)
    source = {"KinesisStreamARN": cfg.source_arn} if cfg.source_arn else None
    out: list[Item] = []

    def failed(item: Item, status: tuple[str, str], attempts: int) -> None:
        failures.setdefault(transform.ERROR_OUTPUT_TYPE, []).append((item.record, transform.processing_failed_document(
            item.data, *status, attempts_made=attempts, arrival_ms=_ms(item.record.arrival),
            attempt_ending_ms=_ms(time.time()), lambda_arn=params.lambda_arn)))

    for chunk in _chunks(items, params.buffer_size_mb * MiB):
        sent = [(i.id, i.data, _ms(i.record.arrival), i.record.kinesis) for i in chunk]
        payload = json.dumps(transform.build_event(sent, cfg.arn, region, source)).encode()
        results, attempts, error = _invoke(params, invoke, payload, [i.id for i in chunk])
        if results is None:
            for item in chunk:
                failed(item, error, attempts)
            continue
        for item, (_, result, data, partition_keys) in zip(chunk, results):
            if result == "ProcessingFailed":
                failed(item, transform.PROCESSING_FAILED_STATUS, attempts)
            elif result == "Ok":
                item.data = data if data is not None else b""
                item.keys["lambda"] = partition_keys or {}
                out.append(item)
    return out


def extract_metadata(items: list[Item], processor: dict[str, Any], jq: JqPool, failures: Failures) -> list[Item]:
    """MetadataExtraction: every item's keys in one call to the jq workers (raises JqUnavailable
    when there are none: the batch is then retried, no record is routed anywhere)."""
    query = partitioning.processor_parameters(processor).get("MetadataExtractionQuery", "")
    out = []
    for item, found in zip(items, partitioning.extract_partition_keys([i.data for i in items], query, jq)):
        if isinstance(found, partitioning.PartitioningError):
            failures.setdefault(partitioning.ERROR_OUTPUT_TYPE, []).append(
                (item.record, error_document(item.record, found.code, found.message, 1)))
            continue
        item.keys["query"] = found
        out.append(item)
    return out


def process(cfg: FlushConfig, records: list[Record], invoke: Any, region: str, jq: JqPool,
            failures: Failures) -> list[Item]:
    """The processors, in the order Firehose applies them: RecordDeAggregation, Lambda,
    MetadataExtraction, then AppendDelimiterToRecord."""
    items = [Item(r.id, r, r.data) for r in records]
    processors = {p["Type"]: p for p in _processors(cfg.dest)}
    if "RecordDeAggregation" in processors:
        items = deaggregate(items, processors["RecordDeAggregation"], failures)
    if "Lambda" in processors:
        items = lambda_transform(cfg, items, processors["Lambda"], invoke, region, failures)
    if "MetadataExtraction" in processors:
        items = extract_metadata(items, processors["MetadataExtraction"], jq, failures)
    if "AppendDelimiterToRecord" in processors:
        for item in items:
            item.data = partitioning.append_delimiter(item.data)
    return items


def _partition(cfg: FlushConfig, items: list[Item], failures: Failures) -> list[tuple[str | None, list[Item]]]:
    """Groups of items that share an evaluated prefix (one group without dynamic partitioning)."""
    dest = cfg.dest
    if not (dest.get("DynamicPartitioningConfiguration") or {}).get("Enabled"):
        return [(None, items)] if items else []
    groups: dict[str, list[Item]] = {}
    for item in items:
        try:
            # The timestamp part is evaluated per object below; only the keys decide the group.
            prefix = keys.evaluate_prefix(dest.get("Prefix"), datetime(2000, 1, 1, tzinfo=timezone.utc),
                                          partition_keys=item.keys, random=lambda: "")
        except keys.PrefixEvaluationError as err:
            failures.setdefault(partitioning.ERROR_OUTPUT_TYPE, []).append((item.record, error_document(
                item.record, "DynamicPartitioning.PartitionKeyMissing", str(err), 1)))
            continue
        groups.setdefault(prefix, []).append(item)
    return list(groups.items())


def data_objects(cfg: FlushConfig, items: list[Item], failures: Failures) -> list[S3Object]:
    """The destination objects: one per partition, its body converted or compressed."""
    dest = cfg.dest
    conversion_cfg = dest.get("DataFormatConversionConfiguration") or {}
    out = []
    for _, group in _partition(cfg, items, failures):
        records = [i.record for i in group]
        if conversion_cfg.get("Enabled"):
            body, errors = conversion.convert([i.data for i in group], conversion_cfg)
            by_data = {}
            for i in group:
                by_data.setdefault(i.data, i)
            for data, message in errors:
                item = by_data[data]
                failures.setdefault(conversion.ERROR_OUTPUT_TYPE, []).append((item.record, conversion.error_document(
                    data, message, arrival_ms=_ms(item.record.arrival), attempt_ending_ms=_ms(time.time()),
                    schema_configuration=conversion_cfg.get("SchemaConfiguration"),
                    sequence_number=(item.record.kinesis or {}).get("sequenceNumber"))))
            if body is None:
                continue
            failed = {d for d, _ in errors}
            records = [i.record for i in group if i.data not in failed]
            encoding, ext = None, conversion.extension(conversion_cfg)
        else:
            body, encoding, ext = _body(dest, [i.data for i in group])
        key = keys.object_key(dest.get("Prefix"), cfg.name, cfg.version, _when(records, dest),
                              partition_keys=group[0].keys, extension=dest.get("FileExtension") or ext)
        out.append(S3Object(dest["BucketARN"], key, body, records, encoding, record_count=len(records)))
    return out


def backup_objects(cfg: FlushConfig, records: list[Record]) -> list[S3Object]:
    """S3BackupMode Enabled: the source records as they arrived, to the backup bucket/prefix."""
    dest = cfg.dest
    if dest.get("S3BackupMode") != "Enabled" or "S3BackupDescription" not in dest:
        return []
    backup = dest["S3BackupDescription"]
    body, encoding, ext = _body(backup, [r.data for r in records])
    key = keys.object_key(backup.get("Prefix"), cfg.name, cfg.version, _when(records, dest), extension=ext)
    return [S3Object(backup["BucketARN"], key, body, records, encoding, kind="backup", record_count=len(records))]


def build_objects(cfg: FlushConfig, records: list[Record], invoke: Any, region: str, jq: JqPool) -> list[S3Object]:
    """Every object a batch becomes: data (per partition), error output (per error type), backup."""
    failures: Failures = {}
    items = process(cfg, records, invoke, region, jq, failures)
    objects = data_objects(cfg, items, failures)
    for output_type, failed in failures.items():
        objects += error_objects(cfg, failed, output_type)
    return objects + backup_objects(cfg, records)


# ------------------------------------------------------------------ the worker

class Worker(threading.Thread):
    def __init__(self, svc: Any, ds: Any, source: Buffer | KinesisSource, stopped: threading.Event):
        super().__init__(name=f"kinesim-firehose-{ds.name}", daemon=True)
        self.svc, self.ds, self.source, self.stopped = svc, ds, source, stopped
        self.writer = Writer(svc.settings, svc.objects)
        self.metrics = Metrics()
        self.scale = svc.settings.firehose_interval_scale

    def flush_config(self) -> FlushConfig:
        ds = self.ds
        with ds.lock:
            return FlushConfig(ds.name, ds.arn, ds.version, json.loads(json.dumps(ds.destination)),
                           ds.source["KinesisStreamARN"] if ds.source else None)

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.step()
            except JqUnavailable as err:  # no jq worker (the server is stopping): the batch waits
                if not self.stopped.is_set():
                    self.note_error(f"InternalError: {err}")
                    self.stopped.wait(RETRY_EVERY_S * self.scale)
            except Exception as err:  # a bug in one flush must not end delivery for good
                log.exception("firehose %s: delivery failed", self.ds.name)
                self.note_error(f"InternalError: {err}")
                self.stopped.wait(RETRY_EVERY_S * self.scale)

    def step(self) -> None:
        cfg = self.flush_config()
        hints = cfg.dest["BufferingHints"]
        size = hints["SizeInMBs"] * MiB
        interval = hints["IntervalInSeconds"] * self.scale
        self.source.fill(size)
        oldest = self.source.oldest_arrival
        if not self.source.pending_count or oldest is None:
            self.source.wait(IDLE_WAIT_S)
            return
        due = oldest + interval - time.time()
        if self.source.pending_bytes < size and due > 0:
            self.source.wait(due)
            return
        batch = self.source.take(size)
        if batch and self.flush(cfg, batch):
            self.source.commit(batch)

    def flush(self, cfg: FlushConfig, batch: list[Record]) -> bool:
        """Write every object of `batch`, each to its destination, else to the error output, else
        nowhere (see the module docstring); False only when stopped before that was decided."""
        pending = build_objects(cfg, batch, self.svc.invoke, self.svc.settings.region, self.svc.jq)
        dynamic = bool((cfg.dest.get("DynamicPartitioningConfiguration") or {}).get("Enabled"))
        retry_s = (cfg.dest["DynamicPartitioningConfiguration"]["RetryOptions"]["DurationInSeconds"]
                   if dynamic else S3_RETRY_S) * self.scale
        failed = self.write(pending, retry_s)
        if failed is None:
            return False
        # Past the retry duration: what never landed goes to the error output (once).
        pending = []
        for obj, err, attempts in failed:
            if obj.kind == "error":
                pending.append(obj)
            else:
                docs = [(r, error_document(r, err.code, err.message, attempts)) for r in obj.records]
                pending += error_objects(cfg, docs, S3_FAILED)
        failed = self.write(pending, retry_s)
        if failed is None:
            return False
        for obj, err, _ in failed:
            self.note_dropped(obj, err)
        return True

    def write(self, objects: list[S3Object],
              retry_s: float) -> list[tuple[S3Object, DeliveryError, int]] | None:
        """Write `objects`, retrying failures every 5 s (scaled) for `retry_s`: those that were never
        written, with their last error and the attempts made; None if stopped meanwhile."""
        started, attempts = time.monotonic(), 0
        while objects:
            attempts += 1
            failed: list[tuple[S3Object, DeliveryError, int]] = []
            for obj in objects:
                try:
                    self.writer.put(obj)
                    self.note_written(obj)
                except DeliveryError as err:
                    self.note_error(str(err), loud=attempts == 1)
                    failed.append((obj, err, attempts))
            if not failed or time.monotonic() - started >= retry_s:
                return failed
            objects = [obj for obj, _, _ in failed]
            if self.stopped.wait(RETRY_EVERY_S * self.scale):
                return None
        return []

    def note_written(self, obj: S3Object) -> None:
        m = self.metrics
        with m.lock:
            if obj.kind == "data":
                m.delivered_records += obj.record_count
                m.delivered_bytes += len(obj.body)
                m.delivered_objects += 1
                m.last_delivery = time.time()
            elif obj.kind == "backup":
                m.backup_records += obj.record_count
                m.backup_objects += 1
            else:
                m.error_records += obj.record_count

    def note_dropped(self, obj: S3Object, err: DeliveryError) -> None:
        with self.metrics.lock:
            self.metrics.dropped_records += obj.record_count
        log.error("firehose %s: %d record(s) dropped: neither the destination nor the error output took them "
                  "within the retry duration (last error %s)", self.ds.name, obj.record_count, err)

    def note_error(self, text: str, loud: bool = True) -> None:
        m = self.metrics
        with m.lock:
            m.failed_attempts += 1
            m.last_error, m.last_error_time = text, time.time()
        # The first failure of a batch is worth a warning; its retries are not.
        log.log(logging.WARNING if loud else logging.DEBUG, "firehose %s: %s (retrying)", self.ds.name, text)

    def snapshot(self) -> dict[str, Any]:
        now = time.time()
        m, source = self.metrics, self.source
        oldest = source.oldest_arrival
        with m.lock:
            attempts = m.delivered_objects + m.failed_attempts
            return {
                "DeliveryStreamName": self.ds.name,
                "DeliveryToS3.Records": m.delivered_records,
                "DeliveryToS3.Bytes": m.delivered_bytes,
                "DeliveryToS3.ObjectCount": m.delivered_objects,
                "DeliveryToS3.Success": (m.delivered_objects / attempts) if attempts else 1.0,
                # Age of the oldest record not yet delivered (0 when none waits), in seconds.
                "DeliveryToS3.DataFreshness": max(0.0, now - oldest) if oldest is not None else 0.0,
                "BackupToS3.Records": m.backup_records,
                "BackupToS3.ObjectCount": m.backup_objects,
                "ErrorOutput.Records": m.error_records,
                "DroppedRecords": m.dropped_records,
                "FailedAttempts": m.failed_attempts,
                "BufferedRecords": source.pending_count,
                "BufferedBytes": source.pending_bytes,
                "LastDeliveryTimestamp": m.last_delivery,
                "LastError": m.last_error,
                "LastErrorTimestamp": m.last_error_time,
            }


class Deliveries:
    """The workers of a FirehoseService, by delivery stream name."""

    def __init__(self, svc: Any):
        self.svc = svc
        self.lock = threading.Lock()
        self.workers: dict[str, Worker] = {}
        self.buffers: dict[str, Buffer] = {}

    def start(self, ds: Any) -> None:
        with self.lock:
            if ds.name in self.workers:
                return
            stopped = threading.Event()
            if ds.type == "KinesisStreamAsSource":
                source: Buffer | KinesisSource = KinesisSource(self.svc, ds, stopped)
            else:
                source = self.buffers[ds.name] = Buffer(self.svc.store, ds.name)
            worker = self.workers[ds.name] = Worker(self.svc, ds, source, stopped)
        worker.start()

    def buffer(self, name: str) -> Buffer:
        return self.buffers[name]

    def wake(self, name: str) -> None:
        worker = self.workers.get(name)
        if worker is not None:
            worker.source.wake()

    def metrics(self, name: str) -> dict[str, Any] | None:
        worker = self.workers.get(name)
        return worker.snapshot() if worker is not None else None

    def stop(self, name: str) -> None:
        with self.lock:
            worker = self.workers.pop(name, None)
            self.buffers.pop(name, None)
        if worker is None:
            return
        worker.stopped.set()
        worker.source.wake()
        if worker is not threading.current_thread():
            worker.join(30)

    def stop_all(self) -> None:
        for name in list(self.workers):
            self.stop(name)
