"""SQLite storage: documents (stream metadata, settings) and the per-shard ordered record log.

Durability: WAL with synchronous=NORMAL. A commit is in the OS before `append` returns, so a
process killed with SIGKILL right after a 200 loses nothing (a power cut may lose the last
commits; `synchronous=FULL` would cover that at ~10x the cost per put).

`--in-memory` runs this same code on a throwaway database in RAM-backed /dev/shm with
synchronous=OFF, so both modes share every line of the data path.

Records live in one table keyed by an integer rowid `shard_uid << 40 | record_index`: one B-tree,
each shard a contiguous key range, a shard read is one range scan.

Space of deleted rows (expired or deleted streams' records, delivered Firehose buffers, documents)
goes back to the OS in the background: see `space`.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
from typing import Any, Iterable

from .space import WAL_LIMIT_BYTES, Reclaimer, convert_to_incremental

# (record index in shard, sequence number, partition key, data, arrival epoch seconds)
StoredRecord = tuple[int, str, str, bytes, float]

_SHIFT = 40
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS records (
    key INTEGER PRIMARY KEY, seq TEXT NOT NULL, pk TEXT NOT NULL,
    data BLOB NOT NULL, arrival REAL NOT NULL);
CREATE TABLE IF NOT EXISTS firehose_buffer (
    stream TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, arrival REAL NOT NULL,
    PRIMARY KEY (stream, seq));
"""
_INSERT = "INSERT INTO records (key, seq, pk, data, arrival) VALUES (?, ?, ?, ?, ?)"
# Records deleted per transaction when a shard's records go: at most a PutRecords' worth (500
# records, 5 MiB), so the write lock is held about as long as a put holds it (deleting 200 MB in
# one statement held it for a second), and puts to every stream keep flowing.
_DELETE_ROWS, _DELETE_BYTES = 500, 5 << 20


class Store:
    def __init__(self, data_dir: str | None):
        """`data_dir=None` means in-memory: a temporary database removed by `close()`."""
        self._tmp = None
        if data_dir is None:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self._tmp = data_dir = tempfile.mkdtemp(prefix="kinesim-mem-", dir=base)
        os.makedirs(data_dir, exist_ok=True)
        self.path = os.path.join(data_dir, "kinesim.db")
        self._sync = "OFF" if self._tmp else "NORMAL"
        # auto_vacuum first: setting the journal mode writes the file's first page, after which
        # auto_vacuum changes only through a VACUUM (which is how older databases are converted).
        self._write = self._connect("auto_vacuum=INCREMENTAL")
        convert_to_incremental(self._write, self.path)
        self._write.executescript(_SCHEMA)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._space = Reclaimer(self._write, self._write_lock, self.path)
        self._space.start()

    def _connect(self, *first_pragmas: str) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        for pragma in first_pragmas:
            conn.execute(f"PRAGMA {pragma}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._sync}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        return conn

    def _reader(self) -> sqlite3.Connection:
        # One connection per thread for reads: WAL lets them run beside the writer.
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def release_reader(self) -> None:
        """Close this thread's reading connection (its next read opens another): a thread about to
        wait long gives back the connection's memory (~130 KB with its page cache)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            conn.close()

    def reclaim_space(self) -> int:
        """Return free pages to the OS now (the background thread does it after deletions);
        how many pages were vacuumed."""
        return self._space.reclaim()

    def close(self) -> None:
        self._space.stop()
        with self._write_lock:
            self._write.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # documents: small JSON bodies (stream metadata, account settings, resource policies)

    def documents(self, kind: str) -> dict[str, Any]:
        rows = self._reader().execute("SELECT name, body FROM documents WHERE kind=?", (kind,))
        return {name: json.loads(body) for name, body in rows}

    def document_count(self, kind: str) -> int:
        """How many documents of one kind there are, none of them read (CloudFormation's stack quota)."""
        return self._reader().execute("SELECT COUNT(*) FROM documents WHERE kind=?", (kind,)).fetchone()[0]

    def document(self, kind: str, name: str) -> Any | None:
        """One document, or None: a primary-key lookup, not a read of the whole kind."""
        row = self._reader().execute("SELECT body FROM documents WHERE kind=? AND name=?", (kind, name)).fetchone()
        return None if row is None else json.loads(row[0])

    def put_document(self, kind: str, name: str, body: Any) -> None:
        text = json.dumps(body, separators=(",", ":"))
        with self._write_lock:
            self._write.execute(
                "INSERT OR REPLACE INTO documents (kind, name, body) VALUES (?, ?, ?)", (kind, name, text))

    def delete_document(self, kind: str, name: str) -> None:
        with self._write_lock:
            self._write.execute("DELETE FROM documents WHERE kind=? AND name=?", (kind, name))
        self._space.freed()

    def put_documents(self, kind: str, bodies: dict[str, Any]) -> None:
        """Several documents of one kind in one transaction: all of them are stored, or none
        (the messages one SQS ReceiveMessage hands out, a message with its deduplication entry)."""
        rows = [(kind, name, json.dumps(body, separators=(",", ":"))) for name, body in bodies.items()]
        self._in_transaction("INSERT OR REPLACE INTO documents (kind, name, body) VALUES (?, ?, ?)", rows)

    def delete_documents(self, kind: str, names: Iterable[str] | None = None) -> None:
        """Delete documents of one kind in one transaction: those named, or all of the kind."""
        if names is None:
            with self._write_lock:
                self._write.execute("DELETE FROM documents WHERE kind=?", (kind,))
        else:
            self._in_transaction("DELETE FROM documents WHERE kind=? AND name=?", [(kind, n) for n in names])
        self._space.freed()

    def document_kinds(self) -> list[str]:
        """The kinds that have documents (a reset deletes them by the service that owns each)."""
        return [kind for (kind,) in self._reader().execute("SELECT DISTINCT kind FROM documents ORDER BY kind")]

    def _in_transaction(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        with self._write_lock:
            w = self._write
            w.execute("BEGIN")
            try:
                w.executemany(statement, rows)
            except BaseException:
                w.execute("ROLLBACK")
                raise
            w.execute("COMMIT")

    # records

    def append_one(self, shard_uid: int, record: StoredRecord) -> None:
        """Commit one record (PutRecord's path): a single autocommit INSERT is its own transaction."""
        idx, seq, pk, data, arrival = record
        with self._write_lock:
            self._write.execute(_INSERT, ((shard_uid << _SHIFT) | idx, seq, pk, data, arrival))

    def append_many(self, batches: dict[int, list[StoredRecord]]) -> None:
        """Commit records to several shards in one transaction (PutRecords)."""
        rows = []
        for shard_uid, records in batches.items():
            base = shard_uid << _SHIFT
            rows.extend((base | idx, seq, pk, data, arrival) for idx, seq, pk, data, arrival in records)
        with self._write_lock:
            w = self._write
            w.execute("BEGIN")
            try:
                w.executemany(_INSERT, rows)
            except BaseException:
                w.execute("ROLLBACK")
                raise
            w.execute("COMMIT")

    def read(self, shard_uid: int, from_idx: int, limit: int, min_arrival: float = 0.0) -> list[StoredRecord]:
        """Up to `limit` records of a shard from index `from_idx` on, skipping expired ones."""
        base = shard_uid << _SHIFT
        rows = self._reader().execute(
            "SELECT key, seq, pk, data, arrival FROM records WHERE key >= ? AND key < ? AND arrival >= ?"
            " ORDER BY key LIMIT ?",
            (base | from_idx, base + (1 << _SHIFT), min_arrival, limit)).fetchall()
        mask = (1 << _SHIFT) - 1
        return [(key & mask, seq, pk, data, arrival) for key, seq, pk, data, arrival in rows]

    def last_index(self, shard_uid: int) -> int | None:
        base = shard_uid << _SHIFT
        row = self._reader().execute(
            "SELECT max(key) FROM records WHERE key >= ? AND key < ?", (base, base + (1 << _SHIFT))).fetchone()
        return None if row[0] is None else row[0] & ((1 << _SHIFT) - 1)

    def shard_uids_with_records(self) -> list[int]:
        """The uids of the shards that have records, ascending: one key lookup per shard (each
        shard's keys are one range), not a scan of the records."""
        conn, uids, start = self._reader(), [], 0
        while (key := conn.execute("SELECT min(key) FROM records WHERE key >= ?", (start,)).fetchone()[0]) is not None:
            uids.append(key >> _SHIFT)
            start = (uids[-1] + 1) << _SHIFT
        return uids

    def first_index_at(self, shard_uid: int, timestamp: float) -> int | None:
        """Index of the first record that arrived at or after `timestamp`, if any.

        A binary search over the shard's keys, a few point reads instead of a scan: arrival times
        never decrease within a shard (records are stamped while the stream's put lock is held)."""
        base, end = shard_uid << _SHIFT, (shard_uid + 1) << _SHIFT
        conn = self._reader()
        lo, hi = conn.execute("SELECT min(key), max(key) FROM records WHERE key >= ? AND key < ?",
                              (base, end)).fetchone()
        if lo is None or conn.execute("SELECT arrival FROM records WHERE key = ?", (hi,)).fetchone()[0] < timestamp:
            return None
        # The smallest x in [lo, hi] whose next stored record (key >= x; retention may have left
        # gaps) arrived at or after `timestamp`: a monotone predicate, true at hi.
        def next_record(x: int) -> tuple[int, float]:
            return conn.execute("SELECT key, arrival FROM records WHERE key >= ? ORDER BY key LIMIT 1",
                                (x,)).fetchone()
        while lo < hi:
            mid = (lo + hi) // 2
            if next_record(mid)[1] >= timestamp:
                hi = mid
            else:
                lo = mid + 1
        return next_record(lo)[0] & ((1 << _SHIFT) - 1)

    def delete_records(self, shard_uids: Iterable[int], before_arrival: float | None = None) -> int:
        """Delete shards' records (all, or those that arrived before a time), in transactions of a
        bounded size; their space goes back to the OS in the background."""
        deleted = 0
        for uid in shard_uids:
            base = uid << _SHIFT
            end = base + (1 << _SHIFT)
            if before_arrival is not None:
                # Expired records are the front of the shard (arrival times never decrease within
                # it): stop at the first record still kept instead of reading every record's
                # arrival. The `arrival <` test below still guards each row.
                kept = self.first_index_at(uid, before_arrival)
                if kept is not None:
                    end = base | kept
            deleted += self._delete_range(base, end, before_arrival)
        if deleted:
            self._space.freed()
        return deleted

    def _delete_range(self, start: int, end: int, before_arrival: float | None) -> int:
        deleted = 0
        conn = self._reader()
        while True:
            stop = self._batch_end(conn, start, end)
            if stop is None:
                return deleted
            with self._write_lock:
                if before_arrival is None:
                    cur = self._write.execute("DELETE FROM records WHERE key >= ? AND key < ?", (start, stop))
                else:
                    cur = self._write.execute("DELETE FROM records WHERE key >= ? AND key < ? AND arrival < ?",
                                              (start, stop, before_arrival))
            deleted += cur.rowcount
            start = stop

    @staticmethod
    def _batch_end(conn: sqlite3.Connection, start: int, end: int) -> int | None:
        """The key that ends the next batch of records from `start` on (None: none are left).
        length() of a blob reads no overflow pages: the size of a batch costs only its keys."""
        rows = conn.execute("SELECT key, length(data) FROM records WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
                            (start, end, _DELETE_ROWS)).fetchall()
        if not rows:
            return None
        size = 0
        for i, (key, length) in enumerate(rows):
            size += length
            if size > _DELETE_BYTES and i:
                return key
        return rows[-1][0] + 1

    # Firehose buffers: records a delivery stream acknowledged (PutRecord/PutRecordBatch) and has
    # not yet delivered, in arrival order. Rows leave only after the object holding them is written.

    def firehose_buffer_append(self, stream: str, rows: list[tuple[int, bytes, float]]) -> None:
        """Commit (seq, data, arrival) rows of one delivery stream in one transaction."""
        with self._write_lock:
            w = self._write
            w.execute("BEGIN")
            try:
                w.executemany("INSERT INTO firehose_buffer (stream, seq, data, arrival) VALUES (?, ?, ?, ?)",
                              [(stream, seq, data, arrival) for seq, data, arrival in rows])
            except BaseException:
                w.execute("ROLLBACK")
                raise
            w.execute("COMMIT")

    def firehose_buffer_read(self, stream: str, after_seq: int, limit: int) -> list[tuple[int, bytes, float]]:
        """Up to `limit` buffered (seq, data, arrival) rows with seq > `after_seq`, oldest first."""
        return self._reader().execute(
            "SELECT seq, data, arrival FROM firehose_buffer WHERE stream=? AND seq>? ORDER BY seq LIMIT ?",
            (stream, after_seq, limit)).fetchall()

    def firehose_buffer_stats(self, stream: str) -> tuple[int, int, int | None, float | None]:
        """(record count, total bytes, highest seq, oldest arrival) of a delivery stream's buffer."""
        count, size, top = self._reader().execute(
            "SELECT count(*), coalesce(sum(length(data)), 0), max(seq) FROM firehose_buffer WHERE stream=?",
            (stream,)).fetchone()
        row = self._reader().execute(
            "SELECT arrival FROM firehose_buffer WHERE stream=? ORDER BY seq LIMIT 1", (stream,)).fetchone()
        return count, size, top, row[0] if row else None

    def firehose_buffer_clear(self) -> None:
        """Remove every delivery stream's rows (a reset of Firehose)."""
        with self._write_lock:
            self._write.execute("DELETE FROM firehose_buffer")
        self._space.freed()

    def firehose_buffer_delete(self, stream: str, through_seq: int | None = None) -> None:
        """Remove a delivery stream's rows up to and including `through_seq` (all when None)."""
        with self._write_lock:
            if through_seq is None:
                self._write.execute("DELETE FROM firehose_buffer WHERE stream=?", (stream,))
            else:
                self._write.execute("DELETE FROM firehose_buffer WHERE stream=? AND seq<=?", (stream, through_seq))
        self._space.freed()
