"""Kinesis channels as Spark tables: which objects of a bucket a channel delivered.

A channel's objects are the keys its OutputKeyTemplate (or AWS's default template) gives, each
with kinesim's unique suffix ``-shardId-NNNNNNNNNNNN-<sequence number>`` (before a final
``!{extension}``, else at the end): see `kinesim.kinesis.channel_objects`. The view is named after
the channel (``clicks-to-s3`` -> ``clicks_to_s3``):

- JSON channels: the records, one JSON object per line (schema inferred by Spark);
- STRING channels: one row per record, a column ``value`` (Spark's text source);
- BYTE_ARRAY channels are not registered: their objects are records back to back with no
  boundary a reader could find.

GZIP objects are read by Spark itself (``.gz``); ZSTD ones are decompressed into the cache first.
Dead-letter objects are never part of the view (they do not match the template).
"""
from __future__ import annotations

import os
import re
from typing import Any

from kinesim.kinesis import channel_objects
from kinesim.protocol.json_client import CallError, call

_VARIABLE = re.compile(r"!\{([^{}]*)\}")
_VALUES = {"yyyy": r"\d{4}", "yy": r"\d{2}", "MM": r"\d{2}", "dd": r"\d{2}", "HH": r"\d{2}", "mm": r"\d{2}"}
_SUFFIX = r"-shardId-\d{12}-\d+"


def describe_channels(endpoint_url: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """ChannelDescription of every channel delivering to S3, through the Kinesis API."""
    def kinesis(operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return call(endpoint_url, f"Kinesis_20131202.{operation}", params, "kinesis", region)

    arns: list[str] = []
    params: dict[str, Any] = {}
    while True:
        try:
            page = kinesis("ListChannels", params)
        except CallError as err:  # a server without channels
            if err.code == "UnknownOperationException":
                return []
            raise
        arns += [s["ChannelARN"] for s in page["ChannelSummaries"] if s["ChannelDestinationType"] == "S3"]
        if not page.get("NextToken"):
            break
        params = {"NextToken": page["NextToken"]}
    out = []
    for arn in arns:
        try:
            out.append(kinesis("DescribeChannel", {"ChannelARN": arn})["ChannelDescription"])
        except CallError as err:
            if err.code != "ResourceNotFoundException":  # deleted meanwhile
                raise
    return out


def key_pattern(template: str | None, name: str, channel_id: str, stream: str, extension: str) -> re.Pattern:
    """A regex for the keys a channel's template gives."""
    template = template or channel_objects.DEFAULT_TEMPLATE
    values = {**_VALUES, "channel-name": re.escape(name), "channel-id": re.escape(channel_id),
              "stream-name": re.escape(stream), "extension": re.escape(extension)}
    final_extension = template.endswith("!{extension}")
    body = template[: -len("!{extension}")] if final_extension else template
    out, pos = [], 0
    for match in _VARIABLE.finditer(body):
        out += [re.escape(body[pos:match.start()]), values.get(match.group(1), "[^/]*")]
        pos = match.end()
    out += [re.escape(body[pos:]), _SUFFIX, re.escape(extension) if final_extension else ""]
    return re.compile("^" + "".join(out) + "$")


def static_dir(template: str | None) -> str:
    """The directory every key of the template is under (the text before its first variable)."""
    static = (template or channel_objects.DEFAULT_TEMPLATE).split("!{", 1)[0]
    return static[: static.rfind("/") + 1]


def channel_source(description: dict[str, Any], s3_root: str, source_type: Any, table_name: Any) -> Any:
    """The `source_type` (table_sources.Source) of a channel, or why it has none (a string)."""
    name = description["ChannelName"]
    if description["ChannelStatus"] not in ("ACTIVE", "UPDATING"):
        return f"{name}: channel is {description['ChannelStatus']}"
    record_format = description["StreamConfigurationList"][0]["RecordConfiguration"]["RecordFormatType"]
    if record_format == "BYTE_ARRAY":
        return f"{name}: a BYTE_ARRAY channel's objects have no record boundaries; not registered"
    storage = description["S3DestinationConfiguration"]["StorageConfiguration"]
    bucket = storage["BucketARN"].split(":::", 1)[-1]
    bucket_dir = os.path.join(s3_root, bucket)
    if not os.path.isdir(bucket_dir):
        return f"{name}: bucket {bucket} is not in kinesim's object store"
    template = storage.get("OutputKeyTemplate")
    stream = description["StreamConfigurationList"][0]["StreamARN"].rsplit("/", 1)[-1]
    extension = channel_objects.extension(record_format, storage["CompressionType"])
    static = static_dir(template)
    return source_type(name=table_name(name), location=f"s3://{bucket}/{static}", bucket_dir=bucket_dir,
                       walk_from=os.path.join(bucket_dir, static), prefix=static,
                       pattern=key_pattern(template, name, description["ChannelId"], stream, extension),
                       format="json" if record_format == "JSON" else "text", stream=name)
