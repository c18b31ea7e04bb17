"""KinesisStreamAsSource: a delivery stream that reads a kinesim stream's shards.

It reads like any other consumer, through the in-process KinesisService (`read_batch`), and
follows resharding: a child shard is read only once its parents are finished (closed, read to
their end, and delivered). Reading starts where the stream's shards ended when the delivery
stream was created (AWS: "from the LATEST position"; that instant is DeliveryStartTimestamp).

The stream itself is the durable buffer: records read are held in memory until delivered, and
the position of each shard is checkpointed in the store (document "firehose-checkpoint") only
after the object containing its records was written. A `kill -9` before that re-reads them:
at-least-once, as AWS.

A record the KPL aggregated becomes its user records (`kinesim.kinesis.aggregation`), each with
its subsequence number; the stream record is checkpointed once the last of them is written.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from kinesim.kinesis import aggregation
from kinesim.kinesis.records import read_batch

from .buffers import Record

READ_LIMIT = 10000


class KinesisSource:
    """The pending records of one KinesisStreamAsSource delivery stream, and its checkpoint.

    Checkpoint body: {"shards": {str(shard uid): {"index": next record index to deliver,
    "done": bool}}}. Shards are keyed by their store uid, unique even when a stream of the same
    name was deleted and created again.
    """

    def __init__(self, svc: Any, ds: Any, stopped: threading.Event):
        self.kinesis, self.store, self.name = svc.kinesis, svc.store, ds.name
        self.stream_name = ds.source["KinesisStreamARN"].rsplit("/", 1)[-1]
        self.stopped = stopped
        self.pending: list[Record] = []
        self.pending_bytes = 0
        self.per_shard: Counter[int] = Counter()   # pending records per shard uid
        self.read_pos: dict[int, int] = {}         # next index to read, per shard uid
        doc = self.store.document("firehose-checkpoint", self.name)
        if doc is None:
            doc = {"shards": self._latest()}
            self.store.put_document("firehose-checkpoint", self.name, doc)
        self.checkpoint: dict[int, dict[str, Any]] = {int(k): v for k, v in doc["shards"].items()}

    def _latest(self) -> dict[str, dict[str, Any]]:
        """Where reading starts: the end of every open shard; closed shards count as finished."""
        stream = self.kinesis.find(self.stream_name)
        if stream is None:
            return {}
        with stream.lock:  # puts hand out indexes under this lock: no record falls in between
            return {str(s.uid): {"index": s.next_index, "done": not s.is_open} for s in stream.shards}

    # what the delivery loop reads

    @property
    def pending_count(self) -> int:
        return len(self.pending)

    @property
    def oldest_arrival(self) -> float | None:
        return self.pending[0].arrival if self.pending else None

    def fill(self, max_bytes: int) -> None:
        """Read what the readable shards hold, until `max_bytes` are pending."""
        stream = self.kinesis.find(self.stream_name)
        if stream is None:
            return
        shards = {s.shard_id: s for s in stream.shards}
        changed = False
        for shard in list(stream.shards):
            if self.pending_bytes >= max_bytes:
                break
            mark = self.checkpoint.get(shard.uid)
            if mark is not None and mark["done"]:
                continue
            parents = [shards[p] for p in (shard.parent, shard.adjacent_parent) if p and p in shards]
            if any(not self.checkpoint.get(p.uid, {}).get("done") for p in parents):
                continue  # children after parents: the parents' records come first
            pos = self.read_pos.get(shard.uid, mark["index"] if mark else 0)
            at_tip = pos >= shard.next_index  # in memory: an idle shard costs no read
            if not at_tip:
                rows, pos, at_tip = read_batch(self.kinesis, stream, shard, pos, READ_LIMIT,
                                               max(1, max_bytes - self.pending_bytes))
                self._add(shard, rows)
                self.read_pos[shard.uid] = pos
            if not shard.is_open and at_tip and not self.per_shard[shard.uid]:
                # Finished: every record of it delivered (or expired). Its children may start.
                self.checkpoint[shard.uid] = {"index": pos, "done": True}
                changed = True
        if changed:
            self._save()

    def _add(self, shard: Any, rows: list[Any]) -> None:
        for idx, seq, pk, data, arrival in rows:
            # Firehose de-aggregates what the KPL aggregated (AWS docs, "kpl-with-firehose"): one
            # record per user record, before a Lambda transform sees them.
            users = aggregation.deaggregate(data) if aggregation.is_aggregated(data) else None
            if users is None:
                self._append(shard, idx + 1, seq, seq, pk, data, arrival, None)
                continue
            for sub, user in enumerate(users):
                # Until its last user record is written, the stream record is read again after a
                # restart (at-least-once): its checkpoint stays at it.
                resume = idx + 1 if sub == len(users) - 1 else idx
                self._append(shard, resume, f"{seq}:{sub}", seq, user.partition_key, user.data, arrival, sub)

    def _append(self, shard: Any, resume: int, record_id: str, seq: str, pk: str, data: bytes,
                arrival: float, sub: int | None) -> None:
        kinesis = {"shardId": shard.shard_id, "sequenceNumber": seq, "partitionKey": pk,
                   "approximateArrivalTimestamp": arrival}
        if sub is not None:
            kinesis["subsequenceNumber"] = sub
        self.pending.append(Record(id=record_id, data=data, arrival=arrival, position=(shard.uid, resume),
                                   kinesis=kinesis))
        self.pending_bytes += len(data)
        self.per_shard[shard.uid] += 1

    def take(self, max_bytes: int) -> list[Record]:
        out, size = [], 0
        for record in self.pending:
            if out and size + len(record.data) > max_bytes:
                break
            out.append(record)
            size += len(record.data)
        return out

    def commit(self, records: list[Record]) -> None:
        """The object holding `records` (a prefix of `pending`) was written: checkpoint past them."""
        del self.pending[:len(records)]
        for r in records:
            uid, resume = r.position
            self.pending_bytes -= len(r.data)
            self.per_shard[uid] -= 1
            mark = self.checkpoint.setdefault(uid, {"index": 0, "done": False})
            mark["index"] = max(mark["index"], resume)
        self._save()

    def wait(self, timeout: float) -> None:
        # Appends to several shards cannot be waited on at once: poll the in-memory tips briefly.
        self.stopped.wait(min(timeout, 0.05))

    def wake(self) -> None:
        pass

    def _save(self) -> None:
        self.store.put_document("firehose-checkpoint", self.name,
                                {"shards": {str(k): v for k, v in self.checkpoint.items()}})
