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
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from ...kinesis.records import ShardClosed, put_to_shards
from .. import errors, producers, topics
from ..batches import CorruptBatch, decode_batches, stored_fields
from ..producers import Appending
from ..context import CloseConnection, Context


def produce(ctx: Context, body: Any) -> dict[str, Any] | None:
    svc = ctx.kinesis
    transactional = body.transactional_id is not None
    responses = [{"name": t.name, "partition_responses": _topic(svc, t, transactional)} for t in body.topic_data]
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


def _topic(svc: Any, topic: Any, transactional: bool) -> list[dict[str, Any]]:
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
            for index, indexes in stored.items():
                if index in idempotent:
                    table.appended(stream.shards[index], idempotent[index], indexes.start - 1)
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
        if verdict.code:
            answers[index] = _answer(index, verdict.code, message=verdict.message)
        elif verdict.duplicate_of is not None:
            # Kafka answers a duplicate as it answered the original: no error, its base offset.
            answers[index] = _answer(index, errors.NONE, verdict.duplicate_of, topics.log_start(svc, stream, shard))
        else:
            continue
        del entries[index]


def _store(svc: Any, stream: Any, entries: dict[int, list], answers: dict[int, dict[str, Any]]) -> dict[int, range]:
    """Store the partitions' rows, answer them; what was stored, by partition."""
    while entries:
        try:
            stored = put_to_shards(svc, stream, entries)
        except ShardClosed as closed:
            # Closed by a reshard since it was checked: nothing was stored; the others go again.
            # (Forwarding to the open shard that holds the key is step 6 of the plan.)
            index = closed.shard.index
            answers[index] = _answer(index, errors.NOT_LEADER_OR_FOLLOWER)
            del entries[index]
            continue
        shards = stream.shards
        for index, indexes in stored.items():
            answers[index] = _answer(index, errors.NONE, indexes.start - 1,
                                     topics.log_start(svc, stream, shards[index]))
        return stored
    return {}


def _rows(stream: Any, part: Any, transactional: bool) -> tuple[dict[str, Any] | None, list, Appending | None]:
    """A partition's rows to store and its idempotent batch if any, or the answer that refuses them."""
    index = part.index
    shard = topics.shard_of(stream, index)
    if shard is None:
        return _answer(index, errors.UNKNOWN_TOPIC_OR_PARTITION), [], None
    if not shard.is_open:
        return _answer(index, errors.NOT_LEADER_OR_FOLLOWER), [], None
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
