"""The shard reader (kinesim/kinesis/reader.py, checkpoints.py), in process: a real KinesisService
on a real store, records put through the registered operations. Cursors (reads, waits, the tip, a
closed shard's end, retention), lineage order across split and merge, the one checkpoint type,
and checkpoints written by kinesim before the reader, which a restart must resume from."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from firehose.source import KinesisSource
from kinesim.config import Settings
from kinesim.functions.checkpoints import Checkpoints
from kinesim.functions.pollers import MappingManager
from kinesim.kinesis.reader import (Checkpoint, CheckpointStore, ShardCursor, ShardMark, StreamReader,
                                    readable_shards, start_position, starting_checkpoint)
from kinesim.kinesis.service import OPERATIONS, KinesisService
from kinesim.store import Store
from test_pollers import Function, mapping, wait_until

STREAM_ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/{}"


def make_service(path, **settings) -> KinesisService:
    return KinesisService(Settings(create_stream_ms=0, update_stream_ms=0, delete_stream_ms=0, **settings),
                          Store(str(path)))


@pytest.fixture
def svc(tmp_path):
    service = make_service(tmp_path)
    yield service
    service.store.close()


def call(svc: KinesisService, op: str, **params):
    return OPERATIONS[op](svc, params)


def put(svc: KinesisService, stream: str, data: bytes, key: str = "k") -> dict:
    return call(svc, "PutRecord", StreamName=stream, Data=data, PartitionKey=key)


def cursor_on(svc: KinesisService, stream: str, shard: int = 0, position: int = 1) -> ShardCursor:
    s = svc.streams[stream]
    return ShardCursor(svc, s, s.shards[shard], position)


def split(svc: KinesisService, stream: str, shard_id: str) -> None:
    shard = svc.streams[stream].shard(shard_id)
    middle = (shard.start_hash + shard.end_hash + 1) // 2
    call(svc, "SplitShard", StreamName=stream, ShardToSplit=shard_id, NewStartingHashKey=str(middle))


def merge(svc: KinesisService, stream: str, lower: str, upper: str) -> None:
    call(svc, "MergeShards", StreamName=stream, ShardToMerge=lower, AdjacentShardToMerge=upper)


# ---------------------------------------------------------------- one shard

def test_a_cursor_reads_batches_after_its_position(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    puts = [put(svc, "s", b"r%d" % i, key=f"k{i}") for i in range(5)]
    cursor = cursor_on(svc, "s")
    first = cursor.read(limit=2)
    assert [(r.index, r.sequence_number, r.partition_key, r.data) for r in first.records] == [
        (1, puts[0]["SequenceNumber"], "k0", b"r0"), (2, puts[1]["SequenceNumber"], "k1", b"r1")]
    assert all(abs(r.arrival - time.time()) < 60 for r in first.records)
    assert (first.next_position, first.at_tip, first.finished, cursor.position) == (3, False, False, 3)
    rest = cursor.read()
    assert [r.data for r in rest.records] == [b"r2", b"r3", b"r4"]
    assert (rest.next_position, rest.at_tip, rest.finished, rest.millis_behind) == (6, True, False, 0)
    again = cursor.read_from(2, limit=1)        # another position: the cursor stays
    assert [r.data for r in again.records] == [b"r1"] and cursor.position == 6
    empty = cursor.read()
    assert (empty.records, empty.next_position, empty.at_tip) == ([], 6, True)
    assert cursor.sequence_before() == puts[4]["SequenceNumber"]
    assert cursor.sequence_before(1) == svc.streams["s"].shards[0].starting_seq


def test_a_batch_keeps_to_its_byte_budget_but_never_returns_nothing(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    for i in range(3):
        put(svc, "s", bytes(1000))
    cursor = cursor_on(svc, "s")
    assert len(cursor.read(max_bytes=10).records) == 1      # one record, however large
    assert len(cursor.read(max_bytes=2000).records) == 2


def test_a_cursor_waits_for_an_append_and_is_woken_by_it(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    cursor = cursor_on(svc, "s")
    assert cursor.wait(0.01) is False                          # nothing there: the timeout passes
    result = {}
    waiting = threading.Thread(target=lambda: result.update(woken=cursor.wait(60)))
    started = time.monotonic()
    waiting.start()
    wait_until(lambda: waiting.is_alive(), what="the waiter")
    put(svc, "s", b"x")
    waiting.join(30)
    assert result == {"woken": True} and time.monotonic() - started < 30
    assert cursor.wait(60) is True                             # a record is there: no wait at all
    assert [r.data for r in cursor.read().records] == [b"x"]


def test_no_append_is_missed_by_waiters_and_listeners_while_puts_skip_unwatched_shards(svc):
    """Shard.notify skips the condition when no reader is counted in `watchers`: a waiter or a
    listener that looks at the shard while a put lands must still see the record or be woken. Each
    round, two waiters and a listener wait for the next record and one put lands; a lost wake-up
    leaves the round's barrier waiting (no waiter has a timeout that would hide it)."""
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    shard = svc.streams["s"].shards[0]
    rounds, lost = 200, []
    barrier = threading.Barrier(4, timeout=60)

    def waiter() -> None:
        cursor = cursor_on(svc, "s")
        for n in range(1, rounds + 1):
            if not cursor.wait(3600, position=n):
                lost.append(n)
            barrier.wait()

    def listener() -> None:
        cursor = cursor_on(svc, "s")
        for n in range(1, rounds + 1):
            woken = threading.Event()
            if cursor.listen(woken.set, position=n) and not woken.wait(60):
                lost.append(n)
            barrier.wait()

    threads = [threading.Thread(target=waiter), threading.Thread(target=waiter), threading.Thread(target=listener)]
    for t in threads:
        t.start()
    for n in range(rounds):
        put(svc, "s", b"%d" % n)
        barrier.wait()
    for t in threads:
        t.join(60)
    assert not lost and shard.watchers == 0 and not shard.listeners
    cursor, callback = cursor_on(svc, "s"), threading.Event().set  # a listener taken back is counted out
    assert cursor.listen(callback, position=rounds + 1) and shard.watchers == 1
    assert cursor.listen(callback, position=rounds + 1) and shard.watchers == 1  # registered once
    cursor.unlisten(callback)
    assert shard.watchers == 0 and not shard.listeners


def test_wake_and_until_end_a_wait(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    cursor = cursor_on(svc, "s")
    stop = threading.Event()
    result = {}
    waiting = threading.Thread(target=lambda: result.update(woken=cursor.wait(60, until=stop.is_set)))
    started = time.monotonic()
    waiting.start()
    stop.set()
    cursor.wake()
    waiting.join(30)
    assert not waiting.is_alive() and result == {"woken": False} and time.monotonic() - started < 30


def test_a_closed_shard_read_to_its_end_is_finished(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    put(svc, "s", b"before")
    cursor = cursor_on(svc, "s")
    split(svc, "s", "shardId-000000000000")
    assert not cursor.is_open and not cursor.finished
    batch = cursor.read()
    assert [r.data for r in batch.records] == [b"before"] and batch.finished and cursor.finished
    assert cursor.wait(60) is True                              # a closed shard: nothing to wait for
    assert {c["ShardId"] for c in cursor.child_shards()} == {"shardId-000000000001", "shardId-000000000002"}


def test_a_deleted_stream_is_gone_and_ends_a_wait(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    cursor = cursor_on(svc, "s")
    assert cursor.gone() is None
    call(svc, "DeleteStream", StreamName="s")
    assert "Stream s under account" in cursor.gone()
    assert cursor.wait(60) is False


def test_expired_positions_skip_forward_to_the_oldest_record_kept(tmp_path):
    svc = make_service(tmp_path, retention_hour_s=0.01)       # 24 "hours" = 0.24 s
    try:
        call(svc, "CreateStream", StreamName="s", ShardCount=1)
        old = [put(svc, "s", b"old%d" % i) for i in range(3)]
        wait_until(lambda: cursor_on(svc, "s").read().records == [], what="the old records to expire")
        put(svc, "s", b"new")
        batch = cursor_on(svc, "s").read()
        assert [(r.index, r.data) for r in batch.records] == [(4, b"new")] and len(old) == 3
    finally:
        svc.store.close()


def test_start_positions(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    first = put(svc, "s", b"a")
    put(svc, "s", b"b")
    stream = svc.streams["s"]
    shard = stream.shards[0]
    assert start_position(svc, stream, shard, "TRIM_HORIZON") == (1, False)
    assert start_position(svc, stream, shard, "LATEST") == (3, False)
    assert start_position(svc, stream, shard, "AT_SEQUENCE_NUMBER", first["SequenceNumber"]) == (1, False)
    assert start_position(svc, stream, shard, "AFTER_SEQUENCE_NUMBER", first["SequenceNumber"]) == (2, False)
    assert start_position(svc, stream, shard, "AT_TIMESTAMP", timestamp=time.time() + 3600) == (3, False)
    assert start_position(svc, stream, shard, "AT_TIMESTAMP", timestamp=0.0) == (1, False)
    split(svc, "s", shard.shard_id)
    assert start_position(svc, stream, shard, "LATEST") == (3, True)      # closed: nothing more
    assert start_position(svc, stream, shard, "AT_TIMESTAMP", timestamp=time.time() + 3600) == (3, True)
    both = starting_checkpoint(svc, stream, "LATEST", lanes=2)
    assert {m.shard_id: (m.positions, m.ended) for m in both.marks.values()} == {
        "shardId-000000000000": ([3, 3], True), "shardId-000000000001": ([1, 1], False),
        "shardId-000000000002": ([1, 1], False)}


# ---------------------------------------------------------------- lineage

def ids(shards) -> list[str]:
    return [s.shard_id[-1] for s in shards]


def test_lineage_order_across_split_and_merge(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    split(svc, "s", "shardId-000000000000")                       # 0 -> 1, 2
    merge(svc, "s", "shardId-000000000001", "shardId-000000000002")  # 1 + 2 -> 3
    stream = svc.streams["s"]
    checkpoint = Checkpoint()

    def end(index: int) -> None:
        shard = stream.shards[index]
        checkpoint.set(ShardMark(shard.shard_id, shard.uid, [1], ended=True))

    assert ids(readable_shards(stream, checkpoint)) == ["0"]
    end(0)
    assert ids(readable_shards(stream, checkpoint)) == ["1", "2"]
    end(1)
    assert ids(readable_shards(stream, checkpoint)) == ["2"]      # a merge's child waits for both parents
    end(2)
    assert ids(readable_shards(stream, checkpoint)) == ["3"]


def test_a_stream_reader_reads_parents_before_children(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=1)
    expected = []

    def put_round(tag: str) -> None:
        for key in ("a", "b", "c", "d"):
            put(svc, "s", f"{tag}-{key}".encode(), key=key)
            expected.append(f"{tag}-{key}")

    put_round("0")
    split(svc, "s", "shardId-000000000000")
    put_round("1")
    merge(svc, "s", "shardId-000000000001", "shardId-000000000002")
    put_round("2")
    stream_reader = StreamReader(svc, "s", starting_checkpoint(svc, svc.streams["s"], "TRIM_HORIZON"))
    got: list[tuple[str, str]] = []
    for _ in range(10):
        for cursor in stream_reader.cursors():
            batch = cursor.read()
            got += [(cursor.shard_id, r.data.decode()) for r in batch.records]
            stream_reader.advance(cursor.shard, batch.next_position)
            if batch.finished:
                stream_reader.ended(cursor)
    assert sorted(d for _, d in got) == sorted(expected)
    for key in "abcd":   # one key's records in the order they were put, through both reshards
        assert [d for _, d in got if d.endswith(key)] == [f"{t}-{key}" for t in "012"]
    order = [sid for sid, _ in got]
    assert max(order.index(s) for s in order if s.endswith("0")) < min(
        order.index(s) for s in order if s.endswith(("1", "2")))
    assert stream_reader.checkpoint.ended(svc.streams["s"].shards[0])


def test_a_stream_reader_wakes_on_an_append_to_any_shard(svc):
    call(svc, "CreateStream", StreamName="s", ShardCount=3)
    stream_reader = StreamReader(svc, "s", starting_checkpoint(svc, svc.streams["s"], "LATEST"))
    try:
        done = threading.Event()

        def wait() -> None:
            stream_reader.wait(60)
            done.set()

        started = time.monotonic()
        threading.Thread(target=wait, daemon=True).start()
        put(svc, "s", b"x", key="any key")
        assert done.wait(30) and time.monotonic() - started < 30
        assert [r.data for c in stream_reader.cursors() for r in c.read().records] == [b"x"]
    finally:
        stream_reader.close()


# ---------------------------------------------------------------- the checkpoint

def test_a_checkpoint_round_trips_through_the_store(svc):
    checkpoint = Checkpoint()
    checkpoint.set(ShardMark("shardId-000000000000", 7, [3, 5], [None, {"start": 0, "end": 60, "state": {}}]))
    checkpoint.set(ShardMark("shardId-000000000001", 8, [9], ended=True))
    assert Checkpoint.from_doc(checkpoint.to_doc()) == checkpoint
    saved = CheckpointStore(svc.store, "test-checkpoint", "one")
    assert saved.load() is None
    saved.save(checkpoint)
    assert CheckpointStore(svc.store, "test-checkpoint", "one").load() == checkpoint
    assert checkpoint.marks[7].position == 3 and checkpoint.marks[7].with_lanes(1).positions == [3]
    saved.delete()
    assert saved.load() is None


def test_a_checkpoint_save_writes_only_the_marks_that_moved(svc, monkeypatch):
    checkpoint = Checkpoint()
    for uid in range(100):
        checkpoint.set(ShardMark(f"shardId-{uid:012d}", uid, [1]))
    saved = CheckpointStore(svc.store, "test-checkpoint", "one")
    saved.save(checkpoint)
    written = []
    monkeypatch.setattr(svc.store, "put_documents", lambda kind, bodies: written.append(sorted(bodies)))
    monkeypatch.setattr(svc.store, "put_document", lambda kind, name, body: written.append([name]))
    checkpoint.marks[7].positions = [5]
    saved.save(checkpoint)
    checkpoint.marks[8].positions = [6]
    saved.save_mark(checkpoint, checkpoint.marks[8])
    assert written == [["one/7"], ["one/8"]]


def test_a_checkpoint_of_the_one_document_format_is_read_and_replaced_whole(svc):
    # What kinesim wrote before the marks got documents of their own.
    old = {"version": 2, "shards": [{"shard": "shardId-000000000000", "uid": 4, "positions": [3], "states": [None],
                                     "ended": False}]}
    svc.store.put_document("test-checkpoint", "one", old)
    saved = CheckpointStore(svc.store, "test-checkpoint", "one")
    checkpoint = saved.load()
    assert checkpoint.marks[4].positions == [3]
    checkpoint.marks[4].positions = [9]
    saved.save_mark(checkpoint, checkpoint.marks[4])  # the first save writes the header and every mark
    assert svc.store.document("test-checkpoint", "one") == {"version": 3}
    assert CheckpointStore(svc.store, "test-checkpoint", "one").load().marks[4].positions == [9]
    saved.delete()
    assert svc.store.documents("test-checkpoint") == {}


def test_a_mapping_resumes_from_a_checkpoint_written_before_the_reader(tmp_path):
    svc = make_service(tmp_path)
    try:
        call(svc, "CreateStream", StreamName="s", ShardCount=1)
        arn = svc.stream_arn("s")
        for i in range(10):
            put(svc, "s", b"%d" % i)
        shard = svc.streams["s"].shards[0]
        m = mapping(arn)
        # What kinesim wrote per (mapping, shard) before: records 1-6 were processed.
        svc.store.put_document("checkpoint", f"{m['UUID']}/{shard.shard_id}",
                               {"shard": shard.shard_id, "uid": shard.uid, "lanes": [7], "windows": [None],
                                "ended": False})
        fn = Function()
        manager = MappingManager(svc, svc.store, fn, svc.settings)
        try:
            manager.sync(m)
            wait_until(lambda: len(fn.delivered()) == 4, what="the records after the old checkpoint")
            assert fn.delivered() == [b"6", b"7", b"8", b"9"]
            wait_until(lambda: Checkpoints(svc.store, m["UUID"]).load()[shard.shard_id].positions == [11],
                       what="the new checkpoint")
        finally:
            manager.close()
        assert not [n for n in svc.store.documents("checkpoint") if n.startswith(m["UUID"])]  # converted
    finally:
        svc.store.close()


def test_a_firehose_source_resumes_from_a_checkpoint_written_before_the_reader(tmp_path):
    svc = make_service(tmp_path)
    try:
        call(svc, "CreateStream", StreamName="src", ShardCount=1)
        for i in range(5):
            put(svc, "src", b"%d" % i)
        shard = svc.streams["src"].shards[0]
        # What kinesim wrote before: records 1 and 2 were delivered.
        svc.store.put_document("firehose-checkpoint", "ds", {"shards": {str(shard.uid): {"index": 3, "done": False}}})
        host = SimpleNamespace(kinesis=svc, store=svc.store)
        ds = SimpleNamespace(name="ds", source={"KinesisStreamARN": STREAM_ARN.format("src")})
        source = KinesisSource(host, ds, stopped=None)
        source.fill(1 << 20)
        assert [r.data for r in source.pending] == [b"2", b"3", b"4"]
        assert svc.store.document("firehose-checkpoint", "ds") == {"version": 3}
        source.commit(source.take(1 << 20))
        again = KinesisSource(host, ds, stopped=None)
        again.fill(1 << 20)
        assert again.pending == []
    finally:
        svc.store.close()
