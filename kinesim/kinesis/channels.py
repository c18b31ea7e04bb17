"""Channels: CreateChannel, DescribeChannel, ListChannels, UpdateChannel, DeleteChannel.

A channel delivers an on-demand stream's records into a general purpose S3 bucket (the delivery
itself: `channel_delivery.py`; state and lifecycle: `channel_state.py`). The model checks shapes,
lengths, patterns and enums; what is checked here is what only the service knows.

Facts used beyond the model (Kinesis Data Streams developer guide, "Data delivery concepts" and
"How Amazon S3 delivery works"; the agent toolkit's "general purpose delivery to S3"):
DataFreshnessInSeconds is 300–900, default 300; one stream per channel; one S3 channel per
stream; the stream must be ON_DEMAND (CreateChannel's own documentation); STRING and BYTE_ARRAY
only for S3 destinations, GSR_JSON only for streaming tables.

S3 Tables (Apache Iceberg) destinations are refused with InvalidArgumentException: such a
channel writes into a table bucket of the S3 Tables service with a schema from the AWS Glue
Schema Registry (GSRSchemaARN, "Required when the channel destination is a streaming table"),
and kinesim emulates neither, so no TableBucketARN or schema could ever be valid here.
"""
from __future__ import annotations

import base64
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..protocol.errors import in_use, invalid_argument, limit_exceeded, not_found
from . import channel_objects
from .channel_state import Channel, Channels

if TYPE_CHECKING:
    from .service import KinesisService

MIN_FRESHNESS, MAX_FRESHNESS, DEFAULT_FRESHNESS = 300, 900, 300
MAX_PAGE = 100
S3_TABLES_REFUSAL = ("kinesim does not emulate Amazon S3 Tables destinations: they need a table bucket of the "
                     "S3 Tables service and an AWS Glue Schema Registry schema, which kinesim does not serve. "
                     "Use S3DestinationConfiguration (a general purpose bucket of kinesim's S3).")


def registry(svc: KinesisService) -> Channels:
    channels = getattr(svc, "channels", None)
    if channels is None:  # a KinesisService made without the edge (unit tests): no object store
        raise invalid_argument("Channels need kinesim's object store; this server was started without one.")
    return channels


def on_stream(svc: KinesisService, stream: Any) -> list[Channel]:
    """The channels reading `stream` (DescribeStreamSummary's ChannelCount; DeleteChannel's doc:
    "A stream cannot be deleted while it has active channels")."""
    if svc.channels is None:
        return []
    return [c for c in svc.channels.all() if c.stream_arn == stream.arn and c.stream_created == stream.created]


def refuse_if_any(svc: KinesisService, stream: Any) -> None:
    """DeleteStream's check: ResourceInUseException while the stream has channels."""
    if on_stream(svc, stream):
        raise in_use(f"Stream {stream.name} under account {svc.account} has channels. Delete the channels first.")


def channel_arn(svc: KinesisService, name: str) -> str:
    return f"arn:aws:kinesis:{svc.settings.region}:{svc.account}:channel/{name}"


def _channel(svc: KinesisService, arn: str) -> Channel:
    prefix = channel_arn(svc, "")
    name = arn[len(prefix):] if arn.startswith(prefix) else None
    channel = registry(svc).find(name) if name else None
    if channel is None or channel.arn != arn:
        raise not_found(f"Channel {arn} under account {svc.account} not found.")
    return channel


def _freshness(value: int | None) -> int:
    if value is None:
        return DEFAULT_FRESHNESS
    if not MIN_FRESHNESS <= value <= MAX_FRESHNESS:
        raise invalid_argument(f"DataFreshnessInSeconds must be between {MIN_FRESHNESS} and {MAX_FRESHNESS} "
                               f"seconds; {value} was given.")
    return value


def _logging(config: dict[str, Any] | None, name: str, channel_id: str) -> dict[str, Any]:
    cw = dict((config or {}).get("CloudWatchLogs") or {"Enabled": False})
    if cw.get("Enabled"):
        # The model's defaults: /aws/kinesis/{channelName}/{channelId} and DestinationDelivery.
        cw.setdefault("LogGroupName", f"/aws/kinesis/{name}/{channel_id}")
        cw.setdefault("LogStreamName", "DestinationDelivery")
    return {"CloudWatchLogs": cw}


def create_channel(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    channels = registry(svc)
    s3, tables = p.get("S3DestinationConfiguration"), p.get("S3TablesDestinationConfiguration")
    if (s3 is None) == (tables is None):
        raise invalid_argument("Exactly one of S3DestinationConfiguration or S3TablesDestinationConfiguration "
                               "must be specified.")
    if tables is not None:
        raise invalid_argument(S3_TABLES_REFUSAL)
    sources = p["StreamConfigurationList"]
    if len(sources) != 1:
        raise invalid_argument("StreamConfigurationList must have exactly one stream: a channel reads one stream.")
    source = sources[0]
    record_config = source["RecordConfiguration"]
    if record_config["RecordFormatType"] == "GSR_JSON":
        raise invalid_argument("RecordFormatType GSR_JSON is supported only for streaming table destinations.")
    storage = dict(s3["StorageConfiguration"])
    template = storage.get("OutputKeyTemplate")
    if template is not None and (problem := channel_objects.template_problem(template)):
        raise invalid_argument(problem)
    storage.setdefault("StorageClass", "STANDARD")
    dlq = dict(s3.get("DeadLetterQueueS3Configuration") or {
        # "If not specified, it defaults to the destination bucket with an error prefix."
        "BucketARN": storage["BucketARN"], "ExpectedBucketOwner": storage["ExpectedBucketOwner"]})
    dlq.setdefault("ErrorOutputPrefix", channel_objects.DEFAULT_ERROR_PREFIX)
    description = {"DataFreshnessInSeconds": _freshness(s3.get("DataFreshnessInSeconds")),
                   "DeadLetterQueueS3Configuration": dlq, "StorageConfiguration": storage}
    stream = svc.stream({"StreamARN": source["StreamARN"]})
    if stream.mode != "ON_DEMAND":
        raise invalid_argument("This operation is only supported for data streams with the on-demand capacity mode.")
    svc.check_active(stream)
    name = p["ChannelName"]
    with channels.lock:
        if channels.find(name) is not None:
            raise in_use(f"Channel {name} under account {svc.account} already exists.")
        if any(c.stream_arn == stream.arn for c in channels.all()):
            raise limit_exceeded(f"Stream {stream.name} under account {svc.account} already has an S3 channel; "
                                 "a stream can have one.")
        channel_id = str(uuid.uuid4())
        channel = Channel(name=name, id=channel_id, arn=channel_arn(svc, name), created=_now(),
                          role=p["ServiceExecutionRoleARN"],
                          stream_arn=stream.arn, stream_created=stream.created, record_config=record_config,
                          s3=description, logging=_logging(p.get("LoggingConfiguration"), name, channel_id),
                          encryption=p.get("EncryptionConfiguration"), tags=p.get("Tags") or {})
        channels.add(channel)
        # "Immediately after creation, the state is CREATING" (model), even when provisioning is instant.
        return {"ChannelDescription": channel.describe()}


def _now() -> float:
    return round(time.time(), 3)


def describe_channel(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return {"ChannelDescription": _channel(svc, p["ChannelARN"]).describe()}


def list_channels(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    found = registry(svc).all()
    filters = p.get("StreamFilter")
    if filters:
        wanted = {f["StreamARN"] for f in filters}
        found = [c for c in found if c.stream_arn in wanted]
        times = {f["StreamARN"]: f["StreamCreationTimestamp"] for f in filters if "StreamCreationTimestamp" in f}
        found = [c for c in found if c.stream_arn not in times or _same_time(times[c.stream_arn], c.stream_created)]
    token = p.get("NextToken")
    if token is not None:
        after = _decode_token(token)
        found = [c for c in found if c.name > after]
    limit = min(p.get("MaxResults", MAX_PAGE), MAX_PAGE)  # "greater than 100, at most 100" (model)
    page = found[:limit]
    out: dict[str, Any] = {"ChannelSummaries": [c.summary() for c in page]}
    if len(found) > limit:
        out["NextToken"] = base64.urlsafe_b64encode(("channels|" + page[-1].name).encode()).decode()
    return out


def _same_time(given: Any, created: float) -> bool:
    seconds = given.timestamp() if hasattr(given, "timestamp") else float(given)
    return abs(seconds - created) < 1.0


def _decode_token(token: str) -> str:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except Exception:
        text = ""
    if not text.startswith("channels|"):
        raise invalid_argument(f"Invalid NextToken: {token}")
    return text[len("channels|"):]


def update_channel(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    channels = registry(svc)
    if p.get("S3TablesDestinationConfiguration") is not None:
        raise invalid_argument("S3TablesDestinationConfiguration cannot be updated on a channel that delivers to a "
                               "general purpose Amazon S3 bucket.")
    s3, logging = p.get("S3DestinationConfiguration"), p.get("LoggingConfiguration")
    if s3 is None and logging is None:
        raise invalid_argument("Specify S3DestinationConfiguration or LoggingConfiguration to update.")
    freshness = _freshness(s3["DataFreshnessInSeconds"]) if s3 is not None else None
    with channels.lock:
        channel = _channel(svc, p["ChannelARN"])
        if channel.status != "ACTIVE":
            raise in_use(f"Channel {channel.name} under account {svc.account} not ACTIVE, instead in state "
                         f"{channel.status}")
        if freshness is not None:
            channel.s3 = {**channel.s3, "DataFreshnessInSeconds": freshness}
        if logging is not None:
            channel.logging = _logging(logging, channel.name, channel.id)
        channels.begin_update(channel)
        return {"ChannelDescription": channel.describe()}


def delete_channel(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    channels = registry(svc)
    with channels.lock:
        channel = _channel(svc, p["ChannelARN"])
        if channel.status != "DELETING":
            channels.begin_delete(channel)
    return {}
