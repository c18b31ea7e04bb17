"""Kafka record batches (magic 2) in and out, and the Kafka-only fields of a stored record.

Batches: a thin wrapper over `aiokafka.record` (Cython; CRC32C; gzip/snappy/lz4/zstd through
cramjam). kio's own batch reader is not used: it drops timestamps' milliseconds and ignores
compression (docs/plans/issue-35-kafka.md §1.3). aiokafka is imported by `load` (the Kafka
listener's start, or the first batch), not with this module: importing it loads its whole client
(~0.1 s), which a server without a Kafka port need not pay.

Records: a Kafka record is stored as a Kinesis one (kafka/§3): value -> data, key -> partition key
(`partition_key`), arrival = the server's time; what Kinesis has no place for (the producer's
timestamp, headers, key bytes that are no partition key, a null value, the producer's id/epoch/
sequence) goes to the row's `kafka` column, encoded by `encode_meta`: a version byte, a flags
byte, the timestamp as a fixed 8-byte integer (Fetch reads it with one unpack: a varint cost ~0.5
µs per record in Python), then zigzag/unsigned varints and length-prefixed bytes (10 bytes for a
keyed record without headers). Records put through Kinesis have no meta; `record_of` gives them Kafka's view.
"""
from __future__ import annotations

import hashlib
import struct
import threading
from dataclasses import dataclass
from typing import Iterable, NamedTuple

from ..protocol.constraints import utf16_len

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
NO_PRODUCER = -1          # producer id / epoch / sequence of a non-idempotent batch
MAX_PK_CHARS = 256        # Kinesis' PartitionKey length, in UTF-16 units as Java counts
_HEADER = 61              # a magic-2 batch header, up to and including the record count
_LENGTH_AT, _EPOCH_AT, _MAGIC_AT = 8, 12, 16
_BATCH_LIMIT = (1 << 31) - 1  # the builder's size cap: the caller decides how much goes in a batch


class CorruptBatch(ValueError):
    """Bytes that are no valid magic-2 batch (Produce answers CORRUPT_MESSAGE, 2)."""


class Record(NamedTuple):
    offset_delta: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(slots=True)
class Batch:
    base_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    compression: int          # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (CODECS)
    transactional: bool
    control: bool
    records: list[Record]

    @property
    def producer(self) -> tuple[int, int, int] | None:
        """(id, epoch, base sequence) of an idempotent producer's batch, else None."""
        if self.producer_id == NO_PRODUCER:
            return None
        return self.producer_id, self.producer_epoch, self.base_sequence


_LOADED: tuple | None = None
_LOAD_LOCK = threading.Lock()


def load() -> str:
    """Import aiokafka's record classes once (the listener calls it as it starts, before any
    request: two work threads importing them at once could leave the first with aiokafka's
    pure-Python fallback, ~10x slower to check and build batches). Which implementation is in
    use: "cython" or "python" (AIOKAFKA_NO_EXTENSIONS, or the extension did not load)."""
    global _LOADED
    with _LOAD_LOCK:
        if _LOADED is None:
            from aiokafka.errors import CorruptRecordException, UnsupportedCodecError
            from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
            _LOADED = DefaultRecordBatch, DefaultRecordBatchBuilder, (CorruptRecordException, UnsupportedCodecError)
    return implementation()


def implementation() -> str:
    reader = _aiokafka()[0]
    return "cython" if "_crecords" in reader.__module__ else "python"


def _aiokafka() -> tuple:
    loaded = _LOADED
    if loaded is None:
        load()
        loaded = _LOADED
    return loaded


def decode_batches(data: bytes) -> list[Batch]:
    """Every batch in a Produce request's `records` bytes, each checked (CRC32C, sizes, record count
    against the last offset delta, as Kafka's LogValidator does) and decompressed. CorruptBatch on
    the first bad one: Kafka rejects a partition's records whole."""
    reader, _, errors = _aiokafka()
    view, pos, out = memoryview(data), 0, []
    while pos < len(data):
        if len(data) - pos < _HEADER:
            raise CorruptBatch(f"{len(data) - pos} bytes left, less than a batch header")
        length = struct.unpack_from(">i", data, pos + _LENGTH_AT)[0]
        end = pos + _LENGTH_AT + 4 + length
        if end > len(data) or end - pos < _HEADER:
            raise CorruptBatch(f"batch length {length} at byte {pos} does not fit the {len(data)} bytes")
        if data[pos + _MAGIC_AT] != 2:
            raise CorruptBatch(f"batch magic {data[pos + _MAGIC_AT]}: only magic 2 is accepted")
        batch = reader(view[pos:end])
        if not batch.validate_crc():  # before iterating: aiokafka checks the compressed bytes
            raise CorruptBatch(f"CRC32C mismatch in the batch at byte {pos}")
        if batch.compression_type not in CODECS:
            raise CorruptBatch(f"unknown compression {batch.compression_type}")
        base = batch.base_offset
        try:
            records = [Record(r.offset - base, r.timestamp, r.key, r.value, r.headers) for r in batch]
        except errors as e:
            raise CorruptBatch(str(e)) from e
        except (ValueError, IndexError, UnicodeDecodeError) as e:  # a compressed payload that is not one
            raise CorruptBatch(f"{type(e).__name__}: {e}") from e
        if not records or len(records) != batch.last_offset_delta + 1:
            raise CorruptBatch(f"{len(records)} records but last offset delta {batch.last_offset_delta}")
        out.append(Batch(base, batch.producer_id, batch.producer_epoch, batch.base_sequence,
                         batch.compression_type, batch.is_transactional, batch.is_control_batch, records))
        pos = end
    return out


def build_batch(base_offset: int, records: Iterable[Record], leader_epoch: int = 0) -> bytes:
    """One uncompressed magic-2 batch (CreateTime, no producer) of `records` at `base_offset`, as
    Fetch answers. The builder writes base offset 0 and leader epoch -1; both are outside the CRC
    (which starts at the attributes), so they are set in place afterwards."""
    _, builder_class, _ = _aiokafka()
    builder = builder_class(2, 0, 0, NO_PRODUCER, NO_PRODUCER, NO_PRODUCER, _BATCH_LIMIT)
    n = 0
    for r in records:
        builder.append(r.offset_delta, r.timestamp_ms, r.key, r.value, r.headers)
        n += 1
    if not n:
        raise ValueError("a batch holds at least one record")
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, _EPOCH_AT, leader_epoch)
    return bytes(buf)


def build_rows(rows: list[tuple]) -> bytes:
    """`build_batch` of stored KafkaRecord rows (index, seq, pk, data, arrival, meta), the first at
    offset index - 1: Fetch's answer. What `record_of` gives, without a Record per row: rows
    put through Kinesis and a Kafka producer's common record (its key is its partition key, no
    headers, a value: flags 0) are appended straight from the row."""
    _, builder_class, _ = _aiokafka()
    builder = builder_class(2, 0, 0, NO_PRODUCER, NO_PRODUCER, NO_PRODUCER, _BATCH_LIMIT)
    append = builder.append
    base = rows[0][0]
    no_headers: list = []
    for index, _, pk, data, arrival, meta in rows:
        if meta is None:
            append(index - base, round(arrival * 1000), pk.encode() if pk else None, data, no_headers)
        elif meta[0] == VERSION and meta[1] == 0:  # the timestamp only
            append(index - base, timestamp_at(meta, 2)[0], pk.encode() if pk else None, data, no_headers)
        else:
            r = record_of((index, None, pk, data, arrival, meta), index - base)
            append(r.offset_delta, r.timestamp_ms, r.key, r.value, r.headers)
    buf = builder.build()
    struct.pack_into(">q", buf, 0, base - 1)
    struct.pack_into(">i", buf, _EPOCH_AT, 0)
    return bytes(buf)


# keys

def partition_key(key: bytes | None) -> tuple[str, bytes | None]:
    """(partition key, key bytes to keep in meta). A key that is valid UTF-8 of 1-256 characters
    is its own partition key, so Kinesis readers see it as sent; any other key (binary, empty,
    too long) stores the hex MD5 of its bytes, a valid and deterministic partition key, and keeps
    the bytes. A null key stores "", as AUTO-stream puts without a key do."""
    if key is None:
        return "", None
    try:
        text = key.decode()
    except UnicodeDecodeError:
        text = ""
    if text and utf16_len(text) <= MAX_PK_CHARS:
        return text, None
    return hashlib.md5(key).hexdigest(), bytes(key)


# meta: the `kafka` column

VERSION = 1
_KEY, _NULL_VALUE, _HEADERS, _PRODUCER = 1, 2, 4, 8
_TIMESTAMP = struct.Struct(">q")
timestamp_at = _TIMESTAMP.unpack_from


class Meta(NamedTuple):
    timestamp_ms: int
    key: bytes | None                      # the key's bytes when the partition key is not the key
    headers: list[tuple[str, bytes | None]]
    null_value: bool
    producer: tuple[int, int, int, int] | None  # (id, epoch, base sequence, records in the batch)


def _uvarint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)


def _varint(n: int, out: bytearray) -> None:  # zigzag, as Kafka's varints
    _uvarint((n << 1) ^ (n >> 63), out)


def encode_meta(timestamp_ms: int, key: bytes | None = None, headers: list[tuple[str, bytes | None]] | None = None,
                null_value: bool = False, producer: tuple[int, int, int, int] | None = None) -> bytes:
    """The `kafka` column of a record put by a Kafka producer. `key`: only the bytes
    `partition_key` says to keep; `producer`: (id, epoch, base sequence, record count) on a
    batch's first record only (what idempotence needs to rebuild its state from the log)."""
    flags = (_KEY if key is not None else 0) | (_NULL_VALUE if null_value else 0) | \
        (_HEADERS if headers else 0) | (_PRODUCER if producer is not None else 0)
    out = bytearray((VERSION, flags))
    out += _TIMESTAMP.pack(timestamp_ms)
    if key is not None:
        _uvarint(len(key), out)
        out += key
    if headers:
        _uvarint(len(headers), out)
        for name, value in headers:
            raw = name.encode()
            _uvarint(len(raw), out)
            out += raw
            if value is None:
                _varint(-1, out)
            else:
                _varint(len(value), out)
                out += value
    if producer is not None:
        for n in producer:
            _varint(n, out)
    return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    n, pos = _read_uvarint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def decode_meta(meta: bytes) -> Meta:
    if not meta or meta[0] != VERSION:
        raise ValueError(f"kafka meta of unknown version {meta[:1]!r}")
    flags = meta[1]
    timestamp, pos = timestamp_at(meta, 2)[0], 2 + _TIMESTAMP.size
    if not flags & ~_NULL_VALUE:  # the common record: a key that is its partition key, no headers
        return Meta(timestamp, None, [], bool(flags), None)
    key = None
    if flags & _KEY:
        size, pos = _read_uvarint(meta, pos)
        key, pos = bytes(meta[pos:pos + size]), pos + size
    headers: list[tuple[str, bytes | None]] = []
    if flags & _HEADERS:
        count, pos = _read_uvarint(meta, pos)
        for _ in range(count):
            size, pos = _read_uvarint(meta, pos)
            name, pos = meta[pos:pos + size].decode(), pos + size
            size, pos = _read_varint(meta, pos)
            if size < 0:
                headers.append((name, None))
            else:
                headers.append((name, bytes(meta[pos:pos + size])))
                pos += size
    producer = None
    if flags & _PRODUCER:
        values = []
        for _ in range(4):
            n, pos = _read_varint(meta, pos)
            values.append(n)
        producer = tuple(values)
    return Meta(timestamp, key, headers, bool(flags & _NULL_VALUE), producer)


def producer_of(meta: bytes | None) -> tuple[int, int, int, int] | None:
    """(id, epoch, base sequence, record count) of the batch a stored record starts, if an
    idempotent producer's: what rebuilds the sequence table after a restart (kafka/producers.py).
    The flags byte answers for most records without decoding the rest."""
    if meta is None or len(meta) < 2 or not meta[1] & _PRODUCER:
        return None
    return decode_meta(meta).producer


# stored rows <-> Kafka records

def stored_fields(record: Record, producer: tuple[int, int, int, int] | None = None) -> tuple[str, bytes, bytes]:
    """(partition key, data, meta) to store for a produced record (`producer` on a batch's first)."""
    pk, kept = partition_key(record.key)
    meta = encode_meta(record.timestamp_ms, kept, record.headers, record.value is None, producer)
    return pk, b"" if record.value is None else record.value, meta


def record_of(row: tuple, offset_delta: int) -> Record:
    """A stored KafkaRecord row (index, seq, pk, data, arrival, meta) as a Kafka record. A row
    put through Kinesis: timestamp = arrival in ms, key = the partition key (null when ""), no headers."""
    _, _, pk, data, arrival, meta = row
    if meta is None:
        return Record(offset_delta, round(arrival * 1000), pk.encode() if pk else None, data, [])
    m = decode_meta(meta)
    key = m.key if m.key is not None else (pk.encode() if pk else None)
    return Record(offset_delta, m.timestamp_ms, key, None if m.null_value else data, m.headers)
