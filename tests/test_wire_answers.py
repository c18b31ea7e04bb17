"""Kinesis on the wire as AWS answers it, byte for byte: CBOR event streams, requests that are not
well-formed calls, the ids and bodies of answers, CORS details. The expected answers are AWS's as
kinesalite recorded them from production (its test/connection.js) and LocalStack's AWS-validated
tests (test_kinesis.py: CBOR blobs, integer millisecond timestamps, CBOR errors)."""
from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.parse

import cbor2
import pytest
from botocore.eventstream import EventStreamBuffer

from kinesim.protocol.codec import decode_cbor

AUTH = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/kinesis/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abcd")
CBOR = "application/x-amz-cbor-1.1"
JSON = "application/x-amz-json-1.1"
ACCESS_DENIED = (b"<AccessDeniedException>\n  <Message>Unable to determine service/operation name to be "
                 b"authorized</Message>\n</AccessDeniedException>\n")


def send(url, body: bytes = b"", target: str | None = "Kinesis_20131202.ListStreams", ctype: str | None = JSON,
         method="POST", auth: str | None = AUTH, extra=None, path="/"):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    headers = {"X-Amz-Date": "20260101T000000Z"}
    for name, value in (("X-Amz-Target", target), ("Content-Type", ctype), ("Authorization", auth)):
        if value is not None:
            headers[name] = value
    headers.update(extra or {})
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


# Item 3: requests that are not well-formed calls

@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_other_methods_signed_for_kinesis_get_xml_access_denied(server, method):
    for ctype in (None, JSON, CBOR):
        status, headers, body = send(server.url, target=None, ctype=ctype, method=method, path="/some/path")
        assert (status, body) == (403, ACCESS_DENIED)
        assert "content-type" not in headers


@pytest.mark.parametrize("ctype,target,code,fmt", [
    (None, None, "UnknownOperationException", "cbor"),
    (None, "Kinesis_20131202.ListStreams", "SerializationException", "cbor"),
    ("application/x-amz-json-1.0", "Kinesis_20131202.ListStreams", "SerializationException", "cbor"),
    ("application/x-amz-json-1.1asdf", None, "UnknownOperationException", "cbor"),
    ("application/json", "Kinesis_20131202.ListStreams", "SerializationException", "cbor"),
    (CBOR, "Kinesis_20131202.Whatever", "UnknownOperationException", "cbor"),
    (JSON, "Kinesis_20131202.ListStream", "UnknownOperationException", "json"),
    (JSON, "Kinesis_20131202.ListStreams", "SerializationException", "json"),
])
def test_empty_bodies_are_answered_in_cbor_unless_json_1_1(server, ctype, target, code, fmt):
    for auth in (AUTH, None):
        status, headers, body = send(server.url, b"", target=target, ctype=ctype, auth=auth)
        assert status == 400
        if fmt == "cbor":
            assert headers["content-type"] == CBOR and cbor2.loads(body) == {"__type": code}
        else:
            assert headers["content-type"] == JSON and json.loads(body) == {"__type": code}


def test_plain_json_gets_the_coral_envelope(server):
    status, headers, body = send(server.url, b"{}", ctype="application/json")
    assert status == 404 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"Output": {"__type": "com.amazon.coral.service#UnknownOperationException"},
                                "Version": "1.0"}
    status, _, body = send(server.url, b"{not json", ctype="application/json")
    assert status == 400
    assert json.loads(body)["Output"]["__type"] == "com.amazon.coral.service#SerializationException"


def test_bodies_with_other_content_types(server):
    assert send(server.url, b"{}", target=None, ctype=None)[::2] == (403, ACCESS_DENIED)
    status, _, body = send(server.url, b"{}", ctype="text/xml")
    assert (status, body) == (404, b"<UnknownOperationException/>\n")


# Item 4: ids and bodies

def test_every_answer_carries_both_ids(server):
    for args in ({}, {"target": "Kinesis_20131202.Nope", "body": b"{}"}, {"method": "GET", "target": None}):
        args.setdefault("body", b"{}")
        _, headers, _ = send(server.url, **args)
        assert len(headers["x-amzn-requestid"]) == 36
        assert len(base64.b64decode(headers["x-amz-id-2"])) == 72


def test_operations_without_output_answer_an_empty_body(server, stream_name):
    for fmt, ctype, encode in (("json", JSON, json.dumps), ("cbor", CBOR, cbor2.dumps)):
        name = f"{stream_name}-{fmt}"
        status, headers, body = send(server.url, _bytes(encode({"StreamName": name, "ShardCount": 1})),
                                     target="Kinesis_20131202.CreateStream", ctype=ctype)
        assert (status, body, headers["content-type"], headers["content-length"]) == (200, b"", ctype, "0")
        status, _, body = send(server.url, _bytes(encode({"StreamName": name, "Tags": {"a": "b"}})),
                               target="Kinesis_20131202.AddTagsToStream", ctype=ctype)
        assert (status, body) == (200, b"")
    # Operations with an output still answer one; Firehose's "empty" outputs are `{}` on AWS.
    assert json.loads(send(server.url, b"{}")[2])["StreamNames"]
    status, _, body = send(server.url, b'{"DeliveryStreamName": "nope-nope"}',
                           target="Firehose_20150804.DeleteDeliveryStream",
                           auth=AUTH.replace("kinesis", "firehose"))
    assert status == 400 and json.loads(body)["__type"] == "ResourceNotFoundException"


def _bytes(value) -> bytes:
    return value.encode() if isinstance(value, str) else value


# Item 1: CBOR event streams

def _frames(sock_file, until, deadline_s=60.0):
    """Parse event-stream frames from a chunked HTTP body until `until(frames)` holds."""
    buf, frames = EventStreamBuffer(), []
    deadline = time.monotonic() + deadline_s
    while not until(frames):
        assert time.monotonic() < deadline, frames
        size_line = sock_file.readline()
        size = int(size_line.strip() or b"0", 16)
        if size == 0:
            break
        chunk = sock_file.read(size)
        sock_file.readline()
        buf.add_data(chunk)
        frames.extend(buf)
    return frames


def _subscribe_raw(url, consumer, shard="shardId-000000000000", ctype=CBOR):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    payload = {"ConsumerARN": consumer, "ShardId": shard, "StartingPosition": {"Type": "TRIM_HORIZON"}}
    body = cbor2.dumps(payload) if ctype == CBOR else json.dumps(payload).encode()
    conn.request("POST", "/", body=body, headers={"X-Amz-Target": "Kinesis_20131202.SubscribeToShard",
                                                  "Content-Type": ctype, "Authorization": AUTH,
                                                  "X-Amz-Date": "20260101T000000Z"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/vnd.amazon.eventstream"
    return conn, resp


def _active_consumer(kinesis, stream):
    arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    consumer = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="cbor")["Consumer"]["ConsumerARN"]
    deadline = time.monotonic() + 60
    while kinesis.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"] != "ACTIVE":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return consumer


def test_cbor_subscription_sends_cbor_events(server, kinesis, make_stream):
    stream = make_stream()
    kinesis.put_record(StreamName=stream, Data=b"hi", PartitionKey="a")
    consumer = _active_consumer(kinesis, stream)
    conn, resp = _subscribe_raw(server.url, consumer)
    try:
            frames = _frames(resp.fp, lambda f: any(m.headers.get(":event-type") == "SubscribeToShardEvent"
                                                and decode_cbor(m.payload)["Records"] for m in f))
    finally:
        conn.close()
    first = frames[0]
    assert first.headers[":event-type"] == "initial-response" and cbor2.loads(first.payload) == {}
    event = next(m for m in frames if m.headers.get(":event-type") == "SubscribeToShardEvent")
    assert event.headers[":content-type"] == CBOR
    raw = event.payload
    assert b"\x42hi" in raw                      # Data: a CBOR byte string, not base64 text
    assert b"\xc1\x1b" in raw and b"\xc1\xfb" not in raw  # tag 1 + integer milliseconds, never a float
    record = decode_cbor(raw)["Records"][0]  # reads tag 1 as AWS's milliseconds
    assert record["Data"] == b"hi" and record["PartitionKey"] == "a"
    assert abs(record["ApproximateArrivalTimestamp"].timestamp() - time.time()) < 600


def test_cbor_subscription_ends_with_a_cbor_exception(server, kinesis, make_stream):
    stream = make_stream()
    consumer = _active_consumer(kinesis, stream)
    conn, resp = _subscribe_raw(server.url, consumer)
    try:
        _frames(resp.fp, lambda f: len(f) >= 1)
        kinesis.deregister_stream_consumer(ConsumerARN=consumer)
        frames = _frames(resp.fp, lambda f: any(m.headers.get(":message-type") == "exception" for m in f))
    finally:
        conn.close()
    error = next(m for m in frames if m.headers.get(":message-type") == "exception")
    assert error.headers[":exception-type"] == "ResourceNotFoundException"
    assert error.headers[":content-type"] == CBOR
    assert "not found" in cbor2.loads(error.payload)["message"]


def test_json_subscription_is_unchanged(server, kinesis, make_stream):
    stream = make_stream()
    kinesis.put_record(StreamName=stream, Data=b"hi", PartitionKey="a")
    consumer = _active_consumer(kinesis, stream)
    conn, resp = _subscribe_raw(server.url, consumer, ctype=JSON)
    try:
        frames = _frames(resp.fp, lambda f: any(m.headers.get(":event-type") == "SubscribeToShardEvent"
                                                and json.loads(m.payload)["Records"] for m in f))
    finally:
        conn.close()
    event = next(m for m in frames if m.headers.get(":event-type") == "SubscribeToShardEvent")
    record = json.loads(event.payload)["Records"][0]
    assert record["Data"] == base64.b64encode(b"hi").decode()
    assert isinstance(record["ApproximateArrivalTimestamp"], float)


# Item 2: CORS details

def test_any_options_with_an_allowed_origin_is_a_preflight(server):
    status, headers, body = send(server.url, method="OPTIONS", target=None, ctype=None, auth=None,
                                 extra={"Origin": "http://localhost:8000"})
    assert (status, body) == (200, b"")
    assert headers["access-control-allow-origin"] == "http://localhost:8000"
    assert headers["access-control-max-age"] == "172800"
    assert len(headers["x-amzn-requestid"]) == 36 and "x-amz-id-2" not in headers
    _, headers, _ = send(server.url, b"{}", extra={"Origin": "http://localhost:8000"})
    exposed = headers["access-control-expose-headers"].split(",")
    for name in ("x-amzn-RequestId", "x-amzn-ErrorType", "x-amz-request-id", "x-amz-id-2", "x-amzn-ErrorMessage",
                 "Date"):
        assert name in exposed


def test_boto3_still_works_with_empty_bodies(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, ShardCount=1)
    kinesis.add_tags_to_stream(StreamName=stream_name, Tags={"k": "v"})
    kinesis.increase_stream_retention_period(StreamName=stream_name, RetentionPeriodHours=48)
    assert kinesis.list_tags_for_stream(StreamName=stream_name)["Tags"] == [{"Key": "k", "Value": "v"}]
    summary = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    assert summary["RetentionPeriodHours"] == 48
