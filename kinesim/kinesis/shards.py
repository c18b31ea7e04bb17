"""ListShards: a stream's shards (open, and closed ones still within retention), filtered and paged.

Pages are in shard id order. A NextToken is opaque and tamper-evident (HMAC under the service's
iterator key): it names the stream and its creation time (a stream deleted and re-created under
the same name does not continue an old listing), the last shard listed, the ShardFilter of the
first call, and when it was issued (AWS's tokens expire after 300 seconds).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..protocol.errors import AwsError, invalid_argument, not_found
from .model import Shard, Stream

if TYPE_CHECKING:
    from .service import KinesisService

DEFAULT_MAX_RESULTS = 1000
TOKEN_TTL_S = 300.0
_MAC_BYTES = 16


def epoch(value: Any) -> float:
    """A timestamp member as epoch seconds (the validator may hand us a number or a datetime)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return float(value)


# NextToken


def encode_token(svc: KinesisService, stream: Stream, last_index: int, shard_filter: dict[str, Any] | None,
                 issued: float | None = None) -> str:
    body = json.dumps({"s": stream.name, "c": stream.created, "l": last_index, "f": shard_filter,
                       "t": time.time() if issued is None else issued}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(body + _mac(svc, body)).decode()


def decode_token(svc: KinesisService, token: str) -> dict[str, Any]:
    invalid = invalid_argument("Invalid NextToken.")
    try:
        raw = base64.urlsafe_b64decode(token.encode())
    except (binascii.Error, ValueError):
        raise invalid from None
    body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    if len(raw) <= _MAC_BYTES or not hmac.compare_digest(mac, _mac(svc, body)):
        raise invalid
    state = json.loads(body)
    if time.time() - state["t"] > TOKEN_TTL_S:
        raise AwsError("ExpiredNextTokenException",
                       f"The NextToken has expired. Tokens expire {int(TOKEN_TTL_S)} seconds after they are issued.")
    return state


def _mac(svc: KinesisService, body: bytes) -> bytes:
    return hmac.new(svc.iterator_key, b"ListShards/" + body, hashlib.sha256).digest()[:_MAC_BYTES]


# filters


def check_filter(shard_filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ShardFilter as the token keeps it (Timestamp in epoch seconds), or AWS's complaint."""
    if shard_filter is None:
        return None
    kind = shard_filter["Type"]
    out: dict[str, Any] = {"Type": kind}
    if kind == "AFTER_SHARD_ID":
        if shard_filter.get("ShardId") is None:
            raise invalid_argument("ShardId must be supplied in a ShardFilter with a Type of AFTER_SHARD_ID")
        out["ShardId"] = shard_filter["ShardId"]
    elif kind in ("AT_TIMESTAMP", "FROM_TIMESTAMP"):
        if shard_filter.get("Timestamp") is None:
            raise invalid_argument(
                "Timestamp must be supplied in a ShardFilter with a Type of FROM_TIMESTAMP or AT_TIMESTAMP")
        out["Timestamp"] = epoch(shard_filter["Timestamp"])
    return out


def after(shards: list[Shard], shard_id: str) -> list[Shard]:
    """Shards whose id follows `shard_id` ('1', 'shardId-1' and 'shardId-000000000001' are one id)."""
    digits = shard_id.split("-")[-1]
    if digits.isdigit():
        index = int(digits)
        return [s for s in shards if s.index > index]
    return [s for s in shards if s.shard_id > shard_id]


def opened_at(stream: Stream, shard: Shard, by_id: dict[str, Shard]) -> float:
    """When a shard started taking records: its stream's creation, or when its parent closed."""
    if shard.parent is None:
        return stream.created
    parent = by_id.get(shard.parent)
    return parent.closed_at if parent is not None and parent.closed_at is not None else float(shard.created)


def open_at(stream: Stream, shards: list[Shard], at: float) -> list[Shard]:
    by_id = {s.shard_id: s for s in stream.shards}
    return [s for s in shards
            if opened_at(stream, s, by_id) <= at and (s.closed_at is None or s.closed_at >= at)]


def select(svc: KinesisService, stream: Stream, shard_filter: dict[str, Any] | None) -> list[Shard]:
    """The shards a filter keeps, in shard id order.

    FROM_TRIM_HORIZON (the default): every shard within retention. AT_LATEST: the open shards.
    AT_TRIM_HORIZON: those open at the trim horizon (or at the stream's creation, if later).
    AT_TIMESTAMP: those open at the time (moved up to the trim horizon if earlier).
    FROM_TIMESTAMP: the open ones and those closed at or after the time.
    AFTER_SHARD_ID: those whose id follows ShardId.
    """
    shards = svc.visible_shards(stream)
    kind = shard_filter["Type"] if shard_filter else "FROM_TRIM_HORIZON"
    if kind == "FROM_TRIM_HORIZON":
        return shards
    if kind == "AT_LATEST":
        return [s for s in shards if s.is_open]
    if kind == "AFTER_SHARD_ID":
        return after(shards, shard_filter["ShardId"])
    if kind == "FROM_TIMESTAMP":
        ts = shard_filter["Timestamp"]
        return [s for s in shards if s.closed_at is None or s.closed_at >= ts]
    horizon = max(svc.retention_horizon(stream), stream.created)
    if kind == "AT_TRIM_HORIZON":
        return open_at(stream, shards, horizon)
    return open_at(stream, shards, max(shard_filter["Timestamp"], horizon))  # AT_TIMESTAMP


def list_shards(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    token = p.get("NextToken")
    if token is not None:
        for member in ("StreamName", "ExclusiveStartShardId", "StreamCreationTimestamp", "ShardFilter"):
            if p.get(member) is not None:
                raise invalid_argument(f"NextToken and {member} cannot be provided together.")
        state = decode_token(svc, token)
        name = state["s"]
        if p.get("StreamARN") is not None and svc.name_from_arn(p["StreamARN"]) != name:
            raise invalid_argument("NextToken and StreamARN cannot be provided together.")
        stream = svc.find(name)
        if stream is None or stream.created != state["c"]:
            raise not_found(f"Stream {name} under account {svc.account} not found.")
        shard_filter, last = state["f"], state["l"]
        shards = [s for s in select(svc, stream, shard_filter) if s.index > last]
    else:
        if p.get("StreamName") is None and p.get("StreamARN") is None:
            raise invalid_argument("Either NextToken or StreamName should be provided.")
        stream = svc.stream(p)
        created = p.get("StreamCreationTimestamp")
        if created is not None and abs(epoch(created) - stream.created) >= 1:
            # Another (deleted) stream of that name.
            raise not_found(f"Stream {stream.name} under account {svc.account} not found.")
        shard_filter = check_filter(p.get("ShardFilter"))
        shards = select(svc, stream, shard_filter)
        if p.get("ExclusiveStartShardId") is not None:
            shards = after(shards, p["ExclusiveStartShardId"])
    limit = p.get("MaxResults", DEFAULT_MAX_RESULTS)
    page = shards[:limit]
    out: dict[str, Any] = {"Shards": [s.describe() for s in page]}
    if len(shards) > limit:
        out["NextToken"] = encode_token(svc, stream, page[-1].index, shard_filter)
    return out
