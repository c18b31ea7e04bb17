"""KinesisStreamAsSource: a delivery stream that reads a kinesim stream's shards.

It reads like any other in-process consumer, through `kinesim.kinesis.reader` (cursors per shard,
lineage order: a child shard is read only once its parents are finished, i.e. closed, read to
their end, and delivered), and sleeps until a record is appended to one of the shards it reads
(no polling). Reading starts where the stream's shards ended when the delivery stream was created
(AWS: "from the LATEST position"; that instant is DeliveryStartTimestamp).

The stream itself is the durable buffer: records read are held in memory until delivered, and
the position of each shard is checkpointed (the reader's Checkpoint, store document
"firehose-checkpoint" named after the delivery stream) only after the object containing its
records was written. A `kill -9` before that re-reads them: at-least-once, as AWS.

A record the KPL aggregated becomes its user records (`kinesim.kinesis.aggregation`), each with
its subsequence number; the stream record is checkpointed once the last of them is written.
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from kinesim.kinesis import aggregation
from kinesim.kinesis.reader import (Checkpoint, CheckpointStore, Record as StreamRecord, ShardMark,
                                    StreamReader, starting_checkpoint)
from kinesim.rates import Series

from .activity import FIELDS
from .buffers import Record

READ_LIMIT = 10000
KIND = "firehose-checkpoint"


class KinesisSource:
    """The pending records of one KinesisStreamAsSource delivery stream, and its checkpoint. Each
    read counts the records and bytes it took in `series` (records_in, bytes_in)."""

    def __init__(self, svc: Any, ds: Any, stopped: threading.Event | None, series: Series | None = None):
        self.kinesis, self.store, self.name = svc.kinesis, svc.store, ds.name
        self.series = series if series is not None else Series(FIELDS)
        self.stream_name = ds.source["KinesisStreamARN"].rsplit("/", 1)[-1]
        self.stopped = stopped
        self.pending: list[Record] = []
        self.pending_bytes = 0
        self.per_shard: Counter[int] = Counter()   # pending records per shard uid
        self.saved = CheckpointStore(self.store, KIND, self.name, legacy=self._legacy)
        checkpoint = self.saved.load()
        if checkpoint is None:
            stream = self.kinesis.find(self.stream_name)
            checkpoint = starting_checkpoint(self.kinesis, stream, "LATEST") if stream else Checkpoint()
            self.saved.save(checkpoint)
        self.checkpoint = checkpoint
        self.reader = StreamReader(self.kinesis, self.stream_name, checkpoint)
        self.shards: dict[int, Any] = {}           # the shards of pending records, by uid

    def _legacy(self) -> Checkpoint | None:
        """The checkpoint as kinesim wrote it before the shard reader (same document):
        {"shards": {str(shard uid): {"index": next record index to deliver, "done": bool}}}."""
        doc = self.store.document(KIND, self.name)
        if not isinstance(doc, dict) or not isinstance(doc.get("shards"), dict):
            return None
        stream = self.kinesis.find(self.stream_name)
        ids = {s.uid: s.shard_id for s in stream.shards} if stream is not None else {}
        return Checkpoint({int(uid): ShardMark(ids.get(int(uid), ""), int(uid), [mark["index"]], ended=mark["done"])
                           for uid, mark in doc["shards"].items()})

    # what the delivery loop reads

    def stats(self) -> tuple[int, int, float | None]:
        """Records, bytes and the oldest arrival pending (only the worker changes them; `commit`
        drops its records from the count before their bytes, so a reader may see fewer records)."""
        pending = self.pending[:1]
        return len(self.pending), self.pending_bytes, pending[0].arrival if pending else None

    def fill(self, max_bytes: int) -> None:
        """Read what the readable shards hold, until `max_bytes` are pending."""
        changed = False
        for cursor in self.reader.cursors():
            if self.pending_bytes >= max_bytes:
                break
            if not cursor.at_tip():
                batch = cursor.read(READ_LIMIT, max(1, max_bytes - self.pending_bytes))
                before_count, before_bytes = len(self.pending), self.pending_bytes
                self._add(cursor.shard, batch.records)
                self.series.add(len(self.pending) - before_count, self.pending_bytes - before_bytes)
            if cursor.finished and not self.per_shard[cursor.uid]:
                # Finished: every record of it delivered (or expired). Its children may start.
                self.reader.ended(cursor)
                changed = True
        if changed:
            self.saved.save(self.checkpoint)

    def _add(self, shard: Any, rows: list[StreamRecord]) -> None:
        self.shards[shard.uid] = shard
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
            self.reader.advance(self.shards[uid], resume)
        self.saved.save(self.checkpoint)

    def wait(self, timeout: float) -> None:
        """Until a record is appended to a shard being read (or `wake`), up to `timeout`."""
        if self.stopped is None or not self.stopped.is_set():
            self.reader.wait(timeout)

    def wake(self) -> None:
        if self.stopped is not None and self.stopped.is_set():
            self.reader.close()
        else:
            self.reader.wake()
