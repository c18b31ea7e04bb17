"""Stream lifecycle and settings through boto3 against a real server."""
from __future__ import annotations

import datetime

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from conftest import client_for

MAX_HASH = 2**128 - 1


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def test_create_describe_delete(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, ShardCount=3)
    desc = kinesis.describe_stream(StreamName=stream_name)["StreamDescription"]
    assert desc["StreamName"] == stream_name
    assert desc["StreamARN"] == f"arn:aws:kinesis:us-east-1:000000000000:stream/{stream_name}"
    assert desc["StreamStatus"] == "ACTIVE"
    assert desc["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
    assert desc["RetentionPeriodHours"] == 24
    assert desc["HasMoreShards"] is False
    assert desc["EncryptionType"] == "NONE"
    assert isinstance(desc["StreamCreationTimestamp"], datetime.datetime)
    shards = desc["Shards"]
    assert [s["ShardId"] for s in shards] == [f"shardId-00000000000{i}" for i in range(3)]
    assert shards[0]["HashKeyRange"]["StartingHashKey"] == "0"
    assert shards[-1]["HashKeyRange"]["EndingHashKey"] == str(MAX_HASH)
    for a, b in zip(shards, shards[1:]):
        assert int(b["HashKeyRange"]["StartingHashKey"]) == int(a["HashKeyRange"]["EndingHashKey"]) + 1
    assert all("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in shards)
    kinesis.delete_stream(StreamName=stream_name)
    with pytest.raises(ClientError) as e:
        kinesis.describe_stream(StreamName=stream_name)
    assert error_of(e) == ("ResourceNotFoundException",
                           f"Stream {stream_name} under account 000000000000 not found.")


def test_create_existing_stream(kinesis, make_stream):
    name = make_stream()
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=name, ShardCount=1)
    assert error_of(e) == ("ResourceInUseException", f"Stream {name} under account 000000000000 already exists.")


def test_validation_message_from_model(server):
    unchecked = client_for(server.url, parameter_validation=False)  # let the server see the bad value
    with pytest.raises(ClientError) as e:
        unchecked.create_stream(StreamName="x", ShardCount=0)
    assert error_of(e) == ("ValidationException",
                           "1 validation error detected: Value '0' at 'shardCount' failed to satisfy constraint: "
                           "Member must have value greater than or equal to 1")


def test_shard_limit_is_checked_before_allocation(kinesis, stream_name):
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=stream_name, ShardCount=100000000000)
    code, message = error_of(e)
    assert code == "LimitExceededException"
    assert "Number of additional shards that would have resulted from this request: 100000000000." in message
    assert stream_name not in kinesis.list_streams(Limit=10000)["StreamNames"]


def test_on_demand_stream(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    summary = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    assert summary["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert summary["OpenShardCount"] == 4
    assert summary["ConsumerCount"] == 0
    arn = summary["StreamARN"]
    kinesis.update_stream_mode(StreamARN=arn, StreamModeDetails={"StreamMode": "PROVISIONED"})
    assert kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]["StreamModeDetails"] == {
        "StreamMode": "PROVISIONED"}
    kinesis.delete_stream(StreamARN=arn)


def test_list_streams_paging(kinesis, make_stream):
    names = sorted(make_stream() for _ in range(3))
    seen, token = [], None
    while True:
        page = kinesis.list_streams(Limit=1, **({"NextToken": token} if token else {}))
        seen += page["StreamNames"]
        assert len(page["StreamSummaries"]) == len(page["StreamNames"])
        if not page["HasMoreStreams"]:
            break
        token = page["NextToken"]
    assert all(n in seen for n in names)
    assert seen == sorted(seen)
    after = kinesis.list_streams(ExclusiveStartStreamName=names[0])["StreamNames"]
    assert names[0] not in after and names[1] in after


def test_describe_stream_paging(kinesis, make_stream):
    name = make_stream(5)
    first = kinesis.describe_stream(StreamName=name, Limit=2)["StreamDescription"]
    assert [s["ShardId"] for s in first["Shards"]] == ["shardId-000000000000", "shardId-000000000001"]
    assert first["HasMoreShards"] is True
    rest = kinesis.describe_stream(StreamName=name, ExclusiveStartShardId="shardId-000000000001")
    assert len(rest["StreamDescription"]["Shards"]) == 3
    assert rest["StreamDescription"]["HasMoreShards"] is False


def test_stream_arn_everywhere(kinesis, make_stream):
    name = make_stream()
    arn = f"arn:aws:kinesis:us-east-1:000000000000:stream/{name}"
    assert kinesis.describe_stream(StreamARN=arn)["StreamDescription"]["StreamName"] == name
    put = kinesis.put_record(StreamARN=arn, StreamName=name, Data=b"x", PartitionKey="k")
    assert put["ShardId"] == "shardId-000000000000"


def test_retention_period(kinesis, make_stream):
    name = make_stream()
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=48)
    assert kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["RetentionPeriodHours"] == 48
    with pytest.raises(ClientError) as e:
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=30)
    assert error_of(e) == ("InvalidArgumentException",
                           f"Requested retention period (30 hours) for stream {name} can not be shorter than "
                           "existing retention period (48 hours). Use DecreaseRetentionPeriod API.")
    with pytest.raises(ClientError) as e:
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=9000)
    assert error_of(e)[0] == "InvalidArgumentException"
    kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=24)
    with pytest.raises(ClientError) as e:
        kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=23)
    assert error_of(e)[0] == "InvalidArgumentException"


def test_encryption_and_monitoring(kinesis, make_stream):
    name = make_stream()
    kinesis.start_stream_encryption(StreamName=name, EncryptionType="KMS", KeyId="alias/aws/kinesis")
    desc = kinesis.describe_stream(StreamName=name)["StreamDescription"]
    assert desc["EncryptionType"] == "KMS" and desc["KeyId"] == "alias/aws/kinesis"
    assert kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")["EncryptionType"] == "KMS"
    kinesis.stop_stream_encryption(StreamName=name, EncryptionType="KMS", KeyId="alias/aws/kinesis")
    assert kinesis.describe_stream(StreamName=name)["StreamDescription"]["EncryptionType"] == "NONE"
    on = kinesis.enable_enhanced_monitoring(StreamName=name, ShardLevelMetrics=["IncomingBytes"])
    assert on["CurrentShardLevelMetrics"] == [] and on["DesiredShardLevelMetrics"] == ["IncomingBytes"]
    off = kinesis.disable_enhanced_monitoring(StreamName=name, ShardLevelMetrics=["ALL"])
    assert off["CurrentShardLevelMetrics"] == ["IncomingBytes"] and off["DesiredShardLevelMetrics"] == []


def test_describe_limits(kinesis, make_stream):
    before = kinesis.describe_limits()
    make_stream(2)
    after = kinesis.describe_limits()
    assert after["ShardLimit"] == 500
    assert after["OpenShardCount"] == before["OpenShardCount"] + 2
    assert after["OnDemandStreamCountLimit"] == 50


def test_max_record_size(kinesis, make_stream):
    name = make_stream()
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    big = b"b" * (2 * 1024 * 1024)
    with pytest.raises((ClientError, ParamValidationError)):
        kinesis.put_record(StreamName=name, Data=big, PartitionKey="k")
    kinesis.update_max_record_size(StreamARN=arn, MaxRecordSizeInKiB=10240)
    assert kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["MaxRecordSizeInKiB"] == 10240
    put = kinesis.put_record(StreamName=name, Data=big, PartitionKey="k")
    it = kinesis.get_shard_iterator(StreamName=name, ShardId=put["ShardId"], ShardIteratorType="TRIM_HORIZON")
    assert kinesis.get_records(ShardIterator=it["ShardIterator"])["Records"][0]["Data"] == big


def test_warm_throughput_and_account_settings(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    out = kinesis.update_stream_warm_throughput(StreamName=stream_name, WarmThroughputMiBps=100)
    assert out["WarmThroughput"]["TargetMiBps"] == 100
    assert kinesis.describe_account_settings()["MinimumThroughputBillingCommitment"]["Status"] in (
        "DISABLED", "ENABLED")
    kinesis.update_account_settings(MinimumThroughputBillingCommitment={"Status": "ENABLED"})
    assert kinesis.describe_account_settings()["MinimumThroughputBillingCommitment"]["Status"] == "ENABLED"
    kinesis.update_account_settings(MinimumThroughputBillingCommitment={"Status": "DISABLED"})
    kinesis.delete_stream(StreamName=stream_name)
