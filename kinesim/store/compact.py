"""Moving rows from `recent` into `records` (see `recent` for why they are there).

A round switches appends to the other `recent` table, then moves the rows of the one it left
shard by shard, in steps of about STEP_ROWS rows, each its own transaction on the main database
(puts to `recent` do not wait for it: they write another file; narrow puts to `records` wait for
one step at most). Within a step the rows go in key order and each shard's rows together, so each
shard's tail page in `records` is written once per round, not once per record. Then the left
table is emptied in one statement.

A round starts when `recent` holds MAX_ROWS rows or MAX_BYTES of data, or when puts have paused
for IDLE_S with anything in it (so a store at rest has an empty `recent`). Wide puts wait while it
holds HARD_ROWS: memory, restart time and the length of a round stay bounded whatever the load.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Callable

from .checkpoint import PAGE_BYTES
from .recent import MOVE, Recent

log = logging.getLogger("kinesim.store")

# A round's size sets how often each shard's tail page in `records` (and the pages around it,
# which SQLite rebalances when it splits a page mid-table) is written again: at 1,024 shards,
# 100,000-row rounds wrote ~800 bytes per record moved, 200,000-row rounds ~630.
MAX_ROWS = 200_000
MAX_BYTES = 32 << 20
HARD_ROWS = 3 * MAX_ROWS
IDLE_S = 5.0  # batches a few seconds apart still share a round (each round rewrites the shards' tails)
# Rows moved per step (~40-80 ms of the main database's write lock, which wide puts do not take).
# Each step needs the GIL back ~5 times, each a wait of up to the interpreter's switch interval
# (5 ms) behind the request threads: 2,048-row steps made a round of 100,000 rows take 3-4.5 s
# under a 1,024-shard load, slower than the puts filled `recent`; 8,192 take 1.1-2 s.
STEP_ROWS = 8192
PAUSE, MAX_PAUSE_S = 0.1, 0.01  # after a step, let the main database's other writers in


def compact_round(recent: Recent, write, write_lock: threading.Lock, wrote: Callable[[int], None] | None = None,
                  stopped: threading.Event | None = None, pause: bool = True) -> int:
    """Move every row committed so far from `recent` into `records` (`write`: the main database's
    writer, used under `write_lock`); how many were moved. Stops between steps once `stopped` is
    set: the rows not moved yet stay readable where they are, and the next round (`Store.close`
    runs one) goes on from there. `pause`: let other writers in between steps."""
    with recent.round:
        return _round(recent, write, write_lock, wrote, stopped, pause)


def _round(recent: Recent, write, write_lock: threading.Lock, wrote: Callable[[int], None] | None,
           stopped: threading.Event | None, pause: bool) -> int:
    with recent.write_lock:
        if not recent.draining:
            if not recent.rows:
                return 0
            recent.switch_tables()
    moved = 0
    for group in recent.plan(STEP_ROWS):
        if stopped is not None and stopped.is_set():
            return moved
        # Listed outside the locks; rows deleted meanwhile (retention, a deleted stream: done
        # under both locks) bump `recent.deletions`, and the list is taken again.
        deletions = recent.deletions
        gkeys = recent.entries(group)
        started = time.monotonic()
        with write_lock:  # puts to `recent` go on: they write the other file
            if recent.deletions != deletions:
                gkeys = recent.entries(group)
            if gkeys:
                write.execute(MOVE[1 - recent.active], (json.dumps(gkeys),))
            with recent.write_lock:
                recent.moved(group)
            if wrote is not None:  # each shard's tail page, and the pages the rows fill
                wrote((len(group) + 1) * PAGE_BYTES + len(gkeys) * 256)
        moved += len(gkeys)
        # Let the writes queued on the lock have it before the next step: a released Lock goes
        # to whoever asks first, and that could be this thread.
        wait = min(PAUSE * (time.monotonic() - started), MAX_PAUSE_S) if pause else 0.0
        if stopped is None:
            time.sleep(wait)
        elif stopped.wait(wait):
            return moved
    with recent.write_lock:
        recent.clear_inactive()
    return moved


class Compactor(threading.Thread):
    """Runs rounds in the background when `recent` is full enough or puts pause."""

    def __init__(self, recent: Recent, write, write_lock: threading.Lock, wrote: Callable[[int], None]):
        super().__init__(name="kinesim-store-compact", daemon=True)
        self.recent, self.write, self.write_lock, self.wrote = recent, write, write_lock, wrote
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self.room = threading.Condition()  # puts waiting for `recent` to shrink below HARD_ROWS
        self.rounds = 0
        self.asleep = False  # waiting with no timeout: `recent` was empty

    def appended(self) -> None:
        """Called after each append to `recent`: cheap."""
        if self.asleep or self.recent.new_rows >= MAX_ROWS or self.recent.new_bytes >= MAX_BYTES:
            self.wake.set()

    def wait_for_room(self, timeout: float = 10.0) -> None:
        """Block a put while `recent` holds HARD_ROWS (the compactor is behind). Never for ever:
        a compactor that failed must not stop puts."""
        if self.recent.rows < HARD_ROWS:
            return
        self.wake.set()
        deadline = time.monotonic() + timeout
        with self.room:
            while self.recent.rows >= HARD_ROWS and self.is_alive() and time.monotonic() < deadline:
                self.room.wait(0.1)

    def due(self) -> bool:
        r = self.recent
        return r.draining or r.new_rows >= MAX_ROWS or r.new_bytes >= MAX_BYTES or (
            r.rows > 0 and time.monotonic() - r.last_append >= IDLE_S)

    def run(self) -> None:
        while not self.stopped.is_set():
            # With `recent` empty, sleep until an append: an idle server wakes for nothing here.
            # (`asleep` is set before `rows` is looked at, and an append counts its rows before
            # looking at `asleep`: one of the two sees the other.)
            self.asleep = True
            self.wake.wait(None if not self.recent.rows and not self.recent.draining else IDLE_S / 2)
            self.asleep = False
            self.wake.clear()
            if self.stopped.is_set() or not self.due():
                continue
            try:
                compact_round(self.recent, self.write, self.write_lock, self.wrote, self.stopped)
                self.rounds += 1
            except Exception:  # disk trouble must not end the thread: the rows stay readable in `recent`
                log.exception("moving records into place failed")
                self.stopped.wait(1.0)
            with self.room:
                self.room.notify_all()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.is_alive():
            self.join()
