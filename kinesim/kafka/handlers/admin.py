"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37): topics made, dropped and widened
as streams, through the Kinesis service of the connection's scope (docs/plans/issue-35-kafka.md
step 3).

Kinesis changes are asynchronous (a stream is CREATING, UPDATING or DELETING for a while), Kafka's
admin answers come when the change is done or the request's timeout has passed
(REQUEST_TIMED_OUT, the change carrying on, as Kafka's does). So these handlers are coroutines:
each step runs in the pool and the waits in between hold no thread.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from ...kinesis import resharding, streams
from ...protocol.errors import AwsError
from .. import configs, errors, topics
from ..context import Context
from .metadata import topic_id

ZERO_ID = uuid.UUID(int=0)
POLL_S = 0.5  # at most, between looks at a stream whose change is due later


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


async def settled(ctx: Context, name: str, deadline: float) -> Any:
    """The stream once neither CREATING nor UPDATING (its change applied), or as it is at the
    deadline; None once gone."""
    while True:
        stream = await ctx.blocking(ctx.kinesis.find, name)
        if stream is None or stream.status not in ("CREATING", "UPDATING"):
            return stream
        now = time.time()
        if now >= deadline:
            return stream
        await asyncio.sleep(min(max(stream.ready_at - now, 0.005), deadline - now, POLL_S))


# CreateTopics


async def create_topics(ctx: Context, body: Any) -> dict[str, Any]:
    timeout_ms = _ms(body.timeout)
    deadline = time.time() + max(timeout_ms, 0) / 1000
    names = [t.name for t in body.topics]
    results, seen = [], set()
    for topic in body.topics:
        if topic.name in seen:
            continue
        seen.add(topic.name)
        if names.count(topic.name) > 1:  # Kafka refuses every entry of a name given twice
            results.append(_failed(topic.name, errors.INVALID_REQUEST, "the topic is named more than once"))
        else:
            results.append(await ctx.blocking(_create, ctx.kinesis, topic, body.validate_only))
    for result in results:
        if result["error_code"] or body.validate_only or timeout_ms <= 0:
            continue  # timeout 0: answered at once, as Kafka does, the stream still CREATING
        stream = await settled(ctx, result["name"], deadline)
        if stream is not None and stream.status == "CREATING":
            result.update(error_code=errors.REQUEST_TIMED_OUT,
                          error_message="the topic's stream is still CREATING; it will be ACTIVE shortly")
    return {"throttle_time": 0, "topics": results}


def _failed(name: str, code: int, message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": ZERO_ID, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


def _create(svc: Any, topic: Any, validate_only: bool) -> dict[str, Any]:
    name = topic.name
    problem = topics.invalid_name(name)
    if problem is not None:
        return _failed(name, errors.INVALID_TOPIC_EXCEPTION, problem)
    existing = svc.find(name)
    if existing is not None:
        return _failed(name, errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    count, rf = topic.num_partitions, topic.replication_factor
    if topic.assignments:
        if count != -1 or rf != -1:
            return _failed(name, errors.INVALID_REQUEST,
                           "Both numPartitions or replicationFactor and replicasAssignments were set.")
        count = len(topic.assignments)
        if any(list(a.broker_ids) != [0] for a in topic.assignments):
            return _failed(name, errors.INVALID_REPLICA_ASSIGNMENT,
                           "kinesim is one broker, node 0: every partition's replicas are [0]")
        rf = 1
    if count == -1:
        count = topics.AUTO_CREATE_SHARDS  # the broker's num.partitions
    if count <= 0:
        return _failed(name, errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    if rf not in (-1, 1):
        return _failed(name, errors.INVALID_REPLICATION_FACTOR,
                       "Replication factor must be larger than 0, or -1 to use the default value." if rf <= 0 else
                       f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                       "cannot be reached because only 1 broker(s) are registered.")
    try:
        wanted = configs.check((c.name, c.value) for c in topic.configs)
    except configs.ConfigError as err:
        return _failed(name, errors.INVALID_CONFIG, str(err))
    if validate_only:
        try:
            streams.check_shard_limit(svc, count)
        except AwsError as err:
            return _failed(name, errors.INVALID_PARTITIONS, err.message)
        made_id = ZERO_ID
    else:
        code, message = topics.create(svc, name, count, wanted.retention_hours, wanted.max_record_kib)
        if code:
            return _failed(name, code, message)
        stream = svc.find(name)
        made_id = topic_id(stream) if stream is not None else ZERO_ID
    described = configs.describe(wanted.retention_hours or configs.DEFAULT_HOURS,
                                 wanted.max_record_kib or configs.DEFAULT_KIB)
    return {"name": name, "topic_id": made_id, "error_code": errors.NONE, "error_message": None,
            "num_partitions": count, "replication_factor": 1, "configs": described}


# DeleteTopics


async def delete_topics(ctx: Context, body: Any) -> dict[str, Any]:
    timeout_ms = _ms(body.timeout)
    deadline = time.time() + max(timeout_ms, 0) / 1000
    if hasattr(body, "topics"):  # v6: by name or by topic id
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, wanted_id in wanted:
        result = await ctx.blocking(_delete, ctx.kinesis, name, wanted_id)
        if not result["error_code"] and timeout_ms > 0:
            # Answered once the stream is gone, so a CreateTopics of the same name right after works.
            while await ctx.blocking(ctx.kinesis.find, result["name"]) is not None and time.time() < deadline:
                await asyncio.sleep(POLL_S / 10)
        results.append(result)
    return {"throttle_time": 0, "responses": results}


def _delete(svc: Any, name: str | None, wanted_id: uuid.UUID | None) -> dict[str, Any]:
    if name is None and wanted_id not in (None, ZERO_ID):
        stream = next((s for s in svc.all_streams() if s.status != "DELETING" and topic_id(s) == wanted_id), None)
        if stream is None:
            return {"name": None, "topic_id": wanted_id, "error_code": errors.UNKNOWN_TOPIC_ID,
                    "error_message": "Topic id not found"}
        name = stream.name
    stream = svc.find(name) if name else None
    answer = {"name": name, "topic_id": ZERO_ID if stream is None else topic_id(stream)}
    if stream is None or stream.status == "DELETING":
        return {**answer, "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                "error_message": "This server does not host this topic-partition."}
    try:
        # Deleting a topic drops its consumers' state in Kafka: the stream's registered (EFO)
        # consumers go with it.
        streams.delete_stream(svc, {"StreamName": name, "EnforceConsumerDeletion": True})
    except AwsError as err:
        # A stream with Kinesis queues or channels attached is kept (as DeleteStream keeps it).
        return {**answer, "error_code": errors.POLICY_VIOLATION, "error_message": err.message}
    return {**answer, "error_code": errors.NONE, "error_message": None}


# CreatePartitions


async def create_partitions(ctx: Context, body: Any) -> dict[str, Any]:
    """Partitions are shards and a shard is only ever added by a reshard: the widest open shard
    is split (closing it: a partition, and adding two) until the topic has at least `count`
    partitions, so it may end with one more than asked (docs/plans/issue-35-kafka.md §4 rule 5).
    Explicit assignments are ignored: every partition's replica is node 0."""
    deadline = time.time() + max(_ms(body.timeout), 0) / 1000
    results = []
    for topic in body.topics:
        code, message = await ctx.blocking(_can_widen, ctx.kinesis, topic.name, topic.count)
        if not code and not body.validate_only:
            code, message = await _widen(ctx, topic.name, topic.count, deadline)
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "results": results}


def _splits(count: int, partitions: int) -> int:
    return max(0, -(-(count - partitions) // 2))  # each split adds two partitions


def _can_widen(svc: Any, name: str, count: int) -> tuple[int, str | None]:
    stream, code = topics.find(svc, name)
    if code:
        return code, None
    have = len(stream.shards)
    if count <= have:
        return errors.INVALID_PARTITIONS, (f"Topic currently has {have} partitions, which is higher than the "
                                           f"requested {count}." if count < have else f"Topic already has {have} partitions.")
    if stream.mode == "ON_DEMAND":
        return errors.INVALID_REQUEST, "the topic's stream is ON_DEMAND: Kinesis scales it, it cannot be resharded"
    try:
        streams.check_shard_limit(svc, _splits(count, have))
    except AwsError as err:
        return errors.INVALID_PARTITIONS, err.message
    return errors.NONE, None


async def _widen(ctx: Context, name: str, count: int, deadline: float) -> tuple[int, str | None]:
    # At least the stream's UPDATING time per split, whatever the client's timeout: an answer
    # sent half-way would leave the client guessing.
    while True:
        stream = await settled(ctx, name, max(deadline, time.time() + 30))
        if stream is None or stream.status == "DELETING":
            return errors.UNKNOWN_TOPIC_OR_PARTITION, None
        if stream.status != "ACTIVE":
            return errors.REQUEST_TIMED_OUT, "the topic's stream is still UPDATING"
        if len(stream.shards) >= count:
            return errors.NONE, None
        try:
            await ctx.blocking(_split_widest, ctx.kinesis, stream)
        except AwsError as err:
            if err.code != "ResourceInUseException":  # another reshard began meanwhile: wait for it
                return errors.INVALID_REQUEST, err.message


def _split_widest(svc: Any, stream: Any) -> None:
    shard = max(stream.open_shards(), key=lambda s: (s.end_hash - s.start_hash, -s.start_hash))
    middle = shard.start_hash + (shard.end_hash - shard.start_hash + 1) // 2
    resharding.split_shard(svc, {"StreamName": stream.name, "ShardToSplit": shard.shard_id,
                                 "NewStartingHashKey": str(middle)})
