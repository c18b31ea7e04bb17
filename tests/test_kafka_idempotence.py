"""Idempotent producers (docs/plans/issue-35-kafka.md step 4): InitProducerId, the per-partition
sequence checks of Produce (duplicates stored once and answered with their first offset, gaps and
old epochs refused), and the table rebuilt from the records after a kill -9."""
from __future__ import annotations

import socket
import threading

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kinesim.server import free_port

from conftest import start_server
from test_kafka_clients import bootstrap, kafka_python_read, new_stream, produce_tree, sent_records
from test_kafka_protocol import address, call


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


def idempotent_batch(producer_id: int, sequence: int, count: int = 3, epoch: int = 0, tag: bytes = b"") -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, producer_id, epoch, sequence, 1 << 30)
    for n in range(count):
        builder.append(n, 1_700_000_000_000 + n, b"k", b"%s-%d" % (tag, sequence + n), [])
    return bytes(builder.build())


def produce(sock, topic: str, records: bytes, partition: int = 0) -> tuple[int, int]:
    """(error code, base offset) of one partition's Produce."""
    part = call(sock, 0, 9, produce_tree(topic, records, partition)).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def log_end(sock, topic: str, partition: int = 0) -> int:
    body = call(sock, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return body.topics[0].partitions[0].offset


def init_producer_id(sock, version: int = 4, **tree) -> tuple[int, int, int]:
    body = call(sock, 22, version, {"transactional_id": None, "transaction_timeout": 60_000, **tree})
    return body.error_code, body.producer_id, body.producer_epoch


def test_kafka_python_default_producer_is_idempotent_and_records_are_read_once(kafka):
    from kafka import KafkaProducer
    topic = new_stream(kafka, shards=2)
    producer = KafkaProducer(bootstrap_servers=bootstrap(kafka))
    try:
        assert producer.config["enable_idempotence"]  # kafka-python 3's default, kept on
        records = sent_records(20)
        futures = [producer.send(topic, partition=i % 2, **r) for i, r in enumerate(records)]
        producer.flush(20)
        acknowledged = [f.get(timeout=20) for f in futures]
    finally:
        producer.close()
    assert sorted((m.partition, m.offset) for m in acknowledged) == \
        sorted((p, o) for p in (0, 1) for o in range(10))
    for partition in (0, 1):
        got = kafka_python_read(kafka, topic, 10, partition=partition)
        assert [m.value for m in got] == [r["value"] for r in records[partition::2]]
        assert [m.offset for m in got] == list(range(10))


def test_confluent_kafka_idempotent_producer(kafka):
    from confluent_kafka import Producer
    topic = new_stream(kafka)
    reports = []
    producer = Producer({"bootstrap.servers": bootstrap(kafka), "enable.idempotence": True, "linger.ms": 5})
    for r in sent_records(30):
        producer.produce(topic, partition=0, key=r["key"], value=r["value"],
                         on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert reports == [(None, i) for i in range(30)]
    assert len(kafka_python_read(kafka, topic, 30)) == 30


def test_init_producer_id(kafka):
    with socket.create_connection(address(kafka)) as sock:
        code, first, epoch = init_producer_id(sock, version=0)
        assert (code, epoch) == (0, 0) and first >= 0
        code, second, epoch = init_producer_id(sock)
        assert (code, epoch) == (0, 0) and second not in (first, -1)
        # KIP-360's bump: the same producer, its latest epoch -> the next epoch.
        assert init_producer_id(sock, producer_id=second, producer_epoch=0) == (0, second, 1)
        # A stale epoch (or a producer this server did not issue) gets a new id.
        code, third, epoch = init_producer_id(sock, producer_id=second, producer_epoch=0)
        assert (code, epoch) == (0, 0) and third not in (first, second)
        # Transactions are not served: INVALID_REQUEST, not retriable.
        assert init_producer_id(sock, transactional_id="tx-1")[0] == 42


def test_a_batch_sent_twice_is_stored_once_and_answered_with_its_offset(kafka):
    topic = new_stream(kafka)
    with socket.create_connection(address(kafka)) as sock:
        _, pid, _ = init_producer_id(sock)
        assert produce(sock, topic, idempotent_batch(pid, 0)) == (0, 0)
        assert produce(sock, topic, idempotent_batch(pid, 0)) == (0, 0)  # the retry: same answer
        assert log_end(sock, topic) == 3
        assert produce(sock, topic, idempotent_batch(pid, 3, count=2)) == (0, 3)
        # Any of the last five batches is recognised, not only the last one.
        assert produce(sock, topic, idempotent_batch(pid, 0)) == (0, 0)
        assert produce(sock, topic, idempotent_batch(pid, 3, count=2)) == (0, 3)
        assert log_end(sock, topic) == 5
    values = [m.value for m in kafka_python_read(kafka, topic, 5)]
    assert values == [b"-0", b"-1", b"-2", b"-3", b"-4"]


def test_copies_sent_at_once_on_two_connections_are_stored_once(kafka):
    topic = new_stream(kafka)
    with socket.create_connection(address(kafka)) as sock:
        _, pid, _ = init_producer_id(sock)
    for sequence in range(0, 60, 3):
        start, answers = threading.Barrier(4), []

        def send():
            with socket.create_connection(address(kafka)) as sock:
                start.wait()
                answers.append(produce(sock, topic, idempotent_batch(pid, sequence)))

        threads = [threading.Thread(target=send) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert answers == [(0, sequence)] * 4
    with socket.create_connection(address(kafka)) as sock:
        assert log_end(sock, topic) == 60


def test_sequence_gaps_and_old_epochs_are_refused(kafka):
    topic = new_stream(kafka)
    with socket.create_connection(address(kafka)) as sock:
        _, pid, _ = init_producer_id(sock)
        assert produce(sock, topic, idempotent_batch(pid, 0)) == (0, 0)
        assert produce(sock, topic, idempotent_batch(pid, 5))[0] == 45  # 3 and 4 are missing
        assert produce(sock, topic, idempotent_batch(pid, 1))[0] == 45  # overlaps, equals no batch
        assert produce(sock, topic, idempotent_batch(pid, 3)) == (0, 3)
        # A new epoch starts at sequence 0; then the old epoch is fenced.
        assert produce(sock, topic, idempotent_batch(pid, 6, epoch=1))[0] == 45
        assert produce(sock, topic, idempotent_batch(pid, 0, epoch=1)) == (0, 6)
        assert produce(sock, topic, idempotent_batch(pid, 6, epoch=0))[0] == 47
        # A producer never seen here is accepted at any sequence (Kafka since KIP-360).
        assert produce(sock, topic, idempotent_batch(pid + 500, 42)) == (0, 9)
        assert log_end(sock, topic) == 12
        # One batch per partition from an idempotent producer, as Kafka's broker requires.
        two = idempotent_batch(pid, 3, epoch=1) + idempotent_batch(pid, 6, epoch=1)
        assert produce(sock, topic, two)[0] == 87
        assert log_end(sock, topic) == 12


def test_a_retry_after_kill_9_gets_the_original_offset(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    try:
        topic = new_stream(proc)
        with socket.create_connection(address(proc)) as sock:
            _, pid, _ = init_producer_id(sock)
            assert produce(sock, topic, idempotent_batch(pid, 0, tag=b"a")) == (0, 0)
            assert produce(sock, topic, idempotent_batch(pid, 3, tag=b"a")) == (0, 3)
            # Another producer's records after them: the scan finds pid's batches among others'.
            _, other, _ = init_producer_id(sock)
            assert produce(sock, topic, idempotent_batch(other, 0, tag=b"b")) == (0, 6)
        proc.kill()
        proc.start()
        with socket.create_connection(address(proc)) as sock:
            # The answer to the second batch was lost: the producer sends it again.
            assert produce(sock, topic, idempotent_batch(pid, 3, tag=b"a")) == (0, 3)
            assert produce(sock, topic, idempotent_batch(pid, 0, tag=b"a")) == (0, 0)
            assert log_end(sock, topic) == 9
            assert produce(sock, topic, idempotent_batch(pid, 7, tag=b"a"))[0] == 45  # still in order
            assert produce(sock, topic, idempotent_batch(pid, 6, tag=b"a")) == (0, 9)
            # Ids are never handed out twice across the restart.
            _, after, _ = init_producer_id(sock)
            assert after not in (pid, other)
    finally:
        proc.stop()
