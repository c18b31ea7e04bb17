"""A Kinesis queue's delivery state: which stream records it has taken, which are in flight,
visible again or dead letters, and their receipt handles. Durable through the store.

The state of a record is implied by two things, so that nothing grows with the records already
acknowledged:
- the queue's reader checkpoint (checkpoints.Checkpoint, the one checkpoint type of in-process
  readers): per shard, the index of the next record the queue has not yet taken from the stream;
- one tracked entry per taken, unacknowledged record (in flight, visible again, or dead letter).
A record below its shard's mark with no entry was acknowledged: it is never delivered again.

Every change is one store transaction (entries and checkpoint together, in the queue's own
document kind, which is why the checkpoint is not saved through a CheckpointStore of its own: a
kill -9 between two writes would lose taken records or track them twice), written before the
answer: a kill -9 loses no acknowledgement that was answered, and a
record handed out but not acknowledged comes back after its visibility timeout, also after a restart
(timeouts are wall-clock epoch seconds).
"""
from __future__ import annotations

import base64
import binascii
import heapq
import threading
from dataclasses import dataclass
from typing import Any, Iterable

from ..store import Store
from .checkpoints import Checkpoint

MAIN, DEAD = "main", "dead"
_CURSORS = "cursors"


def state_kind(queue_id: str) -> str:
    return f"kinesis-queue-state/{queue_id}"


@dataclass
class Entry:
    uid: int                  # shard uid
    index: int                # record index in the shard
    visible_at: float = 0.0   # epoch seconds: in flight until then
    count: int = 0            # receives since taken or restored
    first: float | None = None
    dead: bool = False
    gen: int = 0              # bumped on every receive/visibility change: stale receipt handles fail

    @property
    def key(self) -> tuple[int, int]:
        return self.uid, self.index

    @property
    def name(self) -> str:
        return f"r/{self.uid}/{self.index}"

    def to_doc(self) -> list[Any]:
        return [self.visible_at, self.count, self.first, self.dead, self.gen]

    @classmethod
    def from_doc(cls, name: str, d: list[Any]) -> "Entry":
        _, uid, index = name.split("/")
        return cls(int(uid), int(index), d[0], d[1], d[2], d[3], d[4])


class _Lane:
    """Entries of one kind (the normal receive path or the dead letters): a heap of in-flight
    entries by the time they turn visible, and the visible ones (dict as an ordered set)."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, int]] = []  # (visible_at, gen, uid, index)
        self.ready: dict[tuple[int, int], None] = {}
        self.size = 0  # entries in this lane

    def schedule(self, e: Entry, now: float) -> None:
        if e.visible_at <= now:
            self.ready[e.key] = None
        else:
            heapq.heappush(self.heap, (e.visible_at, e.gen, e.uid, e.index))

    def due(self, entries: dict[tuple[int, int], Entry], now: float) -> list[Entry]:
        """Entries whose visibility timeout has passed since last asked (stale heap items skipped)."""
        out = []
        while self.heap and self.heap[0][0] <= now:
            _, gen, uid, index = heapq.heappop(self.heap)
            e = entries.get((uid, index))
            # Stale items (the entry received again, or its timeout changed since) are skipped.
            if e is not None and e.gen == gen and e.visible_at <= now and e.key not in self.ready:
                out.append(e)
        return out

    def next_due(self) -> float | None:
        return self.heap[0][0] if self.heap else None


class QueueState:
    """Delivery state of one queue. Callers hold `lock` for every method."""

    def __init__(self, store: Store, queue_id: str):
        self.store, self.queue_id, self.kind = store, queue_id, state_kind(queue_id)
        self.lock = threading.Lock()
        # Set by acknowledgements, visibility changes and restores: dead-letter long polls wake.
        self.changed = threading.Event()
        self.checkpoint = Checkpoint()
        self.reader: Any = None  # the queue's reader.StreamReader, made on first receive
        self.wait_lock = threading.Lock()  # held by the long poll waiting in `reader`
        self.entries: dict[tuple[int, int], Entry] = {}
        self.lanes = {MAIN: _Lane(), DEAD: _Lane()}

    # loading and persistence

    def load(self, now: float) -> None:
        docs = self.store.documents(self.kind)
        if _CURSORS in docs:
            self.checkpoint = Checkpoint.from_doc(docs.pop(_CURSORS))
        for name, body in docs.items():
            self._track(Entry.from_doc(name, body), now)

    def save(self, changed: Iterable[Entry], cursors: bool = False) -> None:
        bodies: dict[str, Any] = {e.name: e.to_doc() for e in changed}
        if cursors:
            bodies[_CURSORS] = self.checkpoint.to_doc()
        self.store.put_documents(self.kind, bodies)

    def forget(self, entries: list[Entry]) -> None:
        """Stop tracking entries (acknowledged, or expired from the stream), durably."""
        self.store.delete_documents(self.kind, [e.name for e in entries])
        for e in entries:
            self._untrack(e)

    def drop_all(self) -> None:
        self.store.delete_documents(self.kind)
        self.entries.clear()
        self.lanes = {MAIN: _Lane(), DEAD: _Lane()}

    def notify(self) -> None:
        """Wake the queue's long polls: something may have become receivable."""
        self.changed.set()
        if self.reader is not None:
            self.reader.wake()

    def close(self) -> None:
        """The queue is gone: stop its reader's shard watchers and wake its long polls."""
        self.changed.set()
        if self.reader is not None:
            self.reader.close()

    # in-memory bookkeeping

    def lane_of(self, e: Entry) -> _Lane:
        return self.lanes[DEAD if e.dead else MAIN]

    def _track(self, e: Entry, now: float) -> None:
        self.entries[e.key] = e
        lane = self.lane_of(e)
        lane.size += 1
        lane.schedule(e, now)

    def _untrack(self, e: Entry) -> None:
        if self.entries.pop(e.key, None) is not None:
            lane = self.lane_of(e)
            lane.size -= 1
            lane.ready.pop(e.key, None)

    def add_new(self, uid: int, index: int, now: float) -> Entry | None:
        if (uid, index) in self.entries:  # taken already (never expected: the checkpoint moved past it)
            return None
        e = Entry(uid, index, visible_at=now)
        self._track(e, now)
        return e

    def promote(self, now: float, max_receives: int | None) -> list[Entry]:
        """Make entries whose timeout passed visible again; a main-lane entry received
        `max_receives` times becomes a dead letter instead. Returns the entries that died."""
        died = []
        for lane_name, lane in self.lanes.items():
            for e in lane.due(self.entries, now):
                if lane_name == MAIN and self._dies(e, max_receives):
                    died.append(e)
                else:
                    lane.ready[e.key] = None
        return died

    def _dies(self, e: Entry, max_receives: int | None) -> bool:
        """A main-lane entry received `max_receives` times turns dead letter (visible there)."""
        if max_receives is None or e.count < max_receives:
            return False
        main, dead = self.lanes[MAIN], self.lanes[DEAD]
        main.ready.pop(e.key, None)
        main.size -= 1
        e.dead, e.gen = True, e.gen + 1
        dead.size += 1
        dead.ready[e.key] = None
        return True

    def in_flight(self) -> int:
        main = self.lanes[MAIN]
        return main.size - len(main.ready)

    def take_visible(self, lane_name: str, limit: int, max_receives: int | None,
                     died: list[Entry]) -> list[Entry]:
        """Up to `limit` visible entries of a lane. A main-lane entry that became visible at once
        (a visibility timeout of 0) and was received `max_receives` times dies here instead
        (added to `died`)."""
        lane = self.lanes[lane_name]
        out: list[Entry] = []
        while lane.ready and len(out) < limit:
            key = next(iter(lane.ready))
            e = self.entries[key]
            if lane_name == MAIN and self._dies(e, max_receives):
                died.append(e)
                continue
            del lane.ready[key]
            out.append(e)
        return out

    def mark_received(self, e: Entry, now: float, visibility: int) -> None:
        e.count += 1
        e.gen += 1
        if e.first is None:
            e.first = now
        self.set_visibility(e, now, visibility)

    def set_visibility(self, e: Entry, now: float, seconds: int) -> None:
        lane = self.lane_of(e)
        lane.ready.pop(e.key, None)
        e.visible_at = now + seconds
        lane.schedule(e, now)

    def restore(self, e: Entry, now: float) -> None:
        """A dead letter back on the normal path, receive count reset, visible at once."""
        dead = self.lanes[DEAD]
        dead.ready.pop(e.key, None)
        dead.size -= 1
        e.dead, e.count, e.gen, e.visible_at = False, 0, e.gen + 1, now
        main = self.lanes[MAIN]
        main.size += 1
        main.ready[e.key] = None

    def next_due(self) -> float | None:
        times = [t for t in (lane.next_due() for lane in self.lanes.values()) if t is not None]
        return min(times) if times else None

    # receipt handles

    def handle(self, e: Entry) -> str:
        raw = f"{self.queue_id}|{e.uid}|{e.index}|{e.gen}|{int(e.dead)}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def parse_handle(self, handle: str) -> tuple[int, int, int, bool] | None:
        """(uid, index, gen, dead) of one of this queue's handles, or None."""
        try:
            text = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode()
            queue_id, uid, index, gen, dead = text.split("|")
            if queue_id == self.queue_id:
                return int(uid), int(index), int(gen), dead == "1"
        except (binascii.Error, UnicodeDecodeError, ValueError):
            pass
        return None
