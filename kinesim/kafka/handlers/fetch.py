"""Fetch (1): records from each partition's offset on, as one uncompressed batch per partition
(docs/plans/issue-35-kafka.md §3), and the long-poll that waits for records without a thread.

A partition reads from index offset+1 (offset = index - 1) up to its `partition_max_bytes`, the
response up to `max_bytes`, at least one record of the first partition that has any however
large (KIP-74). Only acknowledged records are answered: those below the shard's tip taken before
the read (a put commits before it moves the tip), so the high watermark covers them all.

When the records found are fewer than `min_bytes` and `max_wait` is not over, the handler
listens on each partition it waits at the tip of (`ShardCursor.listen`: called back from the
appending thread, which only schedules a wake-up on the loop), reads again when woken and
answers at the latest when `max_wait` ends. Listeners are registered again before each wait
(a callback fires once) and removed on every way out, cancellation included.

A closed partition (resharded) is answered NOT_LEADER_OR_FOLLOWER the first time a connection
names it (kafka/resharding.py `nudge`): the client refreshes its metadata and its group rejoins to
take the children, then fetches the closed partition's tail as before.

Fetch sessions (KIP-227) are not kept: every answer says session 0, "no session", so clients
send full requests.
"""
from __future__ import annotations

import asyncio
from typing import Any

from ...kinesis.reader import MAX_READ, ShardCursor
from ...kinesis.records import read_batch
from .. import errors, resharding, topics
from ..batches import build_rows
from ..context import Context


async def fetch(ctx: Context, body: Any) -> dict[str, Any]:
    if getattr(body, "session_id", 0) != 0:  # never handed out: the client is confused, or another broker's
        return {"throttle_time": 0, "error_code": errors.FETCH_SESSION_ID_NOT_FOUND, "session_id": 0, "responses": []}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, body.max_wait.total_seconds())
    while True:
        tree, size, urgent, waits = await ctx.blocking(_read, ctx.kinesis, body, ctx.nudged)
        remaining = deadline - loop.time()
        if size >= body.min_bytes or urgent or remaining <= 0:
            return tree
        await _wait(loop, waits, remaining)
        if loop.time() >= deadline:  # answer what is there now, even under min_bytes
            return (await ctx.blocking(_read, ctx.kinesis, body, ctx.nudged))[0]


async def _wait(loop: asyncio.AbstractEventLoop, waits: list[ShardCursor], timeout: float) -> None:
    """Until a record arrives at one of the cursors' positions (or a shard closes, or the stream
    goes) or `timeout`. Without cursors (every partition closed at its end) the whole timeout:
    nothing can arrive, and the client asked to be answered no sooner."""
    woken = asyncio.Event()

    def wake() -> None:  # on the appending thread: hand over, never block
        try:
            loop.call_soon_threadsafe(woken.set)
        except RuntimeError:  # the loop has closed (the server stops): nobody waits any more
            pass

    armed = []
    try:
        for cursor in waits:
            if not cursor.listen(wake):  # something came meanwhile: read again at once
                return
            armed.append(cursor)
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            pass
    finally:
        for cursor in armed:
            cursor.unlisten(wake)


def _read(svc: Any, body: Any, nudged: set[int]) -> tuple[dict[str, Any], int, bool, list[ShardCursor]]:
    """(answer, bytes of records in it, whether an error wants answering at once, cursors at the
    tip of open partitions to wait on)."""
    budget = body.max_bytes if getattr(body, "max_bytes", None) is not None else 2**31 - 1
    size, urgent, waits, out = 0, False, [], []
    for topic in body.topics:
        stream, code = topics.find(svc, topic.topic)
        parts = []
        for part in topic.partitions:
            answer, cursor, more = _partition(svc, stream, code, part, budget - size, size == 0, nudged)
            size += len(answer["records"])
            # An error, or records left behind for lack of room: waiting would not bring more.
            urgent = urgent or more or answer["error_code"] != errors.NONE
            if cursor is not None:
                waits.append(cursor)
            parts.append(answer)
        out.append({"topic": topic.topic, "partitions": parts})
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": out}, size, urgent, waits


def _partition(svc: Any, stream: Any, code: int, part: Any, budget: int, first: bool, nudged: set[int]):
    """(answer, a cursor at the partition's tip to wait on if it is open and was read to its tip,
    whether records were left behind for lack of room)."""
    index = part.partition
    shard = topics.shard_of(stream, index) if not code else None
    if shard is None:
        return _answer(index, code or errors.UNKNOWN_TOPIC_OR_PARTITION), None, False
    if getattr(part, "current_leader_epoch", -1) > 0:  # every partition's leader epoch is 0
        return _answer(index, errors.UNKNOWN_LEADER_EPOCH), None, False
    if resharding.nudge(nudged, shard):
        return _answer(index, errors.NOT_LEADER_OR_FOLLOWER), None, False
    tip = shard.next_index  # before the read: records past it are not acknowledged yet
    end, start = tip - 1, topics.log_start(svc, stream, shard)
    offset = part.fetch_offset
    if not start <= offset <= end:
        return _answer(index, errors.OFFSET_OUT_OF_RANGE, end, start), None, False
    # A closed shard gets nothing more: never waited on.
    at_tip = ShardCursor(svc, stream, shard, tip) if shard.is_open else None
    if offset == end:
        return _answer(index, errors.NONE, end, start), at_tip, False
    if budget <= 0 and not first:  # the response is full (max_bytes)
        return _answer(index, errors.NONE, end, start), None, True
    limit = part.partition_max_bytes if first else min(part.partition_max_bytes, budget)
    rows, _, _ = read_batch(svc, stream, shard, offset + 1, MAX_READ, max(1, limit), kafka=True)
    rows = [row for row in rows if row[0] < tip]
    if not rows:  # expired between the log start's look and the read
        return _answer(index, errors.NONE, end, start), at_tip, False
    after = rows[-1][0] + 1
    records = build_rows(rows)
    return _answer(index, errors.NONE, end, start, records), at_tip if after >= tip else None, after < tip


def _answer(index: int, code: int, end: int = -1, start: int = -1, records: bytes = b"") -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": end, "last_stable_offset": end,
            "log_start_offset": start, "aborted_transactions": [], "preferred_read_replica": -1,
            "records": records}
