"""Deleted data gives its disk space back: expired records, deleted streams, delivered Firehose
buffers; and databases written by earlier versions (auto_vacuum off) are converted once.

The data directory is measured as the database, its -wal and its -shm file together.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import time

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.store import Store

MB = 1 << 20
RECORD = 256 * 1024
PER_CALL = 16  # 4 MiB per PutRecords, under its 5 MiB limit


def db_bytes(data_dir: str) -> int:
    base = os.path.join(data_dir, "kinesim.db")
    return sum(os.path.getsize(base + ext) for ext in ("", "-wal", "-shm") if os.path.exists(base + ext))


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def put_megabytes(k, stream: str, megabytes: int) -> int:
    """Put about `megabytes` MiB of incompressible records; the bytes acknowledged."""
    written = 0
    while written < megabytes * MB:
        records = [{"Data": os.urandom(RECORD), "PartitionKey": f"pk-{written}-{i}"} for i in range(PER_CALL)]
        resp = k.put_records(StreamName=stream, Records=records)
        assert resp["FailedRecordCount"] == 0
        written += PER_CALL * RECORD
    return written


def read_all(k, stream: str) -> list[bytes]:
    out = []
    for shard in k.list_shards(StreamName=stream)["Shards"]:
        it = k.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            resp = k.get_records(ShardIterator=it)
            out += [r["Data"] for r in resp["Records"]]
            if not resp["Records"] and resp.get("MillisBehindLatest", 0) == 0:
                break
            it = resp.get("NextShardIterator")
    return out


@pytest.fixture
def expiring(tmp_path_factory):
    # An hour of retention lasts 0.05 s: a new stream's 24 hours pass in 1.2 s.
    proc = start_server(tmp_path_factory, retention_hour_s=0.05, retention_sweep_s=0.2)
    yield proc
    proc.stop()


def test_expired_records_give_their_space_back(expiring):
    data_dir = expiring.settings.data_dir
    k = client_for(expiring.url)
    k.create_stream(StreamName="expiring", ShardCount=2)
    before = db_bytes(data_dir)
    written = put_megabytes(k, "expiring", 32)

    # Before the fix the file kept every expired page: it never came back under before + 32 MB.
    wait_until(lambda: db_bytes(data_dir) < before + written // 5, 60,
               f"the data dir to shrink back from {before + written} bytes")
    # The vacuumed database is whole: a new record is stored and read back (once the last of the
    # records above, written up to seconds later on a busy machine, has expired too).
    wait_until(lambda: read_all(k, "expiring") == [], 60, "every record put above to expire")
    k.put_record(StreamName="expiring", Data=b"after the vacuum", PartitionKey="p")
    assert read_all(k, "expiring") == [b"after the vacuum"]


def test_a_deleted_stream_gives_its_space_back(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        data_dir = proc.settings.data_dir
        k = client_for(proc.url)
        k.create_stream(StreamName="kept", ShardCount=1)
        k.create_stream(StreamName="doomed", ShardCount=2)
        kept = [os.urandom(1000) for _ in range(50)]
        k.put_records(StreamName="kept", Records=[{"Data": d, "PartitionKey": "p"} for d in kept])
        before = db_bytes(data_dir)
        written = put_megabytes(k, "doomed", 32)
        assert db_bytes(data_dir) > before + written // 2

        k.delete_stream(StreamName="doomed")

        def gone() -> bool:
            try:
                k.describe_stream_summary(StreamName="doomed")
            except ClientError as e:
                return e.response["Error"]["Code"] == "ResourceNotFoundException"
            return False
        wait_until(gone, 30, "the stream to be deleted")
        wait_until(lambda: db_bytes(data_dir) < before + written // 5, 60,
                   "the data dir to shrink back after DeleteStream")
        assert read_all(k, "kept") == kept  # the other stream lost nothing
    finally:
        proc.stop()


def auto_vacuum(data_dir) -> int:
    conn = sqlite3.connect(os.path.join(data_dir, "kinesim.db"))
    try:
        return conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    finally:
        conn.close()


def some_records(count: int, size: int) -> list:
    return [(i, f"seq-{i}", "pk", os.urandom(size), 1000.0 + i) for i in range(1, count + 1)]


def test_a_new_database_is_incremental_from_the_start(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="kinesim.store"):
        Store(str(tmp_path)).close()
    assert auto_vacuum(tmp_path) == 2  # INCREMENTAL
    assert "convert" not in caplog.text  # set before WAL mode, not repaired afterwards


def test_an_old_database_is_converted_once_and_keeps_its_records(tmp_path, caplog):
    rows = some_records(40, 256 * 1024)  # 10 MiB
    store = Store(str(tmp_path))
    store.append_many({7: rows})
    store.close()
    # What earlier versions left on disk: auto_vacuum off (0), in WAL mode.
    conn = sqlite3.connect(os.path.join(tmp_path, "kinesim.db"))
    conn.execute("PRAGMA auto_vacuum=NONE")
    conn.execute("VACUUM")
    conn.close()
    assert auto_vacuum(tmp_path) == 0

    with caplog.at_level(logging.WARNING, logger="kinesim.store"):
        store = Store(str(tmp_path))
    assert "converting" in caplog.text and "converted" in caplog.text
    assert auto_vacuum(tmp_path) == 2
    assert store.read(7, 0, 1000) == rows

    full = db_bytes(str(tmp_path))
    assert store.delete_records([7]) == len(rows)
    store.reclaim_space()
    assert db_bytes(str(tmp_path)) < full - 8 * MB
    store.close()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kinesim.store"):
        Store(str(tmp_path)).close()
    assert "convert" not in caplog.text  # once


def test_delivered_firehose_buffers_give_their_space_back_unasked(tmp_path):
    store = Store(str(tmp_path))
    try:
        store.firehose_buffer_append("ds", [(i, os.urandom(256 * 1024), 1.0) for i in range(1, 41)])
        full = db_bytes(str(tmp_path))
        store.firehose_buffer_delete("ds", 40)
        # No call to reclaim_space: the store's own thread returns the pages.
        wait_until(lambda: db_bytes(str(tmp_path)) < full - 8 * MB, 30, "the buffer's pages to be returned")
        assert store.firehose_buffer_stats("ds")[0] == 0
    finally:
        store.close()


def test_retention_deletes_in_batches_and_never_a_record_that_has_not_expired(tmp_path):
    store = Store(str(tmp_path))
    try:
        # 1,200 records of 10 KiB: more than one batch by count and by bytes. The wall clock once
        # stepped back (index 700 arrived "later" than its successors): it must survive.
        rows = [(i, f"seq-{i}", "pk", os.urandom(10 * 1024), float(i)) for i in range(1, 1201)]
        rows[699] = (700, "seq-700", "pk", rows[699][3], 5000.0)
        store.append_many({3: rows})
        deleted = store.delete_records([3], before_arrival=1000.0)
        left = store.read(3, 0, 10_000)
        unexpired = [rows[699]] + rows[999:]
        assert [r for r in left if r[4] >= 1000.0] == unexpired
        assert deleted == 1200 - len(left) and len(left) < 400  # the expired front went
    finally:
        store.close()
