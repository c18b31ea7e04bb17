"""The web console's delivery stream API against a real server: source and destination, the buffer
against its hints and the next flush, "flush now" (Firehose's own flush: the object appears, newest
first), failures counted by reason with their messages and where they went, and the overview rows."""
from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
import uuid
import zipfile

import pytest

from conftest import client_for, start_server, wait_for
from kinesim.config import Settings
from kinesim.server import InProcessServer, free_port
from kinesim.webconsole import deliveries

ROLE = "arn:aws:iam::000000000000:role/firehose"
API = "/_kinesim/console/api"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def firehose(server):
    return client_for(server.url, "firehose")


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


def call(url: str, path: str, body: bytes | None = None, content_type: str = "application/json") -> tuple[int, dict]:
    request = urllib.request.Request(url + API + path, data=body, method="GET" if body is None else "POST",
                                     headers={"Content-Type": content_type} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def detail(url: str, name: str) -> dict:
    status, doc = call(url, f"/delivery-streams/{name}")
    assert status == 200, doc
    return doc


def flush(url: str, name: str) -> tuple[int, dict]:
    return call(url, f"/delivery-streams/{name}/flush", b"{}")


def new_stream(firehose, s3, **dest) -> tuple[str, str]:
    name, bucket = "fh-" + uuid.uuid4().hex[:10], "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration={
        "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}", **dest})
    return name, bucket


SLOW = {"BufferingHints": {"SizeInMBs": 1, "IntervalInSeconds": 900}}   # nothing flushes by itself in a test


def test_buffer_against_the_hints_and_the_next_flush(server, firehose, s3):
    name, bucket = new_stream(firehose, s3, Prefix="in/", **SLOW)
    doc = detail(server.url, name)
    assert doc["state"] == "ACTIVE" and doc["source"] == {"type": "DirectPut"}
    assert doc["destination"]["bucket"] == bucket and doc["destination"]["bucket_exists"] is True
    assert doc["destination"]["prefix"] == "in/" and doc["destination"]["transform"] is None
    assert doc["buffer"]["records"] == 0 and doc["buffer"]["bytes"] == 0 and doc["buffer"]["next_flush"] is None
    assert (doc["buffer"]["size_mib"], doc["buffer"]["interval_s"], doc["buffer"]["size_bytes"]) == (1, 900, 1 << 20)

    before = time.time() * 1000
    firehose.put_record_batch(DeliveryStreamName=name, Records=[{"Data": b"a" * 10}, {"Data": b"b" * 20}])
    firehose.put_record(DeliveryStreamName=name, Record={"Data": b"c" * 30})
    after = time.time() * 1000
    buffer = detail(server.url, name)["buffer"]
    assert (buffer["records"], buffer["bytes"]) == (3, 60)
    assert before - 1 <= buffer["oldest"] <= after + 1
    assert buffer["next_flush"] == buffer["oldest"] + 900_000
    assert 800_000 < buffer["next_flush_in_ms"] <= 900_000
    doc = detail(server.url, name)
    assert sum(doc["series"]["records_in"]) == 3 and sum(doc["series"]["bytes_in"]) == 60
    assert doc["metrics"]["BufferedRecords"] == 3 and doc["objects"] == []


def test_flush_now_delivers_and_the_object_comes_first(server, firehose, s3):
    name, bucket = new_stream(firehose, s3, Prefix="out/", **SLOW)
    firehose.put_record(DeliveryStreamName=name, Record={"Data": b"first\n"})
    status, done = flush(server.url, name)
    assert status == 200 and done["done"] is True
    [first] = done["objects"]
    assert first["key"].startswith("out/") and first["records"] == 1 and first["kind"] == "data"
    assert s3.get_object(Bucket=bucket, Key=first["key"])["Body"].read() == b"first\n"

    firehose.put_record_batch(DeliveryStreamName=name, Records=[{"Data": b"second\n"}, {"Data": b"third\n"}])
    status, done = flush(server.url, name)
    [second] = done["objects"]
    doc = detail(server.url, name)
    assert [o["key"] for o in doc["objects"]] == [second["key"], first["key"]]   # newest first
    assert doc["objects"][0]["bucket"] == bucket and doc["objects"][0]["size"] == len(b"second\nthird\n")
    assert doc["buffer"]["records"] == 0 and doc["buffer"]["next_flush"] is None
    assert doc["metrics"]["DeliveryToS3.Records"] == 3 and doc["metrics"]["DeliveryToS3.ObjectCount"] == 2
    assert sum(doc["series"]["records_out"]) == 3
    # The same state the delivery metrics route gives.
    with urllib.request.urlopen(f"{server.url}/_kinesim/firehose/{name}/metrics", timeout=5) as r:
        assert json.loads(r.read())["DeliveryToS3.Records"] == 3
    # Nothing buffered: a flush is done at once and writes nothing.
    status, done = flush(server.url, name)
    assert status == 200 and done == {"done": True, "objects": []}


def test_flush_errors_are_awss_and_actions_take_json_only(server, firehose, s3):
    status, doc = flush(server.url, "no-such-stream")
    assert status == 400 and doc["code"] == "ResourceNotFoundException"
    assert doc["message"] == "Firehose no-such-stream under account 000000000000 not found."
    name, _ = new_stream(firehose, s3, **SLOW)
    firehose.put_record(DeliveryStreamName=name, Record={"Data": b"kept"})
    status, doc = call(server.url, f"/delivery-streams/{name}/flush", b"{}", content_type="text/plain")
    assert status == 415
    status, doc = call(server.url, f"/delivery-streams/{name}/flush", b"{}",
                       content_type="application/x-www-form-urlencoded")
    assert status == 415
    status, doc = call(server.url, f"/delivery-streams/{name}/flush", b"not json")
    assert status == 400
    assert detail(server.url, name)["buffer"]["records"] == 1    # none of those flushed anything
    status, doc = call(server.url, "/delivery-streams/no-such-stream")
    assert status == 404


BROKEN = "def handler(event, context):\n    raise RuntimeError('boom')\n"


def make_function(url: str, code: str) -> str:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", code)
    return client_for(url, "lambda").create_function(
        FunctionName="fn-" + uuid.uuid4().hex[:8], Runtime="python3.12", Role="arn:aws:iam::000000000000:role/lambda",
        Handler="app.handler", Code={"ZipFile": buf.getvalue()})["FunctionName"]


def test_a_transform_failure_is_counted_with_its_message(server, firehose, s3):
    function = make_function(server.url, BROKEN)
    arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function}"
    name, bucket = new_stream(firehose, s3, Prefix="ok/", ErrorOutputPrefix="failed/",
                              BufferingHints={"SizeInMBs": 1, "IntervalInSeconds": 0},
                              ProcessingConfiguration={"Enabled": True, "Processors": [{"Type": "Lambda", "Parameters": [
                                  {"ParameterName": "LambdaArn", "ParameterValue": arn},
                                  {"ParameterName": "NumberOfRetries", "ParameterValue": "0"}]}]})
    transform = detail(server.url, name)["destination"]["transform"]
    assert transform["function"] == function and transform["arn"] == arn and transform["exists"] is True
    firehose.put_record_batch(DeliveryStreamName=name, Records=[{"Data": b"x"}, {"Data": b"y"}])
    [failure] = wait_for(lambda: detail(server.url, name)["failures"], timeout=60)
    assert (failure["output_type"], failure["code"], failure["records"]) == ("processing-failed", "Lambda.FunctionError", 2)
    assert failure["message"] == "The Lambda function was successfully invoked but it returned an error result."
    assert failure["bucket"] == bucket and failure["key"].startswith("failed/processing-failed/")
    doc = detail(server.url, name)
    assert doc["objects"][0]["key"] == failure["key"] and doc["objects"][0]["kind"] == "error"
    assert doc["metrics"]["ErrorOutput.Records"] == 2 and sum(doc["series"]["records_failed"]) == 2
    lines = s3.get_object(Bucket=bucket, Key=failure["key"])["Body"].read().splitlines()
    assert [json.loads(line)["errorCode"] for line in lines] == ["Lambda.FunctionError"] * 2


def test_a_conversion_failure_is_counted_and_the_source_stream_named(server, firehose, s3):
    kinesis = client_for(server.url, "kinesis")
    stream = "src-" + uuid.uuid4().hex[:8]
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    name, bucket = "fh-" + uuid.uuid4().hex[:10], "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=bucket)
    firehose.create_delivery_stream(
        DeliveryStreamName=name, DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={"KinesisStreamARN": f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream}",
                                          "RoleARN": ROLE},
        ExtendedS3DestinationConfiguration={
            "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}", "Prefix": "tables/", "ErrorOutputPrefix": "bad/",
            "BufferingHints": {"SizeInMBs": 64, "IntervalInSeconds": 900},
            "DataFormatConversionConfiguration": {
                "Enabled": True, "SchemaConfiguration": {"RoleARN": ROLE, "DatabaseName": "db", "TableName": "clicks"},
                "InputFormatConfiguration": {"Deserializer": {"OpenXJsonSerDe": {}}},
                "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {}}}}})
    doc = detail(server.url, name)
    assert doc["source"]["type"] == "KinesisStreamAsSource" and doc["source"]["stream"] == stream
    assert doc["source"]["exists"] is True
    assert doc["destination"]["conversion"] == {"input": "OpenXJsonSerDe", "output": "ParquetSerDe", "schema": "db.clicks"}
    for data in (b'{"page": "/a"}', b"not json", b'{"page": "/b"}'):
        kinesis.put_record(StreamName=stream, PartitionKey="k", Data=data)
    wait_for(lambda: detail(server.url, name)["buffer"]["records"] == 3, timeout=30)  # read from the stream
    assert sum(detail(server.url, name)["series"]["records_in"]) == 3
    status, done = flush(server.url, name)
    assert status == 200 and done["done"] is True
    assert sorted(o["kind"] for o in done["objects"]) == ["data", "error"]
    [failure] = detail(server.url, name)["failures"]
    assert (failure["output_type"], failure["code"], failure["records"]) == (
        "format-conversion-failed", "DataFormatConversion.ParseError", 1)
    assert failure["message"].startswith("Encountered malformed JSON.")
    assert failure["key"].startswith("bad/format-conversion-failed/")


def test_overview_rows(tmp_path):
    server = InProcessServer(Settings(port=free_port(), data_dir=str(tmp_path / "data"), log_level="warning",
                                      create_stream_ms=0, delete_stream_ms=0)).start()
    try:
        firehose, s3 = client_for(server.url, "firehose"), client_for(server.url, "s3", s3={"addressing_style": "path"})
        name, _ = new_stream(firehose, s3, **SLOW)
        firehose.put_record(DeliveryStreamName=name, Record={"Data": b"12345"})
        [row] = deliveries.overview_rows(server.edge.own_scope)["delivery-streams"]
        assert row["name"] == name and row["state"] == "ACTIVE"
        assert row["href"] == f"/_kinesim/console/delivery-streams/{name}"
        assert row["figures"]["buffered"] == 1 and row["figures"]["delivered"] == 0 and row["figures"]["failed"] == 0
        assert "1 buffered" in row["health"]
    finally:
        server.stop()
