"""Produce (0): record batches into shards, partition N = shard N (docs/plans/issue-35-kafka.md §3).

A partition's batches are decoded and checked whole (CRC, compression, sizes) before anything is
stored, and a topic's partitions of one request are stored in one transaction
(`records.put_to_shards`), so a partition's records are stored all or none. Every put is committed
before it returns: acks=1 and acks=-1 are answered after the commit; acks=0 is not answered at all
(Kafka sends nothing), and since the listener reads a connection's next request only after this
one's handler returned, its records are still committed in order.

Idempotent producers' batches (a producer id) are stored as any other for now: sequence checks
and deduplication are step 4 of the plan. Transactions are not served (not advertised, and
InitProducerId refuses a transactional id), so a transactional batch is INVALID_REQUEST.
"""
from __future__ import annotations

from typing import Any

from ...kinesis.records import ShardClosed, put_to_shards
from .. import errors, topics
from ..batches import CorruptBatch, decode_batches, stored_fields
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
    order = []
    for part in topic.partition_data:
        order.append(part.index)
        if part.index in answers or part.index in entries:
            answers[part.index] = _answer(part.index, errors.INVALID_REQUEST, message="partition named twice")
            entries.pop(part.index, None)
            continue
        if code:
            answers[part.index] = _answer(part.index, code)
            continue
        failure, rows = _rows(stream, part, transactional)
        if failure is not None:
            answers[part.index] = failure
        else:
            entries[part.index] = rows
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
        break
    # The answer lists partitions in the request's order (a partition named twice: once).
    seen, out = set(), []
    for index in order:
        if index not in seen:
            seen.add(index)
            out.append(answers[index])
    return out


def _rows(stream: Any, part: Any, transactional: bool) -> tuple[dict[str, Any] | None, list]:
    """A partition's rows to store, or the answer that refuses them."""
    index = part.index
    shard = topics.shard_of(stream, index)
    if shard is None:
        return _answer(index, errors.UNKNOWN_TOPIC_OR_PARTITION), []
    if not shard.is_open:
        return _answer(index, errors.NOT_LEADER_OR_FOLLOWER), []
    if part.records is None:
        return _answer(index, errors.CORRUPT_MESSAGE, message="no records"), []
    try:
        batches = decode_batches(part.records)
    except CorruptBatch as err:
        return _answer(index, errors.CORRUPT_MESSAGE, message=str(err)), []
    if not batches:  # Kafka: "Produce requests ... must have at least one record batch"
        return _answer(index, errors.INVALID_RECORD, message="no record batch"), []
    limit = stream.max_record_size_kib * 1024
    rows = []
    for batch in batches:
        if transactional or batch.transactional:
            return _answer(index, errors.INVALID_REQUEST, message="transactions are not supported by kinesim"), []
        if batch.control:  # Kafka: clients may not write control records
            return _answer(index, errors.INVALID_RECORD, message="control batches are written by brokers"), []
        producer = batch.producer
        first = None if producer is None else (*producer, len(batch.records))
        for n, record in enumerate(batch.records):
            if record.value is not None and len(record.value) > limit:
                # The stream's record size limit (UpdateMaxRecordSize), as PutRecord applies it.
                return _answer(index, errors.MESSAGE_TOO_LARGE,
                               message=f"a record of {len(record.value)} bytes exceeds {limit}"), []
            rows.append(stored_fields(record, first if n == 0 else None))
    return None, rows
