"""Records of wide PutRecords batches, kept in arrival order until the compactor sorts them in.

Why: `records` is clustered by shard (`shard_uid << 40 | index`) so that a shard read is one range
scan. A batch of 500 small records spread over hundreds of shards therefore dirties about one
4 KiB leaf page per record, and WAL mode writes every dirty page twice (the -wal file, then the
checkpoint): 7-11 KB written per 100-byte record at 256-1,024 shards. The same batch appended to
`recent`, whose key `gkey` only grows, fills a few consecutive pages instead. The compactor
(`compact`) later moves the rows into `records` many at a time in key order, so each shard's tail
page is rewritten once per round instead of once per record.

`recent` is two tables that take turns (appends go to the active one; a compaction round switches,
moves every row of the other one, then empties it with an unqualified DELETE, which frees its
pages without writing them: a DELETE with a WHERE clause rewrites every page it takes rows from,
which cost as much as the appends). They live in a database file of their own, RECENT_FILE, so
that puts to `recent` and the compactor's writes to `records` take different write locks (SQLite
has one writer per file) and do not wait for each other: a wide batch is written to that file
alone, in one transaction.

What is in `recent` for a shard is always a suffix of the shard (its newest records): once a shard
has rows here, its later records come here too, even from narrow batches, until compaction has
moved them all; the compactor moves a shard's oldest rows first. A shard read is then a range of
`records` followed by rows of `recent`. Appends to one shard are serialized by the caller (the
stream's lock), so whether a shard has rows here does not change under an append.

Which rows of `recent` belong to which shard is kept in memory (`tails`): `recent` has no index
on the shard key, since such an index would be written at random like `records`. It is rebuilt at
open from `recent`, which the compactor keeps small (and empties when the store closes).

Consistency between a reader's snapshot and this memory: rows leave `recent` only by (1)
retention or stream deletion, which readers may simply not find, and (2) compaction, which copies
rows into `records`, then bumps a `step` counter in RECENT_FILE, then updates the memory, and at the
end of a round empties the table the rows were copied from. A reader takes the memory view (with
its step), then opens its snapshot by reading the step in RECENT_FILE; if they differ, its view is
stale and it takes both again (`Store._snapshot`). When they agree, every row the view places in
`recent` is in the snapshot, and everything before it is in `records` (whose snapshot is taken
later, so it can only hold more: rows the view still places in `recent`, which are not read there).

Each row carries the `kafka` column (Kafka-only fields, NULL for Kinesis puts; see
kafka/batches.py) into `records` with it, so it is committed, moved and expired with its record.

Crash safety: rows are copied into `records` first and deleted from `recent` afterwards, so a kill
in between leaves them in both; they stay readable (from `recent`) and the next round copies them
again over themselves (OR REPLACE).
"""
from __future__ import annotations

import json
import threading
import time
from array import array
from bisect import bisect_left
from itertools import count
from typing import Callable, Iterable

from .ranges import MASK, SHIFT, add_column
from .tails import Tail, View, expand
from .transaction import transaction

RECENT_FILE = "kinesim.db-recent"  # beside kinesim.db (and named like its -wal, -shm)
SCHEMA_NAME = "rs"  # what the other connections attach RECENT_FILE as
TABLES = ("recent_0", "recent_1")
_TABLE = """CREATE TABLE IF NOT EXISTS {} (
    gkey INTEGER PRIMARY KEY, key INTEGER NOT NULL, seq TEXT NOT NULL, pk TEXT NOT NULL,
    data BLOB NOT NULL, arrival REAL NOT NULL, kafka BLOB);
"""
SCHEMA = "".join(_TABLE.format(t) for t in TABLES) + """
CREATE TABLE IF NOT EXISTS recent_state (
    id INTEGER PRIMARY KEY CHECK (id = 0), step INTEGER NOT NULL, active INTEGER NOT NULL);
INSERT OR IGNORE INTO recent_state (id, step, active) VALUES (0, 0, 0);
"""
INSERT = [f"INSERT INTO {t} (gkey, key, seq, pk, data, arrival)" for t in TABLES]
INSERT_KAFKA = [f"INSERT INTO {t} (gkey, key, seq, pk, data, arrival, kafka)" for t in TABLES]
DELETE = [f"DELETE FROM {t} WHERE gkey IN (SELECT value FROM json_each(?))" for t in TABLES]


def _both(columns: str, where: str = "", tail: str = "", schema: str = SCHEMA_NAME + ".") -> str:
    """A query over the rows of both tables whose gkeys are in the JSON array ?1. json_each drives
    the join: one rowid lookup per gkey, and any number of gkeys in one parameter."""
    return " UNION ALL ".join(
        f"SELECT {columns} FROM json_each(?1) AS j JOIN {schema}{t} AS r ON r.gkey = j.value {where}"
        for t in TABLES) + " " + tail


# Run by other connections, which attach RECENT_FILE as SCHEMA_NAME.
FETCH = [f"SELECT r.gkey, r.key, r.seq, r.pk, r.data, r.arrival FROM json_each(?1) AS j"
         f" JOIN {SCHEMA_NAME}.{t} AS r ON r.gkey = j.value ORDER BY 1" for t in TABLES]
# Kafka's Fetch shows no sequence number: NULL instead of a 56-digit string per row.
FETCH_KAFKA = [f"SELECT r.gkey, r.key, NULL, r.pk, r.data, r.arrival, r.kafka FROM json_each(?1) AS j"
               f" JOIN {SCHEMA_NAME}.{t} AS r ON r.gkey = j.value ORDER BY 1" for t in TABLES]
FIRST_AT = [f"SELECT r.key FROM json_each(?1) AS j JOIN {SCHEMA_NAME}.{t} AS r ON r.gkey = j.value"
            " WHERE r.arrival >= ?2 ORDER BY r.gkey LIMIT 1" for t in TABLES]
STEP = f"SELECT step FROM {SCHEMA_NAME}.recent_state"
# By the main database's writer. OR REPLACE: a row already in `records` can only be this same
# record, copied by a round that was killed before it emptied its table.
MOVE = ["INSERT OR REPLACE INTO main.records (key, seq, pk, data, arrival, kafka)"
        f" SELECT r.key, r.seq, r.pk, r.data, r.arrival, r.kafka FROM json_each(?) AS j JOIN {SCHEMA_NAME}.{t} AS r"
        " ON r.gkey = j.value" for t in TABLES]
_ARRIVALS = _both("r.gkey, r.arrival", tail="ORDER BY 1", schema="")

# A batch goes to `recent` when it touches more than WIDE_SHARDS shards with less than a page of
# data per shard on average: then writing it into `records` would dirty a page per shard for less
# than a page of records each. Narrow batches (one shard, a few shards, or big records) go straight
# to `records`, as they did before `recent` existed: sorting them in later would only copy them.
WIDE_SHARDS = 8
WIDE_BYTES_PER_SHARD = 4096


CHUNK = 64  # rows per INSERT statement (x 5-7 columns: far below SQLite's 32,766 parameters)
_INSERTS: dict[tuple[str, int], str] = {}


def insert_rows(conn, into: str, rows: list[tuple]) -> None:
    """INSERT `rows` (tuples as wide as the column list in `into`, "INSERT INTO t (a, b)"), CHUNK
    rows per statement. executemany() steps SQLite once per row and gives up the GIL around each
    step; taking it back queues behind whatever other thread holds it (request threads, the
    compactor), so a put of 500 rows waited for the GIL ~500 times."""
    width = len(rows[0]) if rows else 0
    for at in range(0, len(rows), CHUNK):
        chunk = rows[at:at + CHUNK]
        sql = _INSERTS.get((into, len(chunk)))
        if sql is None:
            one = "(" + ", ".join("?" * width) + ")"
            sql = _INSERTS[(into, len(chunk))] = f"{into} VALUES " + ", ".join([one] * len(chunk))
        conn.execute(sql, [value for row in chunk for value in row])


def data_size(batches: dict[int, list]) -> int:
    return sum([len(r[3]) for records in batches.values() for r in records])


def is_wide(batches: dict[int, list], size: int) -> bool:
    """Whether a batch of records (`size` bytes of data) goes to `recent`."""
    return len(batches) > WIDE_SHARDS and size < WIDE_BYTES_PER_SHARD * len(batches)


class Recent:
    """RECENT_FILE's writer (`conn`, used under `write_lock`) and the in-memory map of its rows
    (shard uid -> Tail). The map changes only under `write_lock`, right after the commit that
    changed the rows; `lock` (a leaf) lets readers copy a consistent view meanwhile."""

    def __init__(self, connect: Callable[[], object]):
        self.conn = connect()
        self.write_lock = threading.Lock()
        self.lock = threading.Lock()
        self.round = threading.Lock()         # one compaction round at a time (the compactor's, `Store.compact`)
        self.tails: dict[int, Tail] = {}
        self.rows = 0                         # rows in both tables
        self.deletions = 0                    # calls of `delete` that removed rows
        self.new_rows = self.new_bytes = 0    # rows and data bytes put in the active table
        self.last_append = 0.0
        conn = self.conn
        conn.executescript(SCHEMA)
        for table in TABLES:  # a file written before the column existed
            add_column(conn, table, "kafka")
        self.step, self.active = conn.execute("SELECT step, active FROM recent_state").fetchone()
        self.next_gkey = 1
        self.switch = self._load(TABLES[1 - self.active])  # rows below it are in the inactive table
        self.draining = self.rows > 0
        self._load(TABLES[self.active])
        self.new_rows, self.new_bytes = conn.execute(
            f"SELECT count(*), coalesce(sum(length(data)), 0) FROM {TABLES[self.active]}").fetchone()

    def _load(self, table: str) -> int:
        """Index a table's rows at open (the inactive table first: its gkeys are the lower).
        Returns the gkey after its last. (~0.4 s for 200,000 rows: Tail.add_row inlined.)"""
        tails, rows, top = self.tails, 0, self.next_gkey - 1
        for gkey, uid, idx in self.conn.execute(
                f"SELECT gkey, key >> {SHIFT}, key & {MASK} FROM {table} ORDER BY gkey"):
            tail = tails.get(uid)
            if tail is None:
                tail = tails[uid] = Tail()
            runs = tail.runs
            if runs and runs[-3] + runs[-1] == idx and runs[-2] + runs[-1] == gkey:
                runs[-1] += 1
            else:
                runs.extend((idx, gkey, 1))
            rows += 1
            top = gkey
        self.rows += rows
        self.next_gkey = top + 1
        return self.next_gkey

    def close(self) -> None:
        with self.write_lock:
            self.conn.close()

    def shrink(self) -> None:
        """Give the file's pages back when both tables are empty (a store closing): under load it
        keeps the pages of two rounds, which a stopped server has no use for."""
        with self.write_lock:
            if not self.rows:
                self.conn.execute("VACUUM")

    # appending (under write_lock)

    def append(self, rows: dict[int, list], size: int, kafka: bool = False) -> None:
        """Commit shards' records (StoredRecord lists, or KafkaRecord lists when `kafka`; `size`
        bytes of data) in one transaction, then show them to readers."""
        conn, first = self.conn, self.next_gkey
        gkeys = count(first)  # one comprehension for the whole batch: ~1 µs less per shard than one each
        with transaction(conn):
            if kafka:
                insert_rows(conn, INSERT_KAFKA[self.active], [
                    (next(gkeys), base | idx, seq, pk, data, arrival, meta)
                    for uid, records in rows.items() for base in (uid << SHIFT,)
                    for idx, seq, pk, data, arrival, meta in records])
            else:
                insert_rows(conn, INSERT[self.active], [
                    (next(gkeys), base | idx, seq, pk, data, arrival)
                    for uid, records in rows.items() for base in (uid << SHIFT,)
                    for idx, seq, pk, data, arrival in records])
        self._publish(first, rows, size)

    def _publish(self, g: int, rows: dict[int, list], size: int) -> None:
        with self.lock:
            tails = self.tails
            for uid, records in rows.items():
                tail = tails.get(uid)
                if tail is None:
                    tail = tails[uid] = Tail()
                n = len(records)
                first = records[0][0]
                if records[-1][0] - first == n - 1:  # consecutive indexes: one run (Tail.add, inlined)
                    tail.runs.extend((first, g, n))
                else:
                    tail.add(g, [r[0] for r in records])
                g += n
            added = g - self.next_gkey
            self.rows += added
            self.new_rows += added
            self.new_bytes += size
            self.next_gkey = g
            self.last_append = time.monotonic()

    def has(self, uid: int) -> bool:
        return uid in self.tails

    def delete(self, uid: int, before_arrival: float | None) -> int:
        """Delete a shard's rows (under write_lock): all, or its oldest ones that arrived before
        `before_arrival` (up to the first that did not: arrival times never decrease within a
        shard, and a clock stepped back must not lose a record that has not expired)."""
        with self.lock:
            tail = self.tails.get(uid)
            if tail is None:
                return 0
            gkeys = tail.gkeys()
        cut = len(gkeys)
        if before_arrival is not None:
            arrivals = [a for _, a in self.conn.execute(_ARRIVALS, (json.dumps(gkeys),))]
            cut = next((n for n, a in enumerate(arrivals) if a >= before_arrival), len(arrivals))
            if not cut:
                return 0
        doomed = json.dumps(gkeys[:cut])
        with transaction(self.conn):
            for statement in DELETE:
                self.conn.execute(statement, (doomed,))
        with self.lock:
            tail.drop_rows(cut)
            if not tail.runs:
                del self.tails[uid]
            self.rows -= cut
            self.deletions += 1
        return cut

    # compaction (under write_lock)

    def switch_tables(self) -> None:
        """Start a round: new rows go to the other (empty) table from now on."""
        self.conn.execute("UPDATE recent_state SET active = ?", (1 - self.active,))
        self.active = 1 - self.active
        self.switch = self.next_gkey
        self.draining = True
        self.new_rows = self.new_bytes = 0

    def moved(self, uids: list[int]) -> None:
        """After the main database's writer committed MOVE of these shards' rows of the inactive
        table: bump the step, then forget the rows here. A reader whose view is older than the
        bump sees it in its snapshot and takes a new view; one whose snapshot is older than the
        bump reads the rows from `recent`, where they still are."""
        self.conn.execute("UPDATE recent_state SET step = step + 1")
        with self.lock:
            for uid in uids:
                tail = self.tails.get(uid)
                if tail is None:
                    continue
                cut, rows = tail.below(self.switch)
                self.rows -= rows
                tail.cut_runs(cut)
                if not tail.runs:
                    del self.tails[uid]
            self.step += 1

    def clear_inactive(self) -> None:
        """End a round whose rows have all moved: empty the inactive table."""
        self.conn.execute(f"DELETE FROM {TABLES[1 - self.active]}")
        self.draining = False

    def plan(self, max_rows: int) -> list[list[int]]:
        """The shards with rows in the inactive table, ascending, in groups of about `max_rows`
        rows: one compaction step each."""
        groups, group, n = [], [], 0
        with self.lock:
            for uid in sorted(self.tails):
                below = self.tails[uid].below(self.switch)[1]
                if not below:
                    continue
                group.append(uid)
                n += below
                if n >= max_rows:
                    groups.append(group)
                    group, n = [], 0
        if group:
            groups.append(group)
        return groups

    def entries(self, uids: Iterable[int]) -> list[int]:
        """The gkeys of the shards' rows in the inactive table, in key order (shards ascending)."""
        flat = array("q")
        with self.lock:
            for uid in uids:
                tail = self.tails.get(uid)
                if tail is not None:
                    flat += tail.runs[:3 * tail.below(self.switch)[0]]
        return expand(flat)

    # reading (any thread)

    def view(self, uid: int, from_idx: int = 0) -> View | None:
        with self.lock:
            tail = self.tails.get(uid)
            if tail is None:
                return None
            return View(self.step, tail.first(), tail.from_index(from_idx), self.switch, self.active)

    def last_index(self, uid: int) -> int | None:
        with self.lock:
            tail = self.tails.get(uid)
            return None if tail is None else tail.last()

    def uids(self) -> list[int]:
        with self.lock:
            return list(self.tails)

    @staticmethod
    def fetch(conn, view: View, gkeys: list[int], kafka: bool = False) -> list[tuple]:
        """(gkey, key, seq, pk, data, arrival) rows of `gkeys` (ascending, from `view`) that exist,
        in order, with the `kafka` column last when asked: a lookup in the one table each is in,
        not in both."""
        split = bisect_left(gkeys, view.switch)
        rows = []
        fetch = FETCH_KAFKA if kafka else FETCH
        for part, table in ((gkeys[:split], 1 - view.active), (gkeys[split:], view.active)):
            if part:
                rows += conn.execute(fetch[table], (json.dumps(part),)).fetchall()
        return rows

    @staticmethod
    def first_at(conn, view: View, timestamp: float) -> int | None:
        """The index of the first of the view's rows that arrived at or after `timestamp`, if any."""
        gkeys = view.gkeys()
        split = bisect_left(gkeys, view.switch)
        for part, table in ((gkeys[:split], 1 - view.active), (gkeys[split:], view.active)):
            row = conn.execute(FIRST_AT[table], (json.dumps(part), timestamp)).fetchone() if part else None
            if row is not None:
                return row[0] & MASK
        return None
