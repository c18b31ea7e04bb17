"""Durable progress of event source mappings: per (mapping UUID, shard), where each of the shard's
lanes (ParallelizationFactor) resumes, the lane's open tumbling window, and whether the shard was
read to its end. Written only after a batch succeeded or was given up, so a restart resumes after
the last finished batch: at-least-once, never skipping.

Stored as store documents of kind "checkpoint", named "<uuid>/<shardId>"; the mapping's last
processing result is kept beside them (kind "mapping-result") so it survives a restart too.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..store import Store

KIND = "checkpoint"
RESULT_KIND = "mapping-result"


@dataclass
class ShardProgress:
    shard_id: str
    shard_uid: int                  # tells a re-created stream's shard of the same id apart
    lanes: list[int]                # per lane: the next record index it looks at
    windows: list[dict[str, Any] | None] = field(default_factory=list)  # per lane: open tumbling window
    ended: bool = False             # a closed shard whose every record was processed

    def __post_init__(self) -> None:
        if len(self.windows) != len(self.lanes):
            self.windows = [None] * len(self.lanes)

    def with_lanes(self, count: int) -> "ShardProgress":
        """The progress for `count` lanes. When ParallelizationFactor changed, records map to other
        lanes, so every lane resumes where the slowest old lane was (a few records may repeat)."""
        if count == len(self.lanes):
            return self
        return ShardProgress(self.shard_id, self.shard_uid, [min(self.lanes)] * count, ended=self.ended)

    def to_doc(self) -> dict[str, Any]:
        return {"shard": self.shard_id, "uid": self.shard_uid, "lanes": self.lanes, "windows": self.windows,
                "ended": self.ended}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "ShardProgress":
        return cls(d["shard"], d["uid"], list(d["lanes"]), list(d.get("windows") or []), d.get("ended", False))


class Checkpoints:
    """One mapping's checkpoints in the store."""

    def __init__(self, store: Store, uuid: str):
        self.store, self.uuid = store, uuid
        self.prefix = uuid + "/"

    def load(self) -> dict[str, ShardProgress]:
        return {doc["shard"]: ShardProgress.from_doc(doc)
                for name, doc in self.store.documents(KIND).items() if name.startswith(self.prefix)}

    def save(self, progress: ShardProgress) -> None:
        self.store.put_document(KIND, self.prefix + progress.shard_id, progress.to_doc())

    def load_result(self) -> str | None:
        doc = self.store.document(RESULT_KIND, self.uuid)
        return doc["LastProcessingResult"] if doc else None

    def save_result(self, result: str) -> None:
        self.store.put_document(RESULT_KIND, self.uuid, {"LastProcessingResult": result})

    def delete_all(self) -> None:
        for name in self.store.documents(KIND):
            if name.startswith(self.prefix):
                self.store.delete_document(KIND, name)
        self.store.delete_document(RESULT_KIND, self.uuid)
