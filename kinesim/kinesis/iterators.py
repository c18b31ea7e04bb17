"""Shard iterators: opaque, tamper-evident positions in a shard that expire after 5 minutes.

Shaped like AWS's: base64 of the 8 bytes `00 00 00 00 00 00 00 01` then 16-byte blocks, at
least 152 bytes in all (what kinesalite's tests, run against AWS, check). The blocks are
AES-SIV (RFC 5297) of `created_ms/stream/shardId/next_record_index/shard_uid/000…`, padded to
whole blocks: the synthetic IV doubles as the authentication tag, so a forged or edited
iterator is refused and nothing in it is readable. The key derives from one kept in the store,
so iterators outlive a restart.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from ..protocol.errors import AwsError, expired_iterator, invalid_argument, not_found
from . import dryrun, sequence
from .model import Shard, Stream

if TYPE_CHECKING:
    from .service import KinesisService

_HEADER = b"\x00\x00\x00\x00\x00\x00\x00\x01"
_BLOCK = 16
_MIN_BODY = 152 - len(_HEADER) - _BLOCK   # AWS's iterators are never shorter than 152 bytes


@dataclass(frozen=True)
class Position:
    created_ms: int
    stream: str
    shard_id: str
    index: int
    shard_uid: int


@lru_cache(maxsize=4)
def _cipher(key: bytes) -> AESSIV:
    # AES-256-SIV takes a 64-byte key; the stored key is 32 bytes.
    return AESSIV(hashlib.sha512(b"kinesim shard iterator\0" + key).digest())


def encode(svc: KinesisService, stream: Stream, shard: Shard, index: int) -> str:
    body = f"{int(time.time() * 1000):014d}/{stream.name}/{shard.shard_id}/{index}/{shard.uid}/".encode()
    size = max(_MIN_BODY, -(-len(body) // _BLOCK) * _BLOCK)
    sealed = _cipher(svc.iterator_key).encrypt(body.ljust(size, b"0"), [_HEADER])
    return base64.b64encode(_HEADER + sealed).decode()


def decode(svc: KinesisService, token: str) -> Position:
    invalid = invalid_argument("Invalid ShardIterator.")
    if len(token) > 1 and token[0] == token[-1] == '"':
        token = token[1:-1]   # AWS accepts a quoted iterator (LocalStack's AWS-validated test)
    try:
        raw = base64.b64decode(token, validate=True)
        if not raw.startswith(_HEADER) or len(raw) < len(_HEADER) + 2 * _BLOCK:
            raise invalid
        body = _cipher(svc.iterator_key).decrypt(raw[len(_HEADER):], [_HEADER])
        created, stream, shard_id, index, uid = body.decode().split("/")[:5]
        pos = Position(int(created), stream, shard_id, int(index), int(uid))
    except (binascii.Error, ValueError, InvalidTag):
        raise invalid from None
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


def shard_index(svc: KinesisService, stream_name: str, given: str) -> int:
    """The index a client's ShardId names. AWS checks its text before it looks the stream up."""
    index = sequence.shard_index(given)
    if index is None:
        raise not_found(f"Could not find shard {given} in stream {stream_name} under account {svc.account}.")
    return index


def find_shard(svc: KinesisService, stream: Stream, shard_id: str) -> Shard:
    """A readable shard by the id a client gave (AWS accepts '1', 'shardId-1', 'shardId-000000000001')."""
    name = sequence.shard_id(shard_index(svc, stream.name, shard_id))
    shard = stream.shard(name)
    if shard is None or shard not in svc.visible_shards(stream):
        raise not_found(f"Shard {name} in stream {stream.name} under account {svc.account} does not exist")
    return shard


def refuse_future(timestamp: float) -> None:
    """AWS's answer to an AT_TIMESTAMP iterator for a time to come (kinesalite, getShardIterator.js)."""
    ts_ms, now_ms = int(timestamp * 1000), int(time.time() * 1000)
    if ts_ms > now_ms:
        raise invalid_argument("The timestampInMillis parameter cannot be greater than the currentTimestampInMillis. "
                               f"timestampInMillis: {ts_ms}, currentTimestampInMillis: {now_ms}")


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
    # AWS's three checks, in its order (kinesalite's getShardIterator.js, recorded against AWS).
    parsed = sequence.parse(seq)
    if parsed is None:
        raise invalid_argument(f"StartingSequenceNumber {seq} {where} is invalid.")
    if parsed.shard_index != shard.index:
        raise invalid_argument(f"Invalid StartingSequenceNumber. It encodes {sequence.shard_id(parsed.shard_index)}, "
                               f"while it was used in a call to a shard with {shard.shard_id}")
    if parsed.version == 0:
        raise AwsError("InternalFailure", None, 500)   # AWS fails on small ("version 0") numbers
    if parsed.version != 2 or parsed.shard_created != shard.created:
        raise invalid_argument(f"StartingSequenceNumber {seq} {where} is invalid because it did not come from "
                               "this stream.")
    index = min(parsed.record_index, shard.next_index)
    return index if kind == "AT_SEQUENCE_NUMBER" else min(index + 1, shard.next_index)


def get_shard_iterator(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    name = svc.stream_name(p)
    index = shard_index(svc, name, p["ShardId"])
    stream = svc.find(name)
    if stream is None:   # AWS names the shard, not the stream
        raise not_found(f"Shard {sequence.shard_id(index)} in stream {name} under account {svc.account} does not exist")
    shard = find_shard(svc, stream, p["ShardId"])
    if p["ShardIteratorType"] == "AT_TIMESTAMP" and p.get("Timestamp") is not None:
        refuse_future(p["Timestamp"])
    index = start_index(svc, stream, shard, p["ShardIteratorType"], p.get("StartingSequenceNumber"),
                        p.get("Timestamp"))
    dryrun.stop(p)
    return {"ShardIterator": encode(svc, stream, shard, index)}
