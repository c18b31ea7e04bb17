"""SplitShard, MergeShards, UpdateShardCount and ListShards through boto3 against a real server."""
from __future__ import annotations

import datetime
import hashlib
import threading
import time

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

MAX_HASH = 2**128 - 1
ACCOUNT = "000000000000"


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def sid(index: int) -> str:
    return "shardId-%012d" % index


def md5_key(partition_key: str) -> int:
    return int.from_bytes(hashlib.md5(partition_key.encode()).digest(), "big")


def hash_range(shard: dict) -> tuple[int, int]:
    r = shard["HashKeyRange"]
    return int(r["StartingHashKey"]), int(r["EndingHashKey"])


def list_all(kinesis, name: str, **params) -> list[dict]:
    """Every shard ListShards returns, following NextToken."""
    page = kinesis.list_shards(StreamName=name, **params)
    shards = page["Shards"]
    while page.get("NextToken"):
        page = kinesis.list_shards(NextToken=page["NextToken"])
        shards += page["Shards"]
    return shards


def open_shards(kinesis, name: str) -> list[dict]:
    return [s for s in list_all(kinesis, name) if "EndingSequenceNumber" not in s["SequenceNumberRange"]]


def assert_open_shards_cover_hash_space(kinesis, name: str) -> list[tuple[int, int]]:
    """The open shards' ranges tile [0, 2^128-1]: no gap, no overlap."""
    ranges = sorted(hash_range(s) for s in open_shards(kinesis, name))
    assert ranges[0][0] == 0
    assert ranges[-1][1] == MAX_HASH
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        assert start == end + 1
    return ranges


def assert_lineage(kinesis, name: str) -> None:
    """Every child's parents are closed; a split child lies within its parent, a merge child is
    exactly its two parents; a child's sequence numbers start above every parent's (sequence
    numbers are comparable across the stream)."""
    shards = {s["ShardId"]: s for s in list_all(kinesis, name)}
    for shard in shards.values():
        parents = [shards[p] for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId")) if p]
        if not parents:
            continue
        for parent in parents:
            assert "EndingSequenceNumber" in parent["SequenceNumberRange"]
            assert int(shard["SequenceNumberRange"]["StartingSequenceNumber"]) > \
                int(parent["SequenceNumberRange"]["EndingSequenceNumber"])
        covered = sorted(hash_range(p) for p in parents)
        start, end = hash_range(shard)
        if len(covered) == 1:  # a split: the child holds part of its parent's range
            assert covered[0][0] <= start <= end <= covered[0][1]
        else:  # a merge: the two adjacent parents make up the child's range
            assert covered[0][0] == start and covered[1][1] == end and covered[1][0] == covered[0][1] + 1


def owner(shards: list[dict], key: int) -> str:
    holding = [s["ShardId"] for s in shards if hash_range(s)[0] <= key <= hash_range(s)[1]]
    assert len(holding) == 1
    return holding[0]


def read_all(kinesis, name: str, shard_id: str, limit: int | None = None) -> tuple[list[dict], dict]:
    """Every record of a shard from TRIM_HORIZON, and the last GetRecords response."""
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=shard_id,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    records: list[dict] = []
    while True:
        resp = kinesis.get_records(ShardIterator=iterator, **({"Limit": limit} if limit else {}))
        records += resp["Records"]
        iterator = resp.get("NextShardIterator")
        if iterator is None or not resp["Records"]:
            return records, resp


def status_of(k, name: str) -> str:
    return k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"]


def wait_for_status(kinesis, name: str, status: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while status_of(kinesis, name) != status:
        assert time.monotonic() < deadline, f"{name} never became {status}"
        time.sleep(0.02)


# SplitShard


def test_split_closes_the_parent_and_routes_records_to_the_children(kinesis, make_stream):
    name = make_stream(1)
    before = [kinesis.put_record(StreamName=name, Data=f"before-{i}".encode(), PartitionKey=f"k{i}")
              for i in range(10)]
    middle = 1 << 127
    assert kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=str(middle))[
        "ResponseMetadata"]["HTTPStatusCode"] == 200

    shards = list_all(kinesis, name)
    assert [s["ShardId"] for s in shards] == [sid(0), sid(1), sid(2)]
    parent, low, high = shards
    assert "EndingSequenceNumber" in parent["SequenceNumberRange"]
    assert low["ParentShardId"] == high["ParentShardId"] == sid(0)
    assert "AdjacentParentShardId" not in low and "AdjacentParentShardId" not in high
    assert hash_range(low) == (0, middle - 1) and hash_range(high) == (middle, MAX_HASH)
    assert assert_open_shards_cover_hash_space(kinesis, name) == [(0, middle - 1), (middle, MAX_HASH)]
    assert_lineage(kinesis, name)
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["OpenShardCount"] == 2 and summary["StreamStatus"] == "ACTIVE"

    children = [low, high]
    last_parent_seq = max(int(r["SequenceNumber"]) for r in before)
    after = {}
    for i in range(40):
        key = f"key-{i}"
        out = kinesis.put_record(StreamName=name, Data=key.encode(), PartitionKey=key)
        assert out["ShardId"] == owner(children, md5_key(key))
        assert int(out["SequenceNumber"]) > last_parent_seq
        after.setdefault(out["ShardId"], []).append(key.encode())
    assert set(after) == {sid(1), sid(2)}  # 40 keys land on both halves
    for child in (sid(1), sid(2)):
        got, _ = read_all(kinesis, name, child)
        assert [r["Data"] for r in got] == after[child]
    # ExplicitHashKey overrides the partition key's hash.
    assert kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="any",
                              ExplicitHashKey=str(middle - 1))["ShardId"] == sid(1)
    assert kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="any",
                              ExplicitHashKey=str(middle))["ShardId"] == sid(2)


def test_get_records_on_a_closed_parent_drains_then_ends_with_child_shards(kinesis, make_stream):
    name = make_stream(1)
    put = [kinesis.put_record(StreamName=name, Data=f"r{i}".encode(), PartitionKey=str(i)) for i in range(7)]
    middle = 1 << 127
    kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=str(middle))

    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=sid(0),
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen = []
    for _ in range(3):  # 3 + 3 records with a further iterator each time
        resp = kinesis.get_records(ShardIterator=iterator, Limit=3)
        assert len(resp["Records"]) == 3
        assert resp.get("NextShardIterator") and "ChildShards" not in resp
        seen += resp["Records"]
        iterator = resp["NextShardIterator"]
        if len(seen) == 6:
            break
    last = kinesis.get_records(ShardIterator=iterator, Limit=3)
    seen += last["Records"]
    assert [r["SequenceNumber"] for r in seen] == [p["SequenceNumber"] for p in put]
    assert [r["Data"] for r in seen] == [f"r{i}".encode() for i in range(7)]
    assert last.get("NextShardIterator") is None
    assert last["ChildShards"] == [
        {"ShardId": sid(1), "ParentShards": [sid(0)],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(middle - 1)}},
        {"ShardId": sid(2), "ParentShards": [sid(0)],
         "HashKeyRange": {"StartingHashKey": str(middle), "EndingHashKey": str(MAX_HASH)}},
    ]
    # LATEST on a closed shard is already its end.
    latest = kinesis.get_shard_iterator(StreamName=name, ShardId=sid(0), ShardIteratorType="LATEST")["ShardIterator"]
    resp = kinesis.get_records(ShardIterator=latest)
    assert resp["Records"] == [] and resp.get("NextShardIterator") is None and len(resp["ChildShards"]) == 2


def test_split_errors(kinesis, make_stream):
    name = make_stream(2)
    first = list_all(kinesis, name)[0]
    start, end = hash_range(first)
    for bad in (start, start + 1, end, end + 5):
        with pytest.raises(ClientError) as e:
            kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=str(bad))
        assert error_of(e) == (
            "InvalidArgumentException",
            f"NewStartingHashKey {bad} used in SplitShard() on shard {sid(0)} in stream {name} under account "
            f"{ACCOUNT} is not both greater than one plus the shard's StartingHashKey {start} and less than the "
            f"shard's EndingHashKey {end}.")
    with pytest.raises(ClientError) as e:
        kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey="12x")
    assert error_of(e) == ("ValidationException",
                           "1 validation error detected: Value '12x' at 'newStartingHashKey' failed to satisfy "
                           "constraint: Member must satisfy regular expression pattern: ^(0|([1-9]\\d{0,38}))$")
    with pytest.raises(ClientError) as e:
        kinesis.split_shard(StreamName=name, ShardToSplit=sid(7), NewStartingHashKey="1000")
    assert error_of(e) == ("ResourceNotFoundException",
                           f"Could not find shard {sid(7)} in stream {name} under account {ACCOUNT}.")
    with pytest.raises(ClientError) as e:
        kinesis.split_shard(StreamName="no-such-stream", ShardToSplit=sid(0), NewStartingHashKey="1000")
    assert error_of(e) == ("ResourceNotFoundException", f"Stream no-such-stream under account {ACCOUNT} not found.")
    kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey="1000")
    with pytest.raises(ClientError) as e:  # the parent is closed now
        kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey="2000")
    assert error_of(e) == (
        "InvalidArgumentException",
        f"Shard {sid(0)} in stream {name} under account {ACCOUNT} has already been merged or split, and thus is not "
        "eligible for merging or splitting.")


# MergeShards


def test_merge_closes_both_parents_and_routes_to_the_child(kinesis, make_stream):
    name = make_stream(3)
    before = [kinesis.put_record(StreamName=name, Data=b"b", PartitionKey=f"p{i}") for i in range(20)]
    kinesis.merge_shards(StreamName=name, ShardToMerge=sid(0), AdjacentShardToMerge=sid(1))
    shards = {s["ShardId"]: s for s in list_all(kinesis, name)}
    assert list(shards) == [sid(0), sid(1), sid(2), sid(3)]
    child = shards[sid(3)]
    assert child["ParentShardId"] == sid(0) and child["AdjacentParentShardId"] == sid(1)
    assert hash_range(child) == (hash_range(shards[sid(0)])[0], hash_range(shards[sid(1)])[1])
    for parent in (sid(0), sid(1)):
        assert "EndingSequenceNumber" in shards[parent]["SequenceNumberRange"]
    assert "EndingSequenceNumber" not in shards[sid(2)]["SequenceNumberRange"]
    assert_open_shards_cover_hash_space(kinesis, name)
    assert_lineage(kinesis, name)
    highest_before = max(int(r["SequenceNumber"]) for r in before if r["ShardId"] in (sid(0), sid(1)))
    opened = [shards[sid(2)], child]
    for i in range(30):
        key = f"m{i}"
        out = kinesis.put_record(StreamName=name, Data=b"a", PartitionKey=key)
        assert out["ShardId"] == owner(opened, md5_key(key))
        if out["ShardId"] == sid(3):
            assert int(out["SequenceNumber"]) > highest_before
    # The merged parents end with one child that names them both.
    _, last = read_all(kinesis, name, sid(1))
    assert last.get("NextShardIterator") is None
    assert last["ChildShards"] == [{"ShardId": sid(3), "ParentShards": [sid(0), sid(1)],
                                    "HashKeyRange": child["HashKeyRange"]}]


def test_merge_errors(kinesis, make_stream):
    name = make_stream(3)
    for lower, upper in ((sid(0), sid(2)), (sid(1), sid(0))):  # not adjacent; adjacent but in the wrong order
        with pytest.raises(ClientError) as e:
            kinesis.merge_shards(StreamName=name, ShardToMerge=lower, AdjacentShardToMerge=upper)
        assert error_of(e) == (
            "InvalidArgumentException",
            f"Shards {lower} and {upper} in stream {name} under account {ACCOUNT} are not an adjacent pair of "
            "shards eligible for merging")
    with pytest.raises(ClientError) as e:
        kinesis.merge_shards(StreamName=name, ShardToMerge=sid(0), AdjacentShardToMerge=sid(9))
    assert error_of(e) == ("ResourceNotFoundException",
                           f"Could not find shard {sid(9)} in stream {name} under account {ACCOUNT}.")
    kinesis.merge_shards(StreamName=name, ShardToMerge=sid(1), AdjacentShardToMerge=sid(2))
    with pytest.raises(ClientError) as e:
        kinesis.merge_shards(StreamName=name, ShardToMerge=sid(0), AdjacentShardToMerge=sid(1))
    assert error_of(e)[0] == "InvalidArgumentException"
    assert "has already been merged or split" in error_of(e)[1]


# UpdateShardCount


@pytest.mark.parametrize("initial,target", [(2, 4), (4, 2), (3, 5), (5, 3), (4, 4), (1, 2), (2, 1)])
def test_update_shard_count_gives_even_ranges_with_lineage(kinesis, make_stream, initial, target):
    name = make_stream(initial)
    before = {}
    for i in range(30):
        out = kinesis.put_record(StreamName=name, Data=b"x", PartitionKey=f"u{i}")
        before[out["ShardId"]] = max(before.get(out["ShardId"], 0), int(out["SequenceNumber"]))
    resp = kinesis.update_shard_count(StreamName=name, TargetShardCount=target, ScalingType="UNIFORM_SCALING")
    assert resp["StreamName"] == name
    assert resp["CurrentShardCount"] == initial and resp["TargetShardCount"] == target
    assert resp["StreamARN"] == f"arn:aws:kinesis:us-east-1:{ACCOUNT}:stream/{name}"
    ranges = assert_open_shards_cover_hash_space(kinesis, name)
    size = (MAX_HASH + 1) // target
    assert ranges == [(i * size, MAX_HASH if i == target - 1 else (i + 1) * size - 1) for i in range(target)]
    assert_lineage(kinesis, name)
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["OpenShardCount"] == target
    # New records go to the open shard holding their hash, above every sequence number before.
    current = open_shards(kinesis, name)
    highest = max(before.values())
    for i in range(30):
        key = f"v{i}"
        out = kinesis.put_record(StreamName=name, Data=b"y", PartitionKey=key)
        assert out["ShardId"] == owner(current, md5_key(key))
        if initial != target:
            assert int(out["SequenceNumber"]) > highest


def test_update_shard_count_up_then_down_keeps_every_record_reachable(kinesis, make_stream):
    name = make_stream(2)
    sent = [f"a{i}" for i in range(20)]
    for key in sent:
        kinesis.put_record(StreamName=name, Data=key.encode(), PartitionKey=key)
    kinesis.update_shard_count(StreamName=name, TargetShardCount=4, ScalingType="UNIFORM_SCALING")
    more = [f"b{i}" for i in range(20)]
    for key in more:
        kinesis.put_record(StreamName=name, Data=key.encode(), PartitionKey=key)
    kinesis.update_shard_count(StreamName=name, TargetShardCount=2, ScalingType="UNIFORM_SCALING")
    assert len(open_shards(kinesis, name)) == 2
    assert_open_shards_cover_hash_space(kinesis, name)
    assert_lineage(kinesis, name)
    got = []
    for shard in list_all(kinesis, name):
        got += [r["Data"].decode() for r in read_all(kinesis, name, shard["ShardId"])[0]]
    assert sorted(got) == sorted(sent + more)


def test_update_shard_count_limits(kinesis, make_stream):
    name = make_stream(2)
    with pytest.raises(ClientError) as e:
        kinesis.update_shard_count(StreamName=name, TargetShardCount=5, ScalingType="UNIFORM_SCALING")
    assert error_of(e) == ("LimitExceededException",
                           "UpdateShardCount cannot scale up over double your current open shard count. "
                           "Current open shard count: 2, Target shard count: 5")
    name = make_stream(5)
    with pytest.raises(ClientError) as e:
        kinesis.update_shard_count(StreamName=name, TargetShardCount=2, ScalingType="UNIFORM_SCALING")
    assert error_of(e) == ("LimitExceededException",
                           "UpdateShardCount cannot scale down below half your current open shard count. "
                           "Current open shard count: 5, Target shard count: 2")
    assert len(open_shards(kinesis, name)) == 5  # nothing happened


def test_on_demand_streams_cannot_be_resharded(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    expected = [
        ("SplitShard", lambda: kinesis.split_shard(StreamName=stream_name, ShardToSplit=sid(0),
                                                   NewStartingHashKey=str(1 << 125))),
        ("MergeShards", lambda: kinesis.merge_shards(StreamName=stream_name, ShardToMerge=sid(0),
                                                     AdjacentShardToMerge=sid(1))),
        ("UpdateShardCount", lambda: kinesis.update_shard_count(StreamName=stream_name, TargetShardCount=6,
                                                                ScalingType="UNIFORM_SCALING")),
    ]
    for op, call in expected:
        with pytest.raises(ClientError) as e:
            call()
        code, message = error_of(e)
        assert code == "ValidationException", op
        assert message == (f"{op} is not supported for stream {stream_name} under account {ACCOUNT} because it "
                           "is in ON_DEMAND capacity mode. This API is only supported for data streams with the "
                           "provisioned capacity mode.")
    assert len(list_all(kinesis, stream_name)) == 4
    kinesis.delete_stream(StreamName=stream_name)


# Sequence numbers across a reshard


def test_children_created_in_the_parents_second_still_sort_after_it(kinesis, make_stream):
    """Shard 15's child is shard 16, whose index's low nibble (0) is below 15's (F): only a later
    shard creation time keeps the child's sequence numbers above the parent's."""
    name = make_stream(16)
    parent = kinesis.put_record(StreamName=name, Data=b"p", PartitionKey="x", ExplicitHashKey=str(MAX_HASH))
    assert parent["ShardId"] == sid(15)
    start = hash_range(list_all(kinesis, name)[15])[0]
    kinesis.split_shard(StreamName=name, ShardToSplit=sid(15), NewStartingHashKey=str(start + (1 << 120)))
    child = kinesis.put_record(StreamName=name, Data=b"c", PartitionKey="x", ExplicitHashKey=str(start))
    assert child["ShardId"] == sid(16)
    assert int(child["SequenceNumber"]) > int(parent["SequenceNumber"])
    assert_lineage(kinesis, name)
    # The child's own sequence numbers are usable as iterator positions.
    iterator = kinesis.get_shard_iterator(StreamName=name, ShardId=sid(16), ShardIteratorType="AT_SEQUENCE_NUMBER",
                                          StartingSequenceNumber=child["SequenceNumber"])["ShardIterator"]
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]] == [b"c"]


def test_a_chain_of_reshards_in_one_second_keeps_sequence_numbers_increasing(kinesis, make_stream):
    name = make_stream(1)
    last = int(kinesis.put_record(StreamName=name, Data=b"0", PartitionKey="k")["SequenceNumber"])
    for step in range(4):
        # Alternate a split of the shard holding "k" with a merge back, as fast as the server goes.
        shards = open_shards(kinesis, name)
        holder = owner(shards, md5_key("k"))
        lo, hi = hash_range(next(s for s in shards if s["ShardId"] == holder))
        kinesis.split_shard(StreamName=name, ShardToSplit=holder, NewStartingHashKey=str((lo + hi) // 2))
        out = kinesis.put_record(StreamName=name, Data=str(step).encode(), PartitionKey="k")
        assert int(out["SequenceNumber"]) > last
        last = int(out["SequenceNumber"])
    assert_lineage(kinesis, name)


# ListShards


def test_list_shards_filters(kinesis, make_stream):
    name = make_stream(2)
    created = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamCreationTimestamp"]
    time.sleep(0.05)
    before_split = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.05)
    kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=str(1 << 100))
    time.sleep(0.05)
    after_split = datetime.datetime.now(datetime.timezone.utc)

    def ids(**params) -> list[str]:
        return [s["ShardId"] for s in list_all(kinesis, name, **params)]

    everything = [sid(0), sid(1), sid(2), sid(3)]
    after = [sid(1), sid(2), sid(3)]
    assert ids() == everything
    assert ids(ShardFilter={"Type": "FROM_TRIM_HORIZON"}) == everything
    assert ids(ShardFilter={"Type": "AT_LATEST"}) == after
    assert ids(ShardFilter={"Type": "AT_TRIM_HORIZON"}) == [sid(0), sid(1)]
    assert ids(ShardFilter={"Type": "AFTER_SHARD_ID", "ShardId": sid(1)}) == [sid(2), sid(3)]
    assert ids(ShardFilter={"Type": "AT_TIMESTAMP", "Timestamp": before_split}) == [sid(0), sid(1)]
    assert ids(ShardFilter={"Type": "AT_TIMESTAMP", "Timestamp": after_split}) == after
    assert ids(ShardFilter={"Type": "AT_TIMESTAMP", "Timestamp": created - datetime.timedelta(hours=1)}) == \
        [sid(0), sid(1)]
    assert ids(ShardFilter={"Type": "FROM_TIMESTAMP", "Timestamp": before_split}) == everything
    assert ids(ShardFilter={"Type": "FROM_TIMESTAMP", "Timestamp": after_split}) == after
    assert ids(StreamCreationTimestamp=created) == everything
    with pytest.raises(ClientError) as e:
        kinesis.list_shards(StreamName=name, ShardFilter={"Type": "AFTER_SHARD_ID"})
    assert error_of(e) == ("InvalidArgumentException",
                           "ShardId must be supplied in a ShardFilter with a Type of AFTER_SHARD_ID")
    for kind in ("AT_TIMESTAMP", "FROM_TIMESTAMP"):
        with pytest.raises(ClientError) as e:
            kinesis.list_shards(StreamName=name, ShardFilter={"Type": kind})
        assert error_of(e) == ("InvalidArgumentException",
                               "Timestamp must be supplied in a ShardFilter with a Type of FROM_TIMESTAMP or "
                               "AT_TIMESTAMP")


def test_list_shards_paging(kinesis, make_stream):
    name = make_stream(5)
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    page = kinesis.list_shards(StreamName=name, MaxResults=2)
    seen = [s["ShardId"] for s in page["Shards"]]
    assert seen == [sid(0), sid(1)]
    while page.get("NextToken"):
        page = kinesis.list_shards(NextToken=page["NextToken"], MaxResults=2)
        assert len(page["Shards"]) <= 2
        seen += [s["ShardId"] for s in page["Shards"]]
    assert seen == [sid(i) for i in range(5)]
    assert "NextToken" not in kinesis.list_shards(StreamName=name)
    assert [s["ShardId"] for s in kinesis.list_shards(StreamName=name, ExclusiveStartShardId=sid(2))["Shards"]] == \
        [sid(3), sid(4)]
    assert kinesis.list_shards(StreamARN=arn)["Shards"] == kinesis.list_shards(StreamName=name)["Shards"]
    # A token keeps the first call's filter.
    kinesis.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey="1000")
    page = kinesis.list_shards(StreamName=name, ShardFilter={"Type": "AT_LATEST"}, MaxResults=2)
    seen = [s["ShardId"] for s in page["Shards"]]
    while page.get("NextToken"):
        page = kinesis.list_shards(NextToken=page["NextToken"], MaxResults=2)
        seen += [s["ShardId"] for s in page["Shards"]]
    assert seen == [sid(i) for i in range(1, 7)]


def test_list_shards_errors(kinesis, make_stream, server):
    name = make_stream(3)
    token = kinesis.list_shards(StreamName=name, MaxResults=1)["NextToken"]
    for member, value in (("StreamName", name), ("ExclusiveStartShardId", sid(0)),
                          ("ShardFilter", {"Type": "AT_LATEST"}),
                          ("StreamCreationTimestamp", datetime.datetime.now(datetime.timezone.utc))):
        with pytest.raises(ClientError) as e:
            kinesis.list_shards(NextToken=token, **{member: value})
        assert error_of(e) == ("InvalidArgumentException", f"NextToken and {member} cannot be provided together.")
    with pytest.raises(ClientError) as e:
        kinesis.list_shards()
    assert error_of(e) == ("InvalidArgumentException", "Either NextToken or StreamName should be provided.")
    with pytest.raises(ClientError) as e:
        kinesis.list_shards(NextToken="not-a-token")
    assert error_of(e) == ("InvalidArgumentException", "Invalid NextToken.")
    with pytest.raises(ClientError) as e:
        kinesis.list_shards(StreamName="no-such-stream")
    assert error_of(e) == ("ResourceNotFoundException", f"Stream no-such-stream under account {ACCOUNT} not found.")
    unchecked = client_for(server.url, parameter_validation=False)
    for bad in (0, 10001):
        with pytest.raises(ClientError) as e:
            unchecked.list_shards(StreamName=name, MaxResults=bad)
        code, message = error_of(e)
        assert code == "ValidationException" and f"Value '{bad}' at 'maxResults' failed to satisfy constraint" in message


# UPDATING while resharding


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    proc = start_server(tmp_path_factory, update_stream_ms=300)
    yield proc
    proc.stop()


def test_stream_is_updating_while_resharding_then_active(slow_server):
    """What is seen while UPDATING counts only if the stream is still UPDATING after it was seen
    (UPDATING only ever ends); on a machine too busy for 300 ms, another stream is tried."""
    k = client_for(slow_server.url)
    for attempt in range(5):
        name = f"slow-{attempt}"
        k.create_stream(StreamName=name, ShardCount=2)
        k.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey="1000")
        status = status_of(k, name)
        # Reads and writes go on while UPDATING; control-plane changes wait.
        # The split takes effect when UPDATING ends: until then records go to the old shards.
        shard = k.put_record(StreamName=name, Data=b"x", PartitionKey="k")["ShardId"]
        refused = []
        for call in (lambda: k.split_shard(StreamName=name, ShardToSplit=sid(1), NewStartingHashKey=str(3 << 126)),
                     lambda: k.merge_shards(StreamName=name, ShardToMerge=sid(0), AdjacentShardToMerge=sid(1)),
                     lambda: k.update_shard_count(StreamName=name, TargetShardCount=4,
                                                  ScalingType="UNIFORM_SCALING")):
            with pytest.raises(ClientError) as e:
                call()
            refused.append(error_of(e))
        if status_of(k, name) == "UPDATING":
            break
    else:
        pytest.fail("UPDATING (300 ms) ended five times before the stream could be read")
    assert status == "UPDATING" and shard in (sid(0), sid(1))
    message = f"Stream {name} under account {ACCOUNT} not ACTIVE, instead in state UPDATING"
    assert refused == [("ResourceInUseException", message)] * 3
    wait_for_status(k, name, "ACTIVE", timeout=60)
    k.update_shard_count(StreamName=name, TargetShardCount=4, ScalingType="UNIFORM_SCALING")
    wait_for_status(k, name, "ACTIVE", timeout=60)
    assert len(open_shards(k, name)) == 4


# Lock order


def test_concurrent_create_delete_and_reshard_do_not_deadlock(tmp_path_factory):
    """Creation, deletion, resharding and lookups of one name from several clients at once, with
    state changes due every millisecond: each needs a stream's lock and the service's lock, and
    they must all take them in one order."""
    proc = start_server(tmp_path_factory, update_stream_ms=1, delete_stream_ms=1)
    failures: list[BaseException] = []
    stop = time.monotonic() + 3.0

    def worker(seed: int) -> None:
        import random
        rnd = random.Random(seed)
        k = client_for(proc.url, read_timeout=10, connect_timeout=5)
        calls = [
            lambda: k.create_stream(StreamName="race", ShardCount=2),
            lambda: k.delete_stream(StreamName="race"),
            lambda: k.split_shard(StreamName="race", ShardToSplit=sid(0), NewStartingHashKey="1000"),
            lambda: k.update_shard_count(StreamName="race", TargetShardCount=2, ScalingType="UNIFORM_SCALING"),
            lambda: k.describe_stream_summary(StreamName="race"),
        ]
        try:
            while time.monotonic() < stop:
                try:
                    rnd.choice(calls)()
                except ClientError:
                    pass  # not found / in use / already exists: expected in this race
        except BaseException as exc:  # a read timeout means the server hung
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads)
        assert failures == []
        client_for(proc.url, read_timeout=5).list_streams()
    finally:
        proc.stop()
