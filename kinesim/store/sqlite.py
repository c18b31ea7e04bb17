"""SQLite storage: documents (stream metadata, settings) and the per-shard ordered record log.

Durability: WAL with synchronous=NORMAL. A commit is in the OS before `append` returns, so a
process killed with SIGKILL right after a 200 loses nothing (a power cut may lose the last
commits; `synchronous=FULL` would cover that at ~10x the cost per put). Checkpoints run in a
thread of their own (`checkpoint`), not inside a put's commit.

`--in-memory` runs this same code on a throwaway database in RAM-backed /dev/shm with
synchronous=OFF, so both modes share every line of the data path.

Records live in one table keyed by an integer rowid `shard_uid << 40 | record_index`: one B-tree,
each shard a contiguous key range, a shard read is one range scan. The newest records of a shard
may instead still be in `recent` (a file of its own beside the database, attached to every
connection), where PutRecords batches spread over many shards are appended in arrival order until
the compactor sorts them in: see `recent` and `compact`.

Records put by Kafka clients carry their Kafka-only fields (timestamp, headers, key bytes, ...:
kafka/batches.py) in a nullable column `kafka` of the same row, NULL for Kinesis puts: in the row,
they are committed, compacted and expired with the record (a side table in `recent`'s file would
not commit atomically with it). Databases from before the column gain it at open; older versions
still open them (their statements name their columns), though a compaction of theirs drops the
column of rows it moves out of `recent` (empty after a clean stop: `close`).

Space of deleted rows (expired or deleted streams' records, delivered Firehose buffers, documents)
goes back to the OS in the background: see `space`.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from typing import Any, Iterable

from .buffers import FirehoseBuffers
from .checkpoint import BACKSTOP_PAGES, Checkpointer
from .compact import Compactor, compact_round
from .ranges import (MASK, SHIFT, KafkaRecord, StoredRecord, add_column, batch_end, first_at, kafka_rows_of, read_range,
                     read_range_kafka, rows_of, wal_bytes)
from .recent import RECENT_FILE, SCHEMA_NAME, STEP, WIDE_SHARDS, Recent, data_size, is_wide
from .space import WAL_LIMIT_BYTES, Reclaimer, convert_to_incremental
from .tails import View
from .transaction import transaction

log = logging.getLogger("kinesim.store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, name));
CREATE TABLE IF NOT EXISTS records (
    key INTEGER PRIMARY KEY, seq TEXT NOT NULL, pk TEXT NOT NULL,
    data BLOB NOT NULL, arrival REAL NOT NULL, kafka BLOB);
CREATE TABLE IF NOT EXISTS firehose_buffer (
    stream TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL, arrival REAL NOT NULL,
    PRIMARY KEY (stream, seq));
"""
CLOSE_ROWS = 50_000  # at most this many rows in `recent` are moved into `records` by `close`
_INSERT = "INSERT INTO records (key, seq, pk, data, arrival) VALUES (?, ?, ?, ?, ?)"
_INSERT_KAFKA = "INSERT INTO records (key, seq, pk, data, arrival, kafka) VALUES (?, ?, ?, ?, ?, ?)"


class Store(FirehoseBuffers):
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
        self._write = self._connect("auto_vacuum=INCREMENTAL", attach=False)
        convert_to_incremental(self._write, self.path)
        self._write.executescript(_SCHEMA)
        add_column(self._write, "records", "kafka")  # a database written before the column existed
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._space = Reclaimer(self._write, self._write_lock, self.path)
        self._space.start()
        # `recent`'s own file: its freed pages are taken again by the next compaction round,
        # nothing to give back (auto_vacuum off).
        self.recent_path = os.path.join(data_dir, RECENT_FILE)
        self._recent = Recent(lambda: self._connect("auto_vacuum=NONE", path=self.recent_path, attach=False))
        self._attach(self._write)
        self._checkpoints = Checkpointer(lambda: self._connect(attach=False))
        self._recent_checkpoints = Checkpointer(lambda: self._connect(path=self.recent_path, attach=False))
        for writer, checkpoints in ((self._write, self._checkpoints), (self._recent.conn, self._recent_checkpoints)):
            writer.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
            checkpoints.start()
        self._compactor = Compactor(self._recent, self._write, self._write_lock, self._checkpoints.wrote)
        self._compactor.start()

    def _connect(self, *first_pragmas: str, path: str | None = None, attach: bool = True) -> sqlite3.Connection:
        conn = sqlite3.connect(path or self.path, check_same_thread=False, isolation_level=None, timeout=30)
        for pragma in first_pragmas:
            conn.execute(f"PRAGMA {pragma}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._sync}")
        # This build of SQLite may default to secure_delete=ON, which overwrites every freed page
        # with zeros: emptying a `recent` table (see `recent`) would then write it all once more.
        # FAST zeroes deleted content only on pages written anyway.
        conn.execute("PRAGMA secure_delete=FAST")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        if attach:
            self._attach(conn)
        return conn

    def _attach(self, conn: sqlite3.Connection) -> None:
        """Reads of `recent` (and the compactor's moves out of it) go through the connections of
        the main database, with `recent`'s file attached."""
        conn.execute(f"ATTACH DATABASE ? AS {SCHEMA_NAME}", (self.recent_path,))

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

    def compact(self) -> int:
        """Move what `recent` holds into `records` now, without pausing for other writers (the
        compactor does it in the background, pausing); how many records were moved."""
        return compact_round(self._recent, self._write, self._write_lock, self._checkpoints.wrote, pause=False)

    def close(self) -> None:
        self._compactor.stop()
        if self._recent.rows <= CLOSE_ROWS:
            try:
                # Then the next start has nothing to index, and the database opens in versions
                # that know only `records`. More rows would make the stop slow (~0.5 s per 100,000):
                # the next start indexes them instead (~0.15 s per 100,000).
                self.compact()
                self._recent.shrink()
            except Exception:  # the rows stay in `recent`, where the next start finds them
                log.exception("moving records into place at close failed")
        self._space.stop()
        self._checkpoints.stop()
        self._recent_checkpoints.stop()
        with self._write_lock:
            self._write.close()
        self._recent.close()
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
        with self._write_lock, transaction(self._write) as w:
            w.executemany(statement, rows)

    # records

    def append_one(self, shard_uid: int, record: StoredRecord) -> None:
        """Commit one record (PutRecord's path): a single autocommit INSERT is its own transaction."""
        idx, seq, pk, data, arrival = record
        if self._recent.has(shard_uid):  # then this record goes after the shard's newest, there
            self._to_recent({shard_uid: [record]}, len(data))
            return
        with self._write_lock:
            self._write.execute(_INSERT, ((shard_uid << SHIFT) | idx, seq, pk, data, arrival))
            self._checkpoints.wrote(wal_bytes(1, 1, len(data)))

    def append_many(self, batches: dict[int, list[StoredRecord]], kafka: bool = False) -> None:
        """Commit records to several shards in one transaction (PutRecords): into `recent` when
        the batch is wide (see `recent.is_wide`) or one of its shards has records there, else
        into `records`. Either way one file, one transaction. `kafka`: the records are
        KafkaRecords, their last member stored in the `kafka` column (Kafka's Produce)."""
        size = data_size(batches) if len(batches) > WIDE_SHARDS else 0
        if is_wide(batches, size):
            self._compactor.wait_for_room()
            self._to_recent(batches, size, kafka)
            return
        if any(self._recent.has(uid) for uid in batches):
            self._to_recent(batches, data_size(batches), kafka)
            return
        rows, insert = (kafka_rows_of(batches), _INSERT_KAFKA) if kafka else (rows_of(batches), _INSERT)
        with self._write_lock:
            with transaction(self._write) as w:
                # executemany, not recent.insert_rows: multi-row INSERTs into `records` wrote ~11
                # bytes more per record at 4 shards (measured; SQLite's page splits, presumably).
                w.executemany(insert, rows)
            # Rows in `records` dirty a page per shard besides the pages they fill.
            self._checkpoints.wrote(wal_bytes(len(batches), len(rows), size or data_size(batches)))

    def _to_recent(self, batches: dict[int, list[StoredRecord]], size: int, kafka: bool = False) -> None:
        recent = self._recent
        with recent.write_lock:
            recent.append(batches, size, kafka)
            self._recent_checkpoints.wrote(wal_bytes(1, sum(len(rows) for rows in batches.values()), size))
        self._compactor.appended()

    def _snapshot(self, shard_uid: int, from_idx: int = 0) -> tuple[sqlite3.Connection, View | None]:
        """This thread's reading connection and what `recent` holds of the shard from `from_idx`
        on (None: nothing). With a View, a read transaction is open on the connection, whose
        snapshot agrees with the View (same compaction step), and the caller commits it."""
        conn = self._reader()
        while True:
            view = self._recent.view(shard_uid, from_idx)
            if view is None:
                # Nothing of the shard is in `recent`: whatever a compaction moves meanwhile only
                # adds newer records to the end of its range in `records`.
                return conn, None
            conn.execute("BEGIN")
            current = False
            try:
                current = conn.execute(STEP).fetchone()[0] == view.step
            finally:
                if not current:
                    conn.execute("COMMIT")
            if current:
                return conn, view
            with self._recent.write_lock:  # held from a step's bump until `recent` shows the step
                pass

    def read(self, shard_uid: int, from_idx: int, limit: int, min_arrival: float = 0.0,
             kafka: bool = False) -> list[StoredRecord] | list[KafkaRecord]:
        """Up to `limit` records of a shard from index `from_idx` on, skipping expired ones;
        KafkaRecords (with the `kafka` column) when `kafka`."""
        base = shard_uid << SHIFT
        read_rows = read_range_kafka if kafka else read_range
        conn, view = self._snapshot(shard_uid, from_idx)
        if view is None:
            return read_rows(conn, base | from_idx, base + (1 << SHIFT), limit, min_arrival)
        try:
            out = []
            if from_idx < view.first:
                out = read_rows(conn, base | from_idx, base | view.first, limit, min_arrival)
            gkeys, at = view.gkeys(), 0
            # Expired rows are the shard's oldest: a chunk may be short of them, the next one not.
            while len(out) < limit and at < len(gkeys):
                chunk = gkeys[at:at + limit - len(out)]
                at += len(chunk)
                if kafka:
                    out.extend((key & MASK, seq, pk, data, arrival, meta) for _, key, seq, pk, data, arrival, meta
                               in Recent.fetch(conn, view, chunk, True) if arrival >= min_arrival)
                else:
                    out.extend((key & MASK, seq, pk, data, arrival) for _, key, seq, pk, data, arrival
                               in Recent.fetch(conn, view, chunk) if arrival >= min_arrival)
            return out
        finally:
            conn.execute("COMMIT")

    def last_index(self, shard_uid: int) -> int | None:
        last = self._recent.last_index(shard_uid)
        if last is not None:
            return last
        base = shard_uid << SHIFT
        row = self._reader().execute(
            "SELECT max(key) FROM records WHERE key >= ? AND key < ?", (base, base + (1 << SHIFT))).fetchone()
        return None if row[0] is None else row[0] & ((1 << SHIFT) - 1)

    def shard_uids_with_records(self) -> list[int]:
        """The uids of the shards that have records, ascending: one key lookup per shard (each
        shard's keys are one range), not a scan of the records."""
        conn, uids, start = self._reader(), set(self._recent.uids()), 0
        while (key := conn.execute("SELECT min(key) FROM records WHERE key >= ?", (start,)).fetchone()[0]) is not None:
            uids.add(key >> SHIFT)
            start = ((key >> SHIFT) + 1) << SHIFT
        return sorted(uids)

    def first_index_at(self, shard_uid: int, timestamp: float) -> int | None:
        """Index of the first record that arrived at or after `timestamp`, if any.

        A binary search over the shard's keys, a few point reads instead of a scan: arrival times
        never decrease within a shard (records are stamped while the stream's put lock is held)."""
        base = shard_uid << SHIFT
        conn, view = self._snapshot(shard_uid)
        try:
            found = first_at(conn, base, (base + (1 << SHIFT)) if view is None else base | view.first, timestamp)
            if found is None and view is not None:
                found = Recent.first_at(conn, view, timestamp)
            return found
        finally:
            if view is not None:
                conn.execute("COMMIT")

    def delete_records(self, shard_uids: Iterable[int], before_arrival: float | None = None) -> int:
        """Delete shards' records (all, or those that arrived before a time), in transactions of a
        bounded size; their space goes back to the OS in the background."""
        deleted = 0
        for uid in shard_uids:
            base = uid << SHIFT
            end = base + (1 << SHIFT)
            kept = None
            if before_arrival is None:
                # `recent` first: once the shard has nothing there, compaction adds nothing to
                # `records` behind the deletion below.
                deleted += self._delete_recent(uid, None)
            else:
                # Expired records are the front of the shard (arrival times never decrease within
                # it): stop at the first record still kept instead of reading every record's
                # arrival. The `arrival <` test below still guards each row.
                kept = first_at(self._reader(), base, end, before_arrival)
                if kept is not None:
                    end = base | kept
            deleted += self._delete_range(base, end, before_arrival)
            if before_arrival is not None and kept is None:  # all of `records` expired: `recent` may have too
                deleted += self._delete_recent(uid, before_arrival)
        if deleted:
            self._space.freed()
        return deleted

    def _delete_recent(self, uid: int, before_arrival: float | None) -> int:
        # Both locks: no compaction step is copying the shard's rows while they are deleted
        # (it holds the main database's), and the next one sees them gone (`recent.deletions`).
        with self._write_lock, self._recent.write_lock:
            return self._recent.delete(uid, before_arrival)

    def _delete_range(self, start: int, end: int, before_arrival: float | None) -> int:
        deleted = 0
        conn = self._reader()
        while True:
            stop = batch_end(conn, start, end)
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
