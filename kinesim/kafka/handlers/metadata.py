"""Metadata (3) and DescribeCluster (60): the topics (the scope's streams), their partitions (every
shard the stream ever had) and the one broker, node 0, at the address the client connected to."""
from __future__ import annotations

import uuid
from typing import Any

from ..context import Context
from ..topics import auto_create

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
UNKNOWN_TOPIC_ID = 100
UNSUPPORTED_ENDPOINT_TYPE = 115
BROKER_ENDPOINTS = 1  # DescribeCluster v1's endpoint_type: brokers (2 would be KRaft controllers)

# Topic ids name one incarnation of a topic: a stream deleted and made again under its name gets
# another (Kafka clients use the change to drop what they knew of the old one).
_TOPIC_IDS = uuid.UUID("6f1c0e0a-35ca-4a3e-9d0c-6b61666b6173")


def topic_id(stream: Any) -> uuid.UUID:
    return uuid.uuid5(_TOPIC_IDS, f"{stream.arn}@{stream.created!r}")


def metadata(ctx: Context, body: Any) -> dict[str, Any]:
    kinesis = ctx.kinesis
    requested = body.topics
    if requested is None or (not requested and body.__version__ == 0):  # v0: an empty list is all
        topics = [_topic(s) for s in kinesis.all_streams() if _listed(s)]
    else:
        by_id = None
        topics = []
        for wanted in requested:
            name = wanted.name
            if name is None and getattr(wanted, "topic_id", None) is not None:
                if by_id is None:
                    by_id = {topic_id(s): s for s in kinesis.all_streams() if _listed(s)}
                stream = by_id.get(wanted.topic_id)
                topics.append(_topic(stream) if stream is not None else
                              {"error_code": UNKNOWN_TOPIC_ID, "name": None, "topic_id": wanted.topic_id,
                               "partitions": []})
                continue
            stream = kinesis.find(name)
            code = UNKNOWN_TOPIC_OR_PARTITION
            if stream is None and getattr(body, "allow_auto_topic_creation", True):
                # Kafka's auto.create.topics.enable (on by default; v0-3 always allow it).
                code = auto_create(kinesis, name) or LEADER_NOT_AVAILABLE
                stream = kinesis.find(name)
            if stream is None or not _listed(stream):
                topics.append({"error_code": code, "name": name, "topic_id": None, "partitions": []})
            else:
                topics.append(_topic(stream))
    return {"throttle_time": 0, "brokers": [_broker(ctx, "node_id")], "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id, "topics": topics}


def describe_cluster(ctx: Context, body: Any) -> dict[str, Any]:
    if getattr(body, "endpoint_type", BROKER_ENDPOINTS) != BROKER_ENDPOINTS:
        return {"throttle_time": 0, "error_code": UNSUPPORTED_ENDPOINT_TYPE, "error_message":
                "kinesim has no KRaft controllers to describe, only its broker", "cluster_id": ctx.cluster_id,
                "brokers": []}
    return {"throttle_time": 0, "error_code": 0, "cluster_id": ctx.cluster_id, "controller_id": ctx.node_id,
            "brokers": [_broker(ctx, "broker_id")]}


def _listed(stream: Any) -> bool:
    # A deleting stream is gone for Kafka clients, as a topic marked for deletion is.
    return stream.status != "DELETING"


def _broker(ctx: Context, id_field: str) -> dict[str, Any]:
    return {id_field: ctx.node_id, "host": ctx.host, "port": ctx.port, "rack": None}


def _topic(stream: Any) -> dict[str, Any]:
    if not stream.activated:  # CREATING: no shards yet; clients retry, as for a topic being made
        return {"error_code": LEADER_NOT_AVAILABLE, "name": stream.name, "topic_id": topic_id(stream),
                "partitions": []}
    # Every shard the stream ever had, closed ones too: a Kafka partition never goes away, and
    # a closed shard stays readable to its end.
    partitions = [{"error_code": 0, "partition_index": shard.index, "leader_id": 0, "leader_epoch": 0,
                   "replica_nodes": [0], "isr_nodes": [0], "offline_replicas": []}
                  for shard in sorted(stream.shards, key=lambda s: s.index)]
    return {"error_code": 0, "name": stream.name, "topic_id": topic_id(stream), "is_internal": False,
            "partitions": partitions}
