"""OffsetCommit (8), OffsetFetch (9) and OffsetForLeaderEpoch (23) (docs/plans/issue-35-kafka.md §5).

A committed offset is a document `kafka-offset` / `<group>/<shard uid>` in the scope's store: all
partitions of one OffsetCommit in one `put_documents` transaction, answered once committed, so an
acknowledged commit survives kill -9. Keyed by the shard's uid, not the topic's name: a topic
deleted and made again starts without offsets, as Kafka deletes offsets with their topic.
Only OffsetCommit asks the coordinator (whether the committer may commit); fetching reads the
store alone, so it runs in the pool.

Resharding (plan §4 rule 3): a partition without an offset whose shard descends from one the group
committed on is answered offset 0, not -1, so the consumer reads the child from its start whatever
its auto.offset.reset says (with "latest", Kafka's default, it would skip what was produced to the
child before the group took it: the classic loss after adding partitions).

In-process consumers (a Lambda event source mapping on a topic: functions/kafka_source.py) commit
with `save_offsets` and read with `committed_offset`, so their groups are what this module answers.
"""
from __future__ import annotations

import time
from typing import Any

from .. import coordinator, errors, resharding, topics
from ..context import Context

OFFSET_DOCUMENT = "kafka-offset"
MAX_METADATA = 4096  # Kafka's offset.metadata.max.bytes


def group_of(name: str) -> str:
    """The group of an offset document's name (a group id may itself contain '/')."""
    return name.rsplit("/", 1)[0]


async def offset_commit(ctx: Context, body: Any) -> dict[str, Any]:
    if not body.group_id:
        code = errors.INVALID_GROUP_ID
    else:
        coord = await coordinator.of(ctx)
        code = coord.commit_allowed(body.group_id, body.generation_id_or_member_epoch, body.member_id,
                                    getattr(body, "group_instance_id", None))
    if code:
        return _commit_answer(body, lambda topic, part: code)
    codes = await ctx.blocking(_commit, ctx.kinesis, body)
    return _commit_answer(body, lambda topic, part: codes[(topic.name, part.partition_index)])


def _commit(svc: Any, body: Any) -> dict[tuple[str, int], int]:
    codes, docs, now = {}, {}, time.time()
    for topic in body.topics:
        stream, code = topics.find(svc, topic.name)
        for part in topic.partitions:
            shard = topics.shard_of(stream, part.partition_index) if not code else None
            metadata = part.committed_metadata
            if shard is None:
                codes[(topic.name, part.partition_index)] = code or errors.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and len(metadata.encode()) > MAX_METADATA:
                codes[(topic.name, part.partition_index)] = errors.OFFSET_METADATA_TOO_LARGE
            else:
                codes[(topic.name, part.partition_index)] = errors.NONE
                docs[shard.uid] = offset_document(topic.name, part.partition_index, part.committed_offset, metadata,
                                                  getattr(part, "committed_leader_epoch", -1), now)
    save_offsets(svc.store, body.group_id, docs)  # one transaction; committed before the answer
    return codes


# Shared with in-process consumers (the module's doc).

def offset_document(topic: str, partition: int, offset: int, metadata: str | None = None, leader_epoch: int = -1,
                    at: float | None = None) -> dict[str, Any]:
    """A committed offset as stored: the next offset the group reads in the partition."""
    return {"offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
            "at": time.time() if at is None else at, "topic": topic, "partition": partition}


def save_offsets(store: Any, group_id: str, docs: dict[int, dict[str, Any]]) -> None:
    """Commit `docs` (offset_document by shard uid) for the group, in one transaction."""
    store.put_documents(OFFSET_DOCUMENT, {f"{group_id}/{uid}": doc for uid, doc in docs.items()})


def committed_offset(store: Any, group_id: str, stream: Any, shard: Any) -> int | None:
    """The group's committed offset in `shard`'s partition; 0 for a shard without one whose
    ancestors have one (module doc: resharding); None when the group has none (the consumer's
    reset policy, or a mapping's StartingPosition, applies)."""
    doc = store.document(OFFSET_DOCUMENT, f"{group_id}/{shard.uid}")
    if doc is not None:
        return doc["offset"]
    return 0 if _inherits(store, group_id, stream, shard) else None


def _inherits(store: Any, group_id: str, stream: Any, shard: Any) -> bool:
    """Whether the group committed on one of the shard's ancestors (module doc: resharding)."""
    return resharding.inherits(
        stream, shard, lambda parent: store.document(OFFSET_DOCUMENT, f"{group_id}/{parent.uid}") is not None)


def _commit_answer(body: Any, code_of: Any) -> dict[str, Any]:
    return {"throttle_time": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code_of(t, p)}
                                        for p in t.partitions]} for t in body.topics]}


def offset_fetch(ctx: Context, body: Any) -> dict[str, Any]:
    svc = ctx.kinesis
    if hasattr(body, "groups"):  # v8+: several groups in one request
        return {"throttle_time": 0, "groups": [
            {"group_id": g.group_id, "topics": _fetch(svc, g.group_id, g.topics), "error_code": errors.NONE}
            for g in body.groups]}
    return {"throttle_time": 0, "topics": _fetch(svc, body.group_id, body.topics), "error_code": errors.NONE}


def _fetch(svc: Any, group_id: str, wanted: Any) -> list[dict[str, Any]]:
    """Each partition's committed offset, -1 when none (the client then applies its
    auto.offset.reset); `wanted` None: every partition the group has an offset for."""
    store = svc.store
    if wanted is None:
        shards = {shard.uid: (stream.name, shard.index) for stream in svc.all_streams() for shard in stream.shards}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, doc in store.documents(OFFSET_DOCUMENT).items():
            uid = name.rsplit("/", 1)[-1]
            if group_of(name) == group_id and uid.isdigit() and int(uid) in shards:
                topic, index = shards[int(uid)]
                by_topic.setdefault(topic, []).append(_partition(index, doc))
        return [{"name": t, "partitions": sorted(ps, key=lambda p: p["partition_index"])} for t, ps in by_topic.items()]
    out = []
    for topic in wanted:
        stream, code = topics.find(svc, topic.name)
        parts = []
        for index in topic.partition_indexes:
            shard = topics.shard_of(stream, index) if not code else None
            doc = store.document(OFFSET_DOCUMENT, f"{group_id}/{shard.uid}") if shard is not None else None
            if doc is None and shard is not None and _inherits(store, group_id, stream, shard):
                doc = {"offset": 0}
            parts.append(_partition(index, doc))
        out.append({"name": topic.name, "partitions": parts})
    return out


def _partition(index: int, doc: dict[str, Any] | None) -> dict[str, Any]:
    if doc is None:  # Kafka answers no error for a partition without offset, known or not
        return {"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                "error_code": errors.NONE}
    return {"partition_index": index, "committed_offset": doc["offset"],
            "committed_leader_epoch": doc.get("leader_epoch", -1), "metadata": doc.get("metadata") or "",
            "error_code": errors.NONE}


def offset_for_leader_epoch(ctx: Context, body: Any) -> dict[str, Any]:
    """KIP-320's check after a leader change: every partition has had one leader, epoch 0, so
    epoch 0 ends at the log end offset, and no other epoch exists."""
    svc = ctx.kinesis
    out = []
    for topic in body.topics:
        stream, code = topics.find(svc, topic.topic)
        parts = []
        for part in topic.partitions:
            shard = topics.shard_of(stream, part.partition) if not code else None
            if shard is None:
                parts.append({"error_code": code or errors.UNKNOWN_TOPIC_OR_PARTITION, "partition": part.partition,
                              "leader_epoch": -1, "end_offset": -1})
            elif getattr(part, "current_leader_epoch", -1) > 0:
                parts.append({"error_code": errors.UNKNOWN_LEADER_EPOCH, "partition": part.partition,
                              "leader_epoch": -1, "end_offset": -1})
            elif part.leader_epoch == 0:
                parts.append({"error_code": errors.NONE, "partition": part.partition, "leader_epoch": 0,
                              "end_offset": topics.log_end(shard)})
            else:  # an epoch this log never had: Kafka's UNDEFINED_EPOCH and offset
                parts.append({"error_code": errors.NONE, "partition": part.partition, "leader_epoch": -1,
                              "end_offset": -1})
        out.append({"topic": topic.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": out}
