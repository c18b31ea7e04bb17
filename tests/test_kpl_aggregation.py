"""KPL aggregated records: Firehose reading a Kinesis stream delivers their user records (as AWS's
Firehose de-aggregates them, before a Lambda transform too), an event source mapping passes them
to the function untouched (AWS: Lambda consumers de-aggregate themselves), and records that only
look like aggregates are kept whole, as the KCL keeps them.

The aggregates are built here, by this file's own encoder of the format
(awslabs/amazon-kinesis-producer aggregation-format.md), not by the code under test.
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import uuid
import zipfile
from types import SimpleNamespace

import pytest

from conftest import client_for, make_service, start_server, wait_for
from firehose.source import KinesisSource
from kinesim.kinesis import aggregation
from kinesim.kinesis.service import OPERATIONS

MAGIC = bytes([0xF3, 0x89, 0x9A, 0xC2])
ROLE = "arn:aws:iam::000000000000:role/firehose"
STREAM_ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/{}"


# ---------------------------------------------------------------- the format, encoded by hand

def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, payload: bytes | int, wire: int = 2) -> bytes:
    key = varint(number << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload   # fixed32/64: the bytes as given


def record_message(pk_index: int, data: bytes, ehk_index: int | None = None, tags: bytes = b"") -> bytes:
    return (field(1, pk_index, 0) + (field(2, ehk_index, 0) if ehk_index is not None else b"")
            + field(3, data) + tags)


def message(keys: list[str], records: list[bytes], hash_keys: tuple[str, ...] = ()) -> bytes:
    return (b"".join(field(1, k.encode()) for k in keys) + b"".join(field(2, h.encode()) for h in hash_keys)
            + b"".join(field(3, r) for r in records))


def framed(protobuf: bytes) -> bytes:
    return MAGIC + protobuf + hashlib.md5(protobuf).digest()


def aggregate(entries: list[tuple[str, bytes]]) -> bytes:
    """An aggregate of (partition key, data) user records, with a partition key table as the KPL
    builds it (each key once)."""
    keys = list(dict.fromkeys(pk for pk, _ in entries))
    return framed(message(keys, [record_message(keys.index(pk), data) for pk, data in entries]))


# ---------------------------------------------------------------- decoding

def test_user_records_in_order_with_their_keys():
    tag = field(4, field(1, b"env") + field(2, b"prod"))
    unknown = field(9, 7, 0) + field(10, b"12345678", 1) + field(11, b"1234", 5) + field(12, b"skip")
    group = varint(13 << 3 | 3) + field(1, 5, 0) + varint(13 << 3 | 4)
    protobuf = (message(["a", "b"], [record_message(1, b"first", tags=tag), record_message(0, b"", ehk_index=0),
                                     record_message(1, b"\x00\xff third") + unknown], hash_keys=("123",))
                + unknown + group)
    assert aggregation.deaggregate(framed(protobuf)) == [
        ("b", None, b"first"), ("a", "123", b""), ("b", None, b"\x00\xff third")]
    assert aggregation.deaggregate(aggregate([("k", b"x")])) == [("k", None, b"x")]


GOOD = message(["k"], [record_message(0, b"data")])


@pytest.mark.parametrize("data", [
    b"plain record",
    b"",
    MAGIC[:3],
    MAGIC,
    MAGIC + hashlib.md5(b"").digest(),                          # nothing left after the digest
    MAGIC[::-1] + GOOD + hashlib.md5(GOOD).digest(),           # another magic
    MAGIC + GOOD + hashlib.md5(GOOD + b"x").digest(),          # the digest does not match
    framed(GOOD[:-2]),                                         # truncated protobuf
    framed(message(["k"], [field(3, b"no key index")])),      # required partition_key_index missing
    framed(message(["k"], [field(1, 0, 0)])),                   # required data missing
    framed(message(["k"], [record_message(1, b"x")])),          # index past the key table
    framed(message(["k"], [record_message(0, b"x", ehk_index=0)])),  # past the hash key table
    framed(message(["k"], [record_message(0, b"x", tags=field(4, field(2, b"v")))])),  # Tag.key missing
    framed(b"\x80" * 11),                                       # a varint too long
    framed(varint(14 << 3 | 3) + field(1, 5, 0)),               # a group that never ends
    framed(varint(3 << 3 | 7) + b"x"),                          # no such wire type
])
def test_what_is_not_a_valid_aggregate_is_kept_whole(data):
    assert aggregation.deaggregate(data) is None


# ---------------------------------------------------------------- the Firehose source, in process

def test_a_partly_delivered_aggregate_is_read_again_after_a_restart(tmp_path):
    svc = make_service(tmp_path)
    try:
        OPERATIONS["CreateStream"](svc, {"StreamName": "src", "ShardCount": 1})
        host = SimpleNamespace(kinesis=svc, store=svc.store)
        ds = SimpleNamespace(name="ds", source={"KinesisStreamARN": STREAM_ARN.format("src")})
        source = KinesisSource(host, ds, stopped=None)
        blob = aggregate([("a", b"1" * 10), ("b", b"2" * 10), ("a", b"3" * 10)])
        put = OPERATIONS["PutRecord"](svc, {"StreamName": "src", "Data": blob, "PartitionKey": "outer"})
        OPERATIONS["PutRecord"](svc, {"StreamName": "src", "Data": b"plain", "PartitionKey": "p"})
        source.fill(1 << 20)
        seq = put["SequenceNumber"]
        assert [(r.id, r.data, r.kinesis["partitionKey"], r.kinesis.get("subsequenceNumber"))
                for r in source.pending] == [
            (f"{seq}:0", b"1" * 10, "a", 0), (f"{seq}:1", b"2" * 10, "b", 1), (f"{seq}:2", b"3" * 10, "a", 2),
            (source.pending[3].kinesis["sequenceNumber"], b"plain", "p", None)]
        assert {r.kinesis["sequenceNumber"] for r in source.pending[:3]} == {seq}
        source.commit(source.take(20))                 # two of the aggregate's three user records
        again = KinesisSource(host, ds, stopped=None)  # a restart: what the checkpoint says
        again.fill(1 << 20)
        assert [r.data for r in again.pending] == [b"1" * 10, b"2" * 10, b"3" * 10, b"plain"]
        again.commit(again.take(1 << 20))
        after = KinesisSource(host, ds, stopped=None)
        after.fill(1 << 20)
        assert after.pending == []
    finally:
        svc.store.close()


# ---------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def agg_server(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def clients(agg_server):
    url = agg_server.url
    return SimpleNamespace(kinesis=client_for(url), firehose=client_for(url, "firehose"),
                           lambda_=client_for(url, "lambda"), s3=client_for(url, "s3", s3={"addressing_style": "path"}))


def delivered(s3, bucket: str) -> bytes:
    objects = sorted(s3.list_objects_v2(Bucket=bucket).get("Contents", []), key=lambda o: (o["LastModified"], o["Key"]))
    return b"".join(s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in objects)


def kinesis_to_s3(c, **destination) -> tuple[str, str]:
    """A stream, and a delivery stream reading it into a new bucket: (stream, bucket)."""
    stream, bucket = "agg-" + uuid.uuid4().hex[:8], "bkt-" + uuid.uuid4().hex[:8]
    c.kinesis.create_stream(StreamName=stream, ShardCount=1)
    c.s3.create_bucket(Bucket=bucket)
    c.firehose.create_delivery_stream(
        DeliveryStreamName="fh-" + uuid.uuid4().hex[:8], DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={"KinesisStreamARN": STREAM_ARN.format(stream), "RoleARN": ROLE},
        ExtendedS3DestinationConfiguration={"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}",
                                            "BufferingHints": {"IntervalInSeconds": 0}, **destination})
    return stream, bucket


def test_firehose_delivers_the_user_records_of_aggregates(clients):
    stream, bucket = kinesis_to_s3(clients)
    corrupt = bytearray(aggregate([("k", b"lost?\n")]))
    corrupt[-1] ^= 1                                   # a digest that does not match: kept whole
    clients.kinesis.put_records(StreamName=stream, Records=[
        {"Data": aggregate([("a", b"one\n"), ("b", b"two\n"), ("a", b"three\n")]), "PartitionKey": "agg1"},
        {"Data": b"plain\n", "PartitionKey": "p"},
        {"Data": bytes(corrupt), "PartitionKey": "bad"},
    ])
    clients.kinesis.put_record(StreamName=stream, Data=aggregate([("c", b"four\n")]), PartitionKey="agg2")
    expected = b"one\ntwo\nthree\nplain\n" + bytes(corrupt) + b"four\n"
    assert wait_for(lambda: (got := delivered(clients.s3, bucket)) and len(got) >= len(expected) and got) == expected


TRANSFORM = """
import base64, json

def handler(event, context):
    out = []
    for r in event["records"]:
        line = {"recordId": r["recordId"], "meta": r["kinesisRecordMetadata"],
                "data": base64.b64decode(r["data"]).decode()}
        out.append({"recordId": r["recordId"], "result": "Ok",
                    "data": base64.b64encode(json.dumps(line).encode() + b"\\n").decode()})
    return {"records": out}
"""


def make_function(c, code: str, **env) -> str:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", code)
    return c.lambda_.create_function(
        FunctionName="fn-" + uuid.uuid4().hex[:8], Runtime="python3.12", Role=ROLE, Handler="app.handler",
        Code={"ZipFile": buf.getvalue()}, Environment={"Variables": env})["FunctionArn"]


def test_a_lambda_transform_gets_user_records_with_subsequence_numbers(clients):
    arn = make_function(clients, TRANSFORM)
    stream, bucket = kinesis_to_s3(clients, ProcessingConfiguration={"Enabled": True, "Processors": [
        {"Type": "Lambda", "Parameters": [{"ParameterName": "LambdaArn", "ParameterValue": arn}]}]})
    out = clients.kinesis.put_record(StreamName=stream, Data=aggregate([("a", b"x"), ("b", b"y")]),
                                     PartitionKey="outer")
    plain = clients.kinesis.put_record(StreamName=stream, Data=b"z", PartitionKey="p")
    lines = wait_for(lambda: (got := delivered(clients.s3, bucket).splitlines()) and len(got) >= 3 and got)
    docs = [json.loads(line) for line in lines]
    assert [(d["data"], d["meta"]["partitionKey"], d["meta"]["sequenceNumber"], d["meta"]["subsequenceNumber"])
            for d in docs] == [("x", "a", out["SequenceNumber"], 0), ("y", "b", out["SequenceNumber"], 1),
                               ("z", "p", plain["SequenceNumber"], 0)]
    assert len({d["recordId"] for d in docs}) == 3
    assert {d["meta"]["shardId"] for d in docs} == {out["ShardId"]}


RECORDER = """
import json, os

def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        f.write(json.dumps(event) + "\\n")
    return {}
"""


def test_an_event_source_mapping_passes_aggregates_through_unchanged(clients, tmp_path):
    seen = tmp_path / "seen.jsonl"
    arn = make_function(clients, RECORDER, SEEN_FILE=str(seen))
    stream = "esm-" + uuid.uuid4().hex[:8]
    clients.kinesis.create_stream(StreamName=stream, ShardCount=1)
    blob = aggregate([("a", b"x"), ("b", b"y")])
    out = clients.kinesis.put_record(StreamName=stream, Data=blob, PartitionKey="outer")
    mapping = clients.lambda_.create_event_source_mapping(EventSourceArn=STREAM_ARN.format(stream), FunctionName=arn,
                                                          StartingPosition="TRIM_HORIZON")
    try:
        wait_for(lambda: os.path.exists(seen) and seen.read_text().endswith("\n"))
        [event] = [json.loads(line) for line in seen.read_text().splitlines()]
        [record] = event["Records"]
        assert base64.b64decode(record["kinesis"]["data"]) == blob
        assert record["kinesis"]["partitionKey"] == "outer"
        assert record["kinesis"]["sequenceNumber"] == out["SequenceNumber"]
        assert "subsequenceNumber" not in record["kinesis"]
    finally:
        clients.lambda_.delete_event_source_mapping(UUID=mapping["UUID"])
