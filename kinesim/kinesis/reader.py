"""How anything inside kinesim reads a stream's shards (mapping lanes, the Firehose source,
SubscribeToShard, queues, channels): the only reader-side module that touches `stream.lock`,
`shard.next_index`, `shard.appended` or the store's records.

- ShardCursor: one shard from a position (the index of the next record to read). `read` a Batch,
  `wait` for an append on the shard's `appended` condition (no polling), `finished` once a closed
  shard was read to its end. Positions below the retention horizon skip forward to the oldest
  record kept.
- start_position: where TRIM_HORIZON / LATEST / AT_TIMESTAMP / AT_ / AFTER_SEQUENCE_NUMBER start.
- readable_shards: lineage order, the one place "children after their parents" is written: a
  shard is readable when every parent of it still in the stream has ended in the checkpoint
  (a split's two children after their parent, a merge's child after both).
- StreamReader: a stream's readable shards as cursors, positions kept in a Checkpoint
  (checkpoints.py), and one `wait` for an append to any of them (a listener on each shard, see
  ShardCursor.listen: no thread per shard).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from . import iterators, sequence
from .checkpoints import Checkpoint, CheckpointStore, ShardMark
from .model import Shard, Stream
from .records import MAX_GET_BYTES, child_shards, read_batch

MAX_READ = 10000             # records per read (GetRecords' limit)

__all__ = ["Batch", "Checkpoint", "CheckpointStore", "Record", "ShardCursor", "ShardMark", "StreamReader",
           "start_position", "starting_checkpoint", "readable_shards", "parents", "wake_readers"]


class Record(NamedTuple):
    """One record read; also a store row (index, sequence number, partition key, data, arrival)."""
    index: int
    sequence_number: str
    partition_key: str       # "" for a record put to an AUTO stream without one
    data: bytes
    arrival: float           # epoch seconds, millisecond precision


@dataclass
class Batch:
    records: list[Record]
    next_position: int       # the index to read next
    at_tip: bool             # nothing more to read for now
    finished: bool           # a closed shard read to its end: nothing more, ever

    @property
    def millis_behind(self) -> int:
        """MillisBehindLatest as GetRecords counts it."""
        if self.at_tip or not self.records:
            return 0
        return max(0, int((time.time() - self.records[-1].arrival) * 1000))


class ShardCursor:
    """One shard of one stream, read from `position` on (see the module's doc)."""

    def __init__(self, kinesis: Any, stream: Stream, shard: Shard, position: int = 1):
        self.kinesis, self.stream, self.shard = kinesis, stream, shard
        self.position = position
        self._woken = False

    @property
    def shard_id(self) -> str:
        return self.shard.shard_id

    @property
    def uid(self) -> int:
        return self.shard.uid

    @property
    def is_open(self) -> bool:
        return self.shard.is_open

    @property
    def finished(self) -> bool:
        return not self.shard.is_open and self.position >= self.shard.next_index

    def at_tip(self, position: int | None = None) -> bool:
        return (self.position if position is None else position) >= self.shard.next_index

    def read(self, limit: int = MAX_READ, max_bytes: int = MAX_GET_BYTES) -> Batch:
        """The next records from the cursor's position, which moves past them."""
        batch = self.read_from(self.position, limit, max_bytes)
        self.position = batch.next_position
        return batch

    def read_from(self, position: int, limit: int = MAX_READ, max_bytes: int = MAX_GET_BYTES,
                  kafka: bool = False) -> Batch:
        """Records from `position` on (at least one if any, however large); the cursor stays.
        `kafka`: the store's rows with their Kafka column (records.read_batch), not Records."""
        closed = not self.shard.is_open  # read before the records: a closed shard's tip is final
        if position >= self.shard.next_index:  # an idle shard costs no store read
            return Batch([], position, True, closed)
        rows, next_position, at_tip = read_batch(self.kinesis, self.stream, self.shard, position, limit, max_bytes,
                                                 kafka)
        return Batch(rows if kafka else list(map(Record._make, rows)), next_position, at_tip, closed and at_tip)

    def wait(self, timeout: float, position: int | None = None, until: Callable[[], bool] | None = None) -> bool:
        """Until a record at `position` (default: the cursor's) exists, the shard closes, the
        stream goes, `until()` holds or `wake()` is called, up to `timeout` seconds. Whether
        there is something to read (or the shard ended)."""
        index = self.position if position is None else position
        shard = self.shard
        deadline = time.monotonic() + max(0.0, timeout)
        with shard.appended:
            self._woken = False
            shard.watch(1)  # before looking at the shard: see Shard.notify
            try:
                while shard.next_index <= index and shard.is_open and not self._woken and self.gone() is None \
                        and not (until is not None and until()):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    shard.appended.wait(remaining)
                return shard.next_index > index or not shard.is_open
            finally:
                shard.watch(-1)

    def wake(self) -> None:
        """Wake whoever waits on this cursor (or any reader of the shard: they look again)."""
        with self.shard.appended:
            self._woken = True
            self.shard.appended.notify_all()

    def listen(self, callback: Callable[[], None], position: int | None = None) -> bool:
        """Have `callback()` called once, from the thread that appends to the shard (closes it,
        deletes the stream), unless there is already something at `position` (default: the
        cursor's) or the shard is closed: then False, and nothing is registered. Checked and
        registered under the condition appends notify under, so no append falls between. The
        callback must be quick and must not block: it only hands the work to somebody."""
        index = self.position if position is None else position
        shard = self.shard
        with shard.appended:
            counted = callback in shard.listeners  # registered (and counted) already
            if not counted:
                shard.watch(1)  # before looking at the shard: see Shard.notify
            if shard.next_index > index or not shard.is_open or self.gone() is not None:
                if not counted:
                    shard.watch(-1)
                return False
            shard.listeners.add(callback)
            return True

    def unlisten(self, callback: Callable[[], None]) -> None:
        with self.shard.appended:
            if callback in self.shard.listeners:
                self.shard.listeners.remove(callback)
                self.shard.watch(-1)

    def gone(self) -> str | None:
        """Why nothing more can be read here (the stream deleted or re-created), else None."""
        stream = self.stream
        if self.kinesis.streams.get(stream.name) is not stream or stream.status == "DELETING":
            return f"Stream {stream.name} under account {self.kinesis.account} not found."
        return None

    def sequence_before(self, position: int | None = None) -> str:
        """The sequence number AFTER_SEQUENCE_NUMBER resumes from to read `position` next."""
        index = self.position if position is None else position
        shard = self.shard
        if index <= 1:
            return shard.starting_seq
        rows = self.kinesis.store.read(shard.uid, index - 1, 1)
        if rows and rows[0][0] == index - 1:
            return rows[0][1]
        return sequence.make(shard.created, shard.index, index - 1, shard.created)

    def child_shards(self) -> list[dict[str, Any]]:
        """ChildShards as GetRecords gives them at a closed shard's end."""
        with self.stream.lock:  # a reshard closes the parent before it adds the children
            return child_shards(self.stream, self.shard)


def wake_readers(stream: Stream) -> None:
    """Wake every reader waiting on the stream's shards (they look again: a consumer went, ...)."""
    for shard in list(stream.shards):
        shard.notify()


# where reading starts

def start_position(kinesis: Any, stream: Stream, shard: Shard, kind: str, sequence_number: str | None = None,
                   timestamp: float | None = None) -> tuple[int, bool]:
    """(position, ended) for a StartingPosition / ShardIteratorType. A shard closed before an
    AT_TIMESTAMP time, or closed when LATEST is asked, has nothing to read: ended. Sequence
    numbers are checked as GetShardIterator checks them (AwsError)."""
    if kind == "LATEST":
        return shard.next_index, not shard.is_open
    if kind == "AT_TIMESTAMP" and timestamp is not None and shard.closed_at is not None \
            and shard.closed_at < timestamp:
        return shard.next_index, True
    return iterators.start_index(kinesis, stream, shard, kind, sequence_number, timestamp), False


def starting_checkpoint(kinesis: Any, stream: Stream, kind: str, timestamp: float | None = None,
                        lanes: int = 1) -> Checkpoint:
    """Every shard of `stream` placed at a TRIM_HORIZON / LATEST / AT_TIMESTAMP start, taken under
    the stream's lock: puts hand out indexes under it, so no record falls between two shards' LATEST."""
    checkpoint = Checkpoint()
    with stream.lock:
        for shard in stream.shards:
            position, ended = start_position(kinesis, stream, shard, kind, None, timestamp)
            checkpoint.set(ShardMark(shard.shard_id, shard.uid, [position] * lanes, ended=ended))
    return checkpoint


# lineage

def parents(shard: Shard) -> list[str]:
    return [p for p in (shard.parent, shard.adjacent_parent) if p]


def readable_shards(stream: Stream, checkpoint: Checkpoint) -> list[Shard]:
    """The shards to read now, in shard order: not ended, and every parent still in the stream
    ended (records of a hash key in a parent come before those in its children)."""
    # Without the stream's lock (puts take it): the list only grows, and a copy taken while a
    # reshard runs at worst lacks children not yet added, which the next call sees.
    shards = list(stream.shards)
    by_id = {s.shard_id: s for s in shards}
    return [s for s in shards if not checkpoint.ended(s)
            and all(checkpoint.ended(by_id[p]) for p in parents(s) if p in by_id)]


class StreamReader:
    """A stream's shards, read in lineage order, from the positions of a Checkpoint.

    `cursors()` gives a cursor per readable shard (created at the shard's mark, or at its start
    for a shard without one: a child born after reading began); the caller reads them, moves the
    checkpoint's marks as what it read is handled, and calls `ended(cursor)` when a finished
    cursor's records are all handled, which makes its children readable. `wait` blocks until
    any readable shard has a record past its cursor (or closes), `wake()` or the timeout.
    """

    def __init__(self, kinesis: Any, stream_name: str, checkpoint: Checkpoint):
        self.kinesis, self.stream_name, self.checkpoint = kinesis, stream_name, checkpoint
        self._cursors: dict[int, ShardCursor] = {}
        self._signal = threading.Event()
        self._closed = False
        self._stream: Stream | None = None
        self._lock = threading.RLock()  # several threads may share a reader (a queue's receives)

    def stream(self) -> Stream | None:
        """The stream now, if it exists and is readable; a re-created namesake starts afresh."""
        stream = self.kinesis.find(self.stream_name)
        if stream is None or stream.status in ("CREATING", "DELETING"):
            return None
        with self._lock:
            if stream is not self._stream:
                self._stream, self._cursors = stream, {}
        return stream

    def cursors(self) -> list[ShardCursor]:
        with self._lock:
            stream = self.stream()
            if stream is None:
                return []
            out = []
            for shard in readable_shards(stream, self.checkpoint):
                cursor = self._cursors.get(shard.uid)
                if cursor is None:
                    mark = self.checkpoint.mark(shard)
                    cursor = self._cursors[shard.uid] = ShardCursor(self.kinesis, stream, shard,
                                                                    mark.position if mark else 1)
                out.append(cursor)
            return out

    def advance(self, shard: Shard, position: int) -> ShardMark:
        """The shard's records before `position` are handled: its (single-lane) mark moves there
        (never back). The caller saves the checkpoint."""
        mark = self.checkpoint.mark(shard)
        if mark is None:
            return self.checkpoint.set(ShardMark(shard.shard_id, shard.uid, [position]))
        mark.positions = [max(p, position) for p in mark.positions]
        return mark

    def ended(self, cursor: ShardCursor) -> ShardMark:
        """The cursor's shard is done with: its mark says so (the caller saves the checkpoint)."""
        mark = self.checkpoint.mark(cursor.shard) or ShardMark(cursor.shard_id, cursor.uid, [cursor.position])
        mark.positions = [max(cursor.position, p) for p in mark.positions]
        mark.ended = True
        self.checkpoint.set(mark)
        with self._lock:
            self._cursors.pop(cursor.uid, None)
        return mark

    def wait(self, timeout: float) -> None:
        """Until a readable shard has a record past its cursor or closes, `wake()`, or `timeout`.
        The reader listens on each readable open shard at its tip: no thread per shard."""
        self._signal.clear()
        pending = False
        for cursor in self.cursors():
            # A closed shard at its tip gets nothing more: not listened to.
            if not cursor.at_tip() or (cursor.is_open and not cursor.listen(self._signal.set)):
                pending = True
        if not pending and not self._closed:
            self._signal.wait(timeout)

    def wake(self) -> None:
        self._signal.set()

    def close(self) -> None:
        """Wake a waiter and stop listening. Final: `wait` returns at once afterwards."""
        self._closed = True
        self._signal.set()
        with self._lock:
            cursors = list(self._cursors.values())
        for cursor in cursors:
            cursor.unlisten(self._signal.set)
