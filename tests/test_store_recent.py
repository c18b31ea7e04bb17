"""Wide PutRecords batches go to `recent` first and the compactor moves them into `records` (store/
recent.py, store/compact.py): readers see every shard dense and in order wherever its records are,
through compaction, a kill -9 and a restart; retention and stream deletion reach them there; a
database written before `recent` existed opens and serves its records."""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import client_for
from kinesim.config import Settings
from kinesim.server import ServerProcess, free_port
from kinesim.store import Store
from kinesim.store import compact

SHARDS = 40


class Feed:
    """Deterministic batches over SHARDS shards, and what each shard must hold."""

    def __init__(self, seed: int = 1):
        self.rng = random.Random(seed)
        self.next = {uid: 1 for uid in range(1, SHARDS + 1)}
        self.expected: dict[int, list] = {uid: [] for uid in self.next}
        self.t = 1000.0

    def batch(self, size: int = 200, shards: list[int] | None = None) -> dict[int, list]:
        out: dict[int, list] = {}
        self.t += 1.0
        for _ in range(size):
            uid = self.rng.choice(shards or list(self.next))
            idx = self.next[uid]
            self.next[uid] += 1
            record = (idx, f"seq-{uid}-{idx}", f"pk-{idx}", self.rng.randbytes(20), self.t)
            out.setdefault(uid, []).append(record)
            self.expected[uid].append(record)
        return out


def read_in_pages(store: Store, uid: int, page: int) -> list:
    out, at = [], 0
    while rows := store.read(uid, at, page):
        out += rows
        at = rows[-1][0] + 1
    return out


def check(store: Store, feed: Feed) -> None:
    for uid, expected in feed.expected.items():
        assert store.read(uid, 0, 100_000) == expected, uid
        assert read_in_pages(store, uid, 7) == expected, uid
        if expected:
            middle = expected[len(expected) // 2][0]
            assert store.read(uid, middle, 3) == [r for r in expected if r[0] >= middle][:3]
            assert store.last_index(uid) == expected[-1][0]


def abandon(store: Store) -> None:
    """What a kill -9 leaves: the store's threads stop, nothing more is moved or emptied."""
    store._compactor.stop()
    store._checkpoints.stop()
    store._recent_checkpoints.stop()
    store._space.stop()
    store._write.close()
    store._recent.close()


def stop_after(store: Store, monkeypatch, steps: int) -> threading.Event:
    """An event set once a compaction round has done `steps` steps: the round stops there."""
    stop, done = threading.Event(), []

    def moved(uids, _moved=store._recent.moved):
        _moved(uids)
        done.append(1)
        if len(done) == steps:
            stop.set()
    monkeypatch.setattr(store._recent, "moved", moved)
    return stop


@pytest.fixture
def manual(monkeypatch):
    """The compactor runs only when a test says so (Store.compact): the background thread never
    finds a round due, not even one a test left half done (it would finish it behind the test's back)."""
    monkeypatch.setattr(compact, "IDLE_S", 3600.0)
    monkeypatch.setattr(compact, "MAX_ROWS", 10**9)
    monkeypatch.setattr(compact.Compactor, "due", lambda self: False)


def test_wide_batches_go_to_recent_and_narrow_ones_to_records(tmp_path, manual):
    store = Store(str(tmp_path))
    try:
        feed = Feed()
        store.append_many(feed.batch(shards=[1, 2, 3]))  # narrow: straight into `records`
        assert store._recent.rows == 0
        store.append_many(feed.batch())  # 40 shards: `recent`
        assert store._recent.rows == 200
        store.append_many(feed.batch(shards=[1, 2]))  # narrow, but shards 1 and 2 have rows in `recent`
        assert store._recent.rows == 400
        check(store, feed)
        assert store.compact() == 400 and store._recent.rows == 0
        check(store, feed)
    finally:
        store.close()


def test_reads_are_dense_and_ordered_across_both_tables_and_records(tmp_path, manual, monkeypatch):
    monkeypatch.setattr(compact, "STEP_ROWS", 50)
    store = Store(str(tmp_path))
    try:
        feed = Feed()
        for _ in range(5):
            store.append_many(feed.batch())
        store.compact()  # in `records`
        for _ in range(5):
            store.append_many(feed.batch())
        # A round stopped after its first steps: rows in `records`, in the table being emptied,
        # and (put after the switch) in the active one.
        with monkeypatch.context() as m:
            stop = stop_after(store, m, 3)
            compact.compact_round(store._recent, store._write, store._write_lock, stopped=stop)
        assert store._recent.draining
        for _ in range(3):
            store.append_many(feed.batch())
        check(store, feed)
        assert store.shard_uids_with_records() == list(range(1, SHARDS + 1))
        store.compact()  # finishes the round
        store.compact()  # and moves what came after it
        assert store._recent.rows == 0 and not store._recent.draining
        check(store, feed)
    finally:
        store.close()


def test_readers_never_see_a_gap_while_puts_and_compaction_run(tmp_path, monkeypatch):
    monkeypatch.setattr(compact, "STEP_ROWS", 64)
    monkeypatch.setattr(compact, "MAX_ROWS", 1500)
    store = Store(str(tmp_path))
    feed = Feed()
    committed = {uid: 0 for uid in feed.expected}  # records of each shard whose put has returned
    stop = threading.Event()
    failures: list[str] = []

    def reader(uid: int) -> None:
        while not stop.is_set():
            known = committed[uid]
            at = random.randrange(1, max(known, 1) + 1)
            rows = store.read(uid, at, 50)
            indexes = [r[0] for r in rows]
            if indexes != list(range(at, at + len(rows))) or len(rows) < min(50, known - at + 1):
                failures.append(f"shard {uid} from {at}: {indexes[:5]}... ({len(rows)} rows, {known} known)")

    threads = [threading.Thread(target=reader, args=(uid,)) for uid in (1, 7, 23)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while store._compactor.rounds < 4 and time.monotonic() < deadline:  # puts through several rounds
            store.append_many(feed.batch(100))
            committed.update((uid, len(rows)) for uid, rows in feed.expected.items())
        stop.set()
        for t in threads:
            t.join()
        assert store._compactor.rounds >= 4
        assert not failures, failures[:3]
        check(store, feed)
    finally:
        stop.set()
        store.close()


def test_a_read_whose_view_of_recent_is_older_than_its_snapshot_tries_again(tmp_path, manual, monkeypatch):
    # The race the step counter closes: a reader takes what `recent` holds of a shard, then a
    # whole compaction round moves those rows and empties their table, then the reader's snapshot
    # starts. Reading with the stale view would find the rows in neither place it looks.
    store = Store(str(tmp_path))
    try:
        feed = Feed()
        for _ in range(3):
            store.append_many(feed.batch())
        stale = {uid: store._recent.view(uid, 0) for uid in (1, 2)}
        store.compact()
        fresh = store._recent.view
        served: list[int] = []

        def view(uid, from_idx=0):
            served.append(uid)
            return stale.pop(uid) if uid in stale else fresh(uid, from_idx)
        monkeypatch.setattr(store._recent, "view", view)
        assert store.read(1, 0, 1000) == feed.expected[1]
        assert store.first_index_at(2, 0.0) == 1
        assert served == [1, 1, 2, 2]  # each tried again once
    finally:
        store.close()


def test_restart_rebuilds_the_index_of_recent_also_after_a_kill_mid_round(tmp_path, manual, monkeypatch):
    monkeypatch.setattr(compact, "STEP_ROWS", 50)
    store = Store(str(tmp_path))
    feed = Feed()
    for _ in range(6):
        store.append_many(feed.batch())
    stop = stop_after(store, monkeypatch, 4)
    compact.compact_round(store._recent, store._write, store._write_lock, stopped=stop)
    store.append_many(feed.batch())
    abandon(store)  # rows moved but not yet emptied from `recent` are in both tables now

    store = Store(str(tmp_path))
    try:
        assert store._recent.rows > 0
        check(store, feed)
        store.append_many(feed.batch())  # numbering goes on where it was
        store.append_many(feed.batch(shards=[5]))
        check(store, feed)
        store.compact()
        store.compact()
        assert store._recent.rows == 0
        check(store, feed)
    finally:
        store.close()


def test_close_empties_a_small_recent_and_leaves_a_large_one_to_the_next_start(tmp_path, manual, monkeypatch):
    store = Store(str(tmp_path))
    feed = Feed()
    store.append_many(feed.batch())
    monkeypatch.setattr("kinesim.store.sqlite.CLOSE_ROWS", 100)
    store.close()  # 200 rows: left where they are
    store = Store(str(tmp_path))
    assert store._recent.rows == 200
    check(store, feed)
    monkeypatch.undo()
    store.close()
    store = Store(str(tmp_path))
    try:
        assert store._recent.rows == 0
        check(store, feed)
    finally:
        store.close()


def test_close_leaves_recent_empty(tmp_path):
    store = Store(str(tmp_path))
    feed = Feed()
    for _ in range(3):
        store.append_many(feed.batch())
    store.close()
    conn = sqlite3.connect(os.path.join(tmp_path, "kinesim.db"))
    conn.execute("ATTACH DATABASE ? AS rs", (os.path.join(tmp_path, "kinesim.db-recent"),))
    try:
        assert conn.execute("SELECT count(*) FROM rs.recent_0").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM rs.recent_1").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 600
    finally:
        conn.close()


def test_retention_and_deletion_reach_records_in_recent(tmp_path, manual):
    store = Store(str(tmp_path))
    try:
        feed = Feed()
        for _ in range(4):
            store.append_many(feed.batch())  # arrivals 1001..1004
        store.compact()
        for _ in range(4):
            store.append_many(feed.batch())  # 1005..1008, in `recent`
        for uid in (1, 2):
            for ts in (1000.0, 1003.0, 1005.0, 1006.5, 1008.0, 1008.5):
                want = next((r[0] for r in feed.expected[uid] if r[4] >= ts), None)
                assert store.first_index_at(uid, ts) == want, (uid, ts)
        # Retention up to 1007: all of `records` and part of `recent`.
        expired = sum(1 for rows in feed.expected.values() for r in rows if r[4] < 1007.0)
        assert store.delete_records(list(feed.expected), before_arrival=1007.0) == expired
        for uid in feed.expected:
            feed.expected[uid] = [r for r in feed.expected[uid] if r[4] >= 1007.0]
        check(store, feed)
        # A deleted stream: its shards' records go from both tables.
        gone = [1, 2, 3]
        assert store.delete_records(gone) == sum(len(feed.expected[uid]) for uid in gone)
        for uid in gone:
            feed.expected[uid] = []
            assert store.read(uid, 0, 10) == [] and store.last_index(uid) is None
        assert store.shard_uids_with_records() == list(range(4, SHARDS + 1))
        store.compact()
        check(store, feed)
    finally:
        store.close()


def test_a_database_of_the_schema_before_recent_opens_and_serves(tmp_path):
    # The schema as versions before `recent` created it, with records of two shards.
    conn = sqlite3.connect(os.path.join(tmp_path, "kinesim.db"), isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript("""
        CREATE TABLE documents (kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, name));
        CREATE TABLE records (key INTEGER PRIMARY KEY, seq TEXT NOT NULL, pk TEXT NOT NULL,
                              data BLOB NOT NULL, arrival REAL NOT NULL);
        CREATE TABLE firehose_buffer (stream TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
                                      arrival REAL NOT NULL, PRIMARY KEY (stream, seq));
    """)
    old = {uid: [(i, f"s{i}", "pk", b"old", 10.0 + i) for i in range(1, 51)] for uid in (3, 9)}
    conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)",
                     [(uid << 40 | i, s, pk, d, a) for uid, rows in old.items() for i, s, pk, d, a in rows])
    conn.close()

    store = Store(str(tmp_path))
    try:
        assert store.shard_uids_with_records() == [3, 9]
        assert store.read(3, 0, 100) == old[3] and store.last_index(9) == 50
        assert store.first_index_at(9, 30.0) == 20
        # New wide batches go on from there.
        batch = {uid: [(51 + k, "new", "pk", b"new", 100.0) for k in range(2)] for uid in range(1, 21)}
        store.append_many(batch)
        assert store._recent.rows == 40
        assert store.read(3, 49, 10) == old[3][-2:] + batch[3]
    finally:
        store.close()


KILLED_WRITER = textwrap.dedent("""
    import random, sys
    from kinesim.store import Store, compact
    compact.MAX_ROWS, compact.STEP_ROWS, compact.PAUSE, compact.MAX_PAUSE_S = 1200, 40, 2.0, 0.05  # long rounds: kills land inside
    store = Store(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    nxt = {}
    for b in range(10**6):
        batch = {}
        for j in range(60):
            uid = rng.randrange(1, 31)
            nxt[uid] = nxt.get(uid, 0) + 1
            batch.setdefault(uid, []).append((nxt[uid], f"{b}-{j}", "pk", f"{uid}:{nxt[uid]}".encode(), float(b)))
        store.append_many(batch)
        print(b, flush=True)  # acknowledged
""")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill9_between_put_and_compaction_loses_nothing(tmp_path, seed):
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(seed)],
                            stdout=subprocess.PIPE, text=True)
    acked = -1
    stop_at = random.Random(seed).randrange(60, 160)
    while acked < stop_at:
        line = proc.stdout.readline()
        assert line, "the writer died"
        acked = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    store = Store(str(tmp_path))
    try:
        for uid in store.shard_uids_with_records():
            rows = store.read(uid, 0, 100_000)
            # Dense from 1, each record where the writer put it (a batch in flight at the kill is
            # all there or not at all: else a shard would have a later batch's records without
            # an earlier one's).
            assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
            assert all(r[3] == f"{uid}:{r[0]}".encode() for r in rows)
        batches = {int(r[1].split("-")[0]) for uid in store.shard_uids_with_records()
                   for r in store.read(uid, 0, 100_000)}
        # Every acknowledged batch, and the ones committed after it before the kill landed
        # (acknowledgements not yet read here), in the order they were put.
        assert batches == set(range(max(batches) + 1)) and max(batches) >= acked
        store.compact()
        store.compact()
        assert store._recent.rows == 0
    finally:
        store.close()


def test_server_killed_after_wide_puts_serves_them_after_restart(tmp_path):
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), create_stream_ms=0,
                        update_stream_ms=0, delete_stream_ms=0, log_level="warning")
    proc = ServerProcess(settings).start()
    k = client_for(proc.url)
    k.create_stream(StreamName="wide", ShardCount=64)
    acked: dict[str, list[tuple[int, bytes]]] = {}
    for n in range(20):
        records = [{"Data": f"{n}-{j}".encode(), "PartitionKey": f"{n}-{j}"} for j in range(250)]
        resp = k.put_records(StreamName="wide", Records=records)
        assert resp["FailedRecordCount"] == 0
        for rec, r in zip(records, resp["Records"]):
            acked.setdefault(r["ShardId"], []).append((int(r["SequenceNumber"]), rec["Data"]))
    proc.kill()

    proc = ServerProcess(settings).start()
    try:
        k = client_for(proc.url)
        for shard_id, expected in acked.items():
            it = k.get_shard_iterator(StreamName="wide", ShardId=shard_id,
                                      ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            got = []
            while it:
                resp = k.get_records(ShardIterator=it, Limit=7)
                got += [(int(r["SequenceNumber"]), r["Data"]) for r in resp["Records"]]
                if not resp["Records"]:
                    break
                it = resp["NextShardIterator"]
            assert got == expected, shard_id
    finally:
        proc.stop()


def test_puts_wait_while_the_compactor_is_far_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(compact, "MAX_ROWS", 100)
    monkeypatch.setattr(compact, "HARD_ROWS", 300)
    store = Store(str(tmp_path))
    try:
        feed = Feed()
        for _ in range(30):
            store.append_many(feed.batch(100))
            assert store._recent.rows <= 300 + 100
        check(store, feed)
    finally:
        store.close()
