"""Produce (0): record batches into shards, partition N = shard N (docs/plans/issue-35-kafka.md §3).

A partition's batches are decoded and checked whole (CRC, compression, sizes) before anything is
stored, and a topic's partitions of one request are stored in one transaction
(`records.put_to_shards`), so a partition's records are stored all or none. Every put is committed
before it returns: acks=1 and acks=-1 are answered after the commit; acks=0 is not answered at all
(Kafka sends nothing), and since the listener reads a connection's next request only after this
one's handler returned, its records are still committed in order.

An idempotent producer's batch (one with a producer id) is checked against the producer's last
batches on that partition (kafka/producers.py): a duplicate is answered with its first copy's
offset and not stored again, a sequence gap or an old epoch is refused. The check, the store and
the table's update are one step per producer (its lock is held across them), so two copies of a
batch sent at once are stored once. Transactions are not served (not advertised, and
InitProducerId refuses a transactional id), so a transactional batch is INVALID_REQUEST.

A closed partition (a shard closed by a reshard) still takes records (plan §4, kafka/resharding.py):
the first time a connection names it the answer is NOT_LEADER_OR_FOLLOWER (nothing stored; the
client refreshes its metadata and sends again), after that its records are forwarded, under the
stream's lock, to the open shards a Kinesis put of them would reach, and answered with no error
and base offset -1 (they have no offset in that partition). Idempotence stays per partition as
the client numbers it: a forwarded batch is remembered under the closed partition (answered -1),
so its retry there is a duplicate; the child's own sequence is not touched, since the producer
numbers its batches to the child from 0. A batch out of order on a closed partition follows one
that failed (the nudge, with several batches in flight) and is answered NOT_LEADER_OR_FOLLOWER
too, so the client sends them again in order, as after a leader change.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from ...kinesis.records import put_to_shards
from .. import errors, producers, resharding, topics
from ..batches import CorruptBatch, decode_batches, stored_fields
from ..producers import Appending
from ..context import CloseConnection, Context


def produce(ctx: Context, body: Any) -> dict[str, Any] | None:
    svc = ctx.kinesis
    transactional = body.transactional_id is not None
    responses = [{"name": t.name, "partition_responses": _topic(svc, t, transactional, ctx.nudged)}
                 for t in body.topic_data]
    if body.acks == 0:
        # No answer to carry an error: the broker closes the connection instead, so that the
        # client refreshes its metadata and reconnects (Kafka's KafkaApis does the same).
        if any(p["error_code"] for t in responses for p in t["partition_responses"]):
            raise CloseConnection("a produce with acks=0 failed")
        return None
    return {"responses": responses, "throttle_time": 0}


def _answer(index: int, code: int, base_offset: int = -1, log_start: int = -1, message: str | None = None):
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time": None,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


def _topic(svc: Any, topic: Any, transactional: bool, nudged: set[int]) -> list[dict[str, Any]]:
    stream, code = topics.writable(svc, topic.name)
    answers: dict[int, dict[str, Any]] = {}
    entries: dict[int, list] = {}
    idempotent: dict[int, Appending] = {}
    order = []
    for part in topic.partition_data:
        order.append(part.index)
        if part.index in answers or part.index in entries:
            answers[part.index] = _answer(part.index, errors.INVALID_REQUEST, message="partition named twice")
            entries.pop(part.index, None)
            idempotent.pop(part.index, None)
            continue
        if code:
            answers[part.index] = _answer(part.index, code)
            continue
        shard = topics.shard_of(stream, part.index)
        if shard is not None and resharding.nudge(nudged, shard):
            answers[part.index] = _answer(part.index, errors.NOT_LEADER_OR_FOLLOWER, message=(
                f"partition {part.index} was closed by a reshard: its records now go to its children"))
            continue
        failure, rows, appending = _rows(stream, part, transactional)
        if failure is not None:
            answers[part.index] = failure
        else:
            entries[part.index] = rows
            if appending is not None:
                idempotent[part.index] = appending
    if idempotent:
        table = producers.of(svc)
        with ExitStack() as held:
            # Taken in one order (the stripes'): two requests holding one each never deadlock.
            for stripe in sorted({table.stripe(a.producer_id) for a in idempotent.values()}, key=table.stripes.index):
                held.enter_context(stripe)
            _check(svc, stream, table, idempotent, entries, answers)
            stored = _store(svc, stream, entries, answers)
            for index, first_offset in stored.items():
                if index in idempotent:
                    table.appended(stream.shards[index], idempotent[index], first_offset)
    else:
        _store(svc, stream, entries, answers)
    # The answer lists partitions in the request's order (a partition named twice: once).
    seen, out = set(), []
    for index in order:
        if index not in seen:
            seen.add(index)
            out.append(answers[index])
    return out


def _check(svc: Any, stream: Any, table: producers.Producers, idempotent: dict[int, Appending],
           entries: dict[int, list], answers: dict[int, dict[str, Any]]) -> None:
    """Answer (and drop from `entries`) the idempotent batches that are not to be stored."""
    for index, appending in idempotent.items():
        shard = stream.shards[index]
        verdict = table.check(svc, shard, appending)
        if verdict.code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER and not shard.is_open:
            answers[index] = _answer(index, errors.NOT_LEADER_OR_FOLLOWER, message=verdict.message)
        elif verdict.code:
            answers[index] = _answer(index, verdict.code, message=verdict.message)
        elif verdict.duplicate_of is not None:
            # Kafka answers a duplicate as it answered the original: no error, its base offset.
            answers[index] = _answer(index, errors.NONE, verdict.duplicate_of, topics.log_start(svc, stream, shard))
        else:
            continue
        del entries[index]


def _store(svc: Any, stream: Any, entries: dict[int, list], answers: dict[int, dict[str, Any]]) -> dict[int, int]:
    """Store the partitions' rows, answer them; the first offset each partition's answer gave
    (-1 for a closed partition's, forwarded). Under the stream's lock (re-entered by the put),
    so that no reshard closes a shard between the routing and the put."""
    if not entries:
        return {}
    with stream.lock:
        shards = stream.shards
        merged: dict[int, list] = {}
        at: dict[int, int] = {}  # an open partition's first row in merged[partition]
        for index, rows in entries.items():
            if shards[index].is_open:
                at[index] = len(merged.setdefault(index, []))
                merged[index].extend(rows)
        for index, rows in entries.items():
            if not shards[index].is_open:
                for dest, moved in resharding.route(stream, shards[index], rows).items():
                    merged.setdefault(dest, []).extend(moved)
        stored = put_to_shards(svc, stream, merged)
    out = {}
    for index in entries:
        shard = shards[index]
        first = stored[index].start + at[index] - 1 if index in at and index in stored else -1
        answers[index] = _answer(index, errors.NONE, first, topics.log_start(svc, stream, shard))
        out[index] = first
    return out


def _rows(stream: Any, part: Any, transactional: bool) -> tuple[dict[str, Any] | None, list, Appending | None]:
    """A partition's rows to store and its idempotent batch if any, or the answer that refuses them."""
    index = part.index
    shard = topics.shard_of(stream, index)
    if shard is None:
        return _answer(index, errors.UNKNOWN_TOPIC_OR_PARTITION), [], None
    if part.records is None:
        return _answer(index, errors.CORRUPT_MESSAGE, message="no records"), [], None
    try:
        batches = decode_batches(part.records)
    except CorruptBatch as err:
        return _answer(index, errors.CORRUPT_MESSAGE, message=str(err)), [], None
    if not batches:  # Kafka: "Produce requests ... must have at least one record batch"
        return _answer(index, errors.INVALID_RECORD, message="no record batch"), [], None
    limit = stream.max_record_size_kib * 1024
    rows, appending = [], None
    for batch in batches:
        if transactional or batch.transactional:
            return _answer(index, errors.INVALID_REQUEST, message="transactions are not supported by kinesim"), [], None
        if batch.control:  # Kafka: clients may not write control records
            return _answer(index, errors.INVALID_RECORD, message="control batches are written by brokers"), [], None
        producer = batch.producer
        first = None if producer is None else (*producer, len(batch.records))
        if producer is not None:
            # Kafka takes one batch per partition from a client (LogValidator), which is what lets
            # a duplicate be answered with one offset; and a sequence is never negative.
            if len(batches) > 1:
                return _answer(index, errors.INVALID_RECORD, message="an idempotent producer's partition "
                               "data holds more than one batch"), [], None
            if batch.producer_epoch < 0 or batch.base_sequence < 0:
                return _answer(index, errors.INVALID_RECORD, message=f"producer {batch.producer_id} with "
                               f"epoch {batch.producer_epoch}, sequence {batch.base_sequence}"), [], None
            appending = Appending(*producer, len(batch.records))
        for n, record in enumerate(batch.records):
            if record.value is not None and len(record.value) > limit:
                # The stream's record size limit (UpdateMaxRecordSize), as PutRecord applies it.
                return _answer(index, errors.MESSAGE_TOO_LARGE,
                               message=f"a record of {len(record.value)} bytes exceeds {limit}"), [], None
            rows.append(stored_fields(record, first if n == 0 else None))
    return None, rows, appending
