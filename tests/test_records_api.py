"""Records, iterators and routing through boto3 against a real server."""
from __future__ import annotations

import hashlib
import time

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

MAX_HASH = 2**128 - 1


def shard_ranges(kinesis, name):
    return {s["ShardId"]: (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
            for s in kinesis.describe_stream(StreamName=name)["StreamDescription"]["Shards"]}


def read_all(kinesis, name, shard_id, kind="TRIM_HORIZON", **kw):
    it = kinesis.get_shard_iterator(StreamName=name, ShardId=shard_id, ShardIteratorType=kind, **kw)["ShardIterator"]
    out = []
    while it:
        resp = kinesis.get_records(ShardIterator=it)
        out += resp["Records"]
        if not resp["Records"] and resp["MillisBehindLatest"] == 0:
            break
        it = resp.get("NextShardIterator")
    return out


def test_put_routes_by_md5_and_reads_back_in_order(kinesis, make_stream):
    name = make_stream(4)
    ranges = shard_ranges(kinesis, name)
    sent: dict[str, list] = {}
    for i in range(60):
        key = f"user-{i % 7}"
        resp = kinesis.put_record(StreamName=name, Data=f"r{i}".encode(), PartitionKey=key)
        h = int.from_bytes(hashlib.md5(key.encode()).digest(), "big")
        lo, hi = ranges[resp["ShardId"]]
        assert lo <= h <= hi
        sent.setdefault(resp["ShardId"], []).append((resp["SequenceNumber"], f"r{i}".encode(), key))
    for shard_id, expected in sent.items():
        got = read_all(kinesis, name, shard_id)
        assert [(r["SequenceNumber"], r["Data"], r["PartitionKey"]) for r in got] == expected
        seqs = [int(r["SequenceNumber"]) for r in got]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        assert all(r["ApproximateArrivalTimestamp"].timestamp() > time.time() - 60 for r in got)


def test_explicit_hash_key(kinesis, make_stream):
    name = make_stream(2)
    assert kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k", ExplicitHashKey="0")["ShardId"] == \
        "shardId-000000000000"
    assert kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k",
                              ExplicitHashKey=str(MAX_HASH))["ShardId"] == "shardId-000000000001"
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k", ExplicitHashKey=str(MAX_HASH + 1))
    assert e.value.response["Error"]["Message"] == (
        "Invalid ExplicitHashKey. ExplicitHashKey must be in the range: [0, 2^128-1]. "
        f"Specified value was {MAX_HASH + 1}")


def test_put_records_batch(kinesis, make_stream):
    name = make_stream(4)
    records = [{"Data": f"d{i}".encode(), "PartitionKey": str(i)} for i in range(500)]
    resp = kinesis.put_records(StreamName=name, Records=records)
    assert resp["FailedRecordCount"] == 0
    assert len(resp["Records"]) == 500
    total = sum(len(read_all(kinesis, name, f"shardId-00000000000{i}")) for i in range(4))
    assert total == 500


def test_put_records_limits(kinesis, make_stream):
    name = make_stream()
    with pytest.raises(ClientError) as e:
        kinesis.put_records(StreamName=name, Records=[{"Data": b"x", "PartitionKey": "k"}] * 501)
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert "Member must have length less than or equal to 500" in e.value.response["Error"]["Message"]


def test_put_to_missing_stream(kinesis):
    with pytest.raises(ClientError) as e:
        kinesis.put_record(StreamName="nope-none", Data=b"x", PartitionKey="k")
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_iterator_types(kinesis, make_stream):
    name = make_stream()
    seqs = [kinesis.put_record(StreamName=name, Data=str(i).encode(), PartitionKey="k")["SequenceNumber"]
            for i in range(5)]
    shard = "shardId-000000000000"
    at = read_all(kinesis, name, shard, "AT_SEQUENCE_NUMBER", StartingSequenceNumber=seqs[2])
    assert [r["Data"] for r in at] == [b"2", b"3", b"4"]
    after = read_all(kinesis, name, shard, "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=seqs[2])
    assert [r["Data"] for r in after] == [b"3", b"4"]
    latest = kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    assert kinesis.get_records(ShardIterator=latest)["Records"] == []
    kinesis.put_record(StreamName=name, Data=b"new", PartitionKey="k")
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=latest)["Records"]] == [b"new"]
    start = kinesis.describe_stream(StreamName=name)["StreamDescription"]["Shards"][0]["SequenceNumberRange"][
        "StartingSequenceNumber"]
    assert len(read_all(kinesis, name, shard, "AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=start)) == 6


def test_at_timestamp(kinesis, make_stream):
    name = make_stream()
    kinesis.put_record(StreamName=name, Data=b"old", PartitionKey="k")
    time.sleep(1.1)
    cut = time.time()
    kinesis.put_record(StreamName=name, Data=b"new", PartitionKey="k")
    got = read_all(kinesis, name, "shardId-000000000000", "AT_TIMESTAMP", Timestamp=cut)
    assert [r["Data"] for r in got] == [b"new"]


def test_get_records_limit_and_millis_behind(kinesis, make_stream):
    name = make_stream()
    kinesis.put_records(StreamName=name, Records=[{"Data": b"x", "PartitionKey": "k"}] * 10)
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    first = kinesis.get_records(ShardIterator=it, Limit=4)
    assert len(first["Records"]) == 4
    rest = kinesis.get_records(ShardIterator=first["NextShardIterator"])
    assert len(rest["Records"]) == 6 and rest["MillisBehindLatest"] == 0


def test_iterator_errors(kinesis, make_stream):
    name = make_stream()
    with pytest.raises(ClientError) as e:
        kinesis.get_records(ShardIterator="AAAAAAAAAAGbogus" * 4)
    assert e.value.response["Error"] == {"Code": "InvalidArgumentException", "Message": "Invalid ShardIterator."}
    with pytest.raises(ClientError) as e:
        kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000009", ShardIteratorType="LATEST")
    assert e.value.response["Error"]["Message"] == (
        f"Shard shardId-000000000009 in stream {name} under account 000000000000 does not exist")
    with pytest.raises(ClientError) as e:
        kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                   ShardIteratorType="AT_SEQUENCE_NUMBER")
    assert "Request specified AT_SEQUENCE_NUMBER and no StartingSequenceNumber." in \
        e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                   ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber="12345")
    # AWS reads a small number as an old-style one whose low digits name a shard (kinesalite's recording).
    assert e.value.response["Error"]["Message"] == (
        "Invalid StartingSequenceNumber. It encodes shardId-000000012345, while it was used in a call to a shard "
        "with shardId-000000000000")


def test_iterator_expiry(tmp_path_factory):
    proc = start_server(tmp_path_factory, iterator_ttl_s=1.0)
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="exp", ShardCount=1)
        it = k.get_shard_iterator(StreamName="exp", ShardId="shardId-000000000000",
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        time.sleep(1.3)
        with pytest.raises(ClientError) as e:
            k.get_records(ShardIterator=it)
        assert e.value.response["Error"]["Code"] == "ExpiredIteratorException"
        assert "which is further in the future than the tolerated delay of 1000 milliseconds." in \
            e.value.response["Error"]["Message"]
    finally:
        proc.stop()


def test_enforced_limits_fail_records_individually(tmp_path_factory):
    proc = start_server(tmp_path_factory, enforce_limits=True)
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="lim", ShardCount=1)
        resp = k.put_records(StreamName="lim", Records=[{"Data": b"x" * 4000, "PartitionKey": "k"}] * 300)
        assert 0 < resp["FailedRecordCount"] < 300
        failed = [r for r in resp["Records"] if "ErrorCode" in r]
        assert failed[0]["ErrorCode"] == "ProvisionedThroughputExceededException"
        assert failed[0]["ErrorMessage"].startswith("Rate exceeded for shard shardId-000000000000 in stream lim")
    finally:
        proc.stop()
