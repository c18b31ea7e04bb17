"""Durable progress of event source mappings: the shard reader's Checkpoint
(kinesim.kinesis.checkpoints), one per mapping: per shard, where each of its lanes
(ParallelizationFactor) resumes, the lane's open tumbling window (the mark's per-lane state), and
whether the shard was read to its end. Written only after a batch succeeded or was given up, so a
restart resumes after the last finished batch: at-least-once, never skipping.

Stored as the store documents of kind "mapping-checkpoint" named by the mapping's UUID (its
header, and a document per shard: kinesis/checkpoints.py). Before the
shard reader, kinesim kept one document of kind "checkpoint" per (mapping, shard), named
"<uuid>/<shardId>": those are converted when first loaded, then deleted. The mapping's last
processing result is kept beside them (kind "mapping-result") so it survives a restart too.
"""
from __future__ import annotations

from ..kinesis.checkpoints import Checkpoint, CheckpointStore, ShardMark
from ..store import Store

KIND = "mapping-checkpoint"
LEGACY_KIND = "checkpoint"
RESULT_KIND = "mapping-result"


class Checkpoints:
    """One mapping's checkpoint and last processing result in the store."""

    def __init__(self, store: Store, uuid: str):
        self.store, self.uuid = store, uuid
        self.prefix = uuid + "/"
        self.saved = CheckpointStore(store, KIND, uuid, legacy=self._legacy, forget_legacy=self._forget_legacy)

    def load_checkpoint(self) -> Checkpoint | None:
        return self.saved.load()

    def load(self) -> dict[str, ShardMark]:
        """The marks by shard id (what a look at a mapping's progress wants)."""
        checkpoint = self.saved.load()
        return {m.shard_id: m for m in checkpoint.marks.values()} if checkpoint else {}

    def save(self, checkpoint: Checkpoint, mark: ShardMark | None = None) -> None:
        """The checkpoint; `mark`: only that shard's mark moved."""
        if mark is None:
            self.saved.save(checkpoint)
        else:
            self.saved.save_mark(checkpoint, mark)

    def _legacy_docs(self) -> dict[str, dict]:
        return {name: doc for name, doc in self.store.documents(LEGACY_KIND).items() if name.startswith(self.prefix)}

    def _legacy(self) -> Checkpoint | None:
        """{"shard": shardId, "uid": shard uid, "lanes": [next index per lane], "windows": [open
        tumbling window per lane], "ended": bool}, one document per shard."""
        docs = self._legacy_docs()
        if not docs:
            return None
        return Checkpoint({d["uid"]: ShardMark(d["shard"], d["uid"], list(d["lanes"]), list(d.get("windows") or []),
                                               d.get("ended", False)) for d in docs.values()})

    def _forget_legacy(self) -> None:
        names = list(self._legacy_docs())
        if names:
            self.store.delete_documents(LEGACY_KIND, names)

    def load_result(self) -> str | None:
        doc = self.store.document(RESULT_KIND, self.uuid)
        return doc["LastProcessingResult"] if doc else None

    def save_result(self, result: str) -> None:
        self.store.put_document(RESULT_KIND, self.uuid, {"LastProcessingResult": result})

    def delete_all(self) -> None:
        self.saved.delete()
        self._forget_legacy()
        self.store.delete_document(RESULT_KIND, self.uuid)
