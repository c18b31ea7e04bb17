"""Across families (issue 35): records produced with kafka-python are Kinesis records like any
other, so the stream's other readers get them: a stream-triggered Lambda function (the Kafka
values as the records' `data`, the keys as partition keys), a Firehose delivery stream reading the
stream into a bucket, and `kinesim sql` counting what Firehose delivered. The other way (boto3
PutRecords read by a Kafka consumer with key, value and timestamp) is
test_kafka_clients.test_records_put_through_kinesis_read_by_kafka."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from test_kafka_clients import bootstrap
from test_mappings_e2e import ROLE, deploy, map_stream, stream_arn, wait_until

from kinesim.analytics.table_sources import table_name
from kinesim.server import free_port

from conftest import client_for, start_server

COUNT = 60
PAGES = ["home", "cart", "search"]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    proc = start_server(tmp_path_factory, kafka_port=free_port(), kafka_initial_rebalance_ms=0,
                        firehose_interval_scale=0.01)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def produced(kafka):
    """A two-shard stream, what kafka-python produced to it at acks=all (every send acknowledged):
    [(key, value)], JSON lines, keyed so both partitions get some; and the delivery stream
    reading it (name, bucket), made first."""
    topic = f"kp-{uuid.uuid4().hex[:10]}"
    kinesis = client_for(kafka.url)
    kinesis.create_stream(StreamName=topic, ShardCount=2)
    kinesis.get_waiter("stream_exists").wait(StreamName=topic, WaiterConfig={"Delay": 0.1})
    delivery = source_delivery(kafka, topic)  # before producing: Firehose reads a stream from LATEST
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap(kafka), acks="all")
    sent = [(f"user-{i % 7}".encode(), json.dumps({"page": PAGES[i % 3], "n": i}).encode() + b"\n")
            for i in range(COUNT)]
    try:
        futures = [producer.send(topic, key=key, value=value) for key, value in sent]
        producer.flush(30)
        partitions = {f.get(timeout=30).partition for f in futures}
    finally:
        producer.close()
    assert partitions == {0, 1}
    return topic, sent, delivery


def test_a_stream_triggered_function_gets_the_kafka_records(kafka, produced, tmp_path):
    topic, sent, _ = produced
    lam = client_for(kafka.url, "lambda")
    function, seen = deploy(lam, tmp_path)
    map_stream(lam, topic, function, BatchSize=25)
    wait_until(lambda: len(seen.records()) >= COUNT, timeout=60, what="the function to see every record")
    got = sorted((r["kinesis"]["partitionKey"].encode(), base64.b64decode(r["kinesis"]["data"]))
                 for r in seen.records())
    assert got == sorted(sent)  # each once, the Kafka value as `data`, the key as the partition key
    assert {r["eventSourceARN"] for r in seen.records()} == {stream_arn(topic)}


def source_delivery(kafka, topic: str) -> tuple[str, str]:
    """A KinesisStreamAsSource delivery stream reading `topic` into a new bucket: (name, bucket)."""
    s3 = client_for(kafka.url, "s3", s3={"addressing_style": "path"})
    firehose = client_for(kafka.url, "firehose")
    bucket, name = f"kb-{uuid.uuid4().hex[:8]}", f"kd-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    firehose.create_delivery_stream(
        DeliveryStreamName=name, DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={"KinesisStreamARN": stream_arn(topic), "RoleARN": ROLE},
        ExtendedS3DestinationConfiguration={"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}",
                                            "Prefix": "kafka/", "BufferingHints": {"IntervalInSeconds": 0}})
    wait_until(lambda: firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]
               ["DeliveryStreamStatus"] == "ACTIVE", timeout=30, step=0.1, what="the delivery stream")
    return name, bucket


def delivered_lines(kafka, bucket: str) -> list[bytes]:
    """The lines of the bucket's objects, once there are COUNT."""
    s3 = client_for(kafka.url, "s3", s3={"addressing_style": "path"})

    def lines() -> list[bytes]:
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        return [line for k in keys for line in s3.get_object(Bucket=bucket, Key=k)["Body"].read().splitlines(True)]
    return wait_until(lambda: (got := lines()) and len(got) >= COUNT and got, timeout=90, step=0.2,
                      what="Firehose to deliver every record")


@pytest.fixture(scope="module")
def delivered(kafka, produced):
    name, bucket = produced[2]
    return name, delivered_lines(kafka, bucket)


def test_a_firehose_delivery_gets_the_kafka_records(produced, delivered):
    _, sent, _ = produced
    _, lines = delivered
    assert sorted(lines) == sorted(value for _, value in sent)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="kinesim sql needs Java (Spark)")
def test_kinesim_sql_counts_the_kafka_records(kafka, produced, delivered):
    name, _ = delivered
    view = table_name(name)
    proc = subprocess.run([sys.executable, "-m", "kinesim", "sql", "--endpoint-url", kafka.url, "--format", "json",
                           "--master", "local[2]",
                           f"SELECT page, count(*) AS n, count(DISTINCT n) AS d FROM {view} GROUP BY page ORDER BY page"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    expected = {p: sum(1 for i in range(COUNT) if PAGES[i % 3] == p) for p in PAGES}
    assert {r["page"]: (r["n"], r["d"]) for r in rows} == {p: (n, n) for p, n in expected.items()}


def test_the_console_counts_the_function_and_firehose_as_readers(kafka, produced, delivered):
    """The stream page lists them beside each other once they have read everything (lag 0)."""
    topic, _, _ = produced
    from console_api import ConsoleApi
    api = ConsoleApi(kafka.url, "/streams")

    def caught_up():
        readers = api.get(f"/{topic}").json()["readers"]
        kinds = {r["kind"] for r in readers if r["positions"] and r["records"] == 0}
        return "firehose" in kinds and kinds
    deadline = time.monotonic() + 30
    while not caught_up():
        assert time.monotonic() < deadline, api.get(f"/{topic}").json()["readers"]
        time.sleep(0.2)
