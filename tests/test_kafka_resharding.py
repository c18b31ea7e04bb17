"""Resharding under Kafka clients (docs/plans/issue-35-kafka.md §4): while a kafka-python producer
(acks=all, idempotent by default, keyed and null-keyed records) produces and a group of two
kafka-python consumers consumes and commits, the stream is split, merged and scaled through boto3.
Acknowledged records are all consumed, none twice by the committed group, and a boto3 GetRecords
reader sees each of them once. Every wait is on a condition with a generous deadline.

"Read by the committed group" is what a member read and then committed while it still held the
partition: a commit the client refuses during a rebalance (kafka-python does, as Kafka's own
clients do) leaves its records to be read again by whoever holds the partition next, as Kafka's
at-least-once delivery has it; those reads are not the server's doing and are not counted. What
would be the server's doing, and fails the test: a record two committed reads hold (offsets of a
parent and its children that overlap), or one no committed read holds (a partition or a record
the group never got).
"""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter

import pytest

from kinesim.server import free_port

from conftest import client_for, start_server
from test_kafka_clients import bootstrap, new_stream

DEADLINE = 120.0


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    # The initial rebalance delay stays Kafka's 3 s: both members form the first generation together.
    # (With none, the second member's join interrupts the first's SyncGroup, and kafka-python
    # 3.0.12 then sometimes goes silent for good after its next SyncGroup answer: no heartbeat, no
    # request, its thread polling for a coordinator it already has.)
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


def wait_until(condition, what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling a condition, not a delay anything depends on


class Run:
    """What the producer acknowledged and what the group consumed, shared by the threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked: set[str] = set()
        self.failed: list[str] = []
        self.consumed: Counter[str] = Counter()  # read, then committed while held
        self.commit_errors: list[str] = []  # commits refused with records read (those are read again)
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.ready: dict[int, bool] = {}
        self.errors: list[BaseException] = []
        self.members: dict[int, object] = {}  # n -> its KafkaConsumer, for the diagnosis

    def count(self, what: str) -> int:
        with self.lock:
            return len(self.acked) if what == "acked" else len(set(self.consumed))


def produce(proc, topic: str, run: Run) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap(proc), acks="all", linger_ms=2)
    try:
        i = 0
        while not run.stop_producing.is_set():
            futures = []
            for _ in range(20):
                rid = f"id-{i}"
                key = None if i % 3 == 0 else f"key-{i % 40}".encode()
                futures.append((rid, producer.send(topic, key=key, value=rid.encode())))
                i += 1
            for rid, future in futures:  # each group waited for: the run moves at the server's pace
                try:
                    future.get(timeout=60)
                except Exception as err:  # noqa: BLE001 - every failure is reported by the test
                    with run.lock:
                        run.failed.append(f"{rid}: {err!r}")
                else:
                    with run.lock:
                        run.acked.add(rid)
        producer.flush(60)
    except BaseException as err:  # noqa: BLE001
        run.errors.append(err)
    finally:
        producer.close(timeout=10)


def consume(proc, topic: str, group: str, run: Run, n: int) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    pending: dict = {}  # partition -> ids read since the member's last commit

    class Revoked(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            for tp in revoked:  # read, never committed: the partition's next holder reads them
                pending.pop(tp, None)

        def on_partitions_assigned(self, assigned):
            pass

    # auto.offset.reset stays Kafka's default, "latest": the children are read from their start
    # only because the group committed on their parents (plan §4 rule 3). The metadata age stays
    # its default 5 minutes: new partitions are found through rule 4, not a refresh timer.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(proc), group_id=group, enable_auto_commit=False,
                             heartbeat_interval_ms=300, session_timeout_ms=10000)
    consumer.subscribe([topic], listener=Revoked())
    run.members[n] = consumer
    try:
        while not run.stop_consuming.is_set():
            batches = consumer.poll(timeout_ms=200)
            for tp, records in batches.items():
                pending.setdefault(tp, []).extend(r.value.decode() for r in records)
            if not run.ready.get(n) and consumer.assignment():
                for tp in consumer.assignment():
                    consumer.position(tp)  # "latest" resolved now, before anything is produced
            try:
                consumer.commit()  # after processing: what is committed was counted
            except Exception as err:  # noqa: BLE001
                if any(pending.values()):
                    run.commit_errors.append(repr(err))
            else:
                with run.lock:
                    for ids in pending.values():
                        run.consumed.update(ids)
                pending.clear()
            if consumer.assignment():
                run.ready[n] = True
    except BaseException as err:  # noqa: BLE001
        run.errors.append(err)
    finally:
        consumer.close()


def open_shards(kinesis, name: str) -> list[dict]:
    shards = kinesis.list_shards(StreamName=name)["Shards"]
    return [s for s in shards if "EndingSequenceNumber" not in s["SequenceNumberRange"]]


def kinesis_ids(kinesis, name: str) -> Counter[str]:
    """Every record of every shard, parents before children (indexes grow down the lineage)."""
    found: Counter[str] = Counter()
    shards = sorted(kinesis.list_shards(StreamName=name)["Shards"], key=lambda s: s["ShardId"])
    for shard in shards:
        it = kinesis.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            out = kinesis.get_records(ShardIterator=it, Limit=10000)
            found.update(r["Data"].decode() for r in out["Records"])
            it = out.get("NextShardIterator")
            if not out["Records"] and out.get("MillisBehindLatest", 0) == 0:
                break  # an open shard read to its tip (a closed one ends with no iterator)
    return found


def diagnosis(kinesis, servers: str, topic: str, group: str, run: Run) -> str:
    """Where the acknowledged records not consumed are, and the group's offsets (for a failure)."""
    from kafka import KafkaAdminClient
    with run.lock:
        missing = run.acked - set(run.consumed)
    where: Counter[str] = Counter()
    shards = sorted(kinesis.list_shards(StreamName=topic)["Shards"], key=lambda s: s["ShardId"])
    for shard in shards:
        it = kinesis.get_shard_iterator(StreamName=topic, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out = kinesis.get_records(ShardIterator=it, Limit=10000)
        where[shard["ShardId"][-2:]] = sum(r["Data"].decode() in missing for r in out["Records"])
    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        # kafka-python 3's admin call (list_consumer_group_offsets is the 2.x name).
        offsets = {tp.partition: o.offset for tp, o in admin.list_group_offsets({group: None})[group].items()}
    finally:
        admin.close()
    members = {}
    for n, consumer in run.members.items():  # each member's own view (kafka-python internals, read only)
        co = consumer._coordinator
        members[n] = (f"state={co.state} rejoin_needed={co.rejoin_needed} need_rejoin={co.need_rejoin()} "
                      f"leader={co._is_leader} generation={co._generation.generation_id} "
                      f"assigned={sorted(tp.partition for tp in consumer.assignment())}")
    return (f"{len(missing)} missing, by shard {dict(where)}; committed {dict(sorted(offsets.items()))}; "
            f"members {members}; commit errors {run.commit_errors[:3]}")


def test_split_merge_and_scale_lose_nothing_and_read_nothing_twice(kafka):
    kinesis = client_for(kafka.url)
    topic = new_stream(kafka, shards=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    run = Run()
    consumers = [threading.Thread(target=consume, args=(kafka, topic, group, run, n), daemon=True) for n in (0, 1)]
    for t in consumers:
        t.start()
    # Both members hold partitions (and have resolved "latest") before anything is produced.
    wait_until(lambda: run.ready.get(0) and run.ready.get(1) or run.errors, "the group to form")
    producer = threading.Thread(target=produce, args=(kafka, topic, run), daemon=True)
    producer.start()

    def progress(what: str) -> None:
        """More records acknowledged, and consumed, than before the last change."""
        acked = run.count("acked")
        wait_until(lambda: run.count("acked") >= acked + 200 or run.errors, f"production to go on after {what}")
        try:
            wait_until(lambda: run.count("consumed") >= acked + 200 or run.errors, f"consumption to go on after {what}")
        except AssertionError as err:
            raise AssertionError(f"{err}: {diagnosis(kinesis, bootstrap(kafka), topic, group, run)}") from None
        assert not run.errors, run.errors

    def settled() -> None:
        kinesis.get_waiter("stream_exists").wait(StreamName=topic, WaiterConfig={"Delay": 0.1})

    progress("the start")
    first = next(s for s in open_shards(kinesis, topic) if s["ShardId"].endswith("0"))
    low, high = (int(first["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    kinesis.split_shard(StreamName=topic, ShardToSplit=first["ShardId"], NewStartingHashKey=str((low + high) // 2))
    settled()
    progress("a split")
    children = sorted((s for s in open_shards(kinesis, topic) if s.get("ParentShardId") == first["ShardId"]),
                      key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
    kinesis.merge_shards(StreamName=topic, ShardToMerge=children[0]["ShardId"],
                         AdjacentShardToMerge=children[1]["ShardId"])
    settled()
    progress("a merge")
    # 2 -> 3 -> 1 as AWS allows it: a scale down goes at most to half the open shards (3 -> 2 -> 1).
    for target in (3, 2, 1):
        kinesis.update_shard_count(StreamName=topic, TargetShardCount=target, ScalingType="UNIFORM_SCALING")
        settled()
        assert len(open_shards(kinesis, topic)) == target
        progress(f"scaling to {target}")

    run.stop_producing.set()
    producer.join(DEADLINE)
    assert not producer.is_alive() and not run.errors, run.errors
    assert not run.failed, run.failed[:5]
    acked = set(run.acked)
    wait_until(lambda: set(run.consumed) >= acked or run.errors, "the group to consume every acknowledged record")
    run.stop_consuming.set()
    for t in consumers:
        t.join(DEADLINE)
    assert not run.errors, run.errors

    assert set(run.consumed) == acked, sorted(acked ^ set(run.consumed))[:10]
    twice = {rid: n for rid, n in run.consumed.items() if n != 1}
    assert not twice, (list(twice.items())[:10], run.commit_errors[:5])
    shards = kinesis.list_shards(StreamName=topic)["Shards"]
    assert len(shards) > 2 + 2 + 1  # splits, merges and scaling made partitions that all stay

    # The Kinesis side: every acknowledged record once, in whichever shard it was forwarded to.
    seen = kinesis_ids(kinesis, topic)
    assert set(seen) == acked, sorted(acked ^ set(seen))[:10]
    assert all(n == 1 for n in seen.values()), [rid for rid, n in seen.items() if n != 1][:10]

    # The group's commits cover everything: a new member taking every partition reads nothing.
    from kafka import KafkaConsumer
    last = KafkaConsumer(topic, bootstrap_servers=bootstrap(kafka), group_id=group, enable_auto_commit=False)
    try:
        again: list = []

        def polled_all() -> bool:
            for records in last.poll(timeout_ms=100).values():
                again.extend(r.value for r in records)
            return len(last.assignment()) == len(shards)
        wait_until(polled_all, "the last member to take every partition")
        ends = last.end_offsets(list(last.assignment()))
        assert {tp: last.position(tp) for tp in ends} == ends
        assert not again, again[:10]
    finally:
        last.close()
