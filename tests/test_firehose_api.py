"""Firehose against a real server through boto3: the control plane and its errors, PutRecord(Batch),
buffering by size and by interval, object keys, S3 backup, durability across kill -9, the Kinesis
stream as source (with resharding), an external S3 endpoint, and the delivery metrics route.

The servers run with --firehose-interval-scale 0.01: IntervalInSeconds 60 flushes after 0.6 s.
"""
from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.server import free_port

SCALE = 0.01
ROLE = "arn:aws:iam::000000000000:role/firehose"
# The object name after the prefix: NAME-VERSION-YYYY-MM-DD-HH-MM-SS-UUID
SUFFIX = (r"(?P<name>.+)-(?P<version>\d+)-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-"
          r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SUFFIX_RE = re.compile(f"^{SUFFIX}$")
KEY_RE = re.compile(rf"^\d{{4}}/\d{{2}}/\d{{2}}/\d{{2}}/{SUFFIX}$")   # under the default YYYY/MM/dd/HH/ prefix


@pytest.fixture(scope="module")
def fh_server(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def firehose(fh_server):
    return client_for(fh_server.url, "firehose")


@pytest.fixture(scope="module")
def s3(fh_server):
    return s3_client(fh_server.url)


@pytest.fixture(scope="module")
def kin(fh_server):
    return client_for(fh_server.url, "kinesis")


def s3_client(url: str):
    return client_for(url, "s3", s3={"addressing_style": "path"})


def name() -> str:
    return "fh-" + uuid.uuid4().hex[:10]


def bucket(s3) -> str:
    b = "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=b)
    return b


def dest(b: str, **extra) -> dict:
    return {"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{b}", **extra}


def keys_in(s3, b: str, prefix: str = "") -> list[str]:
    out, token = [], None
    while True:
        kw = {"Bucket": b, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
        resp = s3.list_objects_v2(**kw)
        out += [o["Key"] for o in resp.get("Contents", [])]
        if not resp.get("IsTruncated"):
            return sorted(out)
        token = resp["NextContinuationToken"]


def body(s3, b: str, key: str) -> bytes:
    return s3.get_object(Bucket=b, Key=key)["Body"].read()


def wait_for(predicate, timeout: float = 15.0, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(every)


def delivered(s3, b: str, prefix: str = "") -> bytes:
    return b"".join(body(s3, b, k) for k in keys_in(s3, b, prefix))


def error_code(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def metrics(url: str, stream: str) -> dict:
    with urllib.request.urlopen(f"{url}/_kinesim/firehose/{stream}/metrics", timeout=5) as r:
        return json.loads(r.read())


# ---------------------------------------------------------------- control plane

def test_create_and_describe_with_aws_defaults(firehose, s3):
    n, b = name(), bucket(s3)
    arn = firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(b))[
        "DeliveryStreamARN"]
    assert arn == f"arn:aws:firehose:us-east-1:000000000000:deliverystream/{n}"
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert d["DeliveryStreamName"] == n and d["DeliveryStreamARN"] == arn
    assert d["DeliveryStreamStatus"] == "ACTIVE"
    assert d["DeliveryStreamType"] == "DirectPut"
    assert d["VersionId"] == "1"
    assert d["DeliveryStreamEncryptionConfiguration"] == {"Status": "DISABLED"}
    assert abs(d["CreateTimestamp"].timestamp() - time.time()) < 60
    assert d["HasMoreDestinations"] is False
    [destination] = d["Destinations"]
    assert destination["DestinationId"] == "destinationId-000000000001"
    ext = destination["ExtendedS3DestinationDescription"]
    assert ext == {"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{b}",
                   "BufferingHints": {"SizeInMBs": 5, "IntervalInSeconds": 300},
                   "CompressionFormat": "UNCOMPRESSED",
                   "EncryptionConfiguration": {"NoEncryptionConfig": "NoEncryption"},
                   "CloudWatchLoggingOptions": {"Enabled": False}, "S3BackupMode": "Disabled"}
    assert destination["S3DestinationDescription"] == {k: v for k, v in ext.items() if k != "S3BackupMode"}


def test_older_s3_destination_configuration(firehose, s3):
    n, b = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, S3DestinationConfiguration=dest(
        b, Prefix="old/", CompressionFormat="GZIP", BufferingHints={"IntervalInSeconds": 60}))
    [destination] = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"][
        "Destinations"]
    s3d = destination["S3DestinationDescription"]
    assert s3d["Prefix"] == "old/" and s3d["CompressionFormat"] == "GZIP"
    assert s3d["BufferingHints"] == {"SizeInMBs": 5, "IntervalInSeconds": 60}
    assert destination["ExtendedS3DestinationDescription"]["S3BackupMode"] == "Disabled"


def test_create_errors(firehose, kin, s3):
    b = bucket(s3)
    n = name()
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(b))
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(b))
    assert error_code(e) == ("ResourceInUseException", f"Firehose {n} under accountId 000000000000 already exists")
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name())
    assert error_code(e) == ("InvalidArgumentException", "Exactly one destination configuration is supported for a Firehose")
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(b),
                                        S3DestinationConfiguration=dest(b))
    assert error_code(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName="bad name!", ExtendedS3DestinationConfiguration=dest(b))
    assert error_code(e) == ("ValidationException",
                             "1 validation error detected: Value 'bad name!' at 'deliveryStreamName' failed to satisfy "
                             "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(
            b, BufferingHints={"SizeInMBs": 129}))
    assert error_code(e)[0] == "ValidationException"
    # A Kinesis source configuration only goes with KinesisStreamAsSource, and that needs one.
    kin.create_stream(StreamName="src-" + uuid.uuid4().hex[:8], ShardCount=1)
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(
            DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(b),
            KinesisStreamSourceConfiguration={"KinesisStreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/x",
                                              "RoleARN": ROLE})
    assert error_code(e) == ("InvalidArgumentException",
                             "KinesisSourceStreamConfig is only applicable for KinesisStreamAsSource stream type")
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), DeliveryStreamType="KinesisStreamAsSource",
                                        ExtendedS3DestinationConfiguration=dest(b))
    assert error_code(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(
            DeliveryStreamName=name(), DeliveryStreamType="KinesisStreamAsSource",
            ExtendedS3DestinationConfiguration=dest(b),
            KinesisStreamSourceConfiguration={"KinesisStreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/nope",
                                              "RoleARN": ROLE})
    assert error_code(e) == ("InvalidArgumentException", "Stream nope under account 000000000000 not found.")
    # Prefix rules (keys.validate_prefixes) and the 64 MiB floor of dynamic partitioning.
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(
            b, Prefix="p/!{timestamp:yyyy}/"))
    assert error_code(e)[0] == "InvalidArgumentException"
    assert "ErrorOutputPrefix" in error_code(e)[1]
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(
            b, Prefix="p/!{partitionKeyFromQuery:id}/", ErrorOutputPrefix="e/!{firehose:error-output-type}/",
            BufferingHints={"SizeInMBs": 5}, DynamicPartitioningConfiguration={"Enabled": True}))
    assert error_code(e) == ("InvalidArgumentException",
                             "BufferingHints.SizeInMBs must be at least 64 when Dynamic Partitioning is enabled.")
    # Nothing was created by the failed calls.
    assert n in firehose.list_delivery_streams(Limit=10000)["DeliveryStreamNames"]


def test_list_delivery_streams_pages_and_filters(firehose, kin, s3):
    b = bucket(s3)
    tag = uuid.uuid4().hex[:6]
    names = [f"list-{tag}-{i}" for i in range(5)]
    for n in names:
        firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(b))
    all_names = firehose.list_delivery_streams(Limit=10000)["DeliveryStreamNames"]
    assert all_names == sorted(all_names) and set(names) <= set(all_names)
    page = firehose.list_delivery_streams(Limit=2, ExclusiveStartDeliveryStreamName=f"list-{tag}-0")
    assert page["DeliveryStreamNames"] == names[1:3] and page["HasMoreDeliveryStreams"] is True
    assert firehose.list_delivery_streams()["HasMoreDeliveryStreams"] == (len(all_names) > 10)
    stream = "src-" + uuid.uuid4().hex[:8]
    kin.create_stream(StreamName=stream, ShardCount=1)
    ks = name()
    firehose.create_delivery_stream(
        DeliveryStreamName=ks, DeliveryStreamType="KinesisStreamAsSource", ExtendedS3DestinationConfiguration=dest(b),
        KinesisStreamSourceConfiguration={"KinesisStreamARN": f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream}",
                                          "RoleARN": ROLE})
    kinds = firehose.list_delivery_streams(Limit=10000, DeliveryStreamType="KinesisStreamAsSource")
    assert ks in kinds["DeliveryStreamNames"] and not set(names) & set(kinds["DeliveryStreamNames"])
    direct = firehose.list_delivery_streams(Limit=10000, DeliveryStreamType="DirectPut")["DeliveryStreamNames"]
    assert set(names) <= set(direct) and ks not in direct


def test_delete_and_not_found(firehose, s3):
    n = name()
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(bucket(s3)))
    firehose.delete_delivery_stream(DeliveryStreamName=n)
    for call in (lambda: firehose.describe_delivery_stream(DeliveryStreamName=n),
                 lambda: firehose.delete_delivery_stream(DeliveryStreamName=n),
                 lambda: firehose.put_record(DeliveryStreamName=n, Record={"Data": b"x"}),
                 lambda: firehose.list_tags_for_delivery_stream(DeliveryStreamName=n)):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == ("ResourceNotFoundException", f"Firehose {n} under account 000000000000 not found.")
    assert n not in firehose.list_delivery_streams(Limit=10000)["DeliveryStreamNames"]


def test_update_destination(firehose, s3):
    n, b, b2 = name(), bucket(s3), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="v1/", BufferingHints={"SizeInMBs": 2, "IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b"one\n"})
    wait_for(lambda: keys_in(s3, b, "v1/"))
    with pytest.raises(ClientError) as e:
        firehose.update_destination(DeliveryStreamName=n, CurrentDeliveryStreamVersionId="7",
                                    DestinationId="destinationId-000000000001",
                                    ExtendedS3DestinationUpdate={"Prefix": "x/"})
    assert error_code(e) == ("ConcurrentModificationException",
                             f"Cannot update firehose: {n} since the current version id: 1 and specified version id: "
                             "7 do not match")
    with pytest.raises(ClientError) as e:
        firehose.update_destination(DeliveryStreamName=n, CurrentDeliveryStreamVersionId="1",
                                    DestinationId="destinationId-000000000002",
                                    ExtendedS3DestinationUpdate={"Prefix": "x/"})
    assert error_code(e) == ("InvalidArgumentException", "Destination Id destinationId-000000000002 not found")
    firehose.update_destination(DeliveryStreamName=n, CurrentDeliveryStreamVersionId="1",
                                DestinationId="destinationId-000000000001",
                                ExtendedS3DestinationUpdate={"Prefix": "v2/", "BucketARN": f"arn:aws:s3:::{b2}",
                                                             "BufferingHints": {"SizeInMBs": 3}})
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert d["VersionId"] == "2" and "LastUpdateTimestamp" in d
    ext = d["Destinations"][0]["ExtendedS3DestinationDescription"]
    assert ext["Prefix"] == "v2/" and ext["BucketARN"] == f"arn:aws:s3:::{b2}"
    assert ext["BufferingHints"] == {"SizeInMBs": 3, "IntervalInSeconds": 0}  # the interval was kept
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b"two\n"})
    [key] = wait_for(lambda: keys_in(s3, b2, "v2/"))
    assert KEY_RE.match(key[len("v2/"):]).group("version") == "2"
    assert body(s3, b2, key) == b"two\n"


def test_tags(firehose, s3):
    n = name()
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(bucket(s3)),
                                    Tags=[{"Key": "team", "Value": "data"}])
    firehose.tag_delivery_stream(DeliveryStreamName=n, Tags=[{"Key": "env", "Value": "dev"}, {"Key": "team", "Value": "x"}])
    out = firehose.list_tags_for_delivery_stream(DeliveryStreamName=n)
    assert out == {"Tags": [{"Key": "env", "Value": "dev"}, {"Key": "team", "Value": "x"}], "HasMoreTags": False,
                   "ResponseMetadata": out["ResponseMetadata"]}
    page = firehose.list_tags_for_delivery_stream(DeliveryStreamName=n, Limit=1)
    assert page["Tags"] == [{"Key": "env", "Value": "dev"}] and page["HasMoreTags"] is True
    page = firehose.list_tags_for_delivery_stream(DeliveryStreamName=n, ExclusiveStartTagKey="env")
    assert page["Tags"] == [{"Key": "team", "Value": "x"}]
    firehose.untag_delivery_stream(DeliveryStreamName=n, TagKeys=["env", "absent"])
    assert firehose.list_tags_for_delivery_stream(DeliveryStreamName=n)["Tags"] == [{"Key": "team", "Value": "x"}]
    with pytest.raises(ClientError) as e:
        firehose.tag_delivery_stream(DeliveryStreamName=n, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(50)])
    assert error_code(e)[0] == "LimitExceededException"
    with pytest.raises(ClientError) as e:
        firehose.tag_delivery_stream(DeliveryStreamName=n, Tags=[{"Key": "aws:x", "Value": "v"}])
    assert error_code(e)[0] == "ValidationException"


def test_encryption(firehose, kin, s3):
    n = name()
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(bucket(s3)))
    assert firehose.put_record(DeliveryStreamName=n, Record={"Data": b"a"})["Encrypted"] is False
    firehose.start_delivery_stream_encryption(DeliveryStreamName=n)
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert d["DeliveryStreamEncryptionConfiguration"] == {"KeyType": "AWS_OWNED_CMK", "Status": "ENABLED"}
    assert firehose.put_record(DeliveryStreamName=n, Record={"Data": b"a"})["Encrypted"] is True
    assert firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"a"}])["Encrypted"] is True
    key = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    firehose.start_delivery_stream_encryption(
        DeliveryStreamName=n, DeliveryStreamEncryptionConfigurationInput={"KeyType": "CUSTOMER_MANAGED_CMK", "KeyARN": key})
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert d["DeliveryStreamEncryptionConfiguration"] == {"KeyType": "CUSTOMER_MANAGED_CMK", "KeyARN": key,
                                                          "Status": "ENABLED"}
    with pytest.raises(ClientError) as e:
        firehose.start_delivery_stream_encryption(
            DeliveryStreamName=n, DeliveryStreamEncryptionConfigurationInput={"KeyType": "CUSTOMER_MANAGED_CMK"})
    assert error_code(e)[0] == "InvalidArgumentException"
    firehose.stop_delivery_stream_encryption(DeliveryStreamName=n)
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert d["DeliveryStreamEncryptionConfiguration"] == {"Status": "DISABLED"}
    with pytest.raises(ClientError) as e:
        firehose.stop_delivery_stream_encryption(DeliveryStreamName=name())
    assert error_code(e)[0] == "ResourceNotFoundException"


# ---------------------------------------------------------------- records

def test_put_record_limits_and_errors(firehose, kin, s3):
    n = name()
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(bucket(s3)))
    with pytest.raises(ClientError) as e:
        firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"x" * 1_000_000}] * 5)
    assert error_code(e) == ("InvalidArgumentException", "Records size exceeds 4 MB limit")
    with pytest.raises(ClientError) as e:
        firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"x"}] * 501)
    assert error_code(e)[0] == "ValidationException" and "less than or equal to 500" in error_code(e)[1]
    with pytest.raises(ClientError) as e:
        firehose.put_record(DeliveryStreamName=n, Record={"Data": b"x" * 1_024_001})
    assert error_code(e) == ("ValidationException",
                             "1 validation error detected: Value 'java.nio.HeapByteBuffer[pos=0 lim=1024001 cap=1024001]' "
                             "at 'record.data' failed to satisfy constraint: Member must have length less than or "
                             "equal to 1024000")
    # The largest record and the largest batch are accepted.
    assert firehose.put_record(DeliveryStreamName=n, Record={"Data": b"x" * 1_024_000})["RecordId"]
    out = firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"y" * ((4 << 20) // 500)}] * 500)
    assert out["FailedPutCount"] == 0 and len({r["RecordId"] for r in out["RequestResponses"]}) == 500
    # A delivery stream fed by a Kinesis stream takes no direct puts.
    stream = "src-" + uuid.uuid4().hex[:8]
    kin.create_stream(StreamName=stream, ShardCount=1)
    ks = name()
    firehose.create_delivery_stream(
        DeliveryStreamName=ks, DeliveryStreamType="KinesisStreamAsSource", ExtendedS3DestinationConfiguration=dest("b"),
        KinesisStreamSourceConfiguration={"KinesisStreamARN": f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream}",
                                          "RoleARN": ROLE})
    for call in (lambda: firehose.put_record(DeliveryStreamName=ks, Record={"Data": b"x"}),
                 lambda: firehose.put_record_batch(DeliveryStreamName=ks, Records=[{"Data": b"x"}])):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == ("InvalidArgumentException",
                                 "This operation is not permitted on KinesisStreamAsSource delivery stream type.")


def test_buffering_by_interval_and_zero_interval(firehose, s3):
    n, b = name(), bucket(s3)
    # IntervalInSeconds 100 at scale 0.01: delivered after ~1 s, not before.
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"IntervalInSeconds": 100}))
    start = time.monotonic()
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": f"{i}\n".encode()} for i in range(10)])
    time.sleep(0.4)
    early = keys_in(s3, b)
    if time.monotonic() - start < 0.9:  # (a busy machine may have slept past the interval)
        assert early == []
    [key] = wait_for(lambda: keys_in(s3, b))
    assert 0.9 <= time.monotonic() - start < 5
    assert body(s3, b, key) == b"".join(f"{i}\n".encode() for i in range(10))
    # IntervalInSeconds 0: as soon as records are there.
    n0, b0 = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n0, ExtendedS3DestinationConfiguration=dest(
        b0, BufferingHints={"IntervalInSeconds": 0}))
    start = time.monotonic()
    firehose.put_record(DeliveryStreamName=n0, Record={"Data": b"now"})
    wait_for(lambda: keys_in(s3, b0), timeout=5)
    assert time.monotonic() - start < 0.9


def test_buffering_by_size(firehose, s3):
    n, b = name(), bucket(s3)
    # 1 MiB buffers, IntervalInSeconds 300 (3 s scaled): the size limit flushes first.
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"SizeInMBs": 1, "IntervalInSeconds": 300}))
    chunk = 100 * 1024
    records = [bytes([65 + i]) * chunk for i in range(15)]   # 1.5 MiB in 15 records
    start = time.monotonic()
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": r} for r in records])
    [first] = wait_for(lambda: keys_in(s3, b))
    assert time.monotonic() - start < 2.5
    assert body(s3, b, first) == b"".join(records[:10])       # what fits in 1 MiB, in order
    both = wait_for(lambda: (k := keys_in(s3, b)) and len(k) == 2 and k)
    assert time.monotonic() - start >= 2.5                    # the rest waited for the interval
    assert {body(s3, b, k) for k in both} == {b"".join(records[:10]), b"".join(records[10:])}


def test_key_formats_and_compression(firehose, s3):
    n, b = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b"default"})
    [key] = wait_for(lambda: keys_in(s3, b))
    m = KEY_RE.match(key)
    assert m and m.group("name") == n and m.group("version") == "1"
    now = time.gmtime()
    assert key.startswith(time.strftime("%Y/%m/%d/", now))
    # A custom prefix with expressions, GZIP: the evaluated prefix, the default suffix, ".gz".
    n2, b2 = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n2, ExtendedS3DestinationConfiguration=dest(
        b2, Prefix="logs/year=!{timestamp:yyyy}/", ErrorOutputPrefix="errors/!{firehose:error-output-type}/",
        CompressionFormat="GZIP", BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record_batch(DeliveryStreamName=n2, Records=[{"Data": b"a\n"}, {"Data": b"b\n"}])
    keys = wait_for(lambda: keys_in(s3, b2))
    assert all(k.startswith(f"logs/year={time.gmtime().tm_year}/{n2}-1-") and k.endswith(".gz") for k in keys)
    assert b"".join(gzip.decompress(body(s3, b2, k)) for k in keys) == b"a\nb\n"
    # FileExtension overrides the compression's extension.
    n3, b3 = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n3, ExtendedS3DestinationConfiguration=dest(
        b3, Prefix="plain/", FileExtension=".json", BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=n3, Record={"Data": b"{}"})
    [key] = wait_for(lambda: keys_in(s3, b3))
    assert key.startswith("plain/") and key.endswith(".json") and KEY_RE.match(key[len("plain/"):-len(".json")])
    # CustomTimeZone: the timestamp expressions (and the suffix's time) in that zone.
    n4, b4 = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n4, ExtendedS3DestinationConfiguration=dest(
        b4, Prefix="tz/!{timestamp:yyyy-MM-dd'T'HH}/", ErrorOutputPrefix="e/!{firehose:error-output-type}/",
        CustomTimeZone="Asia/Tokyo", BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=n4, Record={"Data": b"tokyo"})
    [key] = wait_for(lambda: keys_in(s3, b4))
    tokyo = time.gmtime(time.time() + 9 * 3600)
    assert key.startswith("tz/" + time.strftime("%Y-%m-%dT%H", tokyo) + "/")
    with pytest.raises(ClientError) as e:
        firehose.create_delivery_stream(DeliveryStreamName=name(), ExtendedS3DestinationConfiguration=dest(
            b4, CustomTimeZone="Mars/Olympus"))
    assert error_code(e)[0] == "InvalidArgumentException"


def test_s3_backup_enabled(firehose, s3):
    n, b, backup = name(), bucket(s3), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, CompressionFormat="GZIP", BufferingHints={"IntervalInSeconds": 0}, S3BackupMode="Enabled",
        S3BackupConfiguration=dest(backup, Prefix="source/")))
    ext = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]["Destinations"][0][
        "ExtendedS3DestinationDescription"]
    assert ext["S3BackupMode"] == "Enabled"
    assert ext["S3BackupDescription"]["Prefix"] == "source/"
    assert ext["S3BackupDescription"]["BufferingHints"] == {"SizeInMBs": 5, "IntervalInSeconds": 300}
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"r1\n"}, {"Data": b"r2\n"}])
    wait_for(lambda: keys_in(s3, backup, "source/"))
    assert b"".join(gzip.decompress(body(s3, b, k)) for k in keys_in(s3, b)) == b"r1\nr2\n"
    assert delivered(s3, backup, "source/") == b"r1\nr2\n"


def test_missing_bucket_is_retried_until_it_exists(fh_server, firehose, s3):
    n, b = name(), "late-" + uuid.uuid4().hex[:8]
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b"kept"})
    m = wait_for(lambda: (m := metrics(fh_server.url, n))["LastError"] and m)
    assert m["LastError"].startswith("S3.NoSuchBucket") and m["BufferedRecords"] == 1
    assert m["DeliveryToS3.Records"] == 0
    s3.create_bucket(Bucket=b)
    wait_for(lambda: keys_in(s3, b))
    assert delivered(s3, b) == b"kept"
    m = metrics(fh_server.url, n)
    assert m["DeliveryToS3.Records"] == 1 and m["BufferedRecords"] == 0 and m["LastDeliveryTimestamp"]


def test_failed_writes_retry_then_go_to_the_error_output(fh_server, firehose, s3):
    # Object "blocked" exists, so no key under "blocked/" can be written (S3 in kinesim keeps
    # objects as files: ParentIsObject); keys elsewhere in the bucket can.
    b = bucket(s3)
    s3.put_object(Bucket=b, Key="blocked", Body=b"in the way")
    query = {"Type": "MetadataExtraction", "Parameters": [
        {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{team: .team}"},
        {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]}
    # With dynamic partitioning: retried for RetryOptions.DurationInSeconds (60 s, 0.6 s scaled),
    # then written under the ErrorOutputPrefix.
    dp = name()
    firehose.create_delivery_stream(DeliveryStreamName=dp, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="blocked/!{partitionKeyFromQuery:team}/", ErrorOutputPrefix="errors/!{firehose:error-output-type}/",
        BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 0},
        ProcessingConfiguration={"Enabled": True, "Processors": [query]},
        DynamicPartitioningConfiguration={"Enabled": True, "RetryOptions": {"DurationInSeconds": 60}}))
    start = time.monotonic()
    firehose.put_record(DeliveryStreamName=dp, Record={"Data": b'{"team": "red"}'})
    [key] = wait_for(lambda: keys_in(s3, b, "errors/"))
    assert time.monotonic() - start >= 0.6
    assert key.startswith("errors/s3-failed/")
    doc = json.loads(body(s3, b, key))
    assert base64.b64decode(doc["rawData"]) == b'{"team": "red"}'
    assert doc["errorCode"] == "S3.ParentIsObject" and doc["attemptsMade"] >= 2
    # Without dynamic partitioning AWS retries for 24 hours: the records stay buffered, and are
    # delivered as soon as the destination accepts them.
    plain = name()
    firehose.create_delivery_stream(DeliveryStreamName=plain, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="blocked/plain/", BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record(DeliveryStreamName=plain, Record={"Data": b"patient"})
    m = wait_for(lambda: (m := metrics(fh_server.url, plain))["FailedAttempts"] >= 3 and m)
    assert m["LastError"].startswith("S3.ParentIsObject") and m["BufferedRecords"] == 1
    s3.delete_object(Bucket=b, Key="blocked")
    [key] = wait_for(lambda: keys_in(s3, b, "blocked/plain/"))
    assert body(s3, b, key) == b"patient"


def test_creating_and_deleting_states(tmp_path_factory):
    """A stream made ACTIVE by a server without delays, then the same data directory served with
    ten-minute delays: CREATING and DELETING each hold for the whole test however slowly its calls
    go (400 ms windows could close between two calls on a loaded machine)."""
    proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    try:
        fh = client_for(proc.url, "firehose")
        fh.create_delivery_stream(DeliveryStreamName="ready", ExtendedS3DestinationConfiguration=dest("b"))
        fh.create_delivery_stream(DeliveryStreamName="again", ExtendedS3DestinationConfiguration=dest("b"))
        fh.delete_delivery_stream(DeliveryStreamName="again")
        # Once DELETING has ended, the name is free again.
        fh.create_delivery_stream(DeliveryStreamName="again", ExtendedS3DestinationConfiguration=dest("b"))
    finally:
        proc.stop()
    proc.settings.create_stream_ms = proc.settings.delete_stream_ms = 600_000
    proc.start()
    try:
        fh = client_for(proc.url, "firehose")
        fh.create_delivery_stream(DeliveryStreamName="slow", ExtendedS3DestinationConfiguration=dest("b"))
        assert fh.describe_delivery_stream(DeliveryStreamName="slow")["DeliveryStreamDescription"][
            "DeliveryStreamStatus"] == "CREATING"
        with pytest.raises(ClientError) as e:
            fh.put_record(DeliveryStreamName="slow", Record={"Data": b"x"})
        assert error_code(e)[0] == "ResourceNotFoundException"
        with pytest.raises(ClientError) as e:
            fh.delete_delivery_stream(DeliveryStreamName="slow")
        assert error_code(e)[0] == "ResourceInUseException"
        with pytest.raises(ClientError) as e:
            fh.update_destination(DeliveryStreamName="slow", CurrentDeliveryStreamVersionId="1",
                                  DestinationId="destinationId-000000000001", ExtendedS3DestinationUpdate={"Prefix": "x/"})
        assert error_code(e)[0] == "ResourceInUseException"
        fh.delete_delivery_stream(DeliveryStreamName="ready")
        assert fh.describe_delivery_stream(DeliveryStreamName="ready")["DeliveryStreamDescription"][
            "DeliveryStreamStatus"] == "DELETING"
        with pytest.raises(ClientError) as e:
            fh.put_record(DeliveryStreamName="ready", Record={"Data": b"x"})
        assert error_code(e)[0] == "ResourceNotFoundException"
        fh.delete_delivery_stream(DeliveryStreamName="ready")  # deleting again is fine
        with pytest.raises(ClientError) as e:  # the name is taken until DELETING ends
            fh.create_delivery_stream(DeliveryStreamName="ready", ExtendedS3DestinationConfiguration=dest("b"))
        assert error_code(e)[0] == "ResourceInUseException"
    finally:
        proc.stop()


def test_metrics_route(fh_server, firehose, s3):
    n, b = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"IntervalInSeconds": 0}))
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": b"12345"}] * 4)

    def delivered():
        # An object is counted as written just before its records leave the buffer: wait for both.
        m = metrics(fh_server.url, n)
        return m if m["DeliveryToS3.Records"] == 4 and m["BufferedRecords"] == 0 else None

    m = wait_for(delivered)
    assert m["DeliveryToS3.Bytes"] == 20 and m["DeliveryToS3.ObjectCount"] >= 1
    assert m["DeliveryToS3.DataFreshness"] == 0 and m["BufferedBytes"] == 0
    with pytest.raises(urllib.error.HTTPError) as e:
        metrics(fh_server.url, "no-such-stream")
    assert e.value.code == 404


# ---------------------------------------------------------------- processing, partitioning, conversion

TRANSFORM = """
import base64, json

def handler(event, context):
    out = []
    for r in event["records"]:
        doc = json.loads(base64.b64decode(r["data"]))
        if doc.get("drop"):
            out.append({"recordId": r["recordId"], "result": "Dropped"})
        elif doc.get("fail"):
            out.append({"recordId": r["recordId"], "result": "ProcessingFailed", "data": r["data"]})
        else:
            doc["name"] = doc["name"].upper()
            out.append({"recordId": r["recordId"], "result": "Ok",
                        "data": base64.b64encode(json.dumps(doc).encode()).decode(),
                        "metadata": {"partitionKeys": {"team": doc["team"]}}})
    return {"records": out}
"""

BROKEN = """
def handler(event, context):
    raise RuntimeError("boom")
"""


def make_function(url: str, code: str) -> str:
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", code)
    fn = "fn-" + uuid.uuid4().hex[:8]
    return client_for(url, "lambda").create_function(
        FunctionName=fn, Runtime="python3.12", Role="arn:aws:iam::000000000000:role/lambda", Handler="app.handler",
        Code={"ZipFile": buf.getvalue()})["FunctionArn"]


def lambda_processor(arn: str, *extra: dict) -> dict:
    return {"Enabled": True, "Processors": [
        {"Type": "Lambda", "Parameters": [{"ParameterName": "LambdaArn", "ParameterValue": arn}, *extra]}]}


def test_lambda_processor_with_dynamic_partitioning(fh_server, firehose, s3):
    arn = make_function(fh_server.url, TRANSFORM)
    n, b = name(), bucket(s3)
    processing = lambda_processor(arn)
    processing["Processors"] += [
        {"Type": "MetadataExtraction", "Parameters": [
            {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{cust: .cust}"},
            {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]},
        {"Type": "AppendDelimiterToRecord"}]
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="team=!{partitionKeyFromLambda:team}/cust=!{partitionKeyFromQuery:cust}/",
        ErrorOutputPrefix="errors/!{firehose:error-output-type}/", ProcessingConfiguration=processing,
        DynamicPartitioningConfiguration={"Enabled": True}, BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 0}))
    ext = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]["Destinations"][0][
        "ExtendedS3DestinationDescription"]
    assert ext["DynamicPartitioningConfiguration"] == {"Enabled": True, "RetryOptions": {"DurationInSeconds": 300}}
    assert ext["BufferingHints"] == {"SizeInMBs": 64, "IntervalInSeconds": 0}
    docs = [{"name": "ann", "team": "red", "cust": "c1"}, {"name": "bob", "team": "red", "cust": "c2"},
            {"name": "cid", "team": "blue", "cust": "c1"}, {"name": "dan", "team": "red", "cust": "c1"},
            {"name": "eve", "team": "red", "cust": "c1", "drop": True},
            {"name": "fay", "team": "red", "cust": "c1", "fail": True},
            {"name": "gus", "team": "red"}]  # no "cust": MetadataExtraction fails
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": json.dumps(d).encode()} for d in docs])
    wait_for(lambda: len(keys_in(s3, b, "errors/")) >= 1 and len(keys_in(s3, b, "team=")) >= 3, timeout=30)
    time.sleep(0.3)

    def names(prefix):
        return [json.loads(line)["name"] for line in delivered(s3, b, prefix).splitlines()]
    assert names("team=red/cust=c1/") == ["ANN", "DAN"]
    assert names("team=red/cust=c2/") == ["BOB"]
    assert names("team=blue/cust=c1/") == ["CID"]
    for key in keys_in(s3, b, "team="):
        assert SUFFIX_RE.match(key.split("/", 2)[2]).group("name") == n
    errors = [json.loads(line) for line in delivered(s3, b, "errors/processing-failed/").splitlines()]
    by_code = {e["errorCode"]: e for e in errors}
    assert set(by_code) == {"Lambda.ProcessingFailedStatus", "DynamicPartitioning.MetadataExtractionFailed"}
    failed = by_code["Lambda.ProcessingFailedStatus"]
    assert json.loads(base64.b64decode(failed["rawData"]))["name"] == "fay"
    assert failed["lambdaArn"] == arn and failed["errorMessage"] == "ProcessingFailed status set for record"
    assert {"attemptsMade", "arrivalTimestamp", "attemptEndingTimestamp"} <= set(failed)


def test_lambda_function_error_goes_to_processing_failed(fh_server, firehose, s3):
    arn = make_function(fh_server.url, BROKEN)
    n, b = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="ok/", ErrorOutputPrefix="failed/", BufferingHints={"IntervalInSeconds": 0},
        ProcessingConfiguration=lambda_processor(arn, {"ParameterName": "NumberOfRetries", "ParameterValue": "1"})))
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b"payload"})
    [key] = wait_for(lambda: keys_in(s3, b, "failed/"), timeout=30)
    assert key.startswith("failed/processing-failed/")       # plain ErrorOutputPrefix + the error type + time
    [doc] = [json.loads(line) for line in body(s3, b, key).splitlines()]
    assert doc["errorCode"] == "Lambda.FunctionError" and doc["attemptsMade"] == 2
    assert base64.b64decode(doc["rawData"]) == b"payload"
    assert keys_in(s3, b, "ok/") == []


def test_data_format_conversion_to_parquet(firehose, s3):
    import io
    import pyarrow.parquet as pq
    n, b = name(), bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="tables/clicks/", ErrorOutputPrefix="bad/", BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 0},
        DataFormatConversionConfiguration={
            "Enabled": True,
            "SchemaConfiguration": {"RoleARN": ROLE, "DatabaseName": "db", "TableName": "clicks"},
            "InputFormatConfiguration": {"Deserializer": {"OpenXJsonSerDe": {}}},
            "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {}}}}))
    firehose.put_record_batch(DeliveryStreamName=n, Records=[
        {"Data": b'{"page": "/a", "n": 1}'}, {"Data": b'{"page": "/b", "n": 2}'}, {"Data": b"not json"}])
    [key] = wait_for(lambda: keys_in(s3, b, "tables/"))
    assert key.endswith(".parquet")
    table = pq.read_table(io.BytesIO(body(s3, b, key)))
    assert table.to_pylist() == [{"page": "/a", "n": 1}, {"page": "/b", "n": 2}]
    [bad] = wait_for(lambda: keys_in(s3, b, "bad/"))
    assert bad.startswith("bad/format-conversion-failed/")
    doc = json.loads(body(s3, b, bad))
    assert base64.b64decode(doc["rawData"]) == b"not json" and doc["lastErrorCode"] == "DataFormatConversion.ParseError"


# ---------------------------------------------------------------- Kinesis stream as source

def read_lines(s3, b: str) -> list[bytes]:
    """Every line delivered to a bucket, objects in the order they were written."""
    objects = sorted(s3.list_objects_v2(Bucket=b).get("Contents", []), key=lambda o: (o["LastModified"], o["Key"]))
    return [line for o in objects for line in body(s3, b, o["Key"]).split(b"\n") if line]


def test_kinesis_source_end_to_end_with_resharding(firehose, kin, s3):
    stream, n, b = "src-" + uuid.uuid4().hex[:8], name(), bucket(s3)
    kin.create_stream(StreamName=stream, ShardCount=2)
    kin.put_record(StreamName=stream, Data=b"before\n", PartitionKey="p")
    stream_arn = f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream}"
    firehose.create_delivery_stream(
        DeliveryStreamName=n, DeliveryStreamType="KinesisStreamAsSource",
        KinesisStreamSourceConfiguration={"KinesisStreamARN": stream_arn, "RoleARN": ROLE},
        ExtendedS3DestinationConfiguration=dest(b, BufferingHints={"IntervalInSeconds": 20}))
    d = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    src = d["Source"]["KinesisStreamSourceDescription"]
    assert d["DeliveryStreamType"] == "KinesisStreamAsSource"
    assert src["KinesisStreamARN"] == stream_arn and src["RoleARN"] == ROLE
    assert abs(src["DeliveryStartTimestamp"].timestamp() - time.time()) < 60
    sent = []
    for i in range(40):
        line = f"{i % 4}:{i}".encode()
        kin.put_record(StreamName=stream, Data=line + b"\n", PartitionKey=str(i % 4))
        sent.append(line)
    # Split the first shard and keep writing: children are read after their parent.
    shards = kin.list_shards(StreamName=stream)["Shards"]
    mid = (int(shards[0]["HashKeyRange"]["StartingHashKey"]) + int(shards[0]["HashKeyRange"]["EndingHashKey"])) // 2
    kin.split_shard(StreamName=stream, ShardToSplit=shards[0]["ShardId"], NewStartingHashKey=str(mid))
    for i in range(40, 80):
        line = f"{i % 4}:{i}".encode()
        kin.put_record(StreamName=stream, Data=line + b"\n", PartitionKey=str(i % 4))
        sent.append(line)
    # Merge the two children back: a shard with two parents, read after both.
    children = [s for s in kin.list_shards(StreamName=stream)["Shards"] if s.get("ParentShardId") == shards[0]["ShardId"]]
    kin.merge_shards(StreamName=stream, ShardToMerge=children[0]["ShardId"], AdjacentShardToMerge=children[1]["ShardId"])
    for i in range(80, 120):
        line = f"{i % 4}:{i}".encode()
        kin.put_record(StreamName=stream, Data=line + b"\n", PartitionKey=str(i % 4))
        sent.append(line)
    assert len(kin.list_shards(StreamName=stream)["Shards"]) == 5
    got = wait_for(lambda: (lines := read_lines(s3, b)) and len(lines) >= len(sent) and lines)
    assert sorted(got) == sorted(sent)                        # nothing from before creation, nothing lost
    for pk in "0123":                                          # per partition key, in put order
        assert [x for x in got if x.startswith(pk.encode() + b":")] == [x for x in sent if x.startswith(pk.encode() + b":")]


# ---------------------------------------------------------------- durability

def test_kill9_during_buffering_loses_nothing(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    try:
        fh, s3c, kin = client_for(proc.url, "firehose"), s3_client(proc.url), client_for(proc.url, "kinesis")
        b = bucket(s3c)
        # Interval 300 s scaled to 3 s: everything is still buffered when the server dies.
        fh.create_delivery_stream(DeliveryStreamName="direct", ExtendedS3DestinationConfiguration=dest(
            b, Prefix="direct/", BufferingHints={"IntervalInSeconds": 300}))
        kin.create_stream(StreamName="src", ShardCount=2)
        fh.create_delivery_stream(
            DeliveryStreamName="fromkinesis", DeliveryStreamType="KinesisStreamAsSource",
            KinesisStreamSourceConfiguration={"KinesisStreamARN": "arn:aws:kinesis:us-east-1:000000000000:stream/src",
                                              "RoleARN": ROLE},
            ExtendedS3DestinationConfiguration=dest(b, Prefix="kinesis/", BufferingHints={"IntervalInSeconds": 300}))
        acked = []
        for i in range(20):
            fh.put_record_batch(DeliveryStreamName="direct", Records=[{"Data": f"d{i}-{j}\n".encode()} for j in range(10)])
            acked += [f"d{i}-{j}".encode() for j in range(10)]
            kin.put_record(StreamName="src", Data=f"k{i}\n".encode(), PartitionKey=str(i))
        assert keys_in(s3c, b) == []
        proc.kill()
        proc.start()
        fh, s3c = client_for(proc.url, "firehose"), s3_client(proc.url)
        assert fh.describe_delivery_stream(DeliveryStreamName="direct")["DeliveryStreamDescription"]["VersionId"] == "1"
        got = wait_for(lambda: (x := [ln for ln in delivered(s3c, b, "direct/").split(b"\n") if ln])
                       and len(x) >= len(acked) and x)
        assert sorted(got) == sorted(acked)
        got = wait_for(lambda: (x := [ln for ln in delivered(s3c, b, "kinesis/").split(b"\n") if ln])
                       and len(x) >= 20 and x)
        assert sorted(got) == sorted(f"k{i}".encode() for i in range(20))
        # Delivered and checkpointed: another crash and restart delivers nothing twice.
        time.sleep(0.5)
        before = keys_in(s3c, b)
        proc.kill()
        proc.start()
        time.sleep(4)
        assert keys_in(s3_client(proc.url), b) == before
    finally:
        proc.stop()


def test_delivery_streams_survive_restart(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE)
    try:
        fh, s3c = client_for(proc.url, "firehose"), s3_client(proc.url)
        b = bucket(s3c)
        fh.create_delivery_stream(DeliveryStreamName="keep", ExtendedS3DestinationConfiguration=dest(
            b, BufferingHints={"IntervalInSeconds": 0}), Tags=[{"Key": "a", "Value": "b"}])
        fh.update_destination(DeliveryStreamName="keep", CurrentDeliveryStreamVersionId="1",
                              DestinationId="destinationId-000000000001", ExtendedS3DestinationUpdate={"Prefix": "p/"})
        before = fh.describe_delivery_stream(DeliveryStreamName="keep")["DeliveryStreamDescription"]
        proc.stop()
        proc.start()
        fh = client_for(proc.url, "firehose")
        assert fh.describe_delivery_stream(DeliveryStreamName="keep")["DeliveryStreamDescription"] == before
        assert fh.list_tags_for_delivery_stream(DeliveryStreamName="keep")["Tags"] == [{"Key": "a", "Value": "b"}]
        fh.put_record(DeliveryStreamName="keep", Record={"Data": b"after"})
        [key] = wait_for(lambda: keys_in(s3c := s3_client(proc.url), b, "p/"))
        assert KEY_RE.match(key[2:]).group("version") == "2"
    finally:
        proc.stop()


# ---------------------------------------------------------------- throttling (--enforce-limits)

def test_direct_put_quota_fails_records_one_by_one(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE, enforce_limits=True)
    try:
        fh, s3c = client_for(proc.url, "firehose"), s3_client(proc.url)
        b = bucket(s3c)
        fh.create_delivery_stream(DeliveryStreamName="q", ExtendedS3DestinationConfiguration=dest(
            b, BufferingHints={"IntervalInSeconds": 0}))
        record = b"z" * ((1 << 20) // 4)
        accepted = failed = 0
        for _ in range(6):  # 5 MiB/s: 4 MiB batches in quick succession must be cut
            out = fh.put_record_batch(DeliveryStreamName="q", Records=[{"Data": record}] * 16)
            for r in out["RequestResponses"]:
                if "RecordId" in r:
                    accepted += 1
                else:
                    assert r == {"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "Slow down."}
                    failed += 1
            assert out["FailedPutCount"] == sum("ErrorCode" in r for r in out["RequestResponses"])
            if failed:
                break
        assert failed > 0
        wait_for(lambda: len(delivered(s3c, b)) == accepted * len(record))
    finally:
        proc.stop()


# ---------------------------------------------------------------- external S3 endpoint

def test_external_s3_endpoint(tmp_path_factory, monkeypatch):
    port = free_port()
    moto = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"), "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    moto_url = f"http://127.0.0.1:{port}"
    proc = None
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(moto_url + "/moto-api/", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        external = s3_client(moto_url)
        external.create_bucket(Bucket="outside")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        proc = start_server(tmp_path_factory, firehose_interval_scale=SCALE, firehose_s3_endpoint=moto_url)
        fh = client_for(proc.url, "firehose")
        fh.create_delivery_stream(DeliveryStreamName="ext", ExtendedS3DestinationConfiguration=dest(
            "outside", Prefix="ext/", CompressionFormat="GZIP", BufferingHints={"IntervalInSeconds": 0}))
        fh.put_record_batch(DeliveryStreamName="ext", Records=[{"Data": b"far\n"}, {"Data": b"away\n"}])
        keys = wait_for(lambda: keys_in(external, "outside", "ext/"))
        assert all(k.endswith(".gz") for k in keys)
        assert b"".join(gzip.decompress(body(external, "outside", k)) for k in keys) == b"far\naway\n"
    finally:
        if proc is not None:
            proc.stop()
        moto.terminate()
        moto.wait(10)
