"""Durable buffers: what PutRecord/PutRecordBatch acknowledged and delivery has not yet written.

A record is committed to the store (`firehose_buffer` table) before its 200 goes out, so a
`kill -9` after the acknowledgement loses nothing; it leaves the buffer only after the object
holding it was written (at-least-once: a crash between the two delivers it again).

The buffer also keeps, in memory, what the delivery loop decides on: how many bytes wait and
when the oldest of them arrived (rebuilt from the store at start-up).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from kinesim.rates import Series
from kinesim.store import Store

from .activity import FIELDS


@dataclass
class Record:
    """One record on its way to the destination, whatever its source.

    `position` tells the source what to commit once the record is written: the buffer's sequence
    number (DirectPut) or (shard uid, the record index to resume from) (KinesisStreamAsSource).
    `kinesis` carries the source record's metadata (shardId, sequenceNumber, partitionKey, and
    subsequenceNumber for a user record of a KPL aggregate) for Lambda events and error records.
    """
    id: str
    data: bytes
    arrival: float
    position: Any
    kinesis: dict[str, Any] | None = None


def record_id(name: str, seq: int) -> str:
    """A RecordId: opaque to clients, unique per delivery stream (AWS's are long base64 strings)."""
    return base64.b64encode(_id_prefix(name) + seq.to_bytes(8, "big")).decode()


@functools.lru_cache(maxsize=1024)
def _id_prefix(name: str) -> bytes:
    # Hashed once per delivery stream, not per record: PutRecordBatch answers 500 ids at a time.
    return hashlib.sha256(name.encode()).digest()


class Buffer:
    """One DirectPut delivery stream's buffer. Appends come from request threads, reads and
    removals from the stream's delivery worker; `changed` wakes the worker on an append. Each
    append counts its records and bytes in `series` (records_in, bytes_in)."""

    def __init__(self, store: Store, name: str, series: Series | None = None):
        self.store, self.name = store, name
        self.series = series if series is not None else Series(FIELDS)
        self.changed = threading.Condition()
        count, size, top, oldest = store.firehose_buffer_stats(name)
        self.pending_count, self.pending_bytes, self.oldest_arrival = count, size, oldest
        self.next_seq = (top or 0) + 1
        self._seen = 0

    def append(self, datas: list[bytes]) -> list[str]:
        """Commit records (one transaction) and return their RecordIds."""
        now = time.time()
        # One lock for the commit and the counters: sequence numbers go out in commit order and
        # `remove` never sees a committed row that the counters do not yet include.
        with self.changed:
            first = self.next_seq
            rows = [(first + i, data, now) for i, data in enumerate(datas)]
            self.store.firehose_buffer_append(self.name, rows)
            size = sum(len(d) for d in datas)
            self.next_seq = first + len(rows)
            self.pending_count += len(rows)
            self.pending_bytes += size
            if self.oldest_arrival is None:
                self.oldest_arrival = now
            self.changed.notify_all()
        self.series.add(len(rows), size)
        return [record_id(self.name, seq) for seq, _, _ in rows]

    def take(self, max_bytes: int, max_records: int = 1_000_000) -> list[Record]:
        """The oldest buffered records, up to `max_bytes` (always at least one when any wait)."""
        out: list[Record] = []
        size, after = 0, 0
        while len(out) < max_records:
            rows = self.store.firehose_buffer_read(self.name, after, min(500, max_records - len(out)))
            if not rows:
                break
            for seq, data, arrival in rows:
                if out and size + len(data) > max_bytes:
                    return out
                out.append(Record(record_id(self.name, seq), data, arrival, seq))
                size += len(data)
            after = rows[-1][0]
        return out

    def fill(self, max_bytes: int) -> None:
        """Nothing to fetch (appends land here directly): note what the worker has seen, so that
        `wait` returns at once for an append that came in since."""
        with self.changed:
            self._seen = self.next_seq

    def commit(self, records: list[Record]) -> None:
        """Drop records that were written (a prefix of the buffer, as `take` returned them)."""
        if not records:
            return
        with self.changed:
            self.store.firehose_buffer_delete(self.name, max(r.position for r in records))
            self.pending_count -= len(records)
            self.pending_bytes -= sum(len(r.data) for r in records)
            first = self.store.firehose_buffer_read(self.name, 0, 1)
            self.oldest_arrival = first[0][2] if first else None

    def stats(self) -> tuple[int, int, float | None]:
        """Records, bytes and the oldest arrival buffered, as of one moment: other threads (metrics,
        the console) read them while the worker commits, which changes them one after the other."""
        with self.changed:
            return self.pending_count, self.pending_bytes, self.oldest_arrival

    def wait(self, timeout: float) -> None:
        with self.changed:
            if self._seen == self.next_seq:
                self.changed.wait(timeout)

    def wake(self) -> None:
        with self.changed:
            self.changed.notify_all()
