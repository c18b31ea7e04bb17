"""How a mapping's lanes run without a thread each (pollers.py has the whole picture).

A lane (lane.Lane) is written top to bottom as a generator: it reads, batches, invokes and
checkpoints until it has to wait, for a record at an index of its shard (`Wait`) or for a delay
(`Sleep`: a retry's backoff), and yields what it waits for. Its runner then parks it: a waiting
lane listens on its shard source, which calls it back from the thread that appends (or closes the
shard, or deletes the stream); a deadline goes to the Timers. Woken, the lane is queued, and the
next free thread of its mapping's LanePool runs it on.

So an idle mapping holds no thread busy and costs nothing measurable, whatever its number of
shards; a mapping has at most `LanePool.size` threads, started as work needs them. One lane is
never run by two threads at once (a lane is queued only by the wake of its current park), which
keeps a shard's records in order.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger("kinesim.pollers")


@dataclass(frozen=True)
class Wait:
    """Until a record at `index` may exist (or the source ends), at most `timeout` s (None: no limit)."""
    index: int
    timeout: float | None


@dataclass(frozen=True)
class Sleep:
    """`seconds` of delay (a backoff): only the time ends it."""
    seconds: float


class Timers:
    """Callbacks due at a time, on one thread (started on first use) for all of a manager's mappings."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # ties: first come, first called (and never compare callbacks)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def after(self, seconds: float, callback: Callable[[], None]) -> None:
        with self._cond:
            if self._closed:
                return
            heapq.heappush(self._heap, (time.monotonic() + max(0.0, seconds), next(self._order), callback))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mapping-timers", daemon=True)
                self._thread.start()
            if self._heap[0][2] is callback:  # a new earliest deadline: the thread must wait less
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(self._heap[0][0] - time.monotonic() if self._heap else None)
                if self._closed:
                    return
                callback = heapq.heappop(self._heap)[2]
            try:
                callback()
            except Exception:  # a callback's failure must not end every other lane's timers
                log.exception("mapping timer failed")


class LanePool:
    """The threads that run one mapping's lanes: at most `size`, started when work is queued and
    no thread is free. `close()` drops what is queued; a lane being run finishes its step."""

    def __init__(self, size: int, name: str) -> None:
        self.size, self.name = size, name
        self._queue: deque[Callable[[], None]] = deque()
        self._cond = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def submit(self, task: Callable[[], None]) -> None:
        with self._cond:
            if self._closed:
                return
            self._queue.append(task)
            if self._idle > len(self._queue) - 1:
                self._cond.notify()
            elif len(self._threads) < self.size:
                thread = threading.Thread(target=self._run, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()

    def threads(self) -> list[threading.Thread]:
        with self._cond:
            return list(self._threads)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._idle += 1
                    self._cond.wait()
                    self._idle -= 1
                if self._closed:
                    return
                task = self._queue.popleft()
            try:
                task()
            except Exception:  # a lane catches its own failures; this keeps the thread for the others
                log.exception("%s: a lane's step failed", self.name)
