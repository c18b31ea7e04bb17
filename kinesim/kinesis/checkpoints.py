"""The one durable checkpoint of an in-process stream reader (a mapping, a Firehose source, ...).

A Checkpoint holds, per shard (keyed by the shard's store uid, unique even when a stream of the
same name was deleted and created again), a ShardMark: the next record index to read for each of
the reader's lanes (one for a reader without lanes), an opaque state per lane the reader keeps
with it (a mapping lane's open tumbling window), and whether the shard was read to its end.
Shards without a mark are unread; lineage order (reader.readable_shards) only asks `ended`.

It is stored through CheckpointStore (kind and name chosen by its owner) as a header document
and one small document per shard's mark, so that moving one shard's mark writes that mark only,
not every shard's (a mapping checkpoints after each batch: a 1,024-shard stream's whole
checkpoint is ~100 KB). CheckpointStore also reads an earlier format (`legacy`, and version 2's
single document with every mark).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from ..store import Store

VERSION = 3         # a header document (kind, name) and a document per mark (kind, "name/uid")
ONE_DOCUMENT = 2    # every mark in the header document: still read, replaced by the next save


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
        """Every mark in one document (a queue keeps its cursors so, beside its messages)."""
        return {"version": ONE_DOCUMENT, "shards": [m.to_doc() for m in list(self.marks.values())]}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "Checkpoint":
        return cls({m.uid: m for m in map(ShardMark.from_doc, d["shards"])})



Legacy = Callable[[], "Checkpoint | None"]


class CheckpointStore:
    """One reader's Checkpoint as store documents of `kind`: the header (`name`) and the marks
    (`name`/uid). `save` writes the marks that changed since the last save, with the header the
    first time, in one transaction; `save_mark` writes one mark (the caller knows which moved).

    `legacy`, when given, reads the reader's checkpoint as an earlier kinesim wrote it (None: there
    is none); it is asked only when no current document exists, and what it returns is saved in
    the current format at once (then `forget_legacy`, if given, deletes the old documents: in that
    order, a kill -9 in between leaves both, and the current one wins).
    """

    def __init__(self, store: Store, kind: str, name: str, legacy: Legacy | None = None,
                 forget_legacy: Callable[[], None] | None = None):
        self.store, self.kind, self.name = store, kind, name
        self.legacy, self.forget_legacy = legacy, forget_legacy
        self._prefix = name + "/"   # owners' names never hold a "/" (stream, channel names; UUIDs)
        self._lock = threading.Lock()
        # The mark documents as last written or read, by uid; None until this format's header is
        # known to be stored (the next save writes it with every mark).
        self._saved: dict[int, dict[str, Any]] | None = None

    def load(self) -> Checkpoint | None:
        doc = self.store.document(self.kind, self.name)
        version = doc.get("version") if isinstance(doc, dict) else None
        if version == VERSION:
            docs = [d for n, d in self.store.documents(self.kind).items() if n.startswith(self._prefix)]
            checkpoint = Checkpoint({m.uid: m for m in map(ShardMark.from_doc, docs)})
            with self._lock:
                self._saved = {m["uid"]: m for m in docs}
        elif version == ONE_DOCUMENT:
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
        with self._lock:
            docs = {uid: m.to_doc() for uid, m in list(checkpoint.marks.items())}
            saved = self._saved or {}
            changed = {self._prefix + str(uid): d for uid, d in docs.items() if saved.get(uid) != d}
            if self._saved is None:  # header and marks in one transaction: a version 2 document
                changed[self.name] = {"version": VERSION}  # is replaced whole or not at all
            self.store.put_documents(self.kind, changed)
            gone = [self._prefix + str(uid) for uid in saved if uid not in docs]
            if gone:  # marks of shards no longer read (a re-created stream's): never loaded again
                self.store.delete_documents(self.kind, gone)
            self._saved = docs

    def save_mark(self, checkpoint: Checkpoint, mark: ShardMark) -> None:
        """`mark` (of `checkpoint`) moved: only it is written, once the header is stored."""
        with self._lock:
            if self._saved is not None:
                doc = mark.to_doc()
                self.store.put_document(self.kind, self._prefix + str(mark.uid), doc)
                self._saved[mark.uid] = doc
                return
        self.save(checkpoint)

    def delete(self) -> None:
        """The header and every mark, in one transaction (no mark outlives its header)."""
        with self._lock:
            names = [n for n in self.store.documents(self.kind) if n.startswith(self._prefix)]
            self.store.delete_documents(self.kind, names + [self.name])
            self._saved = None
