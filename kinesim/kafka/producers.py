"""Idempotent producers (docs/plans/issue-35-kafka.md step 4): producer ids, and per (producer,
partition) the last batches' sequence numbers, so that a retried batch is stored once.

Ids come from a durable counter in the scope's store (a document), reserved in blocks: the block
is committed before any of its ids is handed out, so no restart ever hands one out twice, and a
Produce commits no more than one document write per `ID_BLOCK` producers.

The sequence table follows Kafka's ProducerStateManager / ProducerAppendInfo: per producer id and
partition, the epoch and its last `KEPT_BATCHES` batches (first sequence, last sequence, first
offset). A batch equal to one of them is a duplicate (answered with the stored batch's offset,
nothing stored again); an older epoch is INVALID_PRODUCER_EPOCH; a newer epoch must start at
sequence 0; otherwise the batch must follow the last one, else OUT_OF_ORDER_SEQUENCE_NUMBER. An
unknown producer is accepted at any sequence, as Kafka does since KIP-360 (its state may have
expired with the records: it no longer answers UNKNOWN_PRODUCER_ID).

The table lives in memory. After a restart it is rebuilt lazily, per partition, from the records'
`kafka` column, which keeps (id, epoch, base sequence, count) on each batch's first record: the
first time a producer is seen on a shard, that shard's last `SCAN_ROWS` records are read. A
producer whose last batch is older than that is unknown (any sequence accepted), as one whose
records retention removed is in Kafka. Ids handed out by this process need no scan: they cannot
have records from before it started.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from . import errors
from .batches import producer_of

ID_DOCUMENT = ("kafka-producer-ids", "next")
ID_BLOCK = 1000
MAX_EPOCH = 32767          # an int16; Kafka moves to a new id rather than wrap the epoch
KEPT_BATCHES = 5           # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN = max.in.flight
SCAN_ROWS = 1000           # a shard's tail read to rebuild a producer's state after a restart
MAX_ENTRIES = 100_000      # (producer, partition) states kept; the least recently used go first
_SEQUENCES = 1 << 31       # sequences are non-negative int32s and wrap to 0
_STRIPES = 64              # locks a produce's check-and-store holds, by producer id


class Kept(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int


@dataclass(slots=True)
class _Entry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=KEPT_BATCHES))


class Appending(NamedTuple):
    """An idempotent batch to store: what the table checks and then remembers."""
    producer_id: int
    epoch: int
    first_seq: int
    count: int

    @property
    def last_seq(self) -> int:
        return (self.first_seq + self.count - 1) % _SEQUENCES


class Verdict(NamedTuple):
    code: int                  # errors.NONE: store it (duplicate_of None) or answer duplicate_of
    duplicate_of: int | None = None
    message: str | None = None


class Producers:
    """One scope's producer ids and sequence table."""

    def __init__(self, store: Any):
        self.store = store
        self._id_lock = threading.Lock()
        self._next = self._end = 0        # the current block: ids [_next, _end) not handed out yet
        self._first_issued: int | None = None
        self._epochs: OrderedDict[int, int] = OrderedDict()  # ids this process issued -> latest epoch
        self._table: OrderedDict[tuple[int, int], _Entry | None] = OrderedDict()
        self._table_lock = threading.Lock()  # the OrderedDict's moves, not a produce's check
        self._evicted = False
        self.stripes = [threading.Lock() for _ in range(_STRIPES)]

    # InitProducerId

    def init(self, producer_id: int = -1, epoch: int = -1) -> tuple[int, int]:
        """(id, epoch) for a producer: the same id at epoch + 1 when it names the latest epoch of
        an id this process issued (KIP-360's bump), else a new id at epoch 0. Kafka itself always
        gives an idempotent producer a new id; both are what clients accept."""
        with self._id_lock:
            if producer_id >= 0 and self._epochs.get(producer_id) == epoch and epoch + 1 < MAX_EPOCH:
                self._epochs[producer_id] = epoch + 1
                self._epochs.move_to_end(producer_id)
                return producer_id, epoch + 1
            if self._next == self._end:
                self._reserve()
            new = self._next
            self._next += 1
            self._epochs[new] = 0
            if len(self._epochs) > MAX_ENTRIES:
                self._epochs.popitem(last=False)
            return new, 0

    def _reserve(self) -> None:
        kind, name = ID_DOCUMENT
        start = (self.store.document(kind, name) or {}).get("next", 0)
        self.store.put_document(kind, name, {"next": start + ID_BLOCK})  # committed before use
        self._next, self._end = start, start + ID_BLOCK
        if self._first_issued is None:
            self._first_issued = start

    def _issued_here(self, producer_id: int) -> bool:
        first = self._first_issued
        return first is not None and first <= producer_id < self._next

    # Produce: call `check` then, once stored, `appended`, both under `stripe(producer id)`

    def stripe(self, producer_id: int) -> threading.Lock:
        return self.stripes[producer_id % _STRIPES]

    def check(self, svc: Any, shard: Any, batch: Appending) -> Verdict:
        entry = self._entry(svc, shard, batch.producer_id)
        if entry is None:
            return Verdict(errors.NONE)
        if batch.epoch == entry.epoch:
            for kept in entry.batches:
                if (kept.first_seq, kept.last_seq) == (batch.first_seq, batch.last_seq):
                    return Verdict(errors.NONE, kept.first_offset)
        if batch.epoch < entry.epoch:
            return Verdict(errors.INVALID_PRODUCER_EPOCH, message=(
                f"epoch {batch.epoch} of producer {batch.producer_id} is older than its last, {entry.epoch}"))
        if batch.epoch > entry.epoch:
            if batch.first_seq != 0:
                return Verdict(errors.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
                    f"a new epoch {batch.epoch} of producer {batch.producer_id} starts at sequence "
                    f"{batch.first_seq}, not 0"))
            return Verdict(errors.NONE)
        last = entry.batches[-1].last_seq
        if batch.first_seq != (last + 1) % _SEQUENCES:
            return Verdict(errors.OUT_OF_ORDER_SEQUENCE_NUMBER, message=(
                f"sequence {batch.first_seq} of producer {batch.producer_id} does not follow {last}"))
        return Verdict(errors.NONE)

    def appended(self, shard: Any, batch: Appending, first_offset: int) -> None:
        key = (batch.producer_id, shard.uid)
        with self._table_lock:
            entry = self._table.get(key)
        if entry is None or entry.epoch != batch.epoch:  # a new epoch forgets the old one's batches
            entry = _Entry(batch.epoch)
        entry.batches.append(Kept(batch.first_seq, batch.last_seq, first_offset))
        self._remember(key, entry)

    def _entry(self, svc: Any, shard: Any, producer_id: int) -> _Entry | None:
        key = (producer_id, shard.uid)
        with self._table_lock:
            if key in self._table:
                self._table.move_to_end(key)
                return self._table[key]
        if self._issued_here(producer_id) and not self._evicted:
            entry = None  # issued after this process started, and seen on this shard never
        else:
            entry = self._scan(svc, shard, producer_id)
        self._remember(key, entry)
        return entry

    def _remember(self, key: tuple[int, int], entry: _Entry | None) -> None:
        with self._table_lock:
            self._table[key] = entry
            self._table.move_to_end(key)
            if len(self._table) > MAX_ENTRIES:
                # A forgotten state is rebuilt from the shard's tail the next time (`_evicted`).
                self._table.popitem(last=False)
                self._evicted = True

    @staticmethod
    def _scan(svc: Any, shard: Any, producer_id: int) -> _Entry | None:
        """The producer's state on a shard as its last `SCAN_ROWS` records show it. Its own records
        cannot be appended meanwhile (the caller holds its stripe); others' do not matter."""
        start = max(1, shard.next_index - SCAN_ROWS)
        entry = None
        for row in svc.store.read(shard.uid, start, SCAN_ROWS, 0.0, True):
            producer = producer_of(row[5])
            if producer is None or producer[0] != producer_id:
                continue
            _, epoch, first_seq, count = producer
            if entry is None or entry.epoch != epoch:
                entry = _Entry(epoch)
            batch = Appending(producer_id, epoch, first_seq, count)
            entry.batches.append(Kept(first_seq, batch.last_seq, row[0] - 1))  # offset = index - 1
        return entry


_scopes: weakref.WeakKeyDictionary[Any, Producers] = weakref.WeakKeyDictionary()
_scopes_lock = threading.Lock()


def of(svc: Any) -> Producers:
    """The producers of a scope (its KinesisService), made at first use."""
    with _scopes_lock:
        found = _scopes.get(svc)
        if found is None:
            found = _scopes[svc] = Producers(svc.store)
        return found
