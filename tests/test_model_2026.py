"""What botocore 1.44.5's Kinesis model added (issue 10 item 8): DryRun on the data plane, the
record distribution strategy (AUTO: partition keys optional and ignored), and the new
DescribeStreamSummary members. Through boto3 against a real server, except where a check needs
to see inside the service (nothing counted against limits, the strategy surviving a restart)."""
from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import make_service
from kinesim.kinesis.throughput import Meter
from kinesim.protocol.errors import AwsError

ACCOUNT = "000000000000"
# Not recorded from Kinesis anywhere public: EC2's DryRunOperation text (see kinesis/dryrun.py).
DRY_RUN = ("DryRunOperationException", "Request would have succeeded, but DryRun flag is set.")


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def status_of(excinfo) -> int:
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


def on_demand(kinesis, strategy: str | None = None) -> tuple[str, str]:
    name = "od-" + uuid.uuid4().hex[:10]
    extra = {"RecordDistributionStrategy": strategy} if strategy else {}
    kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"}, **extra)
    return name, kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def all_records(kinesis, name: str) -> dict[str, list[dict]]:
    """Every record of every shard, read from TRIM_HORIZON."""
    out = {}
    for shard in kinesis.list_shards(StreamName=name)["Shards"]:
        it = kinesis.get_shard_iterator(StreamName=name, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        out[shard["ShardId"]] = kinesis.get_records(ShardIterator=it)["Records"]
    return out


def count(kinesis, name: str) -> int:
    return sum(len(r) for r in all_records(kinesis, name).values())


# DryRun

def test_dry_run_put_record_answers_dry_run_and_writes_nothing(kinesis, make_stream):
    name = make_stream(1)
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k", DryRun=True)
    assert error_of(e) == DRY_RUN and status_of(e) == 400
    with pytest.raises(ClientError) as e:
        kinesis.put_records(StreamName=name, Records=[{"Data": b"x", "PartitionKey": "k"}] * 3, DryRun=True)
    assert error_of(e) == DRY_RUN
    assert count(kinesis, name) == 0
    kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k", DryRun=False)
    assert count(kinesis, name) == 1


def test_dry_run_put_that_would_fail_fails_as_without_it(kinesis, make_stream):
    name = make_stream(1)
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName="missing-" + name, Data=b"x", PartitionKey="k", DryRun=True)
    assert error_of(e) == ("ResourceNotFoundException", f"Stream missing-{name} under account {ACCOUNT} not found.")
    with pytest.raises(ClientError) as e:
        kinesis.put_records(StreamName=name, Records=[{"Data": b"x"}], DryRun=True)
    assert error_of(e)[0] == "ValidationException"
    assert "records.1.member.partitionKey" in error_of(e)[1]
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k", ExplicitHashKey=str(2**128), DryRun=True)
    assert error_of(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"x" * (1024 * 1024 + 1), PartitionKey="k", DryRun=True)
    assert error_of(e)[0] == "ValidationException"


def test_dry_run_iterators_and_reads(kinesis, make_stream):
    name = make_stream(1)
    kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k")
    with pytest.raises(ClientError) as e:
        kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON",
                                   DryRun=True)
    assert error_of(e) == DRY_RUN
    with pytest.raises(ClientError) as e:
        kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000009", ShardIteratorType="TRIM_HORIZON",
                                   DryRun=True)
    assert error_of(e)[0] == "ResourceNotFoundException"
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    with pytest.raises(ClientError) as e:
        kinesis.get_records(ShardIterator=it, DryRun=True)
    assert error_of(e) == DRY_RUN
    with pytest.raises(ClientError) as e:
        kinesis.get_records(ShardIterator=it[:-4] + ("BBBB" if it.endswith("AAAA") else "AAAA"), DryRun=True)
    assert error_of(e)[0] == "InvalidArgumentException"
    # The iterator a dry run checked still reads from where it pointed.
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=it)["Records"]] == [b"a"]


def test_dry_run_subscribe_claims_nothing(kinesis, make_stream):
    name = make_stream(1)
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    consumer = kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="c")["Consumer"]["ConsumerARN"]
    args = dict(ConsumerARN=consumer, ShardId="shardId-000000000000", StartingPosition={"Type": "LATEST"})
    with pytest.raises(ClientError) as e:
        kinesis.subscribe_to_shard(DryRun=True, **args)
    assert error_of(e) == DRY_RUN
    real = kinesis.subscribe_to_shard(**args)  # the dry run left the (consumer, shard) pair free
    try:
        with pytest.raises(ClientError) as e:
            kinesis.subscribe_to_shard(DryRun=True, **args)
        assert error_of(e)[0] == "ResourceInUseException"
    finally:
        real["EventStream"].close()
    with pytest.raises(ClientError) as e:
        kinesis.subscribe_to_shard(DryRun=True, **dict(args, ShardId="shardId-000000000007"))
    assert error_of(e)[0] == "ResourceNotFoundException"


class CountingMeter(Meter):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def _take(self, uid, direction, *args):
        self.calls.append(direction)
        return super()._take(uid, direction, *args)


def test_dry_runs_count_against_no_limit(tmp_path):
    svc = make_service(tmp_path, enforce_limits=True)
    try:
        svc.meter = meter = CountingMeter()
        svc.call("CreateStream", {"StreamName": "s", "ShardCount": 1})
        put = {"StreamName": "s", "Data": "eA==", "PartitionKey": "k", "DryRun": True}
        for op, params in [("PutRecord", put),
                           ("PutRecords", {"StreamName": "s", "DryRun": True,
                                           "Records": [{"Data": "eA==", "PartitionKey": "k"}]})]:
            with pytest.raises(AwsError) as e:
                svc.call(op, params)
            assert e.value.code == "DryRunOperationException"
        it = svc.call("GetShardIterator", {"StreamName": "s", "ShardId": "shardId-000000000000",
                                           "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
        with pytest.raises(AwsError) as e:
            svc.call("GetRecords", {"ShardIterator": it, "DryRun": True})
        assert e.value.code == "DryRunOperationException"
        assert meter.calls == []
        assert svc.store.last_index(svc.streams["s"].shards[0].uid) is None
    finally:
        svc.store.close()


# RecordDistributionStrategy

def test_create_with_auto_and_summary_fields(kinesis, make_stream):
    name, _ = on_demand(kinesis, "AUTO")
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["RecordDistributionStrategy"] == "AUTO"
    assert summary["ChannelCount"] == 0 and summary["QueueCount"] == 0
    default, _ = on_demand(kinesis)
    summary = kinesis.describe_stream_summary(StreamName=default)["StreamDescriptionSummary"]
    assert summary["RecordDistributionStrategy"] == "USER_PARTITION_KEY"
    # "This field is only present for streams that use the on-demand capacity mode."
    provisioned = make_stream(1)
    summary = kinesis.describe_stream_summary(StreamName=provisioned)["StreamDescriptionSummary"]
    assert "RecordDistributionStrategy" not in summary
    assert "RecordDistributionStrategy" not in kinesis.describe_stream(StreamName=name)["StreamDescription"]


def test_auto_is_for_on_demand_streams_only(kinesis, make_stream):
    name = "pv-" + uuid.uuid4().hex[:10]
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=name, ShardCount=1, RecordDistributionStrategy="AUTO")
    assert error_of(e)[0] == "InvalidArgumentException"
    assert name not in kinesis.list_streams(Limit=10000)["StreamNames"]
    provisioned = make_stream(1)
    arn = kinesis.describe_stream_summary(StreamName=provisioned)["StreamDescriptionSummary"]["StreamARN"]
    with pytest.raises(ClientError) as e:
        kinesis.update_stream_record_distribution_strategy(StreamARN=arn, RecordDistributionStrategy="AUTO")
    assert error_of(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        kinesis.create_stream(StreamName=name, ShardCount=1, RecordDistributionStrategy="RANDOM")
    assert error_of(e)[0] == "ValidationException"


def test_auto_spreads_records_and_ignores_keys(kinesis):
    name, _ = on_demand(kinesis, "AUTO")
    shards = [s["ShardId"] for s in kinesis.list_shards(StreamName=name)["Shards"]]
    placed = [kinesis.put_record(StreamName=name, Data=b"%d" % i, PartitionKey="same", ExplicitHashKey="0")["ShardId"]
              for i in range(len(shards))]
    assert sorted(placed) == sorted(shards)  # neither the key nor the hash key pinned them to one shard
    resp = kinesis.put_records(StreamName=name, Records=[{"Data": b"n%d" % i} for i in range(len(shards) * 2)])
    assert resp["FailedRecordCount"] == 0
    assert {r["ShardId"] for r in resp["Records"]} == set(shards)
    solo = kinesis.put_record(StreamName=name, Data=b"solo")
    records = [r for rs in all_records(kinesis, name).values() for r in rs]
    assert len(records) == len(shards) * 3 + 1
    by_data = {r["Data"]: r for r in records}
    # "this value is not returned if the producer did not provide a partition key ... If the
    # producer provided a partition key, the original value is returned" (the model's Record).
    assert "PartitionKey" not in by_data[b"solo"] and "PartitionKey" not in by_data[b"n0"]
    assert by_data[b"0"]["PartitionKey"] == "same"
    assert solo["SequenceNumber"] == by_data[b"solo"]["SequenceNumber"]


def test_auto_refuses_sequence_number_for_ordering(kinesis):
    name, _ = on_demand(kinesis, "AUTO")
    first = kinesis.put_record(StreamName=name, Data=b"a")
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"b", SequenceNumberForOrdering=first["SequenceNumber"])
    assert error_of(e)[0] == "InvalidArgumentException"
    assert count(kinesis, name) == 1


def test_update_strategy_switches_both_ways(kinesis):
    name, arn = on_demand(kinesis)
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"a")
    assert error_of(e)[0] == "ValidationException"
    resp = kinesis.update_stream_record_distribution_strategy(StreamARN=arn, RecordDistributionStrategy="AUTO")
    assert set(resp) == {"ResponseMetadata"}
    summary = kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]
    assert summary["RecordDistributionStrategy"] == "AUTO" and summary["StreamStatus"] == "ACTIVE"
    kinesis.put_record(StreamName=name, Data=b"a")
    kinesis.update_stream_record_distribution_strategy(StreamARN=arn, RecordDistributionStrategy="USER_PARTITION_KEY")
    # "After you switch to user-managed distribution, producers that omit a partition key fail."
    with pytest.raises(ClientError) as e:
        kinesis.put_records(StreamName=name, Records=[{"Data": b"b"}])
    assert error_of(e)[0] == "ValidationException"
    records = [r for rs in all_records(kinesis, name).values() for r in rs]
    assert [(r["Data"], "PartitionKey" in r) for r in records] == [(b"a", False)]


def test_update_strategy_errors(kinesis):
    name, arn = on_demand(kinesis)
    with pytest.raises(ClientError) as e:
        kinesis.update_stream_record_distribution_strategy(StreamARN=arn + "x", RecordDistributionStrategy="AUTO")
    assert error_of(e) == ("ResourceNotFoundException", f"Stream {name}x under account {ACCOUNT} not found.")
    with pytest.raises(ClientError) as e:
        kinesis.update_stream_record_distribution_strategy(StreamARN=arn, RecordDistributionStrategy="SOMETIMES")
    assert error_of(e)[0] == "ValidationException"


def test_strategy_is_durable(tmp_path):
    svc = make_service(tmp_path)
    svc.call("CreateStream", {"StreamName": "s", "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
                              "RecordDistributionStrategy": "AUTO"})
    svc.store.close()
    again = make_service(tmp_path)
    try:
        summary = again.call("DescribeStreamSummary", {"StreamName": "s"})["StreamDescriptionSummary"]
        assert summary["RecordDistributionStrategy"] == "AUTO"
        assert again.call("PutRecord", {"StreamName": "s", "Data": "eA=="})["ShardId"]
    finally:
        again.store.close()


def test_on_demand_auto_stream_cannot_become_provisioned_unnoticed(kinesis):
    name, arn = on_demand(kinesis, "AUTO")
    with pytest.raises(ClientError) as e:
        kinesis.update_stream_mode(StreamARN=arn, StreamModeDetails={"StreamMode": "PROVISIONED"})
    assert error_of(e)[0] == "InvalidArgumentException"
    summary = kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]
    assert summary["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
