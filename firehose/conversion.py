"""DataFormatConversionConfiguration: JSON records to Parquet or ORC, as Firehose converts them.

Interface used by the delivery service:

- ``convert(records, config, *, columns=None) -> (bytes | None, [(record, error_message)])``:
  ``config`` is AWS's DataFormatConversionConfiguration dict. Every record holds one or more
  JSON objects (``{"a":1}{"a":2}`` and JSON lines are fine, an array of objects is not);
  each object becomes a row. Records that do not parse or do not fit the schema are
  returned with AWS's error message (their error type is ``format-conversion-failed``;
  `error_code` gives the ``lastErrorCode``, `error_document` the JSON AWS writes for them);
  the others are converted together into one file. None when no record converted.
- ``infer_columns(records, config) -> [{"Name", "Type"}]``: a schema for records, in Glue's
  column form (Hive type strings).
- ``extension(config) -> ".parquet" | ".orc"``: the key extension AWS appends.
- ``error_code(message)``, ``error_document(...)``: the format-conversion-failed records.

The schema (kinesim's extension, since kinesim has no Glue Data Catalog). AWS reads the
columns from the Glue table named by SchemaConfiguration (DatabaseName, TableName, ...).
Here they come, in order, from:

1. ``columns=``: a list in Glue's ``StorageDescriptor.Columns`` form,
   ``[{"Name": "ts", "Type": "timestamp"}, {"Name": "tags", "Type": "array<string>"}]``,
   which the caller resolves for SchemaConfiguration (e.g. from a JSON file per
   DatabaseName/TableName in its data directory, or an ``AWS::Glue::Table`` in a template);
2. ``config["SchemaConfiguration"]["Columns"]`` in the same form (usable from templates and
   direct calls; boto3 rejects unknown members, so not through the API);
3. otherwise the columns are inferred from the batch (`infer_columns`): JSON strings become
   ``string``, integers ``bigint``, other numbers ``double``, booleans ``boolean``, objects
   ``struct<...>``, arrays ``array<...>``; conflicting types become ``string``. Inference
   is deterministic for a batch but may differ between batches; a caller that wants one
   schema for a stream pins the first batch's `infer_columns` result and passes it as
   ``columns=`` afterwards.

Types: string/varchar/char, boolean, tinyint, smallint, int, bigint, float, double,
decimal(p,s), date, timestamp, binary, array<T>, map<K,V>, struct<name:T,...>. Timestamps are
written as microseconds adjusted to UTC (Parquet INT64 TIMESTAMP_MICROS), which pyarrow,
Spark (TimestampType) and Athena read; AWS itself writes Hive's INT96.

Deserializers: OpenXJsonSerDe (default) matches keys case-insensitively unless
``CaseInsensitive`` is false, applies ``ConvertDotsInJsonKeysToUnderscores`` and
``ColumnToJsonKeyMappings`` ({column: JSON key}), turns nested JSON into text for string
columns, accepts numbers and booleans given as strings, and reads timestamps as
``yyyy-MM-dd'T'HH:mm:ss[.S]Z``, ``yyyy-[M]M-[d]d HH:mm:ss[.S]``, epoch seconds, epoch
milliseconds or fractional epoch seconds. HiveJsonSerDe matches keys case-insensitively,
rejects strings for numeric columns and objects for string columns, and reads timestamps
with its ``TimestampFormats`` (Joda patterns, or ``millis``), by default
``java.sql.Timestamp.valueOf``'s ``yyyy-[M]M-[d]d HH:mm:ss[.f]``. Keys not in the schema are
dropped, missing ones are null.

Serializers: ParquetSerDe (Compression SNAPPY (default) / GZIP / UNCOMPRESSED,
EnableDictionaryCompression, PageSizeBytes, WriterVersion V1 / V2) and OrcSerDe
(Compression SNAPPY (default) / ZLIB / NONE, StripeSizeBytes, RowIndexStride,
BloomFilterColumns, BloomFilterFalsePositiveProbability, DictionaryKeyThreshold,
FormatVersion V0_11 / V0_12 (default), PaddingTolerance). BlockSizeBytes, MaxPaddingBytes
and EnablePadding only align files to HDFS blocks and change no data; they are not applied.
"""

from __future__ import annotations

import base64
import io
import json
import re
from datetime import date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

from .hive_types import arrow_schema
from .json_timestamps import hive_timestamp, openx_timestamp

ERROR_OUTPUT_TYPE = "format-conversion-failed"

# AWS's lastErrorMessage texts.
EMPTY_RECORD = "The record was empty or contained only whitespace."
PRIMITIVE_RECORD = (
    "The input JSON contained a primitive at the top level. The top level must be an object or array."
)
MALFORMED_JSON = "Encountered malformed JSON."
SCHEMA_MISMATCH = "Data does not match the schema."


def error_code(message: str) -> str:
    """The ``lastErrorCode`` AWS reports with a conversion error message."""
    if message.startswith(MALFORMED_JSON):
        return "DataFormatConversion.ParseError"
    return "DataFormatConversion.MalformedData"


def error_document(
    record: bytes,
    message: str,
    *,
    arrival_ms: int,
    attempt_ending_ms: int,
    schema_configuration: dict | None = None,
    attempts_made: int = 1,
    sequence_number: str | None = None,
    sub_sequence_number: int | None = None,
) -> bytes:
    """The JSON line AWS writes for a record that failed format conversion."""
    document: dict[str, Any] = {
        "attemptsMade": attempts_made,
        "arrivalTimestamp": arrival_ms,
        "lastErrorCode": error_code(message),
        "lastErrorMessage": message,
        "attemptEndingTimestamp": attempt_ending_ms,
        "rawData": base64.b64encode(record).decode(),
    }
    if sequence_number is not None:
        document["sequenceNumber"] = sequence_number
        document["subSequenceNumber"] = sub_sequence_number or 0
    schema = schema_configuration or {}
    document["dataCatalogTable"] = {
        "catalogId": schema.get("CatalogId"),
        "databaseName": schema.get("DatabaseName"),
        "tableName": schema.get("TableName"),
        "region": schema.get("Region"),
        "versionId": schema.get("VersionId", "LATEST"),
        "catalogArn": None,
    }
    return json.dumps(document, separators=(",", ":")).encode() + b"\n"


def extension(config: dict) -> str:
    """The extension AWS appends to converted objects."""
    serializer = (config.get("OutputFormatConfiguration") or {}).get("Serializer") or {}
    return ".orc" if "OrcSerDe" in serializer else ".parquet"


class _Mismatch(ValueError):
    """A value that does not fit its column: the record fails with SCHEMA_MISMATCH."""


class _RecordError(ValueError):
    """A record that cannot be converted, with AWS's message."""


# ---------------------------------------------------------------------- deserializers


class _Deserializer:
    """How OpenX / Hive JSON SerDe read keys and values for a column type."""

    def __init__(self, config: dict):
        deserializer = (config.get("InputFormatConfiguration") or {}).get("Deserializer") or {}
        self.hive = "HiveJsonSerDe" in deserializer and "OpenXJsonSerDe" not in deserializer
        openx = deserializer.get("OpenXJsonSerDe") or {}
        self.case_insensitive = True if self.hive else openx.get("CaseInsensitive", True) is not False
        self.dots_to_underscores = not self.hive and bool(openx.get("ConvertDotsInJsonKeysToUnderscores"))
        self.mappings = {} if self.hive else dict(openx.get("ColumnToJsonKeyMappings") or {})
        self.timestamp_formats = list((deserializer.get("HiveJsonSerDe") or {}).get("TimestampFormats") or [])

    def key(self, key: str) -> str:
        if self.dots_to_underscores:
            key = key.replace(".", "_")
        return key.lower() if self.case_insensitive else key

    def normalized(self, obj: dict) -> dict:
        return {self.key(k): v for k, v in obj.items()}

    def lookup(self, obj: dict, column: str, top_level: bool) -> Any:
        json_key = self.mappings.get(column, column) if top_level else column
        return obj.get(self.key(json_key))

    # -- values

    def coerce(self, value: Any, type_: pa.DataType, text_ok: bool | None = None) -> Any:  # noqa: C901
        """``value`` as a ``type_`` column value; ``text_ok``: numbers etc. may come as text."""
        if value is None:
            return None
        text_ok = not self.hive if text_ok is None else text_ok
        if pa.types.is_string(type_):
            if isinstance(value, str):
                return value
            if isinstance(value, (dict, list)):
                if self.hive:
                    raise _Mismatch(f"Data is not a string but a JSON {type(value).__name__}")
                return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            return json.dumps(value)
        if pa.types.is_boolean(type_):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and text_ok and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise _Mismatch(_for_input(value))
        if pa.types.is_integer(type_):
            number = _integer(value, text_ok)
            bits = type_.bit_width
            if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                raise _Mismatch(_for_input(value))
            return number
        if pa.types.is_floating(type_):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str) and text_ok:
                try:
                    return float(value)
                except ValueError:
                    raise _Mismatch(_for_input(value)) from None
            raise _Mismatch(_for_input(value))
        if pa.types.is_decimal(type_):
            return _decimal(value, type_, text_ok)
        if pa.types.is_timestamp(type_):
            return self._timestamp(value)
        if pa.types.is_date(type_):
            if isinstance(value, str):
                try:
                    return date.fromisoformat(value.strip())
                except ValueError:
                    pass
            raise _Mismatch(_for_input(value))
        if pa.types.is_binary(type_):
            if isinstance(value, str):
                return value.encode()
            raise _Mismatch(_for_input(value))
        if pa.types.is_map(type_):
            if not isinstance(value, dict):
                raise _Mismatch(_not_object(value))
            # JSON keys are always text, parsed like text values of the key type.
            return [(self.coerce(k, type_.key_type, text_ok=True), self.coerce(v, type_.item_type))
                    for k, v in value.items()]
        if pa.types.is_list(type_):
            if not isinstance(value, list):
                raise _Mismatch(f"Data is not JSONArray but {_java_type(value)} with value {_java_text(value)}")
            return [self.coerce(item, type_.value_type) for item in value]
        if pa.types.is_struct(type_):
            if not isinstance(value, dict):
                raise _Mismatch(_not_object(value))
            fields = self.normalized(value)
            return {
                field.name: self.coerce(self.lookup(fields, field.name, top_level=False), field.type)
                for field in type_
            }
        raise _Mismatch(f"unsupported column type {type_}")

    def _timestamp(self, value: Any) -> datetime:
        if isinstance(value, bool):
            raise _Mismatch(_for_input(value))
        if self.hive:
            parsed = hive_timestamp(value, self.timestamp_formats)
        else:
            parsed = openx_timestamp(value)
        if parsed is None:
            raise _Mismatch(_for_input(value))
        return parsed


def _integer(value: Any, text_ok: bool) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and text_ok and re.fullmatch(r"[+-]?\d+", value.strip()):
        try:
            return int(value)
        except ValueError:  # more digits than Python converts: out of any integer column's range anyway
            pass
    raise _Mismatch(_for_input(value))


def _decimal(value: Any, type_: pa.Decimal128Type, text_ok: bool) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) or (isinstance(value, str) and not text_ok):
        raise _Mismatch(_for_input(value))
    try:
        number = Decimal(str(value).strip()).quantize(Decimal(1).scaleb(-type_.scale), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        raise _Mismatch(_for_input(value)) from None
    if not number.is_finite() or len(number.as_tuple().digits) > type_.precision:
        raise _Mismatch(_for_input(value))
    return number


def _java_type(value: Any) -> str:
    return {bool: "java.lang.Boolean", int: "java.lang.Long", float: "java.lang.Double",
            str: "java.lang.String", list: "org.openx.data.jsonserde.json.JSONArray",
            dict: "org.openx.data.jsonserde.json.JSONObject"}.get(type(value), type(value).__name__)


def _java_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (bool, dict, list)) else str(value)


def _for_input(value: Any) -> str:
    return f'For input string: "{_java_text(value)}"'


def _not_object(value: Any) -> str:
    return f"Data is not JSONObject  but {_java_type(value)} with value {_java_text(value)}"


# --------------------------------------------------------------------- record parsing


def _documents(record: bytes) -> list[dict]:
    """The JSON objects in a record, or _RecordError with AWS's message."""
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError:
        raise _RecordError(MALFORMED_JSON) from None
    if not text.strip():
        raise _RecordError(EMPTY_RECORD)
    decoder = json.JSONDecoder()
    documents = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        try:
            document, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            # JSONDecodeError; RecursionError: nested deeper than Python reads; ValueError: an integer
            # of more digits than Python converts (4,300), which escaped the flush, retried for ever.
            raise _RecordError(MALFORMED_JSON) from None
        if isinstance(document, list):
            raise _RecordError(SCHEMA_MISMATCH)  # an array of documents is not valid input
        if not isinstance(document, dict):
            raise _RecordError(PRIMITIVE_RECORD)
        documents.append(document)


def _rows(record: bytes, schema: pa.Schema, deserializer: _Deserializer) -> list[dict]:
    rows = []
    for document in _documents(record):
        fields = deserializer.normalized(document)
        try:
            rows.append({
                field.name: deserializer.coerce(deserializer.lookup(fields, field.name, top_level=True), field.type)
                for field in schema
            })
        except _Mismatch as mismatch:
            raise _RecordError(f"{SCHEMA_MISMATCH} {mismatch}") from None
    return rows


# ------------------------------------------------------------------------- inference


def infer_columns(records: list[bytes], config: dict) -> list[dict]:
    """Glue-style columns covering every JSON object in the records that parse."""
    deserializer = _Deserializer(config)
    merged: dict[str, Any] = {}
    for record in records:
        try:
            documents = _documents(record)
            shapes = [(key, _shape(value)) for document in documents
                      for key, value in _normalized_deep(document, deserializer).items()]
        except (_RecordError, RecursionError):  # (nested too deep to walk: convert refuses it too)
            continue
        for key, shape in shapes:
            merged[key] = _merge(merged.get(key), shape)
    for column, json_key in deserializer.mappings.items():
        # A mapped column takes its values from another JSON key.
        source = deserializer.key(json_key)
        if source in merged:
            merged[column] = merged.pop(source)
    return [{"Name": name, "Type": _hive_text(shape)} for name, shape in merged.items()]


def _normalized_deep(document: dict, deserializer: _Deserializer) -> dict:
    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {deserializer.key(k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(document)


def _shape(value: Any) -> Any:
    """A type tree: "null" | "boolean" | "bigint" | "double" | "string" | ("array", t) | ("struct", {})."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        item: Any = "null"
        for element in value:
            item = _merge(item, _shape(element))
        return ("array", item)
    fields: dict[str, Any] = {}
    for key, element in value.items():
        fields[key] = _merge(fields.get(key), _shape(element))
    return ("struct", fields)


def _merge(a: Any, b: Any) -> Any:
    if a is None or a == "null":
        return b
    if b == "null" or a == b:
        return a
    if isinstance(a, str) and isinstance(b, str) and {a, b} == {"bigint", "double"}:
        return "double"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "array":
        return ("array", _merge(a[1], b[1]))
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "struct":
        fields = dict(a[1])
        for key, shape in b[1].items():
            fields[key] = _merge(fields.get(key), shape)
        return ("struct", fields)
    return "string"  # OpenX writes any JSON value into a string column


def _hive_text(shape: Any) -> str:
    if shape == "null":
        return "string"
    if isinstance(shape, str):
        return shape
    if shape[0] == "array":
        return f"array<{_hive_text(shape[1])}>"
    if not shape[1]:
        return "string"  # an always-empty object: keep it as JSON text
    fields = ",".join(
        f"{name if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name) else f'`{name}`'}:{_hive_text(t)}"
        for name, t in shape[1].items()
    )
    return f"struct<{fields}>"


# ------------------------------------------------------------------------- conversion


# Records are turned into rows CHUNK_BYTES of them at a time, and their rows into Arrow batches,
# written out once ROW_GROUP_BYTES of batches are gathered: until it is a batch a row is Python
# objects (a dict per JSON object, an object per value), about 37 bytes of memory for each byte of
# `{}{}{}...`, so a 128 MiB buffer (SizeInMBs' maximum) converted at once held some 5 GB.
CHUNK_BYTES = 1 << 20
ROW_GROUP_BYTES = 32 << 20


def convert(
    records: list[bytes], config: dict, *, columns: list[dict] | None = None
) -> tuple[bytes | None, list[tuple[bytes, str]]]:
    """Convert a batch of JSON records; see the module docstring."""
    columns = columns or (config.get("SchemaConfiguration") or {}).get("Columns") or infer_columns(records, config)
    schema = arrow_schema(columns)
    deserializer = _Deserializer(config)
    out = _Output(schema, config)
    rows: list[dict] = []
    taken = 0
    errors: list[tuple[bytes, str]] = []
    for record in records:
        try:
            rows += _rows(record, schema, deserializer)
        except _RecordError as error:
            errors.append((record, str(error)))
        except RecursionError:  # a value nested too deep to convert: not a reason to stop delivery
            errors.append((record, MALFORMED_JSON))
        taken += len(record)
        if taken >= CHUNK_BYTES:
            out.add(rows)
            rows, taken = [], 0
    out.add(rows)
    return out.close(), errors


class _Output:
    """The converted file, written as rows come (see CHUNK_BYTES): batches gathered up to
    ROW_GROUP_BYTES go to the writer as one table, which splits it into row groups or stripes."""

    def __init__(self, schema: pa.Schema, config: dict):
        self.schema, self.config = schema, config
        self.sink = io.BytesIO()
        self.writer: Any = None
        self.batches: list[pa.RecordBatch] = []
        self.gathered = 0
        self.rows = 0

    def add(self, rows: list[dict]) -> None:
        if not rows:
            return
        batch = pa.RecordBatch.from_pylist(rows, schema=self.schema)
        self.batches.append(batch)
        self.gathered += batch.nbytes
        self.rows += len(rows)
        if self.gathered >= ROW_GROUP_BYTES:
            self._write()

    def _write(self) -> None:
        table = pa.Table.from_batches(self.batches, schema=self.schema)
        self.batches, self.gathered = [], 0
        if self.writer is None:
            self.writer = _writer(self.sink, self.schema, self.config)
        if isinstance(self.writer, orc.ORCWriter):
            self.writer.write(table)
        else:
            self.writer.write_table(table)

    def close(self) -> bytes | None:
        """The file's bytes; None when no record made a row."""
        if not self.rows:
            return None
        if self.batches or self.writer is None:
            self._write()
        self.writer.close()
        return self.sink.getvalue()


def _writer(sink: io.BytesIO, schema: pa.Schema, config: dict) -> Any:
    serializer = (config.get("OutputFormatConfiguration") or {}).get("Serializer") or {}
    if "OrcSerDe" in serializer:
        options = serializer["OrcSerDe"] or {}
        names = schema.names
        bloom = [names.index(c) for c in options.get("BloomFilterColumns") or [] if c in names]
        return orc.ORCWriter(
            sink,
            file_version="0.11" if options.get("FormatVersion") == "V0_11" else "0.12",
            stripe_size=options.get("StripeSizeBytes", 64 * 1024 * 1024),
            compression={"NONE": "uncompressed", "ZLIB": "zlib"}.get(options.get("Compression"), "snappy"),
            row_index_stride=options.get("RowIndexStride", 10_000),
            padding_tolerance=options.get("PaddingTolerance", 0.05),
            # Hive's orc.dictionary.key.threshold default.
            dictionary_key_size_threshold=options.get("DictionaryKeyThreshold", 0.8),
            bloom_filter_columns=bloom or None,
            bloom_filter_fpp=options.get("BloomFilterFalsePositiveProbability", 0.05),
        )
    options = serializer.get("ParquetSerDe") or {}
    return pq.ParquetWriter(
        sink,
        schema,
        compression={"UNCOMPRESSED": "NONE", "GZIP": "GZIP"}.get(options.get("Compression"), "SNAPPY"),
        use_dictionary=options.get("EnableDictionaryCompression", True) is not False,
        data_page_size=options.get("PageSizeBytes", 1024 * 1024),
        data_page_version="2.0" if options.get("WriterVersion") == "V2" else "1.0",
        coerce_timestamps="us",
        allow_truncated_timestamps=True,
    )
