"""Processing (ProcessingConfiguration), in AWS's order: RecordDeAggregation, the Lambda processor
(`transform`), MetadataExtraction, AppendDelimiterToRecord (`partitioning`). Records that fail a
step are set aside with their error documents, for the error output (processing-failed); the
others go on, possibly transformed and with the partition keys found for them. `error_document`
is the error output's line for a record, whatever step (or S3 write) failed it."""
from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

from kinesim.protocol.errors import AwsError

from . import partitioning, transform
from .buffers import Record
from .jq_runner import JqPool
from .writer import DeliveryError

MiB = 1 << 20


@dataclass
class FlushConfig:
    """A delivery stream's configuration as one flush sees it (UpdateDestination may change it)."""
    name: str
    arn: str
    version: int
    dest: dict[str, Any]
    source_arn: str | None


def error_document(record: Record, code: str, message: str, attempts: int) -> bytes:
    """One line of error output, in the shape AWS writes for records it could not deliver."""
    doc = {"attemptsMade": attempts, "arrivalTimestamp": epoch_ms(record.arrival), "errorCode": code,
           "errorMessage": message, "attemptEndingTimestamp": epoch_ms(time.time()),
           "rawData": base64.b64encode(record.data).decode()}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


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


def epoch_ms(seconds: float) -> int:
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
            item.data, *status, attempts_made=attempts, arrival_ms=epoch_ms(item.record.arrival),
            attempt_ending_ms=epoch_ms(time.time()), lambda_arn=params.lambda_arn)))

    for chunk in _chunks(items, params.buffer_size_mb * MiB):
        sent = [(i.id, i.data, epoch_ms(i.record.arrival), i.record.kinesis) for i in chunk]
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
