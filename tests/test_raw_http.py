"""Bad input over raw HTTP: each gets AWS's error and the server stays up."""
from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.parse

import cbor2
import pytest

AUTH = ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/kinesis/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abcd")


def call(url, body: bytes, target="Kinesis_20131202.ListStreams", ctype="application/x-amz-json-1.1",
         auth=AUTH, method="POST", extra=None):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Content-Type": ctype, "X-Amz-Date": "20260101T000000Z"}
    if target:
        headers["X-Amz-Target"] = target
    if auth:
        headers["Authorization"] = auth
    headers.update(extra or {})
    conn.request(method, "/", body=body, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def still_up(url):
    status, _, body = call(url, b"{}")
    assert status == 200 and "StreamNames" in json.loads(body)


def test_malformed_json(server):
    status, _, body = call(server.url, b'{"StreamName": ')
    assert status == 400 and json.loads(body)["__type"] == "SerializationException"
    still_up(server.url)


def test_unknown_target(server):
    status, _, body = call(server.url, b"{}", target="Kinesis_20131202.MakeCoffee")
    assert status == 400 and json.loads(body) == {"__type": "UnknownOperationException"}
    status, _, body = call(server.url, b"{}", target="DynamoDB_20120810.ListTables")
    assert status == 400 and json.loads(body)["__type"] == "UnknownOperationException"
    still_up(server.url)


def test_missing_auth(server):
    # AWS's JSON services (and kinesalite, recorded against them) answer 400 here, not 403.
    status, _, body = call(server.url, b"{}", auth=None)
    assert status == 400
    assert json.loads(body) == {"__type": "MissingAuthenticationTokenException", "message": "Missing Authentication Token"}


def test_malformed_auth(server):
    status, _, body = call(server.url, b"{}", auth="AWS4-HMAC-SHA256 Signature=abc")
    out = json.loads(body)
    assert status == 400 and out["__type"] == "IncompleteSignatureException"
    assert "Authorization header requires 'Credential' parameter." in out["message"]


def test_wrong_content_type(server):
    status, _, _ = call(server.url, b"{}", ctype="text/plain")
    assert status in (403, 404)
    still_up(server.url)


def test_cbor_round_trip(server, kinesis, make_stream):
    name = make_stream()
    body = cbor2.dumps({"StreamName": name, "Data": b"\x00\x01binary", "PartitionKey": "k"})
    status, headers, data = call(server.url, body, target="Kinesis_20131202.PutRecord",
                                 ctype="application/x-amz-cbor-1.1")
    assert status == 200
    assert headers["content-type"].startswith("application/x-amz-cbor-1.1")
    out = cbor2.loads(data)
    assert out["ShardId"] == "shardId-000000000000"
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    status, _, data = call(server.url, cbor2.dumps({"ShardIterator": it}), target="Kinesis_20131202.GetRecords",
                           ctype="application/x-amz-cbor-1.1")
    # As AWS's Java encoders write it: timestamps are tag 1 around integer epoch *milliseconds*.
    rec = cbor2.loads(data, semantic_decoders={1: lambda value, immutable=False: cbor2.CBORTag(1, value)})["Records"][0]
    assert rec["Data"] == b"\x00\x01binary" and rec["SequenceNumber"] == out["SequenceNumber"]
    stamp = rec["ApproximateArrivalTimestamp"]
    assert stamp.tag == 1 and isinstance(stamp.value, int) and abs(stamp.value / 1000 - time.time()) < 60


def test_cbor_garbage(server):
    status, _, data = call(server.url, b"\xff\xfe\xfd", ctype="application/x-amz-cbor-1.1")
    assert status == 400
    assert cbor2.loads(data)["__type"] == "SerializationException"


def test_oversized_body(server):
    # Announce a 15 MiB body but send none of it: the size is refused from the header alone,
    # before anything is read or allocated.
    u = urllib.parse.urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.putrequest("POST", "/")
    for k, v in {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "Kinesis_20131202.ListStreams",
                 "Authorization": AUTH, "Content-Length": str(15 * 1024 * 1024)}.items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413
    assert json.loads(resp.read())["__type"] == "SerializationException"
    conn.close()
    still_up(server.url)


def test_501_records(server, make_stream):
    name = make_stream()
    recs = [{"Data": base64.b64encode(b"x").decode(), "PartitionKey": "k"}] * 501
    status, _, body = call(server.url, json.dumps({"StreamName": name, "Records": recs}).encode(),
                           target="Kinesis_20131202.PutRecords")
    out = json.loads(body)
    assert status == 400 and out["__type"] == "ValidationException"
    assert "Member must have length less than or equal to 500" in out["message"]


def test_record_one_byte_too_big(server, make_stream):
    name = make_stream()
    data = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    status, _, body = call(server.url, json.dumps({"StreamName": name, "Data": data, "PartitionKey": "k"}).encode(),
                           target="Kinesis_20131202.PutRecord")
    out = json.loads(body)
    assert status == 400 and out["__type"] == "ValidationException"
    assert "at 'data' failed to satisfy constraint: Member must have length less than or equal to 1048576" in \
        out["message"]
    still_up(server.url)


def test_any_host_header(server):
    status, _, body = call(server.url, b"{}", extra={"Host": "000000000000.control-kinesis.us-east-1.amazonaws.com"})
    assert status == 200 and "StreamNames" in json.loads(body)


@pytest.mark.parametrize("body", [b"[]", b"null", b"123", b'"str"'])
def test_non_object_json(server, body):
    status, _, data = call(server.url, body)
    assert status == 400 and json.loads(data)["__type"] == "SerializationException"
