"""Dynamic partitioning and the record processors that run without a function.

Processors, in the order Firehose applies them to a record (AWS: "Apply dynamic
partitioning to aggregated data"): RecordDeAggregation, then the Lambda transformation
(`firehose.transform`), then MetadataExtraction (the partition keys), and
AppendDelimiterToRecord when the record is written.

Interface used by the delivery service:

- ``extract_partition_keys(record, query) -> dict[str, str]``: MetadataExtraction with
  AWS's JQ form, e.g. ``{customer_id: .customer_id, year: .event_timestamp|strftime("%Y")}``,
  using the ``jq`` package (each query is compiled once and cached). Values must be
  scalars: strings as they are, numbers and booleans as JSON text. Raises PartitioningError
  for a record that is not JSON, a query that fails on it, or a key without a value; the
  caller routes such records to the error output with error type ``processing-failed``.
- ``deaggregate(record, sub_record_type, delimiter=None) -> list[bytes]``:
  RecordDeAggregation. ``JSON``: consecutive JSON objects (``{"a":1}{"a":2}`` or JSON
  lines; an array of objects is not valid input), each returned as it was written.
  ``DELIMITED``: split on the base64-encoded ``Delimiter`` parameter. At most 500
  sub-records per record. Raises PartitioningError when the record cannot be split.
- ``append_delimiter(record, delimiter=b"\\n") -> bytes``: AppendDelimiterToRecord.
- ``processor_parameters(processor) -> dict[str, str]``: a Processor's Parameters list as
  a dict.
- ``validate_processing(prefix, processing_configuration, dynamic_partitioning)``: what
  CreateDeliveryStream rejects about processors and partition keys, raising AwsError
  InvalidArgumentException with AWS's message (prefix rules: `firehose.keys`).
"""

from __future__ import annotations

import base64
import binascii
import json
from functools import lru_cache
from typing import Any

import jq

from firehose.keys import expressions
from kinesim.protocol.errors import invalid_argument

ERROR_OUTPUT_TYPE = "processing-failed"
MAX_SUB_RECORDS = 500
JSON_PARSING_ENGINES = ("JQ-1.6",)
SUB_RECORD_TYPES = ("JSON", "DELIMITED")


class PartitioningError(ValueError):
    """A record whose partition keys cannot be extracted, or that cannot be de-aggregated.

    ``code`` is the errorCode the error output document carries.
    """

    def __init__(self, message: str, code: str = "DynamicPartitioning.MetadataExtractionFailed"):
        super().__init__(message)
        self.code = code
        self.message = message


@lru_cache(maxsize=256)
def _compiled(query: str) -> Any:
    return jq.compile(query)


def extract_partition_keys(record: bytes, query: str) -> dict[str, str]:
    """The partition keys ``query`` (a MetadataExtractionQuery) extracts from ``record``."""
    try:
        document = json.loads(record)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise PartitioningError("Non JSON record provided") from None
    try:
        program = _compiled(query)
    except ValueError as error:
        raise PartitioningError(f"Invalid MetadataExtractionQuery: {error}") from None
    try:
        results = program.input_value(document).all()
    except ValueError as error:
        raise PartitioningError(f"Failed to execute the MetadataExtractionQuery: {error}") from None
    if len(results) != 1 or not isinstance(results[0], dict):
        raise PartitioningError("The MetadataExtractionQuery must produce one JSON object")
    keys = {}
    for name, value in results[0].items():
        if value is None or isinstance(value, (dict, list)):
            raise PartitioningError(f"The partition key {name} has no scalar value: {json.dumps(value)}")
        keys[name] = value if isinstance(value, str) else json.dumps(value)
    return keys


def deaggregate(record: bytes, sub_record_type: str, delimiter: str | None = None) -> list[bytes]:
    """The sub-records of an aggregated record (RecordDeAggregation)."""
    if sub_record_type == "DELIMITED":
        if not delimiter:
            raise PartitioningError("Delimiter should be present for DELIMITED", code="RecordDeAggregation.Failed")
        try:
            separator = base64.b64decode(delimiter, validate=True)
        except binascii.Error:
            raise PartitioningError("Delimiter must be base64 encoded", code="RecordDeAggregation.Failed") from None
        parts = [part for part in record.split(separator) if part]
    elif sub_record_type == "JSON":
        parts = _json_documents(record)
    else:
        raise PartitioningError("SubRecordType has to be one of JSON, DELIMITED", code="RecordDeAggregation.Failed")
    if len(parts) > MAX_SUB_RECORDS:
        raise PartitioningError(
            f"A record holds more than {MAX_SUB_RECORDS} sub-records", code="RecordDeAggregation.Failed"
        )
    return parts


def _json_documents(record: bytes) -> list[bytes]:
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError:
        raise PartitioningError("Non JSON record provided", code="RecordDeAggregation.Failed") from None
    decoder = json.JSONDecoder()
    parts = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return parts
        try:
            document, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            raise PartitioningError("Non JSON record provided", code="RecordDeAggregation.Failed") from None
        if not isinstance(document, dict):
            raise PartitioningError(
                "Only JSON objects can be de-aggregated", code="RecordDeAggregation.Failed"
            )
        parts.append(text[position:end].encode("utf-8"))
        position = end


def append_delimiter(record: bytes, delimiter: bytes = b"\n") -> bytes:
    """AppendDelimiterToRecord: the record followed by the delimiter (a new line)."""
    return record + delimiter


def processor_parameters(processor: dict) -> dict[str, str]:
    """A Processor's Parameters as {ParameterName: ParameterValue}."""
    return {p["ParameterName"]: p["ParameterValue"] for p in processor.get("Parameters") or []}


def validate_processing(prefix: str | None, processing_configuration: dict | None, dynamic_partitioning: bool) -> None:
    """Reject what CreateDeliveryStream rejects about processors and partition keys."""
    configuration = processing_configuration or {}
    enabled = configuration.get("Enabled", bool(configuration.get("Processors")))
    processors = (configuration.get("Processors") or []) if enabled else []
    types = {p.get("Type") for p in processors}
    prefix_keys = expressions(prefix)
    query_keys = {value for ns, value in prefix_keys if ns == "partitionKeyFromQuery"}
    for processor in processors:
        parameters = processor_parameters(processor)
        kind = processor.get("Type")
        if kind == "MetadataExtraction":
            if not dynamic_partitioning:
                raise invalid_argument(
                    "class com.amazonaws.services.firehose.internal.model.MetadataExtractionProcessor "
                    "can only be present when Dynamic Partitioning is enabled."
                )
            if parameters.get("JsonParsingEngine") not in JSON_PARSING_ENGINES or "MetadataExtractionQuery" not in parameters:
                raise invalid_argument("MetaDataExtraction JSON Parsing Engine has to be one of JQ-1.6")
            query = parameters["MetadataExtractionQuery"]
            try:
                _compiled(query)
            except ValueError:
                raise invalid_argument(f"Invalid MetadataExtractionQuery: {query}") from None
            if not _query_keys(query) <= query_keys:
                raise invalid_argument(
                    "MetaDataExtraction JQ Query can't contain keys that are not present in the S3 Prefix expression"
                )
        elif kind == "RecordDeAggregation":
            sub_record_type = parameters.get("SubRecordType")
            if sub_record_type not in SUB_RECORD_TYPES:
                raise invalid_argument("SubRecordType has to be one of JSON, DELIMITED")
            if sub_record_type == "DELIMITED" and "Delimiter" not in parameters:
                raise invalid_argument("Delimiter should be present for DELIMITED")
    if not dynamic_partitioning:
        return
    if not processors:
        raise invalid_argument("Processing Configuration is not enabled when DataPartitioning is enabled")
    if any(ns == "partitionKeyFromLambda" for ns, _ in prefix_keys) and "Lambda" not in types:
        raise invalid_argument("Lambda should be present when S3 Prefix contains keys from partitionKeyFromLambda namespace")
    if query_keys and "MetadataExtraction" not in types:
        raise invalid_argument(
            "MetadataExtraction processor should be present when S3 Prefix has partitionKeyFromQuery namespace"
        )


def _query_keys(query: str) -> set[str]:
    """The keys of a JQ object constructor ``{a: .x, "b": .y}``, found by running it on null.

    The constructor's keys do not depend on the input, but its values may fail on null
    (e.g. strftime); those keys are then read from the query text instead.
    """
    try:
        result = _compiled(query).input_value(None).first()
        if isinstance(result, dict):
            return set(result)
    except (ValueError, StopIteration):
        pass
    keys = set()
    depth = 0
    token = ""
    expect_key = False
    for char in query:
        if char in "{[(":
            depth += 1
            expect_key = depth == 1 and char == "{"
            token = ""
        elif char in "}])":
            depth -= 1
        elif depth == 1 and char == ",":
            expect_key, token = True, ""
        elif depth == 1 and char == ":" and expect_key:
            keys.add(token.strip().strip('"'))
            expect_key = False
        elif expect_key:
            token += char
    return keys
