"""Checkpoints in the background: copying the -wal file into the database off the write path.

SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold, under the
store's write lock: that put waits while ~4 MB are copied and two fsyncs complete (tens of ms,
100 ms and more on a busy disk), and so does every put queued behind it. Here a thread with a
connection of its own runs PASSIVE checkpoints, which go on beside the writer (in WAL mode a
checkpoint and a write transaction do not exclude each other), once about CHECKPOINT_BYTES have
been committed since the last one: as often as SQLite's own default (1,000 pages) would.

The writer's automatic checkpoint stays, at BACKSTOP_PAGES, for when this thread falls behind or
writes went unreported. Durability does not change: a commit is in the -wal file (in the OS) before
it returns, whoever checkpoints it later.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
from typing import Callable

log = logging.getLogger("kinesim.store")

CHECKPOINT_BYTES = 4 << 20
BACKSTOP_PAGES = 4000
PAGE_BYTES = 4096


class Checkpointer(threading.Thread):
    def __init__(self, connect: Callable[[], sqlite3.Connection]):
        super().__init__(name="kinesim-store-checkpoint", daemon=True)
        self.connect = connect
        self.pending = 0  # about how many bytes were committed since the last checkpoint
        self.wake = threading.Event()
        self.stopped = threading.Event()

    def wrote(self, nbytes: int) -> None:
        """A writer committed about `nbytes` to the -wal file. Cheap; called under the write lock,
        so the addition is not raced."""
        self.pending += nbytes
        if self.pending >= CHECKPOINT_BYTES:
            self.wake.set()

    def run(self) -> None:
        conn = None
        try:
            while True:
                self.wake.wait()
                self.wake.clear()
                if self.stopped.is_set():
                    return
                self.pending = 0
                try:
                    conn = conn or self.connect()
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:  # the writer's backstop checkpoints meanwhile; nothing is lost
                    log.exception("background checkpoint failed")
                    self.stopped.wait(1.0)
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.is_alive():
            self.join()
