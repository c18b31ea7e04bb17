"""The S3 REST API through boto3 (path style), raw HTTP and the AWS CLI, against a real server."""
from __future__ import annotations

import base64
import hashlib
import http.client
import io
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
import zlib
from datetime import datetime, timedelta, timezone
from xml.etree import ElementTree as ET

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

from conftest import client_for, start_server

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


@pytest.fixture
def bucket(s3):
    name = "t-" + uuid.uuid4().hex[:16]
    s3.create_bucket(Bucket=name)
    return name


def error_of(excinfo) -> dict:
    return excinfo.value.response["Error"]


def status_of(excinfo) -> int:
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


def s3_root(server) -> str:
    return os.path.join(server.settings.data_dir, "s3")


def raw(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    u = urllib.parse.urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def xml_error(body: bytes) -> dict[str, str]:
    return {child.tag: child.text for child in ET.fromstring(body)}


# ---------------------------------------------------------------------------------------------
# buckets


def test_bucket_lifecycle(s3, server):
    name = "life-" + uuid.uuid4().hex[:12]
    resp = s3.create_bucket(Bucket=name)
    assert resp["Location"] == "/" + name
    assert "x-amz-request-id" in resp["ResponseMetadata"]["HTTPHeaders"]
    assert name in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    head = s3.head_bucket(Bucket=name)
    assert head["BucketRegion"] == "us-east-1"
    assert s3.get_bucket_location(Bucket=name)["LocationConstraint"] is None
    assert os.path.isdir(os.path.join(s3_root(server), name))
    s3.delete_bucket(Bucket=name)
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert not os.path.exists(os.path.join(s3_root(server), name))
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert status_of(e) == 404
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert error_of(e)["Code"] == "NoSuchBucket"
    assert error_of(e)["Message"] == "The specified bucket does not exist"
    assert error_of(e)["BucketName"] == name
    assert status_of(e) == 404


@pytest.mark.parametrize("name", ["ab", "Upper-Case", "under_score", "a..b", "192.168.1.1", "-leading", "trailing-",
                                  "xn--punycode", "x" * 64, "bucket-s3alias"])
def test_invalid_bucket_names(s3, name):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=name)
    assert error_of(e)["Code"] == "InvalidBucketName"
    assert error_of(e)["Message"] == "The specified bucket is not valid."
    assert status_of(e) == 400


def test_create_bucket_again_and_locations(s3, server):
    name = "again-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    s3.create_bucket(Bucket=name)  # us-east-1's legacy behaviour: 200 for your own bucket
    eu = "eu-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=eu, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    assert s3.get_bucket_location(Bucket=eu)["LocationConstraint"] == "eu-west-1"
    assert s3.head_bucket(Bucket=eu)["BucketRegion"] == "eu-west-1"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=eu, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    assert error_of(e)["Code"] == "BucketAlreadyOwnedByYou" and status_of(e) == 409
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="c-" + uuid.uuid4().hex[:12], CreateBucketConfiguration={"LocationConstraint": "us-east-1"})
    assert error_of(e)["Code"] == "InvalidLocationConstraint"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket="c-" + uuid.uuid4().hex[:12], CreateBucketConfiguration={"LocationConstraint": "mars-1"})
    assert error_of(e)["Code"] == "InvalidLocationConstraint"
    # A regional endpoint creates buckets in its own region only.
    west = _regional_client(server, "us-west-2")
    with pytest.raises(ClientError) as e:
        west.create_bucket(Bucket="c-" + uuid.uuid4().hex[:12])
    assert error_of(e)["Code"] == "IllegalLocationConstraintException"
    assert error_of(e)["Message"] == ("The unspecified location constraint is incompatible for the region specific "
                                      "endpoint this request was sent to.")
    ok = "w-" + uuid.uuid4().hex[:12]
    west.create_bucket(Bucket=ok, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    assert s3.get_bucket_location(Bucket=ok)["LocationConstraint"] == "us-west-2"


def _regional_client(server, region: str):
    return boto3.client("s3", endpoint_url=server.url, region_name=region, aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, s3={"addressing_style": "path"}))


def test_delete_bucket_not_empty(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert error_of(e)["Code"] == "BucketNotEmpty" and status_of(e) == 409
    assert error_of(e)["Message"] == "The bucket you tried to delete is not empty"
    s3.delete_object(Bucket=bucket, Key="k")
    s3.delete_bucket(Bucket=bucket)


def test_list_buckets_pages(s3):
    prefix = "pg-" + uuid.uuid4().hex[:8]
    names = [f"{prefix}-{i}" for i in range(3)]
    for name in names:
        s3.create_bucket(Bucket=name)
    first = s3.list_buckets(MaxBuckets=2, Prefix=prefix)
    assert [b["Name"] for b in first["Buckets"]] == names[:2]
    assert first["Prefix"] == prefix and first["ContinuationToken"]
    rest = s3.list_buckets(MaxBuckets=2, Prefix=prefix, ContinuationToken=first["ContinuationToken"])
    assert [b["Name"] for b in rest["Buckets"]] == names[2:] and "ContinuationToken" not in rest


# ---------------------------------------------------------------------------------------------
# objects


def test_put_get_head_object(s3, bucket, server):
    body = b"hello, world"
    resp = s3.put_object(Bucket=bucket, Key="dir/hello.txt", Body=body, ContentType="text/plain",
                         Metadata={"Owner": "me", "n": "1"}, CacheControl="max-age=60",
                         ContentDisposition='attachment; filename="h.txt"')
    assert resp["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="dir/hello.txt")
    assert got["Body"].read() == body
    assert got["ContentType"] == "text/plain" and got["ContentLength"] == len(body)
    assert got["Metadata"] == {"owner": "me", "n": "1"}
    assert got["CacheControl"] == "max-age=60" and got["ContentDisposition"] == 'attachment; filename="h.txt"'
    assert got["ETag"] == resp["ETag"] and got["AcceptRanges"] == "bytes"
    assert abs(got["LastModified"].timestamp() - time.time()) < 60
    head = s3.head_object(Bucket=bucket, Key="dir/hello.txt")
    assert head["ContentLength"] == len(body) and head["ETag"] == resp["ETag"] and head["Metadata"]["owner"] == "me"
    # A plain file where file:// readers look, and nothing else in the bucket's directory.
    path = os.path.join(s3_root(server), bucket, "dir", "hello.txt")
    with open(path, "rb") as f:
        assert f.read() == body
    assert sorted(os.listdir(os.path.join(s3_root(server), bucket))) == ["dir"]
    assert os.listdir(os.path.join(s3_root(server), bucket, "dir")) == ["hello.txt"]
    # response-* overrides
    over = s3.get_object(Bucket=bucket, Key="dir/hello.txt", ResponseContentType="application/json",
                         ResponseCacheControl="no-cache")
    assert over["ContentType"] == "application/json" and over["CacheControl"] == "no-cache"


def test_default_content_type_and_empty_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    got = s3.get_object(Bucket=bucket, Key="empty")
    assert got["Body"].read() == b"" and got["ContentLength"] == 0
    assert got["ContentType"] == "binary/octet-stream"
    assert got["ETag"] == '"d41d8cd98f00b204e9800998ecf8427e"'


def test_missing_key_and_bucket(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nope/x")
    assert error_of(e)["Code"] == "NoSuchKey" and error_of(e)["Key"] == "nope/x" and status_of(e) == 404
    assert error_of(e)["Message"] == "The specified key does not exist."
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="nope")
    assert status_of(e) == 404
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="no-such-" + uuid.uuid4().hex[:8], Key="k", Body=b"x")
    assert error_of(e)["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="no-such-" + uuid.uuid4().hex[:8], Key="k")
    assert error_of(e)["Code"] == "NoSuchBucket"


def test_overwrite_replaces(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"one", Metadata={"a": "1"})
    s3.put_object(Bucket=bucket, Key="k", Body=b"second")
    got = s3.get_object(Bucket=bucket, Key="k")
    assert got["Body"].read() == b"second" and got["Metadata"] == {}


def test_content_md5(s3, bucket):
    body = b"checked"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3.put_object(Bucket=bucket, Key="ok", Body=body, ContentMD5=good)
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="bad", Body=body, ContentMD5=wrong)
    assert error_of(e)["Code"] == "BadDigest" and status_of(e) == 400
    assert error_of(e)["Message"] == "The Content-MD5 you specified did not match what we received."
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="bad", Body=body, ContentMD5="not-an-md5")
    assert error_of(e)["Code"] == "InvalidDigest"
    assert error_of(e)["Message"] == "The Content-MD5 you specified was invalid."
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="bad")  # nothing stored by a failed check


def test_flexible_checksums(s3, bucket, server):
    body = b"flexible checksums"
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    resp = s3.put_object(Bucket=bucket, Key="crc", Body=body)  # botocore sends CRC32 by default
    assert resp["ChecksumCRC32"] == crc
    got = s3.get_object(Bucket=bucket, Key="crc", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == crc and got["Body"].read() == body  # botocore validates it while reading
    sha = base64.b64encode(hashlib.sha256(body).digest()).decode()
    s3.put_object(Bucket=bucket, Key="sha", Body=body, ChecksumSHA256=sha)
    assert s3.head_object(Bucket=bucket, Key="sha", ChecksumMode="ENABLED")["ChecksumSHA256"] == sha
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="badcrc", Body=body, ChecksumCRC32="AAAAAA==")
    assert error_of(e)["Code"] == "BadDigest"
    assert error_of(e)["Message"] == "The CRC32 you specified did not match the calculated checksum."
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="badcrc", Body=body, ChecksumCRC32="!!")
    assert error_of(e)["Code"] == "InvalidRequest"
    # CRC32C cannot be computed here (no CRT): kept as sent.
    status, _, _ = raw(server, "PUT", f"/{bucket}/c32c", body, {"x-amz-checksum-crc32c": "yZRlqg=="})
    assert status == 200
    assert s3.head_object(Bucket=bucket, Key="c32c", ChecksumMode="ENABLED")["ChecksumCRC32C"] == "yZRlqg=="


def test_aws_chunked_unsigned_trailer(s3, bucket, server):
    data = os.urandom(300_000)
    wrapped = AwsChunkedWrapper(io.BytesIO(data), checksum_cls=Crc32Checksum, checksum_name="x-amz-checksum-crc32",
                                chunk_size=64 * 1024).read()
    headers = {"Content-Encoding": "aws-chunked", "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
               "x-amz-trailer": "x-amz-checksum-crc32", "x-amz-decoded-content-length": str(len(data)),
               "Content-Type": "application/octet-stream"}
    # As botocore sends it: HTTP chunked on top of aws-chunked, no Content-Length.
    u = urllib.parse.urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("PUT", f"/{bucket}/chunked", body=iter([wrapped[i:i + 10_000] for i in range(0, len(wrapped), 10_000)]),
                 headers=headers, encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    assert resp.getheader("ETag") == f'"{hashlib.md5(data).hexdigest()}"'
    conn.close()
    got = s3.get_object(Bucket=bucket, Key="chunked", ChecksumMode="ENABLED")
    assert got["Body"].read() == data
    assert "ContentEncoding" not in got  # aws-chunked describes the request, it is not kept
    # With a Content-Length instead, and a wrong trailing checksum.
    bad = wrapped.replace(b"x-amz-checksum-crc32:", b"x-amz-checksum-crc32:AAAAAA==\r\nx-ignored:")
    status, _, body = raw(server, "PUT", f"/{bucket}/chunked-bad", bad, headers)
    assert status == 400 and xml_error(body)["Code"] == "BadDigest"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="chunked-bad")


def test_aws_chunked_signed_payload(s3, bucket, server):
    data = b"a" * 70_000 + b"b" * 10
    sig = "chunk-signature=" + "0" * 64
    body = (b"%x;%s\r\n" % (65536, sig.encode()) + data[:65536] + b"\r\n" +
            b"%x;%s\r\n" % (len(data) - 65536, sig.encode()) + data[65536:] + b"\r\n" +
            b"0;%s\r\n\r\n" % sig.encode())
    status, headers, out = raw(server, "PUT", f"/{bucket}/signed", body, {
        "Content-Encoding": "aws-chunked", "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "x-amz-decoded-content-length": str(len(data))})
    assert status == 200, out
    assert s3.get_object(Bucket=bucket, Key="signed")["Body"].read() == data
    # A body shorter than it said is refused, and not stored.
    status, _, out = raw(server, "PUT", f"/{bucket}/short", body[:-20], {
        "Content-Encoding": "aws-chunked", "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"})
    assert status == 400 and xml_error(out)["Code"] == "IncompleteBody"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="short")


def test_content_sha256_mismatch(server, bucket):
    status, _, out = raw(server, "PUT", f"/{bucket}/k", b"payload", {"x-amz-content-sha256": "0" * 64})
    assert status == 400 and xml_error(out)["Code"] == "XAmzContentSHA256Mismatch"


def test_ranges(s3, bucket):
    body = bytes(range(100))
    s3.put_object(Bucket=bucket, Key="r", Body=body)
    got = s3.get_object(Bucket=bucket, Key="r", Range="bytes=10-19")
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["ContentRange"] == "bytes 10-19/100" and got["Body"].read() == body[10:20]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=90-")["Body"].read() == body[90:]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=-5")["Body"].read() == body[-5:]
    assert s3.get_object(Bucket=bucket, Key="r", Range="bytes=95-1000")["ContentRange"] == "bytes 95-99/100"
    whole = s3.get_object(Bucket=bucket, Key="r", Range="bytes=5-2")  # malformed: ignored
    assert whole["ResponseMetadata"]["HTTPStatusCode"] == 200 and whole["Body"].read() == body
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range="bytes=100-200")
    assert error_of(e)["Code"] == "InvalidRange" and status_of(e) == 416
    assert error_of(e)["Message"] == "The requested range is not satisfiable"
    head = s3.head_object(Bucket=bucket, Key="r", Range="bytes=0-9")
    assert head["ContentLength"] == 10 and head["ContentRange"] == "bytes 0-9/100"


def test_conditional_reads(s3, bucket):
    etag = s3.put_object(Bucket=bucket, Key="c", Body=b"cond")["ETag"]
    future = datetime.now(timezone.utc) + timedelta(days=1)
    past = datetime.now(timezone.utc) - timedelta(days=1)
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"cond"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfMatch='"0123"')
    assert error_of(e)["Code"] == "PreconditionFailed" and status_of(e) == 412
    assert error_of(e)["Condition"] == "If-Match"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=future)
    assert status_of(e) == 304
    assert s3.get_object(Bucket=bucket, Key="c", IfModifiedSince=past)["Body"].read() == b"cond"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
    assert status_of(e) == 412
    # If-Match true wins over If-Unmodified-Since false (S3's documented rule).
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag, IfUnmodifiedSince=past)["Body"].read() == b"cond"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="c", IfNoneMatch=etag)
    assert status_of(e) == 304


def test_conditional_writes(s3, bucket):
    s3.put_object(Bucket=bucket, Key="w", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="w", Body=b"2", IfNoneMatch="*")
    assert error_of(e)["Code"] == "PreconditionFailed" and status_of(e) == 412
    etag = s3.head_object(Bucket=bucket, Key="w")["ETag"]
    s3.put_object(Bucket=bucket, Key="w", Body=b"3", IfMatch=etag)
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="w", Body=b"4", IfMatch=etag)
    assert status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="absent", Body=b"4", IfMatch=etag)
    assert error_of(e)["Code"] == "NoSuchKey"
    assert s3.get_object(Bucket=bucket, Key="w")["Body"].read() == b"3"


def test_delete_object_idempotent(s3, bucket, server):
    s3.put_object(Bucket=bucket, Key="a/b/c", Body=b"x")
    assert s3.delete_object(Bucket=bucket, Key="a/b/c")["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.delete_object(Bucket=bucket, Key="a/b/c")["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert os.listdir(os.path.join(s3_root(server), bucket)) == []  # emptied directories go too
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket="no-such-" + uuid.uuid4().hex[:8], Key="k")
    assert error_of(e)["Code"] == "NoSuchBucket"


def test_delete_objects(s3, bucket):
    for key in ("a", "b", "c"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    out = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}, {"Key": "b"}, {"Key": "missing"},
                                                               {"Key": "../evil"}]})
    assert sorted(d["Key"] for d in out["Deleted"]) == ["a", "b", "missing"]
    assert out["Errors"] == [{"Key": "../evil", "Code": "InvalidArgument", "Message": out["Errors"][0]["Message"]}]
    quiet = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "c"}], "Quiet": True})
    assert "Deleted" not in quiet and "Errors" not in quiet
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket)


# ---------------------------------------------------------------------------------------------
# listings

KEYS = ["a/1", "a/2", "a/b/3", "b", "c d+e", "caf\u00e9", "d/", "d/x"]


@pytest.fixture
def listed(s3, bucket):
    for key in KEYS:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    return bucket


def test_list_objects_v2(s3, listed):
    everything = s3.list_objects_v2(Bucket=listed)
    assert [o["Key"] for o in everything["Contents"]] == sorted(KEYS, key=lambda k: k.encode())
    assert everything["KeyCount"] == len(KEYS) and everything["IsTruncated"] is False
    first = everything["Contents"][0]
    assert first["Size"] == 3 and first["StorageClass"] == "STANDARD" and first["ETag"].startswith('"')
    top = s3.list_objects_v2(Bucket=listed, Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["b", "c d+e", "caf\u00e9"]
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["a/", "d/"]
    assert top["KeyCount"] == 5
    under = s3.list_objects_v2(Bucket=listed, Prefix="a/", Delimiter="/")
    assert [o["Key"] for o in under["Contents"]] == ["a/1", "a/2"]
    assert [p["Prefix"] for p in under["CommonPrefixes"]] == ["a/b/"]
    marker = s3.list_objects_v2(Bucket=listed, Prefix="d/", Delimiter="/")
    assert [o["Key"] for o in marker["Contents"]] == ["d/", "d/x"]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=listed, Prefix="a/b")["Contents"]] == ["a/b/3"]
    assert s3.list_objects_v2(Bucket=listed, StartAfter="c")["Contents"][0]["Key"] == "c d+e"
    assert "Contents" not in s3.list_objects_v2(Bucket=listed, Prefix="zzz")
    owner = s3.list_objects_v2(Bucket=listed, FetchOwner=True)["Contents"][0]["Owner"]
    assert len(owner["ID"]) == 64


def test_list_objects_v2_pages(s3, listed):
    seen, token, pages = [], None, 0
    while True:
        kwargs = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(Bucket=listed, MaxKeys=3, **kwargs)
        pages += 1
        assert page["MaxKeys"] == 3 and page["KeyCount"] <= 3
        seen += [o["Key"] for o in page.get("Contents", [])]
        if not page["IsTruncated"]:
            break
        token = page["NextContinuationToken"]
    assert seen == sorted(KEYS, key=lambda k: k.encode()) and pages == 3
    # Pages with a delimiter count common prefixes, and do not repeat one.
    paginator = s3.get_paginator("list_objects_v2")
    prefixes, keys = [], []
    for page in paginator.paginate(Bucket=listed, Delimiter="/", PaginationConfig={"PageSize": 1}):
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        keys += [o["Key"] for o in page.get("Contents", [])]
    assert prefixes == ["a/", "d/"] and keys == ["b", "c d+e", "caf\u00e9"]
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=listed, ContinuationToken="%%%")
    assert error_of(e)["Code"] == "InvalidArgument"


def test_list_objects_url_encoding_raw(server, listed):
    status, _, body = raw(server, "GET", f"/{listed}?list-type=2&encoding-type=url&prefix=c")
    assert status == 200
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    keys = [k.text for k in ET.fromstring(body).iter(ns + "Key")]
    assert keys == ["c%20d%2Be", "caf%C3%A9"]
    status, _, body = raw(server, "GET", f"/{listed}?list-type=2&max-keys=-1")
    assert status == 400 and xml_error(body)["Code"] == "InvalidArgument"
    status, _, body = raw(server, "GET", f"/{listed}?list-type=2&encoding-type=base64")
    assert status == 400 and xml_error(body)["Code"] == "InvalidArgument"


def test_list_objects_v1(s3, listed):
    page = s3.list_objects(Bucket=listed, MaxKeys=2)
    assert [o["Key"] for o in page["Contents"]] == ["a/1", "a/2"] and page["IsTruncated"] is True
    assert "NextMarker" not in page  # only with a delimiter
    assert len(page["Contents"][0]["Owner"]["ID"]) == 64
    nxt = s3.list_objects(Bucket=listed, MaxKeys=2, Marker="a/2")
    assert [o["Key"] for o in nxt["Contents"]] == ["a/b/3", "b"]
    delim = s3.list_objects(Bucket=listed, Delimiter="/", MaxKeys=1)
    assert [p["Prefix"] for p in delim["CommonPrefixes"]] == ["a/"] and delim["NextMarker"] == "a/"
    after = s3.list_objects(Bucket=listed, Delimiter="/", Marker="a/")
    assert [o["Key"] for o in after["Contents"]] == ["b", "c d+e", "caf\u00e9"]
    all_keys = [o["Key"] for p in s3.get_paginator("list_objects").paginate(Bucket=listed, PaginationConfig={"PageSize": 3})
                for o in p.get("Contents", [])]
    assert all_keys == sorted(KEYS, key=lambda k: k.encode())


def test_external_files_are_objects(s3, bucket, server):
    # What Spark (or anyone) writes into the bucket directory is listed and readable.
    directory = os.path.join(s3_root(server), bucket, "spark-out")
    os.makedirs(directory)
    with open(os.path.join(directory, "part-0000.csv"), "wb") as f:
        f.write(b"a,b\n1,2\n")
    listing = s3.list_objects_v2(Bucket=bucket)["Contents"]
    etag = '"' + hashlib.md5(b"a,b\n1,2\n").hexdigest() + '"'
    assert [(o["Key"], o["Size"], o["ETag"]) for o in listing] == [("spark-out/part-0000.csv", 8, etag)]
    assert s3.get_object(Bucket=bucket, Key="spark-out/part-0000.csv")["Body"].read() == b"a,b\n1,2\n"


# ---------------------------------------------------------------------------------------------
# copies


def test_copy_object(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"copy me", ContentType="text/plain", Metadata={"m": "1"})
    out = s3.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert out["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"copy me").hexdigest()}"'
    got = s3.get_object(Bucket=bucket, Key="dst")
    assert got["Body"].read() == b"copy me" and got["ContentType"] == "text/plain" and got["Metadata"] == {"m": "1"}
    s3.copy_object(Bucket=bucket, Key="dst2", CopySource=f"{bucket}/src", MetadataDirective="REPLACE",
                   Metadata={"n": "2"}, ContentType="application/x-test")
    got = s3.head_object(Bucket=bucket, Key="dst2")
    assert got["Metadata"] == {"n": "2"} and got["ContentType"] == "application/x-test"
    # In place: only with a metadata change.
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"})
    assert error_of(e)["Code"] == "InvalidRequest"
    s3.copy_object(Bucket=bucket, Key="src", CopySource={"Bucket": bucket, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"m": "changed"})
    assert s3.head_object(Bucket=bucket, Key="src")["Metadata"] == {"m": "changed"}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "missing"})
    assert error_of(e)["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "src"}, CopySourceIfMatch='"00"')
    assert error_of(e)["Code"] == "PreconditionFailed" and status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="x", CopySource={"Bucket": bucket, "Key": "src"}, MetadataDirective="MOVE")
    assert error_of(e)["Code"] == "InvalidArgument"


# ---------------------------------------------------------------------------------------------
# multipart uploads


def test_multipart_upload_api(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", ContentType="text/csv", Metadata={"k": "v"})
    uid = up["UploadId"]
    assert up["Bucket"] == bucket and up["Key"] == "mp"
    part1, part2 = os.urandom(5 * MiB), b"tail"
    e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=1, Body=part1)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=2, Body=part2)["ETag"]
    parts = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, e1, 5 * MiB), (2, e2, 4)]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket)["Uploads"]] == [uid]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}]})
    assert error_of(e)["Code"] == "InvalidPartOrder"
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": '"ffff"'}]})
    assert error_of(e)["Code"] == "InvalidPart"
    done = s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    expected = hashlib.md5(hashlib.md5(part1).digest() + hashlib.md5(part2).digest()).hexdigest() + "-2"
    assert done["ETag"] == f'"{expected}"' and done["Key"] == "mp" and done["Bucket"] == bucket
    got = s3.get_object(Bucket=bucket, Key="mp")
    assert got["Body"].read() == part1 + part2 and got["ContentType"] == "text/csv" and got["Metadata"] == {"k": "v"}
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=3, Body=b"late")
    assert error_of(e)["Code"] == "NoSuchUpload" and status_of(e) == 404


def test_multipart_errors(s3, bucket):
    uid = s3.create_multipart_upload(Bucket=bucket, Key="small")["UploadId"]
    e1 = s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=1, Body=b"too small")["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=2, Body=b"x")["ETag"]
    with pytest.raises(ClientError) as e:
        s3.complete_multipart_upload(Bucket=bucket, Key="small", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert error_of(e)["Code"] == "EntityTooSmall"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="small", UploadId=uid, PartNumber=10001, Body=b"x")
    assert error_of(e)["Code"] == "InvalidArgument"
    # A single small part is a valid upload (the last part may be any size).
    done = s3.complete_multipart_upload(Bucket=bucket, Key="small", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": e1}]})
    assert done["ETag"].endswith('-1"')
    uid = s3.create_multipart_upload(Bucket=bucket, Key="aborted")["UploadId"]
    s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=uid)
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="aborted", UploadId=uid)
    assert error_of(e)["Code"] == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="aborted", UploadId="../../etc")
    assert error_of(e)["Code"] == "NoSuchUpload"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="aborted")


def test_upload_file_20mb_round_trip(s3, bucket, tmp_path):
    src = tmp_path / "big.bin"
    data = os.urandom(20 * MiB)
    src.write_bytes(data)
    s3.upload_file(str(src), bucket, "big/file.bin")  # multipart above 8 MiB
    head = s3.head_object(Bucket=bucket, Key="big/file.bin")
    assert head["ContentLength"] == len(data) and head["ETag"].endswith('-3"')
    dst = tmp_path / "back.bin"
    s3.download_file(bucket, "big/file.bin", str(dst))  # ranged GETs in parallel
    assert hashlib.sha256(dst.read_bytes()).digest() == hashlib.sha256(data).digest()
    # Managed copy: UploadPartCopy for a multipart source.
    s3.copy({"Bucket": bucket, "Key": "big/file.bin"}, bucket, "big/copy.bin")
    copy = s3.get_object(Bucket=bucket, Key="big/copy.bin")["Body"].read()
    assert hashlib.sha256(copy).digest() == hashlib.sha256(data).digest()


def test_upload_part_copy_range(s3, bucket):
    src = os.urandom(6 * MiB)
    s3.put_object(Bucket=bucket, Key="source", Body=src)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="assembled")["UploadId"]
    p1 = s3.upload_part_copy(Bucket=bucket, Key="assembled", UploadId=uid, PartNumber=1,
                             CopySource={"Bucket": bucket, "Key": "source"}, CopySourceRange=f"bytes=0-{5 * MiB - 1}")
    p2 = s3.upload_part_copy(Bucket=bucket, Key="assembled", UploadId=uid, PartNumber=2,
                             CopySource={"Bucket": bucket, "Key": "source"}, CopySourceRange="bytes=0-9")
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="assembled", UploadId=uid, PartNumber=3,
                            CopySource={"Bucket": bucket, "Key": "source"}, CopySourceRange=f"bytes=0-{len(src)}")
    assert error_of(e)["Code"] == "InvalidArgument"
    s3.complete_multipart_upload(Bucket=bucket, Key="assembled", UploadId=uid, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": p2["CopyPartResult"]["ETag"]}]})
    assert s3.get_object(Bucket=bucket, Key="assembled")["Body"].read() == src[:5 * MiB] + src[:10]


# ---------------------------------------------------------------------------------------------
# addressing, safety, durability


def test_virtual_host_style(s3, bucket, server):
    port = urllib.parse.urlparse(server.url).port
    host = {"Host": f"{bucket}.localhost:{port}"}
    status, headers, _ = raw(server, "PUT", "/vh/key.txt", b"virtual", {**host, "Content-Type": "text/plain"})
    assert status == 200
    assert s3.get_object(Bucket=bucket, Key="vh/key.txt")["Body"].read() == b"virtual"
    status, _, body = raw(server, "GET", "/vh/key.txt", None, host)
    assert status == 200 and body == b"virtual"
    status, _, body = raw(server, "GET", "/?list-type=2", None, host)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    assert status == 200 and [k.text for k in ET.fromstring(body).iter(ns + "Key")] == ["vh/key.txt"]
    status, _, body = raw(server, "GET", "/k", None, {"Host": f"no-such-{uuid.uuid4().hex[:6]}.localhost:{port}"})
    assert status == 404 and xml_error(body)["Code"] == "NoSuchBucket"


@pytest.mark.parametrize("path", ["/{b}/../escape", "/{b}/a/../../escape", "/{b}//abs/escape", "/{b}/%2e%2e/escape",
                                  "/{b}/a/%2E%2E/%2e%2e/escape", "/{b}/a%00b", "/{b}/a%5C..%5Cescape",
                                  "/{b}/./escape", "/{b}/a//escape"])
def test_path_traversal_refused(server, bucket, path):
    before = _files_outside(server, bucket)
    status, _, body = raw(server, "PUT", path.format(b=bucket), b"evil")
    assert status == 400 and xml_error(body)["Code"] == "InvalidArgument"
    status, _, body = raw(server, "GET", path.format(b=bucket))
    assert status == 400 and xml_error(body)["Code"] == "InvalidArgument"
    assert _files_outside(server, bucket) == before
    assert os.listdir(os.path.join(s3_root(server), bucket)) == []


def test_bucket_name_traversal_refused(server):
    for path in ("/../kinesim.db", "/%2e%2e/kinesim.db", "/.meta/x", "/.uploads/"):
        status, _, body = raw(server, "GET", path)
        assert status == 404 and xml_error(body)["Code"] == "NoSuchBucket", path
    status, _, body = raw(server, "PUT", "/.tmp")
    assert status == 400 and xml_error(body)["Code"] == "InvalidBucketName"


def _files_outside(server, bucket) -> set[str]:
    root = s3_root(server)
    found = set()
    for dirpath, _, files in os.walk(server.settings.data_dir):
        if dirpath.startswith(os.path.join(root, bucket)):
            continue
        found.update(os.path.join(dirpath, f) for f in files if "escape" in f or f in ("abs", "a\x00b"))
    return found


def test_file_directory_conflicts(s3, bucket):
    s3.put_object(Bucket=bucket, Key="x", Body=b"file")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="x/y", Body=b"under a file")
    assert error_of(e)["Code"] == "ParentIsObject" and status_of(e) == 409
    s3.put_object(Bucket=bucket, Key="d/e", Body=b"nested")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="d", Body=b"over a directory")
    assert error_of(e)["Code"] == "ObjectExistsAsDirectory" and status_of(e) == 409
    # A "folder/" marker and keys under it live together.
    s3.put_object(Bucket=bucket, Key="folder/", Body=b"")
    s3.put_object(Bucket=bucket, Key="folder/inner", Body=b"in")
    s3.delete_object(Bucket=bucket, Key="folder/inner")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="folder")["Contents"]] == ["folder/"]
    assert s3.get_object(Bucket=bucket, Key="folder/")["ContentLength"] == 0


def test_unsupported_subresources(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_website(Bucket=bucket)
    assert error_of(e)["Code"] == "NotImplemented" and status_of(e) == 501
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="k")
    assert status_of(e) == 501
    with pytest.raises(ClientError) as e:
        s3.get_object_acl(Bucket=bucket, Key="k")
    assert status_of(e) == 501
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)


def test_reader_never_sees_partial_object(s3, bucket, server):
    old, new = b"o" * (16 * MiB), os.urandom(24 * MiB)
    digests = {hashlib.md5(old).hexdigest(), hashlib.md5(new).hexdigest()}
    http_reads: list[str] = []
    file_reads: list[str] = []
    stop = threading.Event()
    reader = client_for(server.url, "s3", s3={"addressing_style": "path"})
    path = os.path.join(s3_root(server), bucket, "atomic")

    def read_http():
        while not stop.is_set():
            try:
                body = reader.get_object(Bucket=bucket, Key="atomic")["Body"].read()
                http_reads.append(hashlib.md5(body).hexdigest())
            except ClientError as err:
                http_reads.append(err.response["Error"]["Code"])

    def read_file():  # what a file:// reader (Spark, pandas) sees
        while not stop.is_set():
            try:
                with open(path, "rb") as f:
                    file_reads.append(hashlib.md5(f.read()).hexdigest())
            except FileNotFoundError:
                file_reads.append("missing")

    threads = [threading.Thread(target=read_http), threading.Thread(target=read_file)]
    for t in threads:
        t.start()
    try:
        s3.put_object(Bucket=bucket, Key="atomic", Body=old)
        for _ in range(3):
            s3.put_object(Bucket=bucket, Key="atomic", Body=new)
            s3.put_object(Bucket=bucket, Key="atomic", Body=old)
        deadline = time.monotonic() + 60  # until each reader has read a whole object at least once
        while not (set(http_reads) & digests and set(file_reads) & digests) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert http_reads and set(http_reads) <= digests | {"NoSuchKey"} and set(http_reads) & digests
    assert file_reads and set(file_reads) <= digests | {"missing"} and set(file_reads) & digests


def test_objects_survive_restart(tmp_path_factory):
    srv = start_server(tmp_path_factory)
    try:
        client = client_for(srv.url, "s3", s3={"addressing_style": "path"})
        client.create_bucket(Bucket="durable")
        client.put_object(Bucket="durable", Key="k/v", Body=b"kept", Metadata={"a": "b"}, ContentType="text/x")
        uid = client.create_multipart_upload(Bucket="durable", Key="pending")["UploadId"]
        client.upload_part(Bucket="durable", Key="pending", UploadId=uid, PartNumber=1, Body=b"part")
    finally:
        srv.kill()  # no shutdown code: what was acknowledged is on disk
    srv.start()
    try:
        client = client_for(srv.url, "s3", s3={"addressing_style": "path"})
        got = client.get_object(Bucket="durable", Key="k/v")
        assert got["Body"].read() == b"kept" and got["Metadata"] == {"a": "b"} and got["ContentType"] == "text/x"
        assert [p["PartNumber"] for p in client.list_parts(Bucket="durable", Key="pending", UploadId=uid)["Parts"]] == [1]
    finally:
        srv.stop()


def test_aws_cli(server, tmp_path):
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    aws = [os.path.join(os.path.dirname(sys.executable), "aws"), "--endpoint-url", server.url]

    def run(*args: str) -> str:
        done = subprocess.run(aws + list(args), env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    name = "cli-" + uuid.uuid4().hex[:12]
    (tmp_path / "small.txt").write_text("hello cli\n")
    (tmp_path / "large.bin").write_bytes(os.urandom(9 * MiB))
    run("s3", "mb", f"s3://{name}")
    assert name in run("s3", "ls")
    run("s3", "cp", str(tmp_path / "small.txt"), f"s3://{name}/docs/small.txt", "--only-show-errors")
    run("s3", "cp", str(tmp_path / "large.bin"), f"s3://{name}/large.bin", "--only-show-errors")
    listing = run("s3", "ls", f"s3://{name}/")
    assert "PRE docs/" in listing and "large.bin" in listing
    assert "docs/small.txt" in run("s3", "ls", "--recursive", f"s3://{name}/")
    run("s3", "cp", f"s3://{name}/large.bin", str(tmp_path / "back.bin"), "--only-show-errors")
    assert (tmp_path / "back.bin").read_bytes() == (tmp_path / "large.bin").read_bytes()
    run("s3", "sync", f"s3://{name}/docs/", str(tmp_path / "synced"), "--only-show-errors")
    assert (tmp_path / "synced" / "small.txt").read_text() == "hello cli\n"
    run("s3", "rm", f"s3://{name}/large.bin", "--only-show-errors")
    assert "large.bin" not in run("s3", "ls", "--recursive", f"s3://{name}/")
    run("s3", "rb", f"s3://{name}", "--force")
    assert name not in run("s3", "ls")


def test_errors_before_the_body_keep_connections_usable(s3, bucket, server):
    # botocore sends `Expect: 100-continue` for file bodies; answering before reading the body must
    # not leave its bytes in front of the next request on the connection.
    for i in range(5):
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="../bad", Body=io.BytesIO(b"x" * (i + 1)))
        assert error_of(e)["Code"] == "InvalidArgument"
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="bad/../x", Body=b"y" * 10)
        assert error_of(e)["Code"] == "InvalidArgument"
        s3.put_object(Bucket=bucket, Key=f"good{i}", Body=io.BytesIO(b"z"))
    assert len(s3.list_objects_v2(Bucket=bucket)["Contents"]) == 5
    # A client that waits for "100 Continue" gets the error and a closed connection instead.
    status, headers, body = raw(server, "PUT", "/no-such-bucket-xyz/k", None,
                                {"Content-Length": "5000000", "Expect": "100-continue"})
    assert status == 404 and headers.get("Connection", headers.get("connection")) == "close"


def test_list_object_versions_lists_each_object_as_its_null_version(s3, bucket):
    # What the CDK's autoDeleteObjects does to empty a bucket: list every version, delete them all.
    for key in ("a/1", "a/2", "b"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x" * len(key))
    first = s3.list_object_versions(Bucket=bucket, MaxKeys=2)
    assert [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in first["Versions"]] == [
        ("a/1", "null", True, 3), ("a/2", "null", True, 3)]
    assert first["IsTruncated"] and (first["NextKeyMarker"], first["NextVersionIdMarker"]) == ("a/2", "null")
    rest = s3.list_object_versions(Bucket=bucket, KeyMarker="a/2", VersionIdMarker="null")
    assert [v["Key"] for v in rest["Versions"]] == ["b"] and not rest["IsTruncated"]
    grouped = s3.list_object_versions(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in grouped["CommonPrefixes"]] == ["a/"] and [v["Key"] for v in grouped["Versions"]] == ["b"]
    deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": v["Key"], "VersionId": v["VersionId"]} for v in first["Versions"] + rest["Versions"]]})
    assert sorted((d["Key"], d["VersionId"]) for d in deleted["Deleted"]) == [("a/1", "null"), ("a/2", "null"),
                                                                            ("b", "null")]
    assert "Versions" not in s3.list_object_versions(Bucket=bucket)
    with pytest.raises(ClientError) as caught:
        s3.list_object_versions(Bucket=bucket, VersionIdMarker="null")
    assert error_of(caught)["Code"] == "InvalidArgument"
