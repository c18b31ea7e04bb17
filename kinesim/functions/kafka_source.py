"""An event source mapping on a topic of kinesim's Kafka listener (a "self-managed Apache Kafka"
source for the Lambda API; its parameters: kafka_mappings.py). Its poller is a stream mapping's
(mapping_poller.py, lane.py: batches, the batching window, retries, bisecting, filters,
`batchItemFailures`, children after their parents) reading the topic's stream in-process, with
three differences, all here:

- What the function gets is AWS's self-managed Kafka event (the Lambda guide's example,
  with-kafka): `{"eventSource": "SelfManagedKafka", "bootstrapServers": "<the endpoints, comma-
  joined>", "records": {"<topic>-<partition>": [{topic, partition, offset, timestamp,
  timestampType, key, value, headers}]}}`, key and value in base64 (no `key` for a null key, no
  `value` for a null one), each header `{"name": [its bytes]}`. The Kafka fields are the ones a
  Kafka consumer fetches (kafka/batches.py `record_of`): a record put through Kinesis has its
  partition key as key and its arrival time as timestamp. One invocation holds one partition's
  records, in order.
- Progress is the consumer group's committed offsets (ConsumerGroupId, by default the mapping's
  UUID), the documents OffsetCommit writes (kafka/handlers/group_offsets.py), written after each
  batch as the checkpoint of a stream mapping is: Kafka tools see the group, its offsets and its
  lag through the Kafka port. A partition the group has an offset for resumes there, whatever
  StartingPosition says (the guide, "Customizable consumer group ID"); the others start at
  StartingPosition, and that start is committed at once, so a restart does not move a LATEST.
  The mapping commits as a consumer without a member id (a "simple consumer", generation -1): the
  group shows Empty in DescribeGroups, with its offsets; it is not a member of a group that Kafka
  clients join, and does not share the partitions with them.
- A bootstrap server that is not this server's Kafka listener cannot be reached: the mapping
  reads nothing and says so in LastProcessingResult, in the words AWS uses for an unreachable
  cluster (reported with an MSK mapping: pulumi/pulumi-aws issue 1290). A topic that does not
  exist yet is waited for, as a Kafka consumer subscribed to it waits.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Hashable

from ..config import Settings
from ..kafka.batches import record_of
from ..kafka.handlers.group_offsets import committed_offset, offset_document, save_offsets
from ..kinesis.model import Shard, Stream
from ..kinesis.reader import Batch, Checkpoint, ShardCursor, ShardMark, starting_checkpoint
from ..store import Store
from . import kafka_mappings
from .checkpoints import Checkpoints
from .filters import FilterCriteria, kafka_view
from .mapping_config import MappingConfig, _int, function_target, starting_position
from .mapping_poller import MappingPoller
from .mapping_status import MappingStatus
from .shard_sources import PolledSource

CONNECTION_ERROR = "PROBLEM: Connection error. Please check your event source connection configuration."
TIMESTAMP_TYPE = "CREATE_TIME"  # a Kafka consumer's view too: Fetch's batches are CreateTime


@dataclass(frozen=True)
class KafkaMappingConfig(MappingConfig):
    """A stream mapping's configuration (one lane, no tumbling windows, no destination) plus
    what a Kafka source adds."""
    bootstrap: tuple[str, ...] = ()
    group_id: str = ""
    reachable: bool = True    # a bootstrap server is this server's Kafka listener

    @classmethod
    def from_kafka_mapping(cls, m: dict[str, Any], settings: Settings) -> "KafkaMappingConfig":
        FilterCriteria.parse(m.get("FilterCriteria"))  # refuse a bad pattern now, not in the poller
        invoke_name, executed_version = function_target(m["FunctionArn"])
        position, timestamp = starting_position(m)
        window = m.get("MaximumBatchingWindowInSeconds")
        return cls(
            uuid=m["UUID"], source_arn="", stream_name=m["Topics"][0], function_arn=m["FunctionArn"],
            invoke_name=invoke_name, executed_version=executed_version, state=m.get("State", "Enabled"),
            batch_size=int(m.get("BatchSize") or kafka_mappings.DEFAULT_BATCH_SIZE),
            batching_window_s=kafka_mappings.DEFAULT_BATCHING_WINDOW_S if window is None else float(window),
            lanes=1, starting_position=position, starting_timestamp=timestamp,
            max_retries=_int(m.get("MaximumRetryAttempts"), -1),
            max_record_age_s=_int(m.get("MaximumRecordAgeInSeconds"), -1),
            bisect=bool(m.get("BisectBatchOnFunctionError")), tumbling_window_s=0,
            report_item_failures="ReportBatchItemFailures" in (m.get("FunctionResponseTypes") or []),
            on_failure=None,
            filter_patterns=tuple(f.get("Pattern", "") for f in ((m.get("FilterCriteria") or {}).get("Filters") or [])),
            bootstrap=tuple(kafka_mappings.bootstrap_servers(m)), group_id=kafka_mappings.group_id(m),
            reachable=kafka_mappings.reachable(m, settings))


def partition_of(shard_id: str) -> int:
    """Partition N is shard `shardId-N` (kafka/topics.py)."""
    return int(shard_id.rsplit("-", 1)[1])


def kafka_record(topic: str, partition: int, row: tuple) -> dict[str, Any]:
    """One record of the event, from a stored row with its Kafka column (index, seq, pk, data,
    arrival, meta), in the guide's order of keys."""
    r = record_of(row, 0)
    out: dict[str, Any] = {"topic": topic, "partition": partition, "offset": row[0] - 1,
                           "timestamp": r.timestamp_ms, "timestampType": TIMESTAMP_TYPE}
    if r.key is not None:
        out["key"] = base64.b64encode(r.key).decode()
    if r.value is not None:
        out["value"] = base64.b64encode(r.value).decode()
    out["headers"] = [{name: None if value is None else list(value)} for name, value in r.headers]
    return out


class KafkaShardSource(PolledSource):
    """A partition read as Fetch reads it: the stored rows with their Kafka column."""

    def read(self, index: int, want: int, max_bytes: int) -> Batch:
        return self.cursor.read_from(index, want, max_bytes, kafka=True)


class GroupOffsets:
    """Where a Kafka mapping's progress goes (MappingStatus writes through it as through
    Checkpoints): each shard mark's position as the group's committed offset (the next offset
    to read, i.e. the position less one); the LastProcessingResult beside a stream mapping's."""

    def __init__(self, store: Store, config: KafkaMappingConfig):
        self.store, self.group, self.topic = store, config.group_id, config.stream_name
        self.results = Checkpoints(store, config.uuid)

    def committed(self, stream: Stream, shard: Shard) -> int | None:
        """The next record index the group reads in `shard`, None without an offset."""
        offset = committed_offset(self.store, self.group, stream, shard)
        return None if offset is None else offset + 1

    def save(self, checkpoint: Checkpoint, mark: ShardMark | None = None) -> None:
        marks = [mark] if mark is not None else list(checkpoint.marks.values())
        save_offsets(self.store, self.group, {m.uid: offset_document(self.topic, partition_of(m.shard_id),
                                                                     m.position - 1) for m in marks})

    def load_result(self) -> str | None:
        return self.results.load_result()

    def save_result(self, result: str) -> None:
        self.results.save_result(result)


class KafkaPoller(MappingPoller):
    """A Kafka mapping's poller: a stream mapping's, with the differences of the module's doc."""

    config: KafkaMappingConfig

    def __init__(self, manager: Any, config: KafkaMappingConfig):
        super().__init__(manager, config)
        self.offsets = GroupOffsets(manager.store, config)
        self.reporter = MappingStatus(self.offsets)  # type: ignore[arg-type]

    def status(self) -> dict[str, str]:
        return {"State": "Enabled" if self.active else "Disabled",
                "StateTransitionReason": kafka_mappings.STATE_REASON, "LastProcessingResult": self.result}

    def scan(self, prompted: bool = True) -> None:
        if not self.config.reachable:
            self.set_result(CONNECTION_ERROR)
            return
        stream = self.svc.find(self.config.stream_name)
        if stream is None or stream.status == "DELETING":
            self.attach(None)  # not made yet (or deleted): read once it exists
            return
        super().scan(prompted)

    def attach(self, stream: Stream | None) -> None:
        """Take up `stream`: each partition at the group's committed offset, else at
        StartingPosition (then committed)."""
        if stream is self.stream:
            return
        with self.lock:
            self.running.clear()  # lanes of a deleted stream end by themselves
        self.stream, self.checkpoint = stream, Checkpoint()
        self.shards_seen = -1
        if stream is None or stream.status in ("CREATING", "DELETING") or not self.config.reachable:
            self.stream = None
            return
        cfg = self.config
        start = starting_checkpoint(self.svc, stream, cfg.starting_position, cfg.starting_timestamp)
        for shard in list(stream.shards):
            position = self.offsets.committed(stream, shard)
            mark = start.mark(shard)
            if position is not None:
                mark = ShardMark(shard.shard_id, shard.uid, [position],
                                 ended=not shard.is_open and position >= shard.next_index)
            if mark is not None:
                self.checkpoint.set(mark)
        self.save()

    # the event

    def record_entry(self, row: Any, stream: Stream, shard: Shard, role_arn: str) -> dict[str, Any]:
        return kafka_record(stream.name, shard.index, row)

    def record_key(self, row: Any, stream: Stream, shard: Shard) -> Hashable:
        return (f"{stream.name}-{shard.index}", row[0] - 1)

    @staticmethod
    def reported_key(ident: Any) -> Hashable | None:  # type: ignore[override]
        """A Kafka record's `itemIdentifier`: {"topic-partition": "orders-0", "offset": 15} (the
        response of Powertools for AWS Lambda's Kafka batch processing, aws-powertools/
        powertools-lambda-python PR 7941, getting_started_kafka_response.json)."""
        if not isinstance(ident, dict):
            return None
        where, offset = ident.get("topic-partition"), ident.get("offset")
        if not isinstance(where, str) or not isinstance(offset, int) or isinstance(offset, bool):
            return None
        return where, offset

    def matches(self, entry: dict[str, Any], row: Any) -> bool:
        if self.filters is None:
            return True
        value = base64.b64decode(entry["value"]) if "value" in entry else None
        return self.filters.matches(kafka_view(value))

    def batch_event(self, entries: list[dict[str, Any]], stream: Stream, shard: Shard) -> dict[str, Any]:
        return {"eventSource": "SelfManagedKafka", "bootstrapServers": ",".join(self.config.bootstrap),
                "records": {f"{stream.name}-{shard.index}": entries}}

    def make_source(self, cursor: ShardCursor, mark: ShardMark) -> KafkaShardSource:
        return KafkaShardSource(cursor)
