"""The one durable checkpoint of an in-process stream reader (a mapping, a Firehose source, ...).

A Checkpoint holds, per shard (keyed by the shard's store uid, unique even when a stream of the
same name was deleted and created again), a ShardMark: the next record index to read for each of
the reader's lanes (one for a reader without lanes), an opaque state per lane the reader keeps
with it (a mapping lane's open tumbling window), and whether the shard was read to its end.
Shards without a mark are unread; lineage order (reader.readable_shards) only asks `ended`.

It is stored as one store document (kind and name chosen by its owner) through CheckpointStore,
which also converts a document of an earlier format when it loads one (`legacy`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..store import Store

VERSION = 2


@dataclass
class ShardMark:
    shard_id: str
    uid: int
    positions: list[int]                      # per lane: the next record index to read
    states: list[Any] = field(default_factory=list)  # per lane: the reader's own state, or None
    ended: bool = False                       # a closed shard read (and handled) to its end

    def __post_init__(self) -> None:
        if len(self.states) != len(self.positions):
            self.states = [None] * len(self.positions)

    @property
    def position(self) -> int:
        """Where the shard as a whole resumes: its slowest lane."""
        return min(self.positions)

    def with_lanes(self, count: int) -> "ShardMark":
        """This mark for `count` lanes. When their number changed, records map to other lanes, so
        every lane resumes where the slowest was (a few records may be read again); states drop."""
        if count == len(self.positions):
            return self
        return ShardMark(self.shard_id, self.uid, [self.position] * count, ended=self.ended)

    def to_doc(self) -> dict[str, Any]:
        return {"shard": self.shard_id, "uid": self.uid, "positions": self.positions, "states": self.states,
                "ended": self.ended}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "ShardMark":
        return cls(d["shard"], d["uid"], list(d["positions"]), list(d.get("states") or []), d.get("ended", False))


@dataclass
class Checkpoint:
    marks: dict[int, ShardMark] = field(default_factory=dict)   # by shard uid

    def mark(self, shard: Any) -> ShardMark | None:
        return self.marks.get(shard.uid)

    def ended(self, shard: Any) -> bool:
        mark = self.marks.get(shard.uid)
        return mark is not None and mark.ended

    def set(self, mark: ShardMark) -> ShardMark:
        self.marks[mark.uid] = mark
        return mark

    def only(self, uids: set[int]) -> "Checkpoint":
        """The marks of these shards (a re-created stream's shards have other uids)."""
        return Checkpoint({uid: m for uid, m in self.marks.items() if uid in uids})

    def to_doc(self) -> dict[str, Any]:
        return {"version": VERSION, "shards": [m.to_doc() for m in list(self.marks.values())]}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "Checkpoint":
        return cls({m.uid: m for m in map(ShardMark.from_doc, d["shards"])})

    @staticmethod
    def is_current(d: Any) -> bool:
        return isinstance(d, dict) and d.get("version") == VERSION


Legacy = Callable[[], "Checkpoint | None"]


class CheckpointStore:
    """One reader's Checkpoint as the store document (`kind`, `name`).

    `legacy`, when given, reads the reader's checkpoint as an earlier kinesim wrote it (None: there
    is none); it is asked only when no current document exists, and what it returns is saved in
    the current format at once (then `forget_legacy`, if given, deletes the old documents: in that
    order, a kill -9 in between leaves both, and the current one wins).
    """

    def __init__(self, store: Store, kind: str, name: str, legacy: Legacy | None = None,
                 forget_legacy: Callable[[], None] | None = None):
        self.store, self.kind, self.name = store, kind, name
        self.legacy, self.forget_legacy = legacy, forget_legacy

    def load(self) -> Checkpoint | None:
        doc = self.store.document(self.kind, self.name)
        if Checkpoint.is_current(doc):
            checkpoint = Checkpoint.from_doc(doc)
        else:
            checkpoint = self.legacy() if self.legacy is not None else None
            if checkpoint is None:
                return None
            self.save(checkpoint)
        if self.forget_legacy is not None:
            self.forget_legacy()
        return checkpoint

    def save(self, checkpoint: Checkpoint) -> None:
        self.store.put_document(self.kind, self.name, checkpoint.to_doc())

    def delete(self) -> None:
        self.store.delete_document(self.kind, self.name)
