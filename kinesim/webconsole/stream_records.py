"""The stream page's records: a peek into a shard that consumes nothing, a live tail of what is put
after the page opened, and the decoding of a record's data for a person to read.

Both read the store through the shard reader (`kinesis.reader.ShardCursor.read_from`), which moves
no checkpoint: every consumer still gets every record. Positions (`iterators.start_index`) are
taken as GetShardIterator takes them, so a bad sequence number gets AWS's own error.
"""
from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import orjson

from ..kinesis import aggregation, iterators
from ..kinesis.model import Shard, Stream
from ..kinesis.reader import Record, ShardCursor, start_position

PEEK_TYPES = ("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP")
SHOWN_BYTES = 8192       # data beyond this is cut (the page shows records, not files)
TAIL_LIMIT = 200         # newest records a tail answer carries; older ones are skipped


# ---------------------------------------------------------------------------- decoding

def decode(data: bytes) -> dict[str, Any]:
    """{"format": json | text | binary, "text": what to show, "truncated": bool}: JSON
    pretty-printed, else UTF-8 text, else hex bytes."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = _NOT_JSON
    if value is not _NOT_JSON and isinstance(value, (dict, list)):
        return _shown("json", json.dumps(value, indent=2, ensure_ascii=False))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\r\n" for c in text[:SHOWN_BYTES]):
        return _shown("text", text)
    return _shown("binary", data[:SHOWN_BYTES // 3].hex(" "), len(data) > SHOWN_BYTES // 3)


_NOT_JSON = object()


def _shown(kind: str, text: str, truncated: bool = False) -> dict[str, Any]:
    if len(text) > SHOWN_BYTES:
        text, truncated = text[:SHOWN_BYTES], True
    return {"format": kind, "text": text, "truncated": truncated}


def record_doc(shard_id: str, record: Record) -> dict[str, Any]:
    """A record as the page lists it; a KPL aggregate also lists its user records (the same
    deaggregation Firehose applies, `kinesis.aggregation`)."""
    doc: dict[str, Any] = {"shard": shard_id, "sequence_number": record.sequence_number,
                           "partition_key": record.partition_key, "arrival_ms": int(round(record.arrival * 1000)),
                           "size": len(record.data)}
    users = aggregation.deaggregate(record.data) if aggregation.is_aggregated(record.data) else None
    if users is None:
        doc.update(decode(record.data))
        return doc
    doc.update(format="kpl", text=f"KPL aggregate of {len(users)} user records", truncated=False)
    doc["user_records"] = [{"subsequence": n, "partition_key": u.partition_key,
                            "explicit_hash_key": u.explicit_hash_key, "size": len(u.data), **decode(u.data)}
                           for n, u in enumerate(users)]
    return doc


# ---------------------------------------------------------------------------- peek

def peek(kinesis: Any, stream: Stream, shard_id: str, kind: str, value: str | None, limit: int) -> dict[str, Any]:
    """Up to `limit` records of a shard from a TRIM_HORIZON / LATEST / AT_SEQUENCE_NUMBER /
    AT_TIMESTAMP (`value`: epoch milliseconds or an ISO 8601 time) position. Nothing moves."""
    if kind not in PEEK_TYPES:
        raise ValueError(f"type is one of {', '.join(PEEK_TYPES)}")
    shard = iterators.find_shard(kinesis, stream, shard_id)
    timestamp = None
    if kind == "AT_TIMESTAMP":
        timestamp = _epoch_s(value)
        iterators.refuse_future(timestamp)
    if kind == "AT_SEQUENCE_NUMBER" and not value:
        raise ValueError("AT_SEQUENCE_NUMBER needs a sequence number")
    position, _ = start_position(kinesis, stream, shard, kind, value if kind == "AT_SEQUENCE_NUMBER" else None,
                                 timestamp)
    batch = ShardCursor(kinesis, stream, shard, position).read_from(position, limit)
    return {"shard": shard.shard_id, "type": kind, "records": [record_doc(shard.shard_id, r) for r in batch.records],
            "at_tip": batch.at_tip}


def _epoch_s(value: str | None) -> float:
    if not value:
        raise ValueError("AT_TIMESTAMP needs a time (epoch milliseconds or ISO 8601)")
    try:
        return float(value) / 1000.0
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {value!r} (epoch milliseconds or ISO 8601)") from None
    return moment.timestamp()


# ---------------------------------------------------------------------------- live tail

def tail(kinesis: Any, stream: Stream, shards: list[Shard], cursor: str | None) -> dict[str, Any]:
    """The records put since `cursor`, newest first, and the cursor to ask with next. Without a
    cursor: none, and a cursor at every shard's tip (the tail shows what comes after). A shard
    missing from the cursor (a child born since) is read from its start. When more came than
    TAIL_LIMIT per shard, the older ones are skipped (counted in "skipped")."""
    tips = {shard.uid: shard.next_index for shard in shards}
    if cursor is None:
        return {"records": [], "cursor": _cursor(tips), "skipped": 0}
    positions = _parse_cursor(cursor)
    found: list[tuple[float, str, dict[str, Any]]] = []
    skipped = 0
    for shard in shards:
        position = positions.get(shard.uid, 1)
        if tips[shard.uid] - position > TAIL_LIMIT:
            skipped += tips[shard.uid] - TAIL_LIMIT - position
            position = tips[shard.uid] - TAIL_LIMIT
        if position < tips[shard.uid]:
            batch = ShardCursor(kinesis, stream, shard, position).read_from(position, tips[shard.uid] - position)
            for r in batch.records:
                found.append((r.arrival, r.sequence_number, record_doc(shard.shard_id, r)))
    found.sort(key=lambda f: (f[0], int(f[1])), reverse=True)
    return {"records": [doc for _, _, doc in found[:TAIL_LIMIT]], "cursor": _cursor(tips),
            "skipped": skipped + max(0, len(found) - TAIL_LIMIT), "now_ms": int(time.time() * 1000)}


def _cursor(tips: dict[int, int]) -> str:
    return ",".join(f"{uid}:{index}" for uid, index in sorted(tips.items()))


def _parse_cursor(cursor: str) -> dict[int, int]:
    try:
        return {int(uid): int(index) for uid, index in (part.split(":") for part in cursor.split(",") if part)}
    except ValueError:
        raise ValueError(f"not a tail cursor: {cursor!r}") from None
