"""The Lambda data-transformation contract between Firehose and a processor function.

Interface used by the delivery service:

- ``lambda_parameters(processor, destination="ExtendedS3") -> LambdaProcessor``: a
  ``{"Type": "Lambda", "Parameters": [...]}`` processor with AWS's defaults
  (NumberOfRetries 3, BufferSizeInMBs 1 (0.25 for Splunk and Snowflake),
  BufferIntervalInSeconds 60 (30 for Snowflake)) and ranges; raises AwsError
  InvalidArgumentException with AWS's message.
- ``build_event(records, stream_arn, region, source_kinesis=None, *, invocation_id=None)
  -> dict``: the event the function receives. ``records`` are ``(recordId, data,
  approximate_arrival_ms)``, or ``(recordId, data, approximate_arrival_ms, kinesis)`` where
  ``kinesis`` is ``{"shardId", "partitionKey", "sequenceNumber", "subsequenceNumber"}`` for
  a record read from a Kinesis stream; ``source_kinesis`` is the delivery stream's
  KinesisStreamSourceConfiguration (``{"KinesisStreamARN": ...}``) or None for Direct PUT.
- ``parse_response(payload, sent_ids) -> [(recordId, result, data, partition_keys)]`` in
  ``sent_ids`` order: ``result`` is ``Ok`` / ``Dropped`` / ``ProcessingFailed``, ``data``
  the decoded bytes (None when the function returned none), ``partition_keys`` the
  ``metadata.partitionKeys`` (None when absent). A response that breaks the contract fails
  the whole batch: TransformationFailed(code, message) with AWS's error code and message
  (``Lambda.JsonProcessingException``, ``Lambda.FunctionError``,
  ``Lambda.DuplicatedRecordId``, ``Lambda.MissingRecordId``). Record ids the batch never
  sent are ignored, as AWS does.
- ``processing_failed_document(record, code, message, *, attempts_made, arrival_ms,
  attempt_ending_ms, lambda_arn) -> bytes``: the JSON line written under the error prefix
  (error type ``processing-failed``) for a record the transformation failed.
  ``PROCESSING_FAILED_STATUS`` is the (code, message) for a record the function returned as
  ``ProcessingFailed``; ``FUNCTION_ERROR`` for an invocation that returned a function error
  once every retry (NumberOfRetries) was spent.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from kinesim.protocol.errors import invalid_argument

ERROR_OUTPUT_TYPE = "processing-failed"
RESULTS = ("Ok", "Dropped", "ProcessingFailed")

# (errorCode, errorMessage) pairs as AWS writes them in the error output.
PROCESSING_FAILED_STATUS = ("Lambda.ProcessingFailedStatus", "ProcessingFailed status set for record")
FUNCTION_ERROR = (
    "Lambda.FunctionError",
    "The Lambda function was successfully invoked but it returned an error result.",
)
JSON_PROCESSING_ERROR = (
    "Lambda.JsonProcessingException",
    "There was an error parsing returned records from the Lambda function. "
    "Ensure that the returned records follow the status model required by Firehose.",
)
INVALID_RESPONSE = (
    "Lambda.FunctionError",
    "Check your function and make sure the output is in required format. In addition to that, "
    "make sure the processed records contain valid result status of Dropped, Ok, or ProcessingFailed",
)
DUPLICATED_RECORD_ID = (
    "Lambda.DuplicatedRecordId",
    "Multiple records were returned with the same record Id. "
    "Ensure that the Lambda function returns a unique record Id for each record.",
)
MISSING_RECORD_ID = (
    "Lambda.MissingRecordId",
    "One or more record Ids were not returned. Ensure that the Lambda function returns all received record Ids.",
)


class TransformationFailed(Exception):
    """The function's response broke the contract: every record of the batch failed."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class LambdaProcessor:
    """A Lambda processor's parameters, defaults applied."""

    lambda_arn: str
    number_of_retries: int = 3
    buffer_size_mb: float = 1.0
    buffer_interval_seconds: int = 60
    role_arn: str | None = None


def lambda_parameters(processor: dict, destination: str = "ExtendedS3") -> LambdaProcessor:
    """The Lambda processor's parameters with AWS's defaults for ``destination``.

    ``destination`` is the destination configuration's kind without the
    ``DestinationConfiguration`` suffix (``ExtendedS3``, ``Splunk``, ``Snowflake``, ...).
    """
    parameters = {p["ParameterName"]: p["ParameterValue"] for p in processor.get("Parameters") or []}
    if not parameters.get("LambdaArn"):
        raise invalid_argument("LambdaArn is required when Lambda processor is used.")
    size_default = 0.25 if destination in ("Splunk", "Snowflake") else 1.0
    interval_default = 30 if destination == "Snowflake" else 60
    retries = _number(parameters.get("NumberOfRetries"), 3, int)
    if retries is None or not 0 <= retries <= 300:
        raise invalid_argument("Number of retries for lambda must be between 0 and 300.")
    size = _number(parameters.get("BufferSizeInMBs"), size_default, float)
    if size is None or not 0.2 <= size <= 3:
        raise invalid_argument("BufferSizeInMBs for lambda processor must be between 0.2 and 3.")
    interval = _number(parameters.get("BufferIntervalInSeconds"), interval_default, int)
    if interval is None or not 0 <= interval <= 900:
        raise invalid_argument("BufferIntervalInSeconds for lambda processor must be between 0 and 900.")
    return LambdaProcessor(
        lambda_arn=parameters["LambdaArn"],
        number_of_retries=retries,
        buffer_size_mb=size,
        buffer_interval_seconds=interval,
        role_arn=parameters.get("RoleArn"),
    )


def _number(text: str | None, default: Any, kind: type) -> Any:
    if text is None:
        return default
    try:
        return kind(text.strip())
    except ValueError:
        return None


def build_event(
    records: Iterable[Sequence],
    stream_arn: str,
    region: str,
    source_kinesis: dict | None = None,
    *,
    invocation_id: str | None = None,
) -> dict:
    """The event Firehose invokes a processor function with."""
    event: dict[str, Any] = {"invocationId": invocation_id or str(uuid.uuid4()), "deliveryStreamArn": stream_arn}
    if source_kinesis:
        event["sourceKinesisStreamArn"] = source_kinesis["KinesisStreamARN"]
    event["region"] = region
    event["records"] = [_event_record(record) for record in records]
    return event


def _event_record(record: Sequence) -> dict:
    record_id, data, arrival_ms = record[0], record[1], int(record[2])
    entry: dict[str, Any] = {
        "recordId": record_id,
        "approximateArrivalTimestamp": arrival_ms,
        "data": base64.b64encode(data).decode(),
    }
    kinesis = record[3] if len(record) > 3 else None
    if kinesis:
        entry["kinesisRecordMetadata"] = {
            "shardId": kinesis["shardId"],
            "partitionKey": kinesis["partitionKey"],
            "approximateArrivalTimestamp": arrival_ms,
            "sequenceNumber": kinesis["sequenceNumber"],
            "subsequenceNumber": int(kinesis.get("subsequenceNumber") or 0),
        }
    return entry


def parse_response(
    payload: bytes, sent_ids: Iterable[str]
) -> list[tuple[str, str, bytes | None, dict[str, str] | None]]:
    """Each sent record's outcome from the function's response; see the module docstring."""
    try:
        response = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
        raise TransformationFailed(*JSON_PROCESSING_ERROR) from None
    returned = response.get("records") if isinstance(response, dict) else None
    if not isinstance(returned, list):
        # No records at all: none of the sent ids came back.
        raise TransformationFailed(*MISSING_RECORD_ID)
    by_id: dict[str, tuple[str, bytes | None, dict[str, str] | None]] = {}
    for entry in returned:
        record_id, outcome = _outcome(entry)
        if record_id in by_id:
            raise TransformationFailed(*DUPLICATED_RECORD_ID)
        by_id[record_id] = outcome
    results = []
    for record_id in sent_ids:
        if record_id not in by_id:
            raise TransformationFailed(*MISSING_RECORD_ID)
        results.append((record_id, *by_id[record_id]))
    return results


def _outcome(entry: Any) -> tuple[str, tuple[str, bytes | None, dict[str, str] | None]]:
    if not isinstance(entry, dict) or not isinstance(entry.get("recordId"), str):
        raise TransformationFailed(*INVALID_RESPONSE)
    result = entry.get("result")
    if result not in RESULTS:
        raise TransformationFailed(*INVALID_RESPONSE)
    data = entry.get("data")
    if data is None:
        if result == "Ok":
            raise TransformationFailed(*INVALID_RESPONSE)
        decoded = None
    else:
        if not isinstance(data, str):
            raise TransformationFailed(*INVALID_RESPONSE)
        try:
            decoded = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise TransformationFailed(*INVALID_RESPONSE) from None
    return entry["recordId"], (result, decoded, _partition_keys(entry.get("metadata")))


def _partition_keys(metadata: Any) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise TransformationFailed(*INVALID_RESPONSE)
    keys = metadata.get("partitionKeys")
    if keys is None:
        return None
    if not isinstance(keys, dict):
        raise TransformationFailed(*INVALID_RESPONSE)
    converted = {}
    for name, value in keys.items():
        if isinstance(value, (dict, list)):
            raise TransformationFailed(*JSON_PROCESSING_ERROR)
        # Firehose reads a Map<String, String>: scalars become their JSON text; a null key is
        # left out, so the record fails when the prefix needs it.
        if value is not None:
            converted[name] = value if isinstance(value, str) else json.dumps(value)
    return converted


def processing_failed_document(
    record: bytes,
    code: str,
    message: str,
    *,
    attempts_made: int,
    arrival_ms: int,
    attempt_ending_ms: int,
    lambda_arn: str,
) -> bytes:
    """The JSON line AWS writes for a record that failed transformation."""
    document = {
        "attemptsMade": attempts_made,
        "arrivalTimestamp": arrival_ms,
        "errorCode": code,
        "errorMessage": message,
        "attemptEndingTimestamp": attempt_ending_ms,
        "rawData": base64.b64encode(record).decode(),
        "lambdaArn": lambda_arn,
    }
    return json.dumps(document, separators=(",", ":")).encode() + b"\n"
