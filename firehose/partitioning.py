"""Dynamic partitioning and the record processors that run without a function.

Processors, in the order Firehose applies them to a record (AWS: "Apply dynamic
partitioning to aggregated data"): RecordDeAggregation, then the Lambda transformation
(`firehose.transform`), then MetadataExtraction (the partition keys), and
AppendDelimiterToRecord when the record is written.

Interface used by the delivery service:

- ``extract_partition_keys(records, query, jq) -> list[dict[str, str] | PartitioningError]``:
  MetadataExtraction with AWS's JQ form, e.g. ``{customer_id: .customer_id, year:
  .event_timestamp|strftime("%Y")}``, for a delivery's records at once, evaluated by the
  server's `jq_runner.JqPool` (never in the server's interpreter; each worker compiles a query
  once). Values must be scalars: strings as they are, numbers and booleans as JSON text. A
  PartitioningError stands for a record that is not JSON, a query that fails on it (or exceeds
  the pool's time or memory limit), or a key without a value; the caller routes such records to
  the error output with error type ``processing-failed``. Raises jq_runner.JqUnavailable when no
  worker could evaluate at all (the caller retries the batch later).
- ``deaggregate(record, sub_record_type, delimiter=None) -> list[bytes]``:
  RecordDeAggregation. ``JSON``: consecutive JSON objects (``{"a":1}{"a":2}`` or JSON
  lines; an array of objects is not valid input), each returned as it was written.
  ``DELIMITED``: split on the base64-encoded ``Delimiter`` parameter. At most 500
  sub-records per record. Raises PartitioningError when the record cannot be split.
- ``append_delimiter(record, delimiter=b"\\n") -> bytes``: AppendDelimiterToRecord.
- ``processor_parameters(processor) -> dict[str, str]``: a Processor's Parameters list as
  a dict.
- ``validate_processing(prefix, processing_configuration, dynamic_partitioning, jq)``: what
  CreateDeliveryStream rejects about processors and partition keys, raising AwsError
  InvalidArgumentException with AWS's message (prefix rules: `firehose.keys`). The query is
  compiled and run on null in the pool: one that does not compile, or that exceeds the pool's
  limits on null (`def f: f; f`), is an invalid MetadataExtractionQuery.
"""

from __future__ import annotations

import base64
import binascii
import json

from firehose.jq_runner import JqFailed, JqPool, JqUnavailable
from firehose.keys import expressions
from kinesim.protocol.errors import AwsError, invalid_argument

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


def extract_partition_keys(records: list[bytes], query: str, jq: JqPool) -> list[dict[str, str] | PartitioningError]:
    """The partition keys `query` (a MetadataExtractionQuery) extracts from each record."""
    return [PartitioningError(reply["error"]) if "error" in reply else reply["keys"]
            for reply in jq.partition_keys(query, records)]


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
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested deeper than Python reads
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


def validate_processing(prefix: str | None, processing_configuration: dict | None, dynamic_partitioning: bool,
                        jq: JqPool) -> None:
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
            if not _query_keys(query, jq) <= query_keys:
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


def _query_keys(query: str, jq: JqPool) -> set[str]:
    """The keys of a JQ object constructor ``{a: .x, "b": .y}``, found by running it on null in
    the pool; InvalidArgumentException for a query that does not compile or exceeds the pool's
    limits (the same answer as for a syntax error: AWS documents no other).

    The constructor's keys do not depend on the input, but its values may fail on null
    (e.g. strftime); those keys are then read from the query text instead.
    """
    try:
        inspection = jq.inspect(query)
    except JqFailed:
        raise invalid_argument(f"Invalid MetadataExtractionQuery: {query}") from None
    except JqUnavailable:
        raise AwsError("ServiceUnavailableException", "The service is unavailable. Back off and retry the operation.",
                       503) from None
    if "compile_error" in inspection:
        raise invalid_argument(f"Invalid MetadataExtractionQuery: {query}")
    if inspection["keys"] is not None:
        return set(inspection["keys"])
    return _keys_in_text(query)


def _keys_in_text(query: str) -> set[str]:
    """The keys of the top-level object constructor, read from the query's text."""
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
