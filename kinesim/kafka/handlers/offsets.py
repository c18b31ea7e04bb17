"""ListOffsets (2): a partition's offsets by position or time (docs/plans/issue-35-kafka.md §3).

-1 latest: the log end offset; -2 (and -4, KIP-1005's earliest local) earliest: the log start;
-3 max timestamp: the newest record's offset and timestamp (records are appended in arrival
order, and Kafka's own answer is as approximate for producers' out-of-order CreateTimes); a time:
the first record that *arrived* at or after it (the store indexes arrival, the Kinesis
ApproximateArrivalTimestamp), answered with that record's own timestamp, or offset -1 when none did.
"""
from __future__ import annotations

from typing import Any

from .. import errors, topics
from ..batches import record_of
from ..context import Context

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4


def list_offsets(ctx: Context, body: Any) -> dict[str, Any]:
    svc = ctx.kinesis
    out = []
    for topic in body.topics:
        stream, code = topics.find(svc, topic.name)
        out.append({"name": topic.name, "partitions": [_partition(svc, stream, code, p) for p in topic.partitions]})
    return {"throttle_time": 0, "topics": out}


def _partition(svc: Any, stream: Any, code: int, part: Any) -> dict[str, Any]:
    index = part.partition_index
    shard = topics.shard_of(stream, index) if not code else None
    if shard is None:
        return _answer(index, code or errors.UNKNOWN_TOPIC_OR_PARTITION)
    if getattr(part, "current_leader_epoch", -1) > 0:  # every partition's leader epoch is 0
        return _answer(index, errors.UNKNOWN_LEADER_EPOCH)
    wanted = part.timestamp
    if wanted == LATEST:
        return _answer(index, errors.NONE, topics.log_end(shard))
    if wanted in (EARLIEST, EARLIEST_LOCAL):
        return _answer(index, errors.NONE, topics.log_start(svc, stream, shard))
    horizon = svc.retention_horizon(stream)
    tip = shard.next_index  # records at and past it may be stored but are not acknowledged yet
    if wanted == MAX_TIMESTAMP:
        found = tip - 1 if tip > 1 else None
    elif wanted >= 0:
        found = svc.store.first_index_at(shard.uid, max(wanted / 1000, horizon))
    else:
        return _answer(index, errors.INVALID_REQUEST)
    if found is None or found >= tip:
        return _answer(index, errors.NONE)
    rows = svc.store.read(shard.uid, found, 1, horizon, True)
    if not rows or rows[0][0] >= tip:  # expired meanwhile
        return _answer(index, errors.NONE)
    return _answer(index, errors.NONE, rows[0][0] - 1, record_of(rows[0], 0).timestamp_ms)


def _answer(index: int, code: int, offset: int = -1, timestamp: int = -1) -> dict[str, Any]:
    # Latest and earliest answer timestamp -1, as Kafka's broker does.
    return {"partition_index": index, "error_code": code, "timestamp": timestamp, "offset": offset,
            "leader_epoch": 0 if offset >= 0 else -1}
