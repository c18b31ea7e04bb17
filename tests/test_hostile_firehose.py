"""Firehose under hostile configuration (issue 9, item 13): prefixes whose keys could not be stored
(or would leave the bucket) are refused at CreateDeliveryStream / UpdateDestination, keys made from
record data that cannot be stored go to the error output after the retry duration, and an error
output that cannot be written either does not hold the delivery stream forever.

The server runs with --firehose-interval-scale 0.01, as in test_firehose_api.py.
"""
from __future__ import annotations

import base64
import json
import os
import urllib.request
import uuid

import pytest
import requests
from botocore.exceptions import ClientError

from test_firehose_api import ROLE, body, fh_server, firehose, keys_in, s3, wait_for  # noqa: F401 (fixtures)




def new_name() -> str:
    return "fh-" + uuid.uuid4().hex[:10]


def new_bucket(s3) -> str:
    b = "bkt-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=b)
    return b


def dest(b: str, **extra) -> dict:
    return {"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{b}", **extra}


def metrics(url: str, stream: str) -> dict:
    with urllib.request.urlopen(f"{url}/_kinesim/firehose/{stream}/metrics", timeout=5) as r:
        return json.loads(r.read())


def assert_unharmed(server) -> None:
    assert requests.get(server.url + "/_kinesim/health", timeout=10).ok


def refused(fh_server, call, **kwargs) -> str:
    with pytest.raises(ClientError) as e:
        call(**kwargs)
    assert_unharmed(fh_server)
    err = e.value.response["Error"]
    assert err["Code"] == "InvalidArgumentException", err
    return err["Message"]


PARTITIONING = {
    "ProcessingConfiguration": {"Enabled": True, "Processors": [{"Type": "MetadataExtraction", "Parameters": [
        {"ParameterName": "MetadataExtractionQuery", "ParameterValue": "{team: .team}"},
        {"ParameterName": "JsonParsingEngine", "ParameterValue": "JQ-1.6"}]}]},
    "BufferingHints": {"SizeInMBs": 64, "IntervalInSeconds": 0},
}


# (members of the destination, the member the message must name)
BAD_PREFIXES = [
    ({"Prefix": "../up/"}, "Prefix"),
    ({"Prefix": "/absolute/"}, "Prefix"),
    ({"Prefix": "a//b/"}, "Prefix"),
    ({"Prefix": "a/./b/"}, "Prefix"),
    ({"Prefix": "back\\slash/"}, "Prefix"),
    ({"Prefix": "!{timestamp:'..'}/up/", "ErrorOutputPrefix": "err/!{firehose:error-output-type}/"}, "Prefix"),
    ({"Prefix": "ok/", "ErrorOutputPrefix": "../err/"}, "ErrorOutputPrefix"),
    ({"Prefix": "ok/!{timestamp:yyyy}/", "ErrorOutputPrefix": "err/!{firehose:error-output-type}/../../x/"},
     "ErrorOutputPrefix"),
]


@pytest.mark.parametrize("members,field", BAD_PREFIXES, ids=[str(m) for m, _ in BAD_PREFIXES])
@pytest.mark.parametrize("kind", ["ExtendedS3", "S3"])
def test_unstorable_prefix_refused_at_create(fh_server, firehose, s3, kind, members, field):
    n, b = new_name(), new_bucket(s3)
    message = refused(fh_server, firehose.create_delivery_stream, DeliveryStreamName=n,
                      **{f"{kind}DestinationConfiguration": dest(b, **members)})
    assert field in message
    with pytest.raises(ClientError) as e:
        firehose.describe_delivery_stream(DeliveryStreamName=n)
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"


@pytest.mark.parametrize("prefix", ["../backup/", "!{firehose:error-output-type}/", "!{timestamp:'}/",
                                    "!{firehose:bogus}/", "!{partitionKeyFromQuery:team}/"])
def test_invalid_backup_prefix_refused(fh_server, firehose, s3, prefix):
    """The backup's Prefix follows the rules of a Prefix (its records are neither partitioned nor
    sent to an error output): before, such a prefix was accepted and every flush then failed."""
    n, b = new_name(), new_bucket(s3)
    message = refused(fh_server, firehose.create_delivery_stream, DeliveryStreamName=n,
                      ExtendedS3DestinationConfiguration=dest(
                          b, S3BackupMode="Enabled", S3BackupConfiguration=dest(b, Prefix=prefix)))
    assert "Prefix" in message or "Dynamic Partitioning" in message


@pytest.mark.parametrize("members,field", BAD_PREFIXES[:2] + BAD_PREFIXES[6:7])
@pytest.mark.parametrize("kind", ["ExtendedS3", "S3"])
def test_unstorable_prefix_refused_at_update(fh_server, firehose, s3, kind, members, field):
    n, b = new_name(), new_bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="good/", ErrorOutputPrefix="bad-records/"))
    wait_for(lambda: firehose.describe_delivery_stream(DeliveryStreamName=n)[
        "DeliveryStreamDescription"]["DeliveryStreamStatus"] == "ACTIVE")
    message = refused(fh_server, firehose.update_destination, DeliveryStreamName=n,
                      CurrentDeliveryStreamVersionId="1", DestinationId="destinationId-000000000001",
                      **{f"{kind}DestinationUpdate": members})
    assert field in message
    description = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    assert description["VersionId"] == "1"
    extended = description["Destinations"][0]["ExtendedS3DestinationDescription"]
    assert (extended["Prefix"], extended["ErrorOutputPrefix"]) == ("good/", "bad-records/")


def test_partition_key_that_cannot_be_a_key_goes_to_the_error_output(fh_server, firehose, s3):
    """A partition key value from the records themselves ("../../../up") makes a key that cannot
    be stored (and would name a path outside the bucket): retried for RetryOptions, then written
    to the error output; the other records are delivered, and nothing lands outside the bucket."""
    n, b = new_name(), new_bucket(s3)
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="data/!{partitionKeyFromQuery:team}/", ErrorOutputPrefix="errors/!{firehose:error-output-type}/",
        DynamicPartitioningConfiguration={"Enabled": True, "RetryOptions": {"DurationInSeconds": 10}},
        **PARTITIONING))
    records = [b'{"team": "../../../up"}', b'{"team": "red"}', b'{"team": ""}']
    firehose.put_record_batch(DeliveryStreamName=n, Records=[{"Data": r} for r in records])

    def error_output() -> list[dict]:
        return [json.loads(line) for key in keys_in(s3, b, "errors/") for line in body(s3, b, key).splitlines()]

    failed = wait_for(lambda: len(error_output()) == 2 and error_output(), timeout=60)
    assert all(key.startswith("errors/s3-failed/") for key in keys_in(s3, b, "errors/"))
    assert sorted(base64.b64decode(d["rawData"]) for d in failed) == sorted([records[0], records[2]])
    assert {d["errorCode"] for d in failed} == {"S3.InvalidArgument"}
    [red] = keys_in(s3, b, "data/")
    assert red.startswith("data/red/") and body(s3, b, red) == records[1]
    data_dir = fh_server.settings.data_dir
    assert not [d for d, _, _ in os.walk(data_dir) if os.path.basename(d) == "up"]
    m = metrics(fh_server.url, n)
    assert m["BufferedRecords"] == 0 and m["ErrorOutput.Records"] == 2


def test_error_output_that_cannot_be_written_does_not_block_forever(fh_server, firehose, s3):
    """The destination bucket is missing, so the error output (in the same bucket) cannot be
    written either: after the retry duration the records are dropped (AWS: "If data delivery
    fails for more than 24 hours, your data is lost"), counted, and later records flow again."""
    n, b = new_name(), "late-" + uuid.uuid4().hex[:8]
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, Prefix="data/!{partitionKeyFromQuery:team}/", ErrorOutputPrefix="errors/!{firehose:error-output-type}/",
        DynamicPartitioningConfiguration={"Enabled": True, "RetryOptions": {"DurationInSeconds": 10}},
        **PARTITIONING))
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b'{"team": "lost"}'})
    m = wait_for(lambda: (m := metrics(fh_server.url, n))["DroppedRecords"] == 1 and m, timeout=60)
    assert m["BufferedRecords"] == 0 and m["LastError"].startswith("S3.NoSuchBucket")
    s3.create_bucket(Bucket=b)
    firehose.put_record(DeliveryStreamName=n, Record={"Data": b'{"team": "blue"}'})
    [key] = wait_for(lambda: keys_in(s3, b, "data/"), timeout=60)
    assert key.startswith("data/blue/") and body(s3, b, key) == b'{"team": "blue"}'
    assert keys_in(s3, b, "errors/") == []


def test_an_integer_past_64_bits_is_described_not_a_500(fh_server, firehose, s3):
    # The model bounds BlockSizeBytes only from below; what was stored must still be described.
    n, b = new_name(), new_bucket(s3)
    conversion = {"Enabled": True,
                  "SchemaConfiguration": {"RoleARN": ROLE, "DatabaseName": "db", "TableName": "t"},
                  "InputFormatConfiguration": {"Deserializer": {"OpenXJsonSerDe": {}}},
                  "OutputFormatConfiguration": {"Serializer": {"ParquetSerDe": {"BlockSizeBytes": 2 ** 64}}}}
    firehose.create_delivery_stream(DeliveryStreamName=n, ExtendedS3DestinationConfiguration=dest(
        b, BufferingHints={"SizeInMBs": 64, "IntervalInSeconds": 60}, DataFormatConversionConfiguration=conversion))
    described = firehose.describe_delivery_stream(DeliveryStreamName=n)["DeliveryStreamDescription"]
    serde = described["Destinations"][0]["ExtendedS3DestinationDescription"]["DataFormatConversionConfiguration"][
        "OutputFormatConfiguration"]["Serializer"]["ParquetSerDe"]
    assert serde["BlockSizeBytes"] == 2 ** 64
