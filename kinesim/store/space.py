"""Giving the space of deleted rows back to the OS.

SQLite puts the pages of deleted rows on a free list and reuses them, but the file only shrinks in
auto_vacuum mode. INCREMENTAL (not FULL) leaves the work to `incremental_vacuum`, which this
module runs in a background thread, a few milliseconds of the write lock at a time, so neither
PutRecord nor the deletions themselves pay for it. In WAL mode the moved pages go to the -wal file
and the database file is cut only when a checkpoint copies them back, so a TRUNCATE checkpoint
follows; `journal_size_limit` keeps the -wal file from staying at its largest size in between.

All of this is crash-safe as plain SQLite transactions are: a kill -9 mid-way leaves free pages
that the next run returns.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time

log = logging.getLogger("kinesim.store")

INCREMENTAL = 2                  # PRAGMA auto_vacuum's value for INCREMENTAL
WAL_LIMIT_BYTES = 8 << 20        # journal_size_limit: what a reset -wal file is cut back to
STEP_PAGES = 256                 # pages per vacuum step (1 MiB at 4 KiB): a few ms of the lock
SLACK_BYTES = 2 << 20            # free pages left for reuse: a Firehose buffer that fills and
                                 # drains all day should not make the file shrink and grow again
CHECK_EVERY_S = 60.0             # free space from anywhere (a crash, replaced documents) comes back
CHECKPOINT_BUSY_MS = 100         # how long the TRUNCATE checkpoint waits for readers, lock held


def convert_to_incremental(conn: sqlite3.Connection, path: str) -> None:
    """Make a database created without auto_vacuum (earlier versions set it after WAL mode,
    where it has no effect) incremental: once, by rewriting the file with VACUUM.

    VACUUM is atomic: if it fails (typically for want of disk space: it needs room for a copy of
    the database in the temp directory and in the -wal file) nothing is lost, the database stays
    as it was, and the next start tries again."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        return
    mb = os.path.getsize(path) / 1e6 if os.path.exists(path) else 0.0
    log.warning("converting %s (%.0f MB) to incremental auto-vacuum so that deleted records give their "
                "space back: a one-time VACUUM that rewrites the file and needs about twice its size free",
                path, mb)
    started = time.monotonic()
    try:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("VACUUM")
    except sqlite3.OperationalError as e:
        log.error("could not convert %s (%s): it keeps working, but deleted records' space is not returned "
                  "until a later start converts it", path, e)
        return
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    log.warning("converted %s in %.1f s", path, time.monotonic() - started)


def _free_pages_over_slack(conn: sqlite3.Connection) -> int:
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return conn.execute("PRAGMA freelist_count").fetchone()[0] - SLACK_BYTES // page_size


class Reclaimer(threading.Thread):
    """Returns free pages to the OS when told that rows were deleted (and every CHECK_EVERY_S)."""

    def __init__(self, conn: sqlite3.Connection, lock: threading.Lock, path: str):
        super().__init__(name="kinesim-store-space", daemon=True)
        self.conn, self.lock, self.path = conn, lock, path
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self._one_at_a_time = threading.Lock()  # the thread's rounds and `Store.reclaim_space`

    def freed(self) -> None:
        """Rows were deleted: cheap, callers on any path may call it."""
        self.wake.set()

    def run(self) -> None:
        self.wake.set()  # free pages a previous run left behind
        while True:
            self.wake.wait(CHECK_EVERY_S)
            self.wake.clear()
            if self.stopped.is_set():
                return
            try:
                self.reclaim()
            except Exception:  # disk trouble must not end the thread; nothing is lost by waiting
                log.exception("returning free space failed")

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()
        if self.is_alive():
            self.join()

    def reclaim(self) -> int:
        """Vacuum the free pages beyond the slack in short steps, then cut the -wal file.
        Returns how many pages were vacuumed."""
        with self._one_at_a_time:
            return self._reclaim()

    def _reclaim(self) -> int:
        pages = 0
        while not self.stopped.is_set():
            with self.lock:
                started = time.monotonic()
                step = min(STEP_PAGES, _free_pages_over_slack(self.conn))
                if step <= 0:
                    break
                # executescript steps the pragma to its end; execute() would free a single page.
                self.conn.executescript(f"PRAGMA incremental_vacuum({step})")
                took = time.monotonic() - started
            pages += step
            # Writers get the lock at least half of the time while this runs.
            self.stopped.wait(max(took, 0.001))
        if pages or self._wal_bytes() > WAL_LIMIT_BYTES:
            self.checkpoint()
        if pages:
            log.info("returned %d free pages of %s to the OS", pages, self.path)
        return pages

    def checkpoint(self) -> bool:
        """Copy the -wal file into the database (which cuts the database file to its vacuumed
        size) and truncate it. Waits only briefly for readers: if one is busy, the next round
        (or journal_size_limit at the next reset of the -wal file) finishes the job."""
        with self.lock:
            conn = self.conn
            saved = conn.execute("PRAGMA busy_timeout").fetchone()[0]
            conn.execute(f"PRAGMA busy_timeout={CHECKPOINT_BUSY_MS}")
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.execute(f"PRAGMA busy_timeout={saved}")
        return not busy

    def _wal_bytes(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0
