"""Kafka clients on kinesim's streams without consumer groups (docs/plans/issue-35-kafka.md step 2):
Produce, Fetch and ListOffsets with kafka-python and confluent-kafka, compression, acks=0, the
Kinesis side reading what Kafka wrote and the other way round, the Fetch long-poll, and the
per-partition errors with raw frames. Groups (subscribe, commit) are a later step: consumers here
are assigned their partitions."""
from __future__ import annotations

import hashlib
import socket
import threading
import time
import uuid

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kinesim.kafka.batches import Record, build_batch, decode_batches
from kinesim.server import free_port

from conftest import client_for, start_server
from test_kafka_protocol import address, call

KEYS = [b"alpha", b"\x00\xffbinary", None, b"k" * 300]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port())
    yield proc
    proc.stop()


def bootstrap(proc) -> str:
    return f"127.0.0.1:{proc.settings.kafka_port}"


def new_stream(proc, shards: int = 1) -> str:
    name = f"kc-{uuid.uuid4().hex[:10]}"
    kinesis = client_for(proc.url)
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.1})
    return name


def sent_records(n: int = 8) -> list[dict]:
    base = 1_700_000_000_123
    return [{"key": KEYS[i % len(KEYS)], "value": None if i == 5 else b"value-%d" % i,
             "headers": [("h", b"%d" % i), ("empty", b"")] if i % 2 else [],
             "timestamp_ms": base + i * 7} for i in range(n)]


def kafka_python_produce(proc, topic: str, records: list[dict], partition: int = 0, **config) -> list:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap(proc), **{"acks": "all", **config})
    try:
        futures = [producer.send(topic, partition=partition, **r) for r in records]
        producer.flush(20)
        return [f.get(timeout=20) for f in futures] if config.get("acks", "all") != 0 else []
    finally:
        producer.close()


def kafka_python_read(proc, topic: str, count: int, partition: int = 0, offset: int | None = None) -> list:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(proc), group_id=None, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if offset is not None:
            consumer.seek(tp, offset)
        got: list = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
        return got
    finally:
        consumer.close()


def as_sent(message) -> dict:
    return {"key": message.key, "value": message.value, "headers": list(message.headers),
            "timestamp_ms": message.timestamp}


# kafka-python


def test_kafka_python_reads_back_exactly_what_it_produced(kafka):
    topic = new_stream(kafka, shards=2)
    records = sent_records()
    acknowledged = kafka_python_produce(kafka, topic, records, partition=1)
    assert [m.offset for m in acknowledged] == list(range(len(records)))
    got = kafka_python_read(kafka, topic, len(records), partition=1)
    assert [m.offset for m in got] == list(range(len(records)))
    assert [as_sent(m) for m in got] == records
    assert all(m.timestamp_type == 0 for m in got)  # CreateTime, as produced
    # The other partition is empty, and a second produce continues the offsets.
    more = kafka_python_produce(kafka, topic, records[:2], partition=1)
    assert [m.offset for m in more] == [len(records), len(records) + 1]


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_produce(kafka, compression):
    topic = new_stream(kafka)
    records = sent_records(50)
    kafka_python_produce(kafka, topic, records, compression_type=compression, linger_ms=50)
    got = kafka_python_read(kafka, topic, len(records))
    assert [as_sent(m) for m in got] == records


def test_acks_0_records_are_stored_unanswered(kafka):
    topic = new_stream(kafka)
    records = sent_records(20)
    kafka_python_produce(kafka, topic, records, acks=0)
    got = kafka_python_read(kafka, topic, len(records))
    assert [as_sent(m) for m in got] == records


def test_auto_created_topic(kafka):
    topic = f"kc-auto-{uuid.uuid4().hex[:8]}"
    kafka_python_produce(kafka, topic, sent_records(3))
    assert [m.offset for m in kafka_python_read(kafka, topic, 3)] == [0, 1, 2]
    described = client_for(kafka.url).describe_stream(StreamName=topic)["StreamDescription"]
    assert described["StreamStatus"] == "ACTIVE" and len(described["Shards"]) == 1


def test_list_offsets(kafka):
    from kafka import KafkaConsumer, TopicPartition
    topic = new_stream(kafka)
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(kafka), group_id=None)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0} and consumer.end_offsets([tp]) == {tp: 0}
        assert consumer.offsets_for_times({tp: 0}) == {tp: None}
        kafka_python_produce(kafka, topic, sent_records(3))
        time.sleep(0.01)  # the search is by arrival (ms): the next records arrive later
        before = int(time.time() * 1000)
        time.sleep(0.01)
        later = sent_records(2)
        kafka_python_produce(kafka, topic, later)
        assert consumer.beginning_offsets([tp]) == {tp: 0} and consumer.end_offsets([tp]) == {tp: 5}
        found = consumer.offsets_for_times({tp: before})[tp]
        assert (found.offset, found.timestamp) == (3, later[0]["timestamp_ms"])  # the record's own time
        assert consumer.offsets_for_times({tp: int(time.time() * 1000) + 60_000}) == {tp: None}
    finally:
        consumer.close()
    with socket.create_connection(address(kafka)) as sock:  # -3: the newest record
        body = call(sock, 2, 10, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -3}]}]})
        part = body.topics[0].partitions[0]
        assert (part.error_code, part.offset, part.timestamp) == (0, 4, later[1]["timestamp_ms"])


# confluent-kafka


def test_confluent_kafka_reads_back_exactly_what_it_produced(kafka):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    topic = new_stream(kafka)
    records = sent_records()
    reports = []
    producer = Producer({"bootstrap.servers": bootstrap(kafka), "acks": "all", "compression.type": "zstd",
                         "linger.ms": 20})
    for r in records:
        producer.produce(topic, partition=0, key=r["key"], value=r["value"], headers=r["headers"] or None,
                         timestamp=r["timestamp_ms"], on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert reports == [(None, i) for i in range(len(records))]
    # A group id is required by the client; with assign() and no commits it is never used.
    consumer = Consumer({"bootstrap.servers": bootstrap(kafka), "group.id": "unused", "enable.auto.commit": False,
                         "enable.auto.offset.store": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(records) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message)
    finally:
        consumer.close()
    assert [m.offset() for m in got] == list(range(len(records)))
    assert [{"key": m.key(), "value": m.value(), "headers": list(m.headers() or []),
             "timestamp_ms": m.timestamp()[1]} for m in got] == records


# Kinesis <-> Kafka


def test_records_put_through_kinesis_read_by_kafka(kafka):
    topic = new_stream(kafka)
    kinesis = client_for(kafka.url)
    put = kinesis.put_records(StreamName=topic, Records=[{"Data": b"d%d" % i, "PartitionKey": f"pk-{i}"}
                                                        for i in range(5)])
    assert put["FailedRecordCount"] == 0
    iterator = kinesis.get_shard_iterator(StreamName=topic, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    arrivals = [round(r["ApproximateArrivalTimestamp"].timestamp() * 1000)
                for r in kinesis.get_records(ShardIterator=iterator)["Records"]]
    got = kafka_python_read(kafka, topic, 5)
    assert [(m.offset, m.key, m.value, m.headers, m.timestamp) for m in got] == \
        [(i, b"pk-%d" % i, b"d%d" % i, [], arrivals[i]) for i in range(5)]


def test_records_produced_by_kafka_read_through_kinesis(kafka):
    topic = new_stream(kafka)
    records = sent_records()
    kafka_python_produce(kafka, topic, records)
    kinesis = client_for(kafka.url)
    iterator = kinesis.get_shard_iterator(StreamName=topic, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    got = kinesis.get_records(ShardIterator=iterator)["Records"]
    expected_keys = [r["key"].decode() if r["key"] and len(r["key"]) <= 256 and r["key"].isascii() and
                     b"\x00" not in r["key"] else (hashlib.md5(r["key"]).hexdigest() if r["key"] else None)
                     for r in records]
    assert [r.get("PartitionKey") for r in got] == expected_keys
    assert [r["Data"] for r in got] == [r["value"] or b"" for r in records]


# Fetch: long-poll and errors, raw


def fetch_tree(topic: str, offset: int, max_wait_ms: int = 0, partition: int = 0, min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


def test_fetch_waits_for_a_record_put_afterwards(kafka):
    topic = new_stream(kafka)
    kinesis = client_for(kafka.url)
    kinesis.put_record(StreamName=topic, Data=b"first", PartitionKey="a")
    answers = []

    def long_poll():
        with socket.create_connection(address(kafka)) as sock:
            started = time.monotonic()
            answers.append((call(sock, 1, 12, fetch_tree(topic, 1, max_wait_ms=30_000)), time.monotonic() - started))

    waiter = threading.Thread(target=long_poll)
    waiter.start()
    time.sleep(0.3)
    assert not answers  # still waiting at the end of the partition
    kinesis.put_record(StreamName=topic, Data=b"second", PartitionKey="b")
    waiter.join(20)
    (body, took), = answers
    assert took < 15  # woken by the put, not by the 30 s max_wait
    part = body.responses[0].partitions[0]
    assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 2, 0)
    (batch,) = decode_batches(part.records)
    assert batch.base_offset == 1 and [r.value for r in batch.records] == [b"second"]


def test_fetch_waits_until_min_bytes(kafka):
    topic = new_stream(kafka)
    kinesis = client_for(kafka.url)
    kinesis.put_record(StreamName=topic, Data=b"a" * 100, PartitionKey="a")
    answers = []

    def long_poll():
        with socket.create_connection(address(kafka)) as sock:
            started = time.monotonic()
            # Two records of 100 bytes make a batch of ~290 bytes, three of ~400.
            tree = fetch_tree(topic, 0, max_wait_ms=30_000, min_bytes=350)
            answers.append((call(sock, 1, 12, tree), time.monotonic() - started))

    waiter = threading.Thread(target=long_poll)
    waiter.start()
    time.sleep(0.3)
    kinesis.put_record(StreamName=topic, Data=b"b" * 100, PartitionKey="b")  # not enough yet
    time.sleep(0.3)
    assert not answers
    kinesis.put_record(StreamName=topic, Data=b"c" * 100, PartitionKey="c")
    waiter.join(20)
    (body, took), = answers
    assert took < 15
    (batch,) = decode_batches(body.responses[0].partitions[0].records)
    assert [r.value[:1] for r in batch.records] == [b"a", b"b", b"c"]


def test_fetch_at_the_end_answers_empty_after_max_wait(kafka):
    topic = new_stream(kafka)
    with socket.create_connection(address(kafka)) as sock:
        started = time.monotonic()
        part = call(sock, 1, 12, fetch_tree(topic, 0, max_wait_ms=300)).responses[0].partitions[0]
        assert time.monotonic() - started >= 0.25
        assert (part.error_code, part.high_watermark, part.records) == (0, 0, b"")


def test_kafka_python_consumer_waiting_at_the_end_gets_a_later_record(kafka):
    from kafka import KafkaConsumer, TopicPartition
    topic = new_stream(kafka)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(kafka), group_id=None, auto_offset_reset="latest",
                             fetch_max_wait_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.poll(timeout_ms=300)  # positioned at the end
        threading.Timer(0.5, lambda: client_for(kafka.url).put_record(
            StreamName=topic, Data=b"late", PartitionKey="k")).start()
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = [m for batch in consumer.poll(timeout_ms=500).values() for m in batch]
        assert [(m.offset, m.value) for m in got] == [(0, b"late")]
    finally:
        consumer.close()


def test_fetch_out_of_range(kafka):
    topic = new_stream(kafka)
    client_for(kafka.url).put_record(StreamName=topic, Data=b"x", PartitionKey="a")
    with socket.create_connection(address(kafka)) as sock:
        for offset in (2, 100, -5):
            part = call(sock, 1, 12, fetch_tree(topic, offset)).responses[0].partitions[0]
            assert (part.error_code, part.high_watermark, part.log_start_offset) == (1, 1, 0)
        assert call(sock, 1, 4, fetch_tree(topic, 1)).responses[0].partitions[0].error_code == 0
        unknown = call(sock, 1, 12, fetch_tree(topic, 0, partition=3)).responses[0].partitions[0]
        assert unknown.error_code == 3


# Produce errors, raw


def produce_tree(topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
                 transactional_id: str | None = None) -> dict:
    return {"transactional_id": transactional_id, "acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def one_batch(value: bytes = b"v", transactional: bool = False) -> bytes:
    if not transactional:
        return build_batch(0, [Record(0, 1, b"k", value, [])])
    builder = DefaultRecordBatchBuilder(2, 0, 1, 5, 0, 0, 1 << 30)
    builder.append(0, 1, b"k", value, [])
    return bytes(builder.build())


def produce_error(sock, tree: dict) -> int:
    return call(sock, 0, 9, tree).responses[0].partition_responses[0].error_code


def test_produce_errors(kafka):
    topic = new_stream(kafka)
    corrupt = bytearray(one_batch())
    corrupt[-1] ^= 0xFF
    with socket.create_connection(address(kafka)) as sock:
        assert produce_error(sock, produce_tree(topic, one_batch(), partition=1)) == 3
        assert produce_error(sock, produce_tree(topic, bytes(corrupt))) == 2
        assert produce_error(sock, produce_tree(topic, one_batch(b"x" * (1024 * 1024 + 1)))) == 10
        assert produce_error(sock, produce_tree(topic, one_batch(transactional=True))) == 42
        assert produce_error(sock, produce_tree(topic, one_batch(), transactional_id="t")) == 42
        assert produce_error(sock, produce_tree("bad/name", one_batch())) == 17
        assert produce_error(sock, produce_tree("x" * 129, one_batch())) == 17
        # Nothing of the refused ones was stored; a good one gets offset 0.
        ok = call(sock, 0, 3, produce_tree(topic, one_batch(b"fine"))).responses[0].partition_responses[0]
        assert (ok.error_code, ok.base_offset) == (0, 0)


def test_failed_acks_0_produce_closes_the_connection(kafka):
    topic = new_stream(kafka)
    from test_kafka_protocol import closed_by_server, request_frame
    with socket.create_connection(address(kafka)) as sock:
        sock.sendall(request_frame(0, 9, 1, produce_tree(topic, one_batch(), partition=7, acks=0)))
        assert closed_by_server(sock)
