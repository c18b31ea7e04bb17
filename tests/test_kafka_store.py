"""The storage half of Kafka on kinesim's streams (docs/plans/issue-35-kafka.md §1.3, §3):
the `kafka` column through `records`, `recent` and compaction, data directories from before the
column, retention and deletion; record batches (kafka/batches.py) in all five compressions, CRC
and exact timestamps; the meta codec and the key <-> partition key rule; `put_to_shards`."""
from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kinesim.config import Settings
from kinesim.kafka.batches import (CorruptBatch, Record, build_batch, decode_batches, decode_meta, encode_meta,
                                   partition_key, record_of, stored_fields)
from kinesim.kinesis.reader import ShardCursor
from kinesim.kinesis.records import ShardClosed, put_to_shards, wait_for_append
from kinesim.kinesis.service import OPERATIONS, KinesisService
from kinesim.store import Store, compact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEFORE_COLUMN = "7887068"  # the last commit whose store has no `kafka` column


@pytest.fixture
def manual(monkeypatch):
    """Compaction only when a test asks (Store.compact); see test_store_recent.manual."""
    monkeypatch.setattr(compact, "IDLE_S", 3600.0)
    monkeypatch.setattr(compact, "MAX_ROWS", 10**9)
    monkeypatch.setattr(compact.Compactor, "due", lambda self: False)


class Log:
    """Batches of Kinesis rows (5-tuples) and Kafka rows (6-tuples) and what each shard holds."""

    def __init__(self):
        self.next: dict[int, int] = {}
        self.expected: dict[int, list] = {}
        self.t = 1000.0

    def batch(self, uids, per_shard: int, kafka: bool) -> dict[int, list]:
        self.t += 1.0
        out = {}
        for uid in uids:
            rows = []
            for _ in range(per_shard):
                idx = self.next.get(uid, 1)
                self.next[uid] = idx + 1
                meta = encode_meta(int(self.t * 1000) - idx, b"\x00k%d" % idx, [("h", b"%d" % uid), ("n", None)],
                                   idx % 3 == 0, (7, 0, idx, 1)) if kafka else None
                row = (idx, f"seq-{uid}-{idx}", f"pk{idx}", b"v%d" % idx, self.t)
                rows.append(row + (meta,) if kafka else row)
                self.expected.setdefault(uid, []).append(row + (meta,))
            out[uid] = rows
        return out

    def check(self, store: Store) -> None:
        for uid, expected in self.expected.items():
            assert store.read(uid, 0, 10**6) == [r[:5] for r in expected], uid  # Kinesis readers: as before
            # Kafka's reads leave the sequence number out (Fetch never shows it).
            kafka = [(r[0], None, *r[2:]) for r in expected]
            assert store.read(uid, 0, 10**6, kafka=True) == kafka, uid
            out, at = [], 0
            while rows := store.read(uid, at, 7, kafka=True):
                out += rows
                at = rows[-1][0] + 1
            assert out == kafka, uid


def test_meta_round_trips_through_records_recent_and_compaction(tmp_path, manual, monkeypatch):
    monkeypatch.setattr(compact, "STEP_ROWS", 30)
    store = Store(str(tmp_path))
    try:
        log, wide = Log(), list(range(1, 21))
        store.append_many(log.batch([1, 2], 5, kafka=True), kafka=True)  # narrow: `records`
        store.append_many(log.batch([1, 2], 5, kafka=False))
        assert store._recent.rows == 0
        store.append_many(log.batch(wide, 3, kafka=True), kafka=True)  # wide: `recent`
        store.append_many(log.batch(wide, 2, kafka=False))
        store.append_many(log.batch([1], 4, kafka=True), kafka=True)  # narrow, but shard 1 is in `recent`
        assert store._recent.rows == 20 * 5 + 4
        log.check(store)
        # A round stopped after a step: rows in `records`, in the table being emptied, and in the active one.
        stop, moved_steps = threading.Event(), []

        def moved(uids, _moved=store._recent.moved):
            _moved(uids)
            moved_steps.append(1)
            stop.set()
        monkeypatch.setattr(store._recent, "moved", moved)
        compact.compact_round(store._recent, store._write, store._write_lock, stopped=stop, pause=False)
        monkeypatch.undo()
        assert moved_steps and store._recent.rows
        store.append_many(log.batch(wide, 2, kafka=True), kafka=True)
        log.check(store)
        store.compact()  # the round stopped above (only: its rows were switched out before these)
        store.compact()  # the rows put after it
        assert store._recent.rows == 0
        log.check(store)
    finally:
        store.close()
    store = Store(str(tmp_path))  # and after a restart
    try:
        log.check(store)
    finally:
        store.close()


def columns(path: str, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def test_a_store_written_without_the_column_opens_and_gains_it(tmp_path, manual):
    # The schema before the column, with rows in `records` and in `recent` (a server killed mid-use).
    db = os.path.join(tmp_path, "kinesim.db")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript("""
        CREATE TABLE documents (kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (kind, name));
        CREATE TABLE records (key INTEGER PRIMARY KEY, seq TEXT NOT NULL, pk TEXT NOT NULL,
                              data BLOB NOT NULL, arrival REAL NOT NULL);
        CREATE TABLE firehose_buffer (stream TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
                                      arrival REAL NOT NULL, PRIMARY KEY (stream, seq));
    """)
    conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?)", [(5 << 40 | i, f"s{i}", "pk", b"old", 10.0 + i)
                                                                     for i in range(1, 11)])
    conn.close()
    conn = sqlite3.connect(os.path.join(tmp_path, "kinesim.db-recent"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript("".join(f"""
        CREATE TABLE {t} (gkey INTEGER PRIMARY KEY, key INTEGER NOT NULL, seq TEXT NOT NULL, pk TEXT NOT NULL,
                          data BLOB NOT NULL, arrival REAL NOT NULL);""" for t in ("recent_0", "recent_1")) + """
        CREATE TABLE recent_state (id INTEGER PRIMARY KEY CHECK (id = 0), step INTEGER NOT NULL, active INTEGER NOT NULL);
        INSERT INTO recent_state (id, step, active) VALUES (0, 0, 0);
    """)
    conn.executemany("INSERT INTO recent_0 VALUES (?, ?, ?, ?, ?, ?)",
                     [(g, 5 << 40 | (10 + g), f"s{10 + g}", "pk", b"old", 20.0 + g) for g in range(1, 6)])
    conn.close()

    store = Store(str(tmp_path))
    try:
        assert "kafka" in columns(db, "records")
        assert all("kafka" in columns(store.recent_path, t) for t in ("recent_0", "recent_1"))
        old = store.read(5, 0, 100, kafka=True)
        assert [r[0] for r in old] == list(range(1, 16)) and all(r[5] is None for r in old)
        meta = encode_meta(123, None, [("a", b"b")])
        store.append_many({5: [(16, "s16", "pk", b"new", 40.0, meta)]}, kafka=True)  # after the shard's rows in `recent`
        store.compact()
        rows = store.read(5, 14, 100, kafka=True)
        assert [(r[0], r[5]) for r in rows] == [(14, None), (15, None), (16, meta)]
    finally:
        store.close()
    store = Store(str(tmp_path))  # the second open finds the column and adds nothing
    try:
        assert columns(db, "records").count("kafka") == 1
        assert store.read(5, 16, 1, kafka=True)[0][5] == meta
    finally:
        store.close()


OLD_KINESIM = textwrap.dedent("""
    import sys
    from kinesim.store import Store
    store = Store(sys.argv[1])
    start = (store.last_index(1) or 0) + 1
    print(len(store.read(1, 0, 10**6)), len(store.read(2, 0, 10**6)), flush=True)
    # Narrow and wide batches, as that version writes them.
    store.append_many({1: [(start, "old", "pk", b"old", 1e9)]})
    store.append_many({uid: [((store.last_index(uid) or 0) + 1, "old", "pk", b"old", 1e9)] for uid in range(1, 21)})
    store.close()
""")


def run_old(source: str, data_dir: str) -> str:
    env = {**os.environ, "PYTHONPATH": source}
    out = subprocess.run([sys.executable, "-c", OLD_KINESIM, data_dir], env=env, cwd=source,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_version_before_the_column_and_this_one_share_a_data_directory(tmp_path):
    """A data directory of the previous kinesim opens here and gains the column; the previous
    kinesim still opens it afterwards and reads and writes its records (it names its columns)."""
    source = tmp_path / "old"
    source.mkdir()
    archive = subprocess.run(["git", "-C", ROOT, "archive", BEFORE_COLUMN, "kinesim"], capture_output=True)
    if archive.returncode:
        pytest.skip(f"commit {BEFORE_COLUMN} is not in this checkout: {archive.stderr.decode()[:200]}")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    data = str(tmp_path / "data")
    assert run_old(str(source), data).split() == ["0", "0"]  # written by the old version
    store = Store(data)
    try:
        assert [r[5] for r in store.read(1, 0, 10, kafka=True)] == [None, None]
        meta = encode_meta(5, b"\xff")
        store.append_many({1: [(3, "new", "pk", b"new", 2e9, meta)]}, kafka=True)
        store.append_many({uid: [(store.last_index(uid) + 1, "new", "pk", b"new", 2e9, meta)] for uid in range(1, 21)},
                          kafka=True)
    finally:
        store.close()
    assert run_old(str(source), data).split() == ["4", "2"]  # the old version reads the new rows
    store = Store(data)
    try:
        assert [r[5] for r in store.read(1, 0, 10, kafka=True)] == [None, None, meta, meta, None, None]
    finally:
        store.close()


def test_retention_and_deletion_take_the_meta_with_the_rows(tmp_path, manual):
    store = Store(str(tmp_path))
    try:
        log, wide = Log(), list(range(1, 21))
        for _ in range(3):
            store.append_many(log.batch(wide, 2, kafka=True), kafka=True)  # 1001..1003
        store.compact()
        for _ in range(3):
            store.append_many(log.batch(wide, 2, kafka=True), kafka=True)  # 1004..1006, in `recent`
        expired = sum(1 for rows in log.expected.values() for r in rows if r[4] < 1005.0)
        assert store.delete_records(wide, before_arrival=1005.0) == expired
        for uid in wide:
            log.expected[uid] = [r for r in log.expected[uid] if r[4] >= 1005.0]
        log.check(store)
        assert store.delete_records([1, 2]) == 8
        log.expected[1] = log.expected[2] = []
        log.check(store)
        store.compact()
        log.check(store)
        assert store._write.execute("SELECT count(*) FROM records WHERE kafka IS NOT NULL").fetchone()[0] == 18 * 4
    finally:
        store.close()


KILLED_WRITER = textwrap.dedent("""
    import random, sys
    from kinesim.kafka.batches import encode_meta
    from kinesim.store import Store, compact
    compact.MAX_ROWS, compact.STEP_ROWS, compact.PAUSE, compact.MAX_PAUSE_S = 1200, 40, 2.0, 0.05  # kills land inside rounds
    store = Store(sys.argv[1])
    rng = random.Random(int(sys.argv[2]))
    nxt = {}
    for b in range(10**6):
        batch = {}
        for j in range(60):
            uid = rng.randrange(1, 31)
            nxt[uid] = nxt.get(uid, 0) + 1
            meta = encode_meta(b * 1000 + j, b"%d:%d" % (uid, nxt[uid])) if j % 2 else None
            batch.setdefault(uid, []).append((nxt[uid], f"{b}-{j}", "pk", b"d", float(b), meta))
        store.append_many(batch, kafka=True)
        print(b, flush=True)  # acknowledged
""")


@pytest.mark.parametrize("seed", [1, 2])
def test_kill9_mid_compaction_keeps_every_acknowledged_meta(tmp_path, seed):
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(seed)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    acked, stop_at = -1, 60 + 40 * seed
    while acked < stop_at:
        line = proc.stdout.readline()
        assert line, "the writer died"
        acked = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(str(tmp_path))
    try:
        def check() -> set[int]:
            batches = set()
            for uid in store.shard_uids_with_records():
                rows = store.read(uid, 0, 100_000, kafka=True)
                assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
                seqs = [r[1] for r in store.read(uid, 0, 100_000)]  # Kafka's reads leave them out
                for (idx, _, _, _, _, meta), seq in zip(rows, seqs, strict=True):
                    b, j = map(int, seq.split("-"))
                    batches.add(b)
                    if j % 2:
                        m = decode_meta(meta)
                        assert (m.timestamp_ms, m.key) == (b * 1000 + j, b"%d:%d" % (uid, idx)), seq
                    else:
                        assert meta is None, seq
            return batches
        batches = check()
        assert batches == set(range(max(batches) + 1)) and max(batches) >= acked
        store.compact()  # the round the kill interrupted, then the rows put after its switch
        store.compact()
        assert check() == batches and store._recent.rows == 0
    finally:
        store.close()


# batches

def aiokafka_batch(compression: int, records: list[Record], producer=(-1, -1, -1), base_offset: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, compression, 0, *producer, 1 << 30)
    for r in records:
        assert builder.append(r.offset_delta, r.timestamp_ms, r.key, r.value, r.headers) is not None
    buf = builder.build()
    buf[:8] = base_offset.to_bytes(8, "big")
    return bytes(buf)


SAMPLE = [
    Record(0, 1795985943297, b"user-1", b"x" * 300, [("trace", b"\x00\x01"), ("empty", b""), ("null", None)]),
    Record(1, 1795985943298, None, b"no key " * 40, []),
    Record(2, 1795985943001, b"\xff\xfe", None, [("t", b"tombstone")]),  # earlier than the first: deltas may be < 0
    Record(3, 1, b"", b"", []),
]


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_batches_of_every_compression_decode_exactly(compression):
    data = aiokafka_batch(compression, SAMPLE, producer=(4000, 3, 17), base_offset=0)
    (batch,) = decode_batches(data)
    assert batch.compression == compression  # the data compresses: the builder kept the codec
    assert batch.records == SAMPLE  # timestamps to the ms, null key/value, empty key/value, headers
    assert batch.producer == (4000, 3, 17) and not batch.transactional and not batch.control


def test_several_batches_in_one_records_field():
    first = aiokafka_batch(1, SAMPLE[:2], producer=(9, 0, 0))
    second = aiokafka_batch(0, [r._replace(offset_delta=i) for i, r in enumerate(SAMPLE[2:])], producer=(9, 0, 2))
    batches = decode_batches(first + second)
    assert [b.base_sequence for b in batches] == [0, 2]
    assert [r.timestamp_ms for b in batches for r in b.records] == [r.timestamp_ms for r in SAMPLE]
    assert decode_batches(b"") == []
    with pytest.raises(CorruptBatch, match="offset delta"):  # record count and offset deltas disagree
        decode_batches(aiokafka_batch(0, SAMPLE[2:]))


@pytest.mark.parametrize("compression", [0, 4])
def test_corrupt_batches_are_refused(compression):
    good = aiokafka_batch(compression, SAMPLE)
    for at in (21, 40, len(good) // 2, len(good) - 1):  # attributes, timestamps, records: all under the CRC
        bad = bytearray(good)
        bad[at] ^= 0x10
        with pytest.raises(CorruptBatch, match="CRC"):
            decode_batches(bytes(bad))
    with pytest.raises(CorruptBatch):
        decode_batches(good[:-1])  # truncated
    with pytest.raises(CorruptBatch):
        decode_batches(good + good[:30])  # a partial batch after a whole one
    old_magic = bytearray(good)
    old_magic[16] = 1
    with pytest.raises(CorruptBatch, match="magic"):
        decode_batches(bytes(old_magic))


def test_built_batches_read_back_with_both_clients_readers():
    records = [Record(i, 1795985943297 + 7 * i, b"k%d" % i if i % 2 else None, None if i == 3 else b"v" * i,
                      [("n", b"%d" % i)] if i % 3 else []) for i in range(6)]
    data = build_batch(41, records)
    assert int.from_bytes(data[:8], "big") == 41 and int.from_bytes(data[12:16], "big", signed=True) == 0
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.base_offset == 41 and batch.compression_type == 0
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch] == \
        [(41 + r.offset_delta, r.timestamp_ms, r.key, r.value, r.headers) for r in records]
    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with deprecated importlib calls
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch  # an independent reader
    other = KafkaPythonBatch(data)
    assert other.validate_crc() and [r.offset for r in other] == list(range(41, 47))
    (again,) = decode_batches(data)
    assert again.base_offset == 41 and again.records == records and again.producer is None
    with pytest.raises(ValueError):
        build_batch(0, [])


# meta and keys

def test_meta_round_trips_and_stays_small():
    cases = [
        (1795985943297, None, [], False, None),
        (-1, b"", [], True, None),
        (1795985943297, b"\xff" * 300, [("a", b""), ("\u00e9", None), ("z", b"\x00" * 200)], True, (2**40, 32767, 2**31 - 1, 500)),
        (0, None, [("only", b"x")], False, (0, 0, 0, 1)),
    ]
    for timestamp, key, headers, null_value, producer in cases:
        meta = encode_meta(timestamp, key, headers, null_value, producer)
        assert tuple(decode_meta(meta)) == (timestamp, key, headers, null_value, producer)
    assert len(encode_meta(1795985943297)) == 10  # a keyed record without headers: version, flags, 8-byte timestamp
    with pytest.raises(ValueError):
        decode_meta(b"\x09\x00\x00")


def test_keys_become_partition_keys_when_kinesis_allows_them():
    assert partition_key(None) == ("", None)
    assert partition_key(b"user-42") == ("user-42", None)
    assert partition_key("é".encode() * 256) == ("é" * 256, None)  # 256 characters, 512 bytes
    long = b"a" * 257
    assert partition_key(long) == (hashlib.md5(long).hexdigest(), long)
    emoji = "\U0001F600"
    assert partition_key((emoji * 128).encode()) == (emoji * 128, None)  # 256 UTF-16 units, as Java counts
    assert partition_key((emoji * 129).encode())[1] == (emoji * 129).encode()
    for kept in (b"", b"\xff\x00", b"\xc3"):
        pk, raw = partition_key(kept)
        assert raw == kept and pk == hashlib.md5(kept).hexdigest()


def test_stored_rows_read_as_kafka_records():
    record = Record(0, 1795985943297, b"\xff", None, [("h", None)])
    pk, data, meta = stored_fields(record, (5, 1, 0, 1))
    assert data == b"" and decode_meta(meta).producer == (5, 1, 0, 1)
    assert record_of((7, "seq", pk, data, 1.5, meta), 3) == record._replace(offset_delta=3)
    # Put through Kinesis: arrival as the timestamp, the partition key as the key.
    assert record_of((7, "seq", "user-1", b"d", 1795985943.297, None), 0) == Record(0, 1795985943297, b"user-1", b"d", [])
    assert record_of((7, "seq", "", b"d", 1795985943.297, None), 0).key is None


# put_to_shards

@pytest.fixture
def svc(tmp_path):
    service = KinesisService(Settings(create_stream_ms=0, update_stream_ms=0, delete_stream_ms=0), Store(str(tmp_path)))
    yield service
    service.store.close()


def call(svc, op: str, **params):
    return OPERATIONS[op](svc, params)


def entry(n: int) -> tuple[str, bytes, bytes]:
    return stored_fields(Record(0, 1_000_000 + n, b"k%d" % n, b"v%d" % n, [("n", b"%d" % n)]))


def test_put_to_shards_hands_out_dense_indexes_beside_kinesis_puts(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=2)
    stream = svc.streams["s"]
    call(svc, "PutRecords", StreamName="s", Records=[
        {"Data": b"kinesis", "ExplicitHashKey": str(h), "PartitionKey": "x"} for h in (0, 0, 2**127)])
    out = put_to_shards(svc, stream, {0: [entry(n) for n in range(3)], 1: [entry(3)]})
    assert out == {0: range(3, 6), 1: range(2, 3)}
    assert [s.next_index for s in stream.shards] == [6, 3]
    out = put_to_shards(svc, stream, {1: [entry(4), entry(5)]})
    assert out == {1: range(3, 5)}
    rows = svc.store.read(stream.shards[0].uid, 1, 100, kafka=True)
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5] and [r[5] is None for r in rows] == [True, True, False, False, False]
    assert [record_of(r, 0).value for r in rows] == [b"kinesis", b"kinesis", b"v0", b"v1", b"v2"]
    # Kinesis readers get them as records with the key as partition key.
    it = call(svc, "GetShardIterator", StreamName="s", ShardId="shardId-000000000001", ShardIteratorType="TRIM_HORIZON")
    got = call(svc, "GetRecords", ShardIterator=it["ShardIterator"])["Records"]
    assert [(r["PartitionKey"], r["Data"]) for r in got] == [("x", b"kinesis"), ("k3", b"v3"), ("k4", b"v4"), ("k5", b"v5")]
    assert svc.write_rates[stream.shards[1].uid].total()["records"] == 4


def test_put_to_shards_wakes_waiting_readers(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    stream = svc.streams["s"]
    shard = stream.shards[0]
    cursor = ShardCursor(svc, stream, shard, 1)
    woken = threading.Event()
    assert cursor.listen(woken.set)
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(wait_for_append(shard, 1, 10.0)))
    waiter.start()
    time.sleep(0.05)
    put_to_shards(svc, stream, {0: [entry(1)]})
    assert woken.wait(5.0)
    waiter.join(5.0)
    assert waited == [True]
    assert [r.data for r in cursor.read().records] == [b"v1"]
    assert not cursor.listen(woken.set, position=1)  # something to read there: not registered


def test_put_to_shards_refuses_closed_and_unknown_shards_storing_nothing(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    stream = svc.streams["s"]
    shard = stream.shards[0]
    call(svc, "SplitShard", StreamName="s", ShardToSplit=shard.shard_id, NewStartingHashKey=str(2**127))
    assert not shard.is_open and len(stream.shards) == 3
    before = [s.next_index for s in stream.shards]
    with pytest.raises(ShardClosed) as closed:
        put_to_shards(svc, stream, {1: [entry(1)], 0: [entry(2)]})
    assert closed.value.shard is shard
    with pytest.raises(IndexError):
        put_to_shards(svc, stream, {1: [entry(1)], 3: [entry(2)]})
    assert [s.next_index for s in stream.shards] == before
    assert all(svc.store.read(s.uid, 0, 10) == [] for s in stream.shards)
    assert put_to_shards(svc, stream, {1: [entry(1)], 2: [entry(2)]}) == {1: range(1, 2), 2: range(1, 2)}
