"""Shard uids and the iterator key: one per server, shared by the Kinesis of every account and region.

Records, iterators and readers' checkpoints name a shard by its uid, and records of every scope live
in one table keyed by it, so a uid is never given out twice across scopes, nor across restarts. Both
are kept in the unscoped "meta" documents of the store, where a server of one scope kept them.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Iterable

from ..scoped_store import every_scope
from .model import Stream

log = logging.getLogger("kinesim.kinesis")

# The "meta" documents: the next shard uid (a uid is never given out twice, not even across
# restarts), and the key iterators are sealed with.
UID_COUNTER = "next-shard-uid"
ITERATOR_KEY = "iterator-key"


class ShardUids:
    def __init__(self, store: Any):
        self.store = store  # the whole store, not one scope's view
        self._lock = threading.Lock()  # a leaf lock: taken under streams' and services' locks
        meta = store.documents("meta")
        self._next = self._saved = meta.get(UID_COUNTER, 1)
        if ITERATOR_KEY in meta:
            self.iterator_key = bytes.fromhex(meta[ITERATOR_KEY])
        else:
            self.iterator_key = os.urandom(32)
            store.put_document("meta", ITERATOR_KEY, self.iterator_key.hex())

    def new(self) -> int:
        with self._lock:
            uid = self._next
            self._next += 1
            return uid

    def save(self) -> None:
        """Store the counter if uids were given out since it was last stored. Called before any
        document naming a new uid is written, so that no later run hands that uid out again: the
        highest uids may belong to a stream deleted since, whose iterators and checkpoints must not
        apply to a new shard. One small write per CreateStream or reshard."""
        with self._lock:
            if self._next > self._saved:
                self.store.put_document("meta", UID_COUNTER, self._next)
                self._saved = self._next

    def finish_interrupted_drops(self) -> None:
        """At start, before any Kinesis is made: delete the records of shards that belong to no
        stream of any scope, left by a kill -9 inside a stream's deletion (its document goes first).

        The counter is first floored above the uids of those records and stored: a database written
        before the counter was kept has no other trace of them once they are deleted, and without
        the floor a new shard would take a uid that still has records."""
        live = set(_uids(every_scope(self.store, "stream")))
        with_records = self.store.shard_uids_with_records()
        with self._lock:
            self._next = max(self._next, 1 + max(live.union(with_records), default=0))
        self.save()
        orphans = [uid for uid in with_records if uid not in live]
        if orphans:
            deleted = self.store.delete_records(orphans)
            log.warning("deleted %d records left by %d shards of streams whose deletion was interrupted",
                        deleted, len(orphans))


def _uids(docs: Iterable[dict[str, Any]]) -> Iterable[int]:
    for doc in docs:
        for shard in Stream.from_doc(doc).shards:
            yield shard.uid
