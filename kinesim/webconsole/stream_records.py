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
from .figures import counted

PEEK_TYPES = ("TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AT_TIMESTAMP")
# The text a record shows; the rest is cut (the page shows records, not files). A KPL aggregate's
# user records share it, each also costing USER_RECORD_COST for its key and size: a 1 MiB aggregate
# holds 170,000 empty user records, which listed whole made 20 MB of answer per record.
SHOWN_BYTES = 8192
USER_RECORD_COST = 64
KEY_CHARS = 256          # of a user record's partition or hash key (an aggregate's table is not checked)
TAIL_LIMIT = 200         # newest records a tail answer carries; older ones are skipped
_INDENTED = json.JSONEncoder(indent=2, ensure_ascii=False)


# ---------------------------------------------------------------------------- decoding

def decode(data: bytes, limit: int = SHOWN_BYTES) -> dict[str, Any]:
    """{"format": json | text | binary, "text": what to show, at most `limit` characters,
    "truncated": bool}: JSON pretty-printed, else UTF-8 text, else hex bytes."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        value = _NOT_JSON
    if value is not _NOT_JSON and isinstance(value, (dict, list)):
        pretty = _pretty(value, limit)
        if pretty is not None:
            return {"format": "json", "text": pretty[0], "truncated": pretty[1]}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\t\r\n" for c in text[:limit]):
        return _shown("text", text, limit)
    return _shown("binary", data[:limit // 3].hex(" "), limit, len(data) > limit // 3)


_NOT_JSON = object()


def _pretty(value: Any, limit: int) -> tuple[str, bool] | None:
    """`value` as JSON indented by two, only as far as `limit` characters, and whether it went on;
    None when it is nested deeper than the encoder goes. The encoder's pieces are taken one at a
    time: the whole text can be a thousand times the record (each level of nesting indents every
    line under it: 1 MiB of nested arrays cost the server 1.1 GB and 18 s of its interpreter)."""
    pieces, size = [], 0
    try:
        for piece in _INDENTED.iterencode(value):
            pieces.append(piece)
            size += len(piece)
            if size > limit:
                break
    except RecursionError:
        return None
    return "".join(pieces)[:limit], size > limit


def _shown(kind: str, text: str, limit: int, truncated: bool = False) -> dict[str, Any]:
    if len(text) > limit:
        text, truncated = text[:limit], True
    return {"format": kind, "text": text, "truncated": truncated}


def record_doc(shard_id: str, record: Record) -> dict[str, Any]:
    """A record as the page lists it; a KPL aggregate also lists its user records (the same
    deaggregation Firehose applies, `kinesis.aggregation`) as far as SHOWN_BYTES goes, and says
    how many more it holds ("user_records_hidden")."""
    doc: dict[str, Any] = {"shard": shard_id, "sequence_number": record.sequence_number,
                           "partition_key": record.partition_key, "arrival_ms": int(round(record.arrival * 1000)),
                           "size": len(record.data)}
    users = aggregation.deaggregate(record.data) if aggregation.is_aggregated(record.data) else None
    if users is None:
        doc.update(decode(record.data))
        return doc
    doc.update(format="kpl", text=f"KPL aggregate of {counted(len(users), 'user record')}", truncated=False)
    shown, left = [], SHOWN_BYTES
    for n, u in enumerate(users):
        if left <= 0:
            break
        user = {"subsequence": n, "partition_key": _key(u.partition_key),
                "explicit_hash_key": _key(u.explicit_hash_key), "size": len(u.data),
                **decode(u.data, min(left, SHOWN_BYTES))}
        left -= len(user["text"]) + len(user["partition_key"]) + USER_RECORD_COST
        shown.append(user)
    doc.update(user_records=shown, user_records_hidden=len(users) - len(shown))
    return doc


def _key(key: str | None) -> str | None:
    return key if key is None or len(key) <= KEY_CHARS else key[:KEY_CHARS] + "…"


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
    found: list[tuple[str, Record]] = []
    skipped = 0
    for shard in shards:
        position = positions.get(shard.uid, 1)
        if tips[shard.uid] - position > TAIL_LIMIT:
            skipped += tips[shard.uid] - TAIL_LIMIT - position
            position = tips[shard.uid] - TAIL_LIMIT
        if position < tips[shard.uid]:
            batch = ShardCursor(kinesis, stream, shard, position).read_from(position, tips[shard.uid] - position)
            found += [(shard.shard_id, r) for r in batch.records]
    found.sort(key=lambda f: (f[1].arrival, int(f[1].sequence_number)), reverse=True)
    # Only the records answered are decoded (up to TAIL_LIMIT of every shard were read).
    return {"records": [record_doc(shard_id, r) for shard_id, r in found[:TAIL_LIMIT]], "cursor": _cursor(tips),
            "skipped": skipped + max(0, len(found) - TAIL_LIMIT), "now_ms": int(time.time() * 1000)}


def _cursor(tips: dict[int, int]) -> str:
    return ",".join(f"{uid}:{index}" for uid, index in sorted(tips.items()))


def _parse_cursor(cursor: str) -> dict[int, int]:
    try:
        return {int(uid): int(index) for uid, index in (part.split(":") for part in cursor.split(",") if part)}
    except ValueError:
        raise ValueError(f"not a tail cursor: {cursor!r}") from None
