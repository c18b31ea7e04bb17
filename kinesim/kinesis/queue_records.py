"""Kinesis queues, the data plane: ReceiveQueueRecords, AcknowledgeQueueRecords,
UpdateQueueRecordsVisibility, and the receive/batch machinery the dead-letter operations share
(queue_dlq.py).

A receive hands out, in this order, records whose visibility timeout has passed and records the
queue has not yet taken from the stream: every shard, a child only once its parents are read to
their end (lineage order), each from its cursor. Delivery is unordered and at-least-once, as the
model says. A long poll waits for an append to any of the stream's shards, an acknowledgement or
visibility change of this queue, or the next visibility timeout to pass, whichever comes first.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.errors import AwsError
from .model import Stream
from .queue_state import DEAD, MAIN, Entry, QueueState
from .queues import Queue
from .reader import Record, ShardCursor, StreamReader

if TYPE_CHECKING:
    from .service import KinesisService

MAX_IN_FLIGHT = 120_000       # per queue: "Maximum in-flight records per queue" (queues quotas page)
DEFAULT_WAIT = 9              # "The default is 9" (ReceiveQueueRecords.WaitTimeSeconds)
DEFAULT_LIMIT = 10


# reading the stream (through the shard reader API, reader.py)

def _reader(svc: KinesisService, queue: Queue, state: QueueState) -> StreamReader:
    """The queue's StreamReader over its checkpoint: lineage order and waiting on appends come
    from it. Its cursors' own positions are not trusted (a long poll's `wait` may make one while a
    receive reads): every read starts at the checkpoint's mark."""
    if state.reader is None:
        state.reader = StreamReader(svc, queue.stream_name, state.checkpoint)
    return state.reader


def _take_new(reader: StreamReader, state: QueueState, need: int, now: float,
              rotation: int) -> list[tuple[Entry, Record]]:
    """Up to `need` records the queue has not taken yet, newly tracked; marks advanced."""
    out: list[tuple[Entry, Record]] = []
    cursors = reader.cursors()
    if not cursors:
        return out
    start = rotation % len(cursors)
    for cursor in cursors[start:] + cursors[:start]:  # spread receives over the shards
        if len(out) >= need:
            break
        mark = state.checkpoint.mark(cursor.shard)
        batch = cursor.read_from(mark.position if mark else 1, need - len(out))
        cursor.position = batch.next_position
        reader.advance(cursor.shard, batch.next_position)
        if batch.finished:
            reader.ended(cursor)  # its children become readable
        for record in batch.records:
            e = state.add_new(cursor.uid, record.index, now)
            if e is not None:
                out.append((e, record))
    return out


def _row(svc: KinesisService, stream: Stream | None, e: Entry) -> Record | None:
    """The stored record of a tracked entry, or None once retention has removed it (a read below
    the retention horizon skips forward, past the entry's index)."""
    shard = next((s for s in stream.shards if s.uid == e.uid), None) if stream is not None else None
    if shard is None:
        return None
    records = ShardCursor(svc, stream, shard, e.index).read_from(e.index, 1).records
    return records[0] if records and records[0].index == e.index else None


def queue_stream(svc: KinesisService, queue: Queue) -> Stream | None:
    stream = svc.find(queue.stream_name)
    return stream if stream is not None and stream.created == queue.stream_created else None


def _wire(state: QueueState, e: Entry, row: Record) -> dict[str, Any]:
    # RecordId: "the same in every queue on the stream that delivers the record" (the model), and
    # digits only: the record's sequence number.
    out = {"ReceiptHandle": state.handle(e), "RecordId": row.sequence_number, "PartitionKey": row.partition_key,
           "Data": row.data, "ApproximateArrivalTimestamp": row.arrival, "FirstReceiveTimestamp": e.first,
           "ReceiveCount": e.count}
    if not row.partition_key:  # a keyless put to an AUTO stream
        del out["PartitionKey"]
    return out


# receiving

def _attempt(svc: KinesisService, queue: Queue, lane: str, limit: int, visibility: int,
             rotation: int) -> list[dict[str, Any]]:
    state = queue.state
    assert state is not None
    stream = queue_stream(svc, queue)  # before the state's lock: a lookup may take the stream's
    with state.lock:
        if not queue.delivering or queue.id not in svc.queues.queues:
            return []
        now = time.time()
        died = state.promote(now, queue.dead_after)
        room = limit
        if lane == MAIN:
            room = min(limit, MAX_IN_FLIGHT - state.in_flight())
            if room <= 0:
                # The model lists no LimitExceededException for this operation; SQS answers
                # OverLimit at 120,000 in flight. ThrottlingException (in the model's list) tells
                # the consumer to back off and acknowledge; the text is ours.
                raise AwsError("ThrottlingException", f"Queue {queue.name} has {MAX_IN_FLIGHT} records in flight, "
                               "the most a queue can have. Acknowledge records before receiving more.")
        picked: list[tuple[Entry, Record]] = []
        expired: list[Entry] = []
        while len(picked) < room:
            visible = state.take_visible(lane, room - len(picked), queue.dead_after, died)
            if not visible:
                break
            for e in visible:
                row = _row(svc, stream, e)
                if row is None:
                    expired.append(e)
                else:
                    picked.append((e, row))
        advanced = False
        if lane == MAIN and len(picked) < room and stream is not None:
            fresh = _take_new(_reader(svc, queue, state), state, room - len(picked), now, rotation)
            advanced = bool(fresh)  # marks moved without records (past expired ones) are saved with the next
            picked += fresh
        for e, _ in picked:
            state.mark_received(e, now, visibility)
        changed = [e for e, _ in picked] + died
        if changed or advanced:
            state.save(changed, cursors=advanced)
        if expired:
            # "When a record reaches the end of the data stream's retention period, the queue
            # stops delivering it" (CreateQueue)
            state.forget(expired)
        return [_wire(state, e, row) for e, row in picked]


def receive(svc: KinesisService, p: dict[str, Any], lane: str) -> dict[str, Any]:
    queue = svc.queues.by_arn(p["QueueARN"])
    state = queue.state
    assert state is not None
    limit = p.get("Limit", DEFAULT_LIMIT)
    visibility = p.get("VisibilityTimeoutSeconds", queue.visibility)
    wait = p.get("WaitTimeSeconds", DEFAULT_WAIT)
    with svc.long_polls.waiting(wait > 0) as waiting:
        return _poll(svc, queue, lane, limit, visibility, time.monotonic() + (wait if waiting else 0))


def _poll(svc: KinesisService, queue: Queue, lane: str, limit: int, visibility: int,
          deadline: float) -> dict[str, Any]:
    """Records for a receive, waiting until `deadline` for some to be there."""
    state = queue.state
    assert state is not None
    rotation = int(time.monotonic() * 1000)
    while True:
        svc.queues.settle(queue)  # CREATING ends while a long poll waits
        state.changed.clear()
        records = _attempt(svc, queue, lane, limit, visibility, rotation)
        remaining = deadline - time.monotonic()
        if records or remaining <= 0 or queue.id not in svc.queues.queues:
            return {"QueueRecords": records}
        due = state.next_due()
        if due is not None:
            remaining = min(remaining, max(0.0, due - time.time()) + 0.001)
        if queue.status == "CREATING" and queue.ready_at:
            remaining = min(remaining, max(0.0, queue.ready_at - time.time()) + 0.001)
        if lane == MAIN and queue.delivering and queue_stream(svc, queue) is not None:
            # One long poll at a time waits in the reader (its wait is not meant for several
            # threads); the others wait for it to return, which an append or a notify causes.
            until = time.monotonic() + remaining
            if state.wait_lock.acquire(timeout=remaining):
                try:
                    # A restore or a visibility set to 0 since the attempt: look again now.
                    if not state.changed.is_set():
                        _reader(svc, queue, state).wait(max(0.0, until - time.monotonic()))
                finally:
                    state.wait_lock.release()
        else:
            state.changed.wait(remaining)
        rotation += 1


def receive_queue_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return receive(svc, p, MAIN)


# entry batches (acknowledge, visibility, restore)

Action = Callable[[QueueState, Entry, dict[str, Any], float], None]


def _fail(handle: str, code: str, message: str) -> dict[str, str]:
    return {"ReceiptHandle": handle, "ErrorCode": code, "ErrorMessage": message}


def batch(svc: KinesisService, p: dict[str, Any], lane: str, action: Action | None,
          in_flight_only: bool = False) -> dict[str, Any]:
    """Apply `action` to each entry's record (None: acknowledge it), each entry reported apart.

    A receipt handle names one delivery: one made stale by a later receive (or by the record
    turning dead letter, or being restored) fails with InvalidArgumentException, as does one not
    of this queue. A record already acknowledged acknowledges again without error (SQS's
    DeleteMessage does the same); the other actions on it answer ResourceNotFoundException."""
    queue = svc.queues.by_arn(p["QueueARN"])
    state = queue.state
    assert state is not None
    ok: list[dict[str, str]] = []
    failed: list[dict[str, str]] = []
    with state.lock:
        now = time.time()
        changed: list[Entry] = state.promote(now, queue.dead_after)
        acked: list[Entry] = []
        for item in p["Entries"]:
            handle = item["ReceiptHandle"]
            parsed = state.parse_handle(handle)
            if parsed is None or parsed[3] != (lane == DEAD):
                failed.append(_fail(handle, "InvalidArgumentException", "The receipt handle is not valid for this "
                                    f"queue{' dead-letter records' if lane == DEAD else ''}: {handle}"))
                continue
            uid, index, gen, _ = parsed
            e = state.entries.get((uid, index))
            if e is None or any(a is e for a in acked):
                if action is None:
                    ok.append({"ReceiptHandle": handle})
                else:
                    failed.append(_fail(handle, "ResourceNotFoundException",
                                        "The record of this receipt handle was already acknowledged."))
                continue
            if e.gen != gen or e.dead != (lane == DEAD):
                failed.append(_fail(handle, "InvalidArgumentException", "The receipt handle has expired: the "
                                    "record was received again, or its dead-letter state changed, since."))
                continue
            if in_flight_only and e.visible_at <= now:
                failed.append(_fail(handle, "InvalidArgumentException",
                                    "The record of this receipt handle is not in flight."))
                continue
            if action is None:
                acked.append(e)
            else:
                action(state, e, item, now)
                changed.append(e)
            ok.append({"ReceiptHandle": handle})
        if changed:
            state.save(changed)
        if acked:
            state.forget(acked)
        if changed or acked:
            state.notify()  # a dead letter restored, a record visible again: long polls look
    return {"Successful": ok, "Failed": failed}


def set_visibility(state: QueueState, e: Entry, item: dict[str, Any], now: float) -> None:
    state.set_visibility(e, now, item["VisibilityTimeoutSeconds"])


def acknowledge_queue_records(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return batch(svc, p, MAIN, None)


def update_queue_records_visibility(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return batch(svc, p, MAIN, set_visibility, in_flight_only=True)
