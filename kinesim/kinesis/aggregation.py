"""The KPL aggregation format: many user records packed into one Kinesis record.

Format (awslabs/amazon-kinesis-producer, aggregation-format.md): the magic F3 89 9A C2, a proto2
`AggregatedRecord`, then the MD5 of that protobuf message:

    message AggregatedRecord { repeated string partition_key_table = 1;
                               repeated string explicit_hash_key_table = 2;
                               repeated Record records = 3; }
    message Record { required uint64 partition_key_index = 1; optional uint64 explicit_hash_key_index = 2;
                     required bytes data = 3; repeated Tag tags = 4; }
    message Tag { required string key = 1; optional string value = 2; }

`deaggregate` reads it as the KCL does (AggregatorUtil.deaggregate): a record that is not an
aggregate (too short, another magic, no room for the digest, a digest that does not match, a
protobuf that does not parse) is None, and its consumer keeps the record as it is. The protobuf
is read by hand: two small messages do not justify a protobuf runtime (aws-kinesis-agg needs one).
The KCL also drops user records whose hash key lies outside the shard's range (after a reshard);
Firehose's documentation says nothing of it, so every user record is kept.
"""
from __future__ import annotations

import hashlib
from typing import NamedTuple

MAGIC = b"\xf3\x89\x9a\xc2"
DIGEST_SIZE = 16

_VARINT, _FIXED64, _LEN, _START_GROUP, _END_GROUP, _FIXED32 = 0, 1, 2, 3, 4, 5


class UserRecord(NamedTuple):
    partition_key: str
    explicit_hash_key: str | None
    data: bytes


class _Invalid(Exception):
    """The bytes are not a well-formed message (protobuf-java: InvalidProtocolBufferException)."""


def is_aggregated(data: bytes) -> bool:
    """Cheap test for the magic number: most records are not aggregates and cost only this."""
    return data[:4] == MAGIC


def deaggregate(data: bytes) -> list[UserRecord] | None:
    """The user records of a KPL aggregate, subsequence numbers being their indexes; None when
    `data` is not a valid aggregate."""
    if not is_aggregated(data) or len(data) - len(MAGIC) <= DIGEST_SIZE:
        return None
    message, digest = data[len(MAGIC):-DIGEST_SIZE], data[-DIGEST_SIZE:]
    if hashlib.md5(message, usedforsecurity=False).digest() != digest:
        return None
    try:
        return _aggregated_record(message)
    except _Invalid:
        return None


def _aggregated_record(buf: bytes) -> list[UserRecord]:
    keys: list[str] = []
    hash_keys: list[str] = []
    entries: list[tuple[int, int | None, bytes]] = []
    for number, wire, value in _fields(buf):
        # A known field number with another wire type is an unknown field to protobuf: skipped.
        if wire != _LEN:
            continue
        if number == 1:
            keys.append(_text(value))
        elif number == 2:
            hash_keys.append(_text(value))
        elif number == 3:
            entries.append(_record(value))
    out = []
    for key_index, hash_index, data in entries:
        # The KCL logs an index past its table and loses the aggregate's remaining user records;
        # kinesim keeps the record whole instead (no data lost), as any aggregate it cannot read.
        if key_index >= len(keys) or (hash_index is not None and hash_index >= len(hash_keys)):
            raise _Invalid
        out.append(UserRecord(keys[key_index], hash_keys[hash_index] if hash_index is not None else None, data))
    return out


def _record(buf: bytes) -> tuple[int, int | None, bytes]:
    key_index = hash_index = data = None
    for number, wire, value in _fields(buf):
        if number == 1 and wire == _VARINT:
            key_index = value
        elif number == 2 and wire == _VARINT:
            hash_index = value
        elif number == 3 and wire == _LEN:
            data = value
        elif number == 4 and wire == _LEN:
            _tag(value)
    if key_index is None or data is None:  # required fields
        raise _Invalid
    return key_index, hash_index, data


def _tag(buf: bytes) -> None:
    if not any(number == 1 and wire == _LEN for number, wire, _ in _fields(buf)):
        raise _Invalid  # Tag.key is required


def _text(value: bytes) -> str:
    # protobuf-java does not check a proto2 string's UTF-8 when parsing; reading it replaces.
    return value.decode("utf-8", "replace")


def _fields(buf: bytes) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of every field of a message: ints for varints, bytes for
    length-delimited fields, None for the others (which nobody here reads)."""
    return _parse(buf, 0, None)[0]


def _parse(buf: bytes, pos: int, group: int | None) -> tuple[list[tuple[int, int, object]], int]:
    """The fields from `pos` to the end of `buf`, or, inside group `group`, to its end-group key."""
    out: list[tuple[int, int, object]] = []
    end = len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: object = None
        if number == 0:
            raise _Invalid
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LEN:
            size, pos = _varint(buf, pos)
            if size > end - pos:
                raise _Invalid
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (_FIXED64, _FIXED32):
            pos += 8 if wire == _FIXED64 else 4
            if pos > end:
                raise _Invalid
        elif wire == _START_GROUP:  # deprecated groups are skipped whole, as protobuf does
            pos = _parse(buf, pos, number)[1]
        elif wire == _END_GROUP and group == number:
            return out, pos
        else:
            raise _Invalid
        out.append((number, wire, value))
    if group is not None:
        raise _Invalid  # a group that never ends
    return out, pos


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(10):
        if pos >= len(buf):
            raise _Invalid
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos   # uint64: bits past the 64th are dropped
        shift += 7
    raise _Invalid  # more than ten bytes: malformed
