"""Shard iterators: opaque, tamper-evident positions in a shard that expire after 5 minutes.

Like AWS's, a token is base64 of 8 bytes `00 00 00 00 00 00 00 01` and an opaque body. Ours is
`created_ms/stream/shardId/next_record_index/shard_uid` plus an HMAC under a key kept in the
store, so iterators outlive a restart and a forged or edited one is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..protocol.errors import expired_iterator, invalid_argument, not_found
from . import sequence
from .model import Shard, Stream
from .service import KinesisService, operation

_HEADER = b"\x00\x00\x00\x00\x00\x00\x00\x01"
_MAC_BYTES = 16


@dataclass(frozen=True)
class Position:
    created_ms: int
    stream: str
    shard_id: str
    index: int
    shard_uid: int


def encode(svc: KinesisService, stream: Stream, shard: Shard, index: int) -> str:
    body = f"{int(time.time() * 1000):014d}/{stream.name}/{shard.shard_id}/{index}/{shard.uid}".encode()
    mac = hmac.new(svc.iterator_key, body, hashlib.sha256).digest()[:_MAC_BYTES]
    return base64.b64encode(_HEADER + body + mac).decode()


def decode(svc: KinesisService, token: str) -> Position:
    invalid = invalid_argument("Invalid ShardIterator.")
    try:
        raw = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError):
        raise invalid from None
    body, mac = raw[len(_HEADER):-_MAC_BYTES], raw[-_MAC_BYTES:]
    if not raw.startswith(_HEADER) or len(raw) <= len(_HEADER) + _MAC_BYTES or not hmac.compare_digest(
            mac, hmac.new(svc.iterator_key, body, hashlib.sha256).digest()[:_MAC_BYTES]):
        raise invalid
    created, stream, shard_id, index, uid = body.decode().split("/")
    pos = Position(int(created), stream, shard_id, int(index), int(uid))
    now_ms = int(time.time() * 1000)
    ttl_ms = int(svc.settings.iterator_ttl_s * 1000)
    if now_ms - pos.created_ms > ttl_ms:
        raise expired_iterator(
            f"Iterator expired. The iterator was created at time {_amz_time(pos.created_ms)} while right now it is "
            f"{_amz_time(now_ms)} which is further in the future than the tolerated delay of {ttl_ms} milliseconds.")
    return pos


def _amz_time(ms: int) -> str:
    # AWS's format: "Thu Jan 22 01:22:02 UTC 2015"
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


def resolve(svc: KinesisService, pos: Position) -> tuple[Stream, Shard]:
    """The stream and shard an iterator points into, or AWS's not-found error."""
    stream = svc.find(pos.stream)
    shard = stream.shard(pos.shard_id) if stream is not None else None
    if shard is None or shard.uid != pos.shard_uid:
        raise not_found(f"Shard {pos.shard_id} in stream {pos.stream} under account {svc.account} does not exist")
    return stream, shard


def find_shard(svc: KinesisService, stream: Stream, shard_id: str) -> Shard:
    """A shard by the id a client gave (AWS accepts '1', 'shardId-1', 'shardId-000000000001')."""
    digits = shard_id.split("-")[-1]
    index = int(digits) if digits.isdigit() and len(digits) <= 12 else -1
    if not 0 <= index <= 2147483647:
        raise not_found(f"Could not find shard {shard_id} in stream {stream.name} under account {svc.account}.")
    shard = stream.shard(sequence.shard_id(index))
    from .streams import visible_shards
    if shard is None or shard not in visible_shards(svc, stream):
        raise not_found(f"Shard {sequence.shard_id(index)} in stream {stream.name} under account {svc.account} "
                        "does not exist")
    return shard


def start_index(svc: KinesisService, stream: Stream, shard: Shard, kind: str,
                seq: str | None, timestamp: float | None) -> int:
    """The record index an iterator of `kind` starts at."""
    both = ("Must either specify (1) AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER and StartingSequenceNumber or "
            "(2) TRIM_HORIZON or LATEST and no StartingSequenceNumber. ")
    if kind in ("TRIM_HORIZON", "LATEST", "AT_TIMESTAMP") and seq is not None:
        raise invalid_argument(both + f"Request specified {kind} and also a StartingSequenceNumber.")
    if kind == "TRIM_HORIZON":
        return 1
    if kind == "LATEST":
        return shard.next_index
    if kind == "AT_TIMESTAMP":
        if timestamp is None:
            raise invalid_argument("Must specify timestampInMillis parameter for iterator of type AT_TIMESTAMP. "
                                   "Current request has no timestamp parameter.")
        found = svc.store.first_index_at(shard.uid, timestamp)
        return shard.next_index if found is None else found
    if seq is None:
        raise invalid_argument(both + f"Request specified {kind} and no StartingSequenceNumber.")
    where = f"used in GetShardIterator on shard {shard.shard_id} in stream {stream.name} under account {svc.account}"
    parsed = sequence.parse(seq)
    if parsed is None:
        raise invalid_argument(f"StartingSequenceNumber {seq} {where} is invalid.")
    if parsed.shard_index != shard.index:
        raise invalid_argument(f"Invalid StartingSequenceNumber. It encodes {sequence.shard_id(parsed.shard_index)}, "
                               f"while it was used in a call to a shard with {shard.shard_id}")
    if parsed.shard_created != shard.created:
        raise invalid_argument(f"StartingSequenceNumber {seq} {where} is invalid because it did not come from "
                               "this stream.")
    index = min(parsed.record_index, shard.next_index)
    return index if kind == "AT_SEQUENCE_NUMBER" else min(index + 1, shard.next_index)


@operation("GetShardIterator")
def get_shard_iterator(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    stream = svc.stream(p)
    shard = find_shard(svc, stream, p["ShardId"])
    index = start_index(svc, stream, shard, p["ShardIteratorType"], p.get("StartingSequenceNumber"),
                        p.get("Timestamp"))
    return {"ShardIterator": encode(svc, stream, shard, index)}
