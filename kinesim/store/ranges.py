"""Queries on `records`, the table of shards' records by key `shard_uid << SHIFT | index`."""
from __future__ import annotations

import sqlite3

from .checkpoint import PAGE_BYTES

SHIFT = 40
MASK = (1 << SHIFT) - 1
ROW_BYTES = 120  # a record's key, sequence number, partition key, arrival time and cell header
# Records deleted per transaction when a shard's records go: at most a PutRecords' worth (500
# records, 5 MiB), so the write lock is held about as long as a put holds it (deleting 200 MB in
# one statement held it for a second), and puts to every stream keep flowing.
DELETE_ROWS, DELETE_BYTES = 500, 5 << 20

# (record index in shard, sequence number, partition key, data, arrival epoch seconds)
StoredRecord = tuple[int, str, str, bytes, float]
# A StoredRecord and its `kafka` column (kafka/batches.py's meta; None for a Kinesis put). Only the
# Kafka paths pass or ask for it, so every Kinesis path keeps its 5-column statements.
KafkaRecord = tuple[int, str | None, str, bytes, float, bytes | None]  # no sequence number when read


def wal_bytes(pages: int, rows: int, data: int) -> int:
    """About how much a commit writes to the -wal file: `pages` pages dirtied besides the ones
    `rows` rows holding `data` bytes fill (for the background checkpoint's pace)."""
    return (pages + 1) * PAGE_BYTES + data + rows * ROW_BYTES


def rows_of(batches: dict[int, list[StoredRecord]]) -> list[tuple]:
    rows = []
    for shard_uid, records in batches.items():
        base = shard_uid << SHIFT
        rows.extend((base | idx, seq, pk, data, arrival) for idx, seq, pk, data, arrival in records)
    return rows


def kafka_rows_of(batches: dict[int, list[KafkaRecord]]) -> list[tuple]:
    rows = []
    for shard_uid, records in batches.items():
        base = shard_uid << SHIFT
        rows.extend((base | idx, seq, pk, data, arrival, meta) for idx, seq, pk, data, arrival, meta in records)
    return rows


def read_range(conn: sqlite3.Connection, start: int, end: int, limit: int, min_arrival: float) -> list[StoredRecord]:
    rows = conn.execute(
        "SELECT key, seq, pk, data, arrival FROM records WHERE key >= ? AND key < ? AND arrival >= ?"
        " ORDER BY key LIMIT ?", (start, end, min_arrival, limit)).fetchall()
    return [(key & MASK, seq, pk, data, arrival) for key, seq, pk, data, arrival in rows]


def read_range_kafka(conn: sqlite3.Connection, start: int, end: int, limit: int,
                     min_arrival: float) -> list[KafkaRecord]:
    """read_range with the `kafka` column (a separate statement: the Kinesis one stays as it was),
    and None for the sequence number, which Kafka's Fetch never shows (a string per row less).
    SQLite masks the key, so its rows are the answer as they come (no tuple made again per row)."""
    return conn.execute(
        f"SELECT key & {MASK}, NULL, pk, data, arrival, kafka FROM records WHERE key >= ? AND key < ?"
        " AND arrival >= ? ORDER BY key LIMIT ?", (start, end, min_arrival, limit)).fetchall()


def add_column(conn: sqlite3.Connection, table: str, column: str, schema: str = "main") -> None:
    """Add a nullable column to a table written by an older version (ALTER TABLE ... ADD COLUMN
    changes only the schema, no row is rewritten). Older versions still open the file: every
    statement of theirs names its columns, and they leave the new one NULL."""
    if column not in [row[1] for row in conn.execute(f"PRAGMA {schema}.table_info({table})")]:
        conn.execute(f"ALTER TABLE {schema}.{table} ADD COLUMN {column} BLOB")


def first_at(conn: sqlite3.Connection, start: int, end: int, timestamp: float) -> int | None:
    """Index of the first record in `records` keys [start, end) that arrived at or after
    `timestamp`, if any: a binary search (arrival times never decrease within a shard)."""
    # Two statements: SQLite looks a lone min() or max() up in the index, but computes the two
    # together by scanning every row of the range (125 ms per million rows, measured).
    lo = conn.execute("SELECT min(key) FROM records WHERE key >= ? AND key < ?", (start, end)).fetchone()[0]
    hi = conn.execute("SELECT max(key) FROM records WHERE key >= ? AND key < ?", (start, end)).fetchone()[0]
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
    return next_record(lo)[0] & MASK


def batch_end(conn: sqlite3.Connection, start: int, end: int) -> int | None:
    """The key that ends the next batch of records from `start` on (None: none are left).
    length() of a blob reads no overflow pages: the size of a batch costs only its keys."""
    rows = conn.execute("SELECT key, length(data) FROM records WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
                        (start, end, DELETE_ROWS)).fetchall()
    if not rows:
        return None
    size = 0
    for i, (key, length) in enumerate(rows):
        size += length
        if size > DELETE_BYTES and i:
            return key
    return rows[-1][0] + 1
