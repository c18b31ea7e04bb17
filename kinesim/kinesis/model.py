"""What a stream is: its shards (with hash ranges and lineage), state, settings and consumers.

Plain objects, kept in memory and written through to the store's documents on every change.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from . import sequence

MAX_HASH = (1 << 128) - 1


@dataclass
class Shard:
    uid: int                      # store key, unique across streams and re-creations
    index: int                    # the N of shardId-N within its stream
    start_hash: int
    end_hash: int
    created: int                  # epoch seconds
    parent: str | None = None
    adjacent_parent: str | None = None
    closed_at: float | None = None
    ending_seq: str | None = None
    # Record index the next put gets. Kept in memory; the saved value is only a floor for when
    # retention has deleted a shard's newest records (at load: max(floor, last stored + 1)).
    next_index: int = 1
    # Readers (GetRecords long-polls, SubscribeToShard) wait here for appends.
    appended: threading.Condition = field(default_factory=threading.Condition, repr=False, compare=False)
    # Readers that hold no thread while they wait (mapping lanes, StreamReader) are called back
    # once at the next notify instead; guarded by `appended` (kinesis/reader.py registers them).
    listeners: set[Callable[[], None]] = field(default_factory=set, repr=False, compare=False)
    # How many readers wait on `appended` or are among `listeners` (changed under `appended`): a
    # put to 500 shards skips the notification of those nobody waits on (see `notify`).
    watchers: int = field(default=0, repr=False, compare=False)

    @cached_property
    def shard_id(self) -> str:  # a shard's index never changes; PutRecords names it per record
        return sequence.shard_id(self.index)

    @property
    def starting_seq(self) -> str:
        return sequence.make(self.created, self.index, 0, self.created)

    @property
    def is_open(self) -> bool:
        return self.closed_at is None

    def notify(self) -> None:
        """Something for readers happened (an append, the shard closed, the stream went): waiters
        wake, listeners are called (each once; they register again when they wait again).

        Read without the lock, `watchers` at 0 means nobody is to be woken: a reader counts itself
        (`watch`) before it looks at the shard, and whoever changes the shard (next_index,
        closed_at, the stream's status) does so before calling this. So either this call sees the
        reader counted, or the reader sees the change and does not wait. (CPython runs one
        bytecode at a time: each thread's reads and writes are seen in the order it made them.)
        Taking the condition for each of 500 shards a put touched cost ~2 µs per record."""
        if not self.watchers:
            return
        with self.appended:
            self.appended.notify_all()
            fired, self.listeners = self.listeners, set()
            self.watchers -= len(fired)
        for callback in fired:
            callback()

    def watch(self, change: int) -> None:
        """Count a reader in (1, before it looks at the shard) or out (-1); under `appended`."""
        self.watchers += change

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ShardId": self.shard_id}
        if self.parent:
            out["ParentShardId"] = self.parent
        if self.adjacent_parent:
            out["AdjacentParentShardId"] = self.adjacent_parent
        out["HashKeyRange"] = {"StartingHashKey": str(self.start_hash), "EndingHashKey": str(self.end_hash)}
        seq_range = {"StartingSequenceNumber": self.starting_seq}
        if self.ending_seq:
            seq_range["EndingSequenceNumber"] = self.ending_seq
        out["SequenceNumberRange"] = seq_range
        return out

    def to_doc(self) -> dict[str, Any]:
        return {"uid": self.uid, "index": self.index, "start": str(self.start_hash), "end": str(self.end_hash),
                "created": self.created, "parent": self.parent, "adjacent": self.adjacent_parent,
                "closed_at": self.closed_at, "ending_seq": self.ending_seq, "next_index": self.next_index}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "Shard":
        return cls(uid=d["uid"], index=d["index"], start_hash=int(d["start"]), end_hash=int(d["end"]),
                   created=d["created"], parent=d["parent"], adjacent_parent=d["adjacent"],
                   closed_at=d["closed_at"], ending_seq=d["ending_seq"], next_index=d.get("next_index", 1))


@dataclass
class Consumer:
    name: str
    arn: str
    created: float
    status: str = "CREATING"
    ready_at: float = 0.0          # when CREATING becomes ACTIVE / DELETING disappears
    tags: dict[str, str] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "created": self.created, "status": self.status,
                "ready_at": self.ready_at, "tags": self.tags}


@dataclass
class Stream:
    name: str
    arn: str
    created: float
    mode: str = "PROVISIONED"
    status: str = "CREATING"
    # When the current CREATING/UPDATING/DELETING state ends (applied lazily on next access).
    ready_at: float = 0.0
    retention_hours: int = 24
    encryption_type: str = "NONE"
    key_id: str | None = None
    shard_level_metrics: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    shards: list[Shard] = field(default_factory=list)
    consumers: dict[str, Consumer] = field(default_factory=dict)
    max_record_size_kib: int = 1024
    warm_throughput_mibps: int | None = None
    mode_changed_at: float | None = None
    # "AUTO" (records spread over the open shards, partition keys optional and ignored) or AWS's
    # default "USER_PARTITION_KEY". Whoever changes it resets `routing`.
    distribution: str = "USER_PARTITION_KEY"
    # Set when CREATING first ends: only then are shards listed (a stream deleted while CREATING
    # lists none, as kinesalite's, whose Shards stay [] until the stream turns ACTIVE).
    activated: bool = False
    # A SplitShard/MergeShards/UpdateShardCount accepted but not yet in effect: AWS answers at once
    # and changes the shards when UPDATING ends. Its parameters (see resharding.apply_pending),
    # kept in the document so that an acknowledged reshard survives a kill -9.
    pending_reshard: dict[str, Any] | None = None
    # Serialises puts and reshards of this stream; readers never take it.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    # The put path's hash-key router, built once per shard layout (see records.router).
    routing: tuple[int, Any] | None = field(default=None, repr=False, compare=False)

    def open_shards(self) -> list[Shard]:
        return [s for s in self.shards if s.is_open]

    def reserved_shards(self) -> int:
        """Open shards counted against the account's limit: a pending reshard's children already
        count, so that nothing created meanwhile can push the account over the limit when they
        appear."""
        added = self.pending_reshard["added"] if self.pending_reshard else 0
        return len(self.open_shards()) + max(0, added)

    def shard(self, shard_id: str) -> Shard | None:
        for s in self.shards:
            if s.shard_id == shard_id:
                return s
        return None

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "created": self.created, "mode": self.mode,
                "status": self.status, "ready_at": self.ready_at, "retention_hours": self.retention_hours,
                "encryption_type": self.encryption_type, "key_id": self.key_id,
                "shard_level_metrics": self.shard_level_metrics, "tags": self.tags,
                "shards": [s.to_doc() for s in self.shards],
                "consumers": [c.to_doc() for c in self.consumers.values()],
                "max_record_size_kib": self.max_record_size_kib, "distribution": self.distribution,
                "warm_throughput_mibps": self.warm_throughput_mibps, "mode_changed_at": self.mode_changed_at,
                "activated": self.activated, "pending_reshard": self.pending_reshard}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "Stream":
        s = cls(name=d["name"], arn=d["arn"], created=d["created"], mode=d["mode"], status=d["status"],
                ready_at=d["ready_at"], retention_hours=d["retention_hours"],
                encryption_type=d["encryption_type"], key_id=d["key_id"],
                shard_level_metrics=d["shard_level_metrics"], tags=d["tags"],
                shards=[Shard.from_doc(x) for x in d["shards"]],
                max_record_size_kib=d.get("max_record_size_kib", 1024),
                distribution=d.get("distribution", "USER_PARTITION_KEY"),
                warm_throughput_mibps=d.get("warm_throughput_mibps"), mode_changed_at=d.get("mode_changed_at"),
                # Documents from before the flag: every stream past CREATING had been active.
                activated=d.get("activated", d["status"] != "CREATING"),
                pending_reshard=d.get("pending_reshard"))
        s.consumers = {c["name"]: Consumer(**c) for c in d["consumers"]}
        return s


def even_ranges(count: int) -> list[tuple[int, int]]:
    """[0, 2^128-1] split into `count` contiguous ranges, as AWS splits a new stream."""
    size = (MAX_HASH + 1) // count
    ranges = [(i * size, (i + 1) * size - 1) for i in range(count)]
    ranges[-1] = (ranges[-1][0], MAX_HASH)
    return ranges
