"""What a channel writes to S3: object keys from the OutputKeyTemplate, record validation and
framing by RecordFormatType, compression. Pure functions, no I/O.

AWS facts used (Kinesis Data Streams developer guide, "S3 output key template for Amazon S3
delivery" and "How Amazon S3 delivery works"):
- default template ``kinesis-channel/!{channel-name}/!{channel-id}/!{yyyy}/!{MM}/!{dd}/!{HH}/
  !{channel-name}-!{channel-id}-!{yyyy}-!{MM}-!{dd}-!{HH}-!{mm}!{extension}``;
- variables channel-name, channel-id, stream-name, yyyy, yy, MM, dd, HH, mm, extension;
- "a unique suffix" is appended to every key;
- STRING records must be valid UTF-8 and JSON records valid JSON, else they go to the
  dead-letter queue.
What the guide leaves out, chosen as a Firehose user would expect: the unique suffix is
``-<shardId>-<sequence number of the object's first record>`` (deterministic, so that an object
written again after a crash replaces itself); JSON and STRING records are written one per line;
BYTE_ARRAY records back to back as they were put; extensions ``.json`` / ``.txt`` / ``.bin``, then
``.gz`` / ``.zst``; the template's time is the first record's arrival time (UTC).
"""
from __future__ import annotations

import base64
import gzip
import re
import time
from typing import Iterable

import cramjam
import orjson

DEFAULT_TEMPLATE = ("kinesis-channel/!{channel-name}/!{channel-id}/!{yyyy}/!{MM}/!{dd}/!{HH}/"
                    "!{channel-name}-!{channel-id}-!{yyyy}-!{MM}-!{dd}-!{HH}-!{mm}!{extension}")
VARIABLES = ("channel-name", "channel-id", "stream-name", "yyyy", "yy", "MM", "dd", "HH", "mm", "extension")
_VARIABLE = re.compile(r"!\{([^{}]*)\}")
FORMAT_EXTENSIONS = {"JSON": ".json", "STRING": ".txt", "BYTE_ARRAY": ".bin"}
COMPRESSION_EXTENSIONS = {"NONE": "", "GZIP": ".gz", "ZSTD": ".zst"}
DEFAULT_ERROR_PREFIX = "kinesis-channel-errors/"


def template_problem(template: str) -> str | None:
    """Why a template cannot be used, or None. The rules are the ones AWS documents for the
    same templates of MSK channels (no `..`, no leading or trailing `/`, balanced `!{}`, known
    variables only)."""
    if template.startswith("/") or template.endswith("/"):
        return "OutputKeyTemplate must not start or end with '/'."
    if ".." in template or "./" in template:
        return "OutputKeyTemplate must not contain '..' or './'."
    for name in _VARIABLE.findall(template):
        if name not in VARIABLES:
            return (f"OutputKeyTemplate has an unknown variable !{{{name}}}. Valid variables: "
                    + ", ".join(f"!{{{v}}}" for v in VARIABLES) + ".")
    if "{" in _VARIABLE.sub("", template) or "}" in _VARIABLE.sub("", template):
        return "OutputKeyTemplate has an unbalanced '!{' or '}'."
    return None


def extension(record_format: str, compression: str) -> str:
    return FORMAT_EXTENSIONS.get(record_format, "") + COMPRESSION_EXTENSIONS[compression]


def render_key(template: str | None, *, channel: str, channel_id: str, stream: str, arrival: float,
               ext: str, shard_id: str, first_sequence: str) -> str:
    """The key of the object whose first record is `first_sequence` of `shard_id`."""
    t = time.gmtime(arrival)
    values = {"channel-name": channel, "channel-id": channel_id, "stream-name": stream,
              "yyyy": f"{t.tm_year:04d}", "yy": f"{t.tm_year % 100:02d}", "MM": f"{t.tm_mon:02d}",
              "dd": f"{t.tm_mday:02d}", "HH": f"{t.tm_hour:02d}", "mm": f"{t.tm_min:02d}", "extension": ext}
    template = template or DEFAULT_TEMPLATE
    suffix = f"-{shard_id}-{first_sequence}"
    if template.endswith("!{extension}"):
        # The suffix goes before a final extension: the key still says what the object holds.
        return _VARIABLE.sub(lambda m: values[m.group(1)], template[: -len("!{extension}")]) + suffix + ext
    return _VARIABLE.sub(lambda m: values[m.group(1)], template) + suffix


def error_key(prefix: str | None, *, channel: str, arrival: float, shard_id: str, first_sequence: str) -> str:
    t = time.gmtime(arrival)
    return (f"{prefix or DEFAULT_ERROR_PREFIX}{channel}/{t.tm_year:04d}/{t.tm_mon:02d}/{t.tm_mday:02d}/"
            f"{t.tm_hour:02d}/{channel}-{shard_id}-{first_sequence}.json")


def error_records(failed: list[tuple[tuple[int, str, str, bytes, float], str]], shard_id: str) -> bytes:
    """Dead-letter lines: one JSON object per failed record, "with error context" (AWS's words;
    the fields are kinesim's choice, named as Firehose names those of its error output)."""
    out = []
    for (_, seq, pk, data, arrival), problem in failed:
        out.append(orjson.dumps({"errorCode": "RecordValidationFailed", "errorMessage": problem,
                                 "rawData": base64.b64encode(data).decode(), "shardId": shard_id,
                                 "sequenceNumber": seq, "partitionKey": pk,
                                 "approximateArrivalTimestamp": int(arrival * 1000)}) + b"\n")
    return b"".join(out)


def record_problem(record_format: str, data: bytes) -> str | None:
    """Why a record fails its format's validation (it then goes to the dead-letter queue)."""
    if record_format == "STRING":
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return "The record is not a valid UTF-8 string."
    elif record_format == "JSON":
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError:
            return "The record is not a valid JSON payload."
    return None


def frame(record_format: str, records: Iterable[bytes]) -> bytes:
    """The records of one object, uncompressed."""
    if record_format == "BYTE_ARRAY":
        return b"".join(records)
    lines = []
    for data in records:
        text = data.rstrip(b"\r\n")
        if record_format == "JSON" and b"\n" in text:
            text = orjson.dumps(orjson.loads(data))  # a pretty-printed record would span lines
        lines.append(text + b"\n")
    return b"".join(lines)


def compress(data: bytes, compression: str) -> bytes:
    if compression == "GZIP":
        return gzip.compress(data, mtime=0)  # mtime 0: the same records give the same bytes
    if compression == "ZSTD":
        return bytes(cramjam.zstd.compress(data))
    return data


def decompress(data: bytes, compression: str) -> bytes:
    if compression == "GZIP":
        return gzip.decompress(data)
    if compression == "ZSTD":
        return bytes(cramjam.zstd.decompress(data))
    return data
