"""kill -9 under Kafka clients (issue 35): the server is killed at a random point and restarted
on the same data directory and port while (1) a kafka-python producer at acks=all (idempotent, its
default) produces numbered records, retrying across the restart: every record whose send was
acknowledged is in the topic, and only once (the sequence table is rebuilt from the shard's tail,
so a retried batch is recognised as a duplicate); (2) a kafka-python group consumer reads and
commits after processing: no acknowledged commit is lost, and the group resumes from it."""
from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from kinesim.server import ServerProcess, free_port

from conftest import client_for

# Generous: the producer retries through the restart (kinesim's start takes a second or two).
CLIENT_TIMEOUT_MS = 120_000


@pytest.fixture
def server(tmp_path):
    proc = ServerProcess(port=free_port(), kafka_port=free_port(), data_dir=str(tmp_path), create_stream_ms=0,
                         log_level="warning").start()
    yield proc
    proc.stop()


def bootstrap(proc) -> str:
    return f"127.0.0.1:{proc.settings.kafka_port}"


def new_topic(proc, shards: int = 2) -> str:
    name = f"k9-{uuid.uuid4().hex[:8]}"
    kinesis = client_for(proc.url)
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    return name


def kill_and_restart(proc, rng: random.Random, total: int, progress, at_kill: list) -> None:
    """kill -9 once the clients' progress (records acknowledged or read) passes a random point of
    `total`, then the same server again: a point of the work, not of the clock, so it lands
    mid-work however fast the clients go."""
    point = rng.randint(total // 10, total * 8 // 10)
    deadline = time.monotonic() + 60
    while progress() < point and time.monotonic() < deadline:
        time.sleep(0.001)
    at_kill.append(progress())  # checked afterwards: the kill landed while the clients worked
    proc.kill()
    proc.start(timeout=60)


def read_all(proc, topic: str, partitions: int) -> list:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap(proc), group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    ends = c.end_offsets(tps)
    got: list = []
    deadline = time.monotonic() + 60
    while any(c.position(tp) < ends[tp] for tp in tps):
        assert time.monotonic() < deadline, "the topic could not be read to its end"
        for batch in c.poll(timeout_ms=500).values():
            got.extend(batch)
    c.close()
    return got


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_acknowledged_records_survive_kill_9_once(server, seed):
    from kafka import KafkaProducer
    rng = random.Random(seed)
    topic, total = new_topic(server), 3000
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), acks="all", linger_ms=5,
                             request_timeout_ms=10_000, delivery_timeout_ms=CLIENT_TIMEOUT_MS,
                             retry_backoff_ms=100, reconnect_backoff_max_ms=500)
    acked: list[int] = []
    failed: list[tuple[int, Exception]] = []

    def produce() -> None:
        for i in range(total):
            future = producer.send(topic, key=b"k%d" % (i % 10), value=b"%d" % i)
            future.add_callback(lambda _m, i=i: acked.append(i))
            future.add_errback(lambda err, i=i: failed.append((i, err)))
    sender = threading.Thread(target=produce)
    sender.start()
    at_kill: list = []
    kill_and_restart(server, rng, total, lambda: len(acked), at_kill)
    sender.join(120)
    producer.flush(CLIENT_TIMEOUT_MS / 1000)
    producer.close()
    assert at_kill[0] < total, "the kill came after the last acknowledgement: nothing was tested"
    values = [int(m.value) for m in read_all(server, topic, 2)]
    assert set(acked) <= set(values), sorted(set(acked) - set(values))[:20]  # 0 acknowledged lost
    duplicates = sorted(v for v in set(values) if values.count(v) > 1)
    assert not duplicates, f"idempotence did not hold across the restart: {duplicates[:20]}"
    # A record neither acknowledged nor failed cannot be: the producer flushed.
    assert len(acked) + len(failed) == total, failed[:3]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_a_group_resumes_from_its_commits_after_kill_9(server, seed):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaError
    rng = random.Random(seed)
    topic, total = new_topic(server), 600
    producer = KafkaProducer(bootstrap_servers=bootstrap(server), acks="all")
    for i in range(total):
        producer.send(topic, value=b"%d" % i, partition=i % 2)
    producer.flush(30)
    producer.close()
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap(server), group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=20, request_timeout_ms=30_000,
                             reconnect_backoff_max_ms=500)
    committed: dict[int, int] = {}   # partition -> the last offset the server acknowledged
    seen: set[int] = set()
    at_kill: list = []
    killer = threading.Thread(target=kill_and_restart, args=(server, rng, total, lambda: len(seen), at_kill))
    killer.start()
    deadline = time.monotonic() + 120
    while len(seen) < total:
        assert time.monotonic() < deadline, f"{len(seen)} of {total} read"
        try:
            batches = consumer.poll(timeout_ms=200)
        except KafkaError:
            continue
        for tp, records in batches.items():
            for r in records:
                seen.add(int(r.value))
                # A record read below an acknowledged commit would be a commit lost.
                assert r.offset >= committed.get(tp.partition, 0), (tp.partition, r.offset, committed)
            time.sleep(0.01)  # "processing": the kill lands between reads and commits too
        if batches:
            offsets = {tp.partition: consumer.position(tp) for tp in batches}
            try:
                consumer.commit()
            except KafkaError:
                continue  # not acknowledged: the records after the last acknowledged commit come again
            committed.update(offsets)
    killer.join(60)
    consumer.close(autocommit=False)
    assert seen == set(range(total))
    # And the server keeps what it acknowledged: a new member of the group starts there.
    check = KafkaConsumer(bootstrap_servers=bootstrap(server), group_id=group, enable_auto_commit=False)
    assert {p: check.committed(TopicPartition(topic, p)) for p in (0, 1)} == committed
    check.close()
    assert at_kill[0] < total, "the kill came after the last record was read: nothing was tested"
