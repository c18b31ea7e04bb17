"""Unit tests for SplitShard, MergeShards, UpdateShardCount and ListShards, called in-process."""
from __future__ import annotations

import hashlib
import random
import threading
import time

import pytest

from kinesim.kinesis import records, sequence, shards as shards_module
from kinesim.kinesis.model import MAX_HASH, even_ranges
from kinesim.kinesis.service import OPERATIONS, KinesisService
from kinesim.protocol.errors import AwsError

from conftest import make_service

ACCOUNT = "000000000000"


def call(svc: KinesisService, op: str, **params):
    return OPERATIONS[op](svc, params)


def error(svc: KinesisService, op: str, **params) -> AwsError:
    with pytest.raises(AwsError) as caught:
        call(svc, op, **params)
    return caught.value


def create(svc: KinesisService, name: str = "s", count: int = 1) -> str:
    call(svc, "CreateStream", StreamName=name, ShardCount=count)
    return name


def list_all(svc: KinesisService, name: str, **params) -> list[dict]:
    return call(svc, "ListShards", StreamName=name, **params)["Shards"]


def hash_range(shard: dict) -> tuple[int, int]:
    r = shard["HashKeyRange"]
    return int(r["StartingHashKey"]), int(r["EndingHashKey"])


def open_ranges(svc: KinesisService, name: str) -> list[tuple[int, int]]:
    return sorted(hash_range(s) for s in list_all(svc, name, ShardFilter={"Type": "AT_LATEST"}))


def assert_covers_hash_space(svc: KinesisService, name: str) -> list[tuple[int, int]]:
    """The open shards' ranges cover [0, 2^128-1] exactly, with no gap and no overlap."""
    ranges = open_ranges(svc, name)
    assert ranges[0][0] == 0
    assert ranges[-1][1] == MAX_HASH
    for (lo, hi), (next_lo, _) in zip(ranges, ranges[1:]):
        assert lo <= hi
        assert hi + 1 == next_lo
    return ranges


def assert_lineage(svc: KinesisService, name: str) -> None:
    """Every child's parents (one for a split, two adjacent ones for a merge) cover it exactly as
    AWS's do: a split child lies inside its parent; a merge child is its two parents' union."""
    by_id = {s["ShardId"]: s for s in list_all(svc, name)}
    for shard in by_id.values():
        if "ParentShardId" not in shard:
            continue
        lo, hi = hash_range(shard)
        parent = hash_range(by_id[shard["ParentShardId"]])
        assert "EndingSequenceNumber" in by_id[shard["ParentShardId"]]["SequenceNumberRange"]
        if "AdjacentParentShardId" in shard:
            adjacent = hash_range(by_id[shard["AdjacentParentShardId"]])
            assert "EndingSequenceNumber" in by_id[shard["AdjacentParentShardId"]]["SequenceNumberRange"]
            assert parent[1] + 1 == adjacent[0]
            assert (parent[0], adjacent[1]) == (lo, hi)
        else:
            assert parent[0] <= lo and hi <= parent[1] and (lo, hi) != parent


def follow(svc: KinesisService, name: str, key: int) -> str:
    """Walk from the root shard holding `key` through children holding it, as a reader following
    ChildShards does; returns the open shard it ends at."""
    all_shards = list_all(svc, name)
    current = next(s for s in all_shards if "ParentShardId" not in s and hash_range(s)[0] <= key <= hash_range(s)[1])
    while "EndingSequenceNumber" in current["SequenceNumberRange"]:
        children = [s for s in all_shards
                    if current["ShardId"] in (s.get("ParentShardId"), s.get("AdjacentParentShardId"))]
        holding = [c for c in children if hash_range(c)[0] <= key <= hash_range(c)[1]]
        assert len(holding) == 1, f"{current['ShardId']} has children {children}"
        current = holding[0]
    return current["ShardId"]


# SplitShard


def test_split_closes_parent_and_creates_two_children(svc):
    create(svc, "s", 1)
    middle = 1 << 127
    assert call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000",
                NewStartingHashKey=str(middle)) == {}
    shards = list_all(svc, "s")
    assert [s["ShardId"] for s in shards] == ["shardId-000000000000", "shardId-000000000001", "shardId-000000000002"]
    parent, low, high = shards
    assert "EndingSequenceNumber" in parent["SequenceNumberRange"]
    end = sequence.parse(parent["SequenceNumberRange"]["EndingSequenceNumber"])
    assert end.shard_index == 0 and end.record_index == sequence.END_INDEX
    assert low["ParentShardId"] == high["ParentShardId"] == "shardId-000000000000"
    assert "AdjacentParentShardId" not in low and "AdjacentParentShardId" not in high
    assert hash_range(low) == (0, middle - 1)
    assert hash_range(high) == (middle, MAX_HASH)
    assert "EndingSequenceNumber" not in low["SequenceNumberRange"]
    assert sequence.parse(high["SequenceNumberRange"]["StartingSequenceNumber"]).shard_index == 2
    assert assert_covers_hash_space(svc, "s") == [(0, middle - 1), (middle, MAX_HASH)]
    assert_lineage(svc, "s")
    summary = call(svc, "DescribeStreamSummary", StreamName="s")["StreamDescriptionSummary"]
    assert summary["OpenShardCount"] == 2 and summary["StreamStatus"] == "ACTIVE"


def test_split_accepts_short_shard_ids_and_stream_arn(svc):
    create(svc, "s", 2)
    arn = svc.stream_arn("s")
    lo, hi = even_ranges(2)[1]
    call(svc, "SplitShard", StreamARN=arn, ShardToSplit="1", NewStartingHashKey=str(lo + 1000))
    assert hash_range(list_all(svc, "s")[-1]) == (lo + 1000, hi)
    assert_covers_hash_space(svc, "s")


def test_split_hash_key_must_be_strictly_inside(svc):
    create(svc, "s", 2)
    lo, hi = even_ranges(2)[1]
    for key in (lo, lo + 1, hi, hi + 1, MAX_HASH + 5):
        err = error(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000001",
                    NewStartingHashKey=str(key))
        assert err.code == "InvalidArgumentException"
        assert err.message == (
            f"NewStartingHashKey {key} used in SplitShard() on shard shardId-000000000001 in stream s under "
            f"account {ACCOUNT} is not both greater than one plus the shard's StartingHashKey {lo} and less than "
            f"the shard's EndingHashKey {hi}.")
    assert len(list_all(svc, "s")) == 2  # nothing was allocated
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000001", NewStartingHashKey=str(lo + 2))
    assert hash_range(list_all(svc, "s")[2]) == (lo, lo + 1)


def test_split_of_closed_or_unknown_shard(svc):
    create(svc, "s", 1)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(1 << 100))
    err = error(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000",
                NewStartingHashKey=str(1 << 90))
    assert (err.code, err.message) == (
        "InvalidArgumentException",
        f"Shard shardId-000000000000 in stream s under account {ACCOUNT} has already been merged or split, "
        "and thus is not eligible for merging or splitting.")
    err = error(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000009", NewStartingHashKey="5")
    assert (err.code, err.message) == (
        "ResourceNotFoundException",
        f"Could not find shard shardId-000000000009 in stream s under account {ACCOUNT}.")
    err = error(svc, "SplitShard", StreamName="s", ShardToSplit="ABKLFD8", NewStartingHashKey="5")
    assert err.message == f"Could not find shard ABKLFD8 in stream s under account {ACCOUNT}."
    err = error(svc, "SplitShard", StreamName="nope", ShardToSplit="shardId-000000000000", NewStartingHashKey="5")
    assert (err.code, err.message) == ("ResourceNotFoundException", f"Stream nope under account {ACCOUNT} not found.")


def test_split_while_updating_is_refused(tmp_path):
    svc = make_service(tmp_path, update_stream_ms=60000)
    create(svc, "s", 2)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey="1000")
    assert call(svc, "DescribeStreamSummary", StreamName="s")["StreamDescriptionSummary"]["StreamStatus"] == "UPDATING"
    err = error(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000001", NewStartingHashKey=str(3 << 126))
    assert (err.code, err.message) == (
        "ResourceInUseException", f"Stream s under account {ACCOUNT} not ACTIVE, instead in state UPDATING")
    err = error(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000000",
                AdjacentShardToMerge="shardId-000000000001")
    assert err.code == "ResourceInUseException"
    err = error(svc, "UpdateShardCount", StreamName="s", TargetShardCount=1, ScalingType="UNIFORM_SCALING")
    assert err.code == "ResourceInUseException"
    assert len(list_all(svc, "s")) == 2  # the split takes effect when UPDATING ends
    svc.store.close()


def test_split_respects_the_account_shard_limit(tmp_path):
    svc = make_service(tmp_path, shard_limit=2)
    create(svc, "s", 2)
    err = error(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey="1000")
    assert err.code == "LimitExceededException"
    assert err.message.startswith(
        f"This request would exceed the shard limit for the account {ACCOUNT} in us-east-1. Current shard count "
        "for the account: 2. Limit: 2. Number of additional shards that would have resulted from this request: 1.")
    assert len(list_all(svc, "s")) == 2
    svc.store.close()


# MergeShards


def test_merge_two_adjacent_shards(svc):
    create(svc, "s", 3)
    ranges = even_ranges(3)
    call(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000000",
         AdjacentShardToMerge="shardId-000000000001")
    shards = list_all(svc, "s")
    assert len(shards) == 4
    child = shards[3]
    assert child["ShardId"] == "shardId-000000000003"
    assert child["ParentShardId"] == "shardId-000000000000"
    assert child["AdjacentParentShardId"] == "shardId-000000000001"
    assert hash_range(child) == (ranges[0][0], ranges[1][1])
    for closed in shards[:2]:
        assert "EndingSequenceNumber" in closed["SequenceNumberRange"]
    assert "EndingSequenceNumber" not in shards[2]["SequenceNumberRange"]
    assert assert_covers_hash_space(svc, "s") == [(ranges[0][0], ranges[1][1]), ranges[2]]
    assert_lineage(svc, "s")
    # The merged shard merges again with its neighbour.
    call(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000003",
         AdjacentShardToMerge="shardId-000000000002")
    assert assert_covers_hash_space(svc, "s") == [(0, MAX_HASH)]
    assert_lineage(svc, "s")


def test_merge_requires_an_adjacent_pair_in_order(svc):
    create(svc, "s", 3)
    for a, b in (("0", "2"), ("1", "0"), ("1", "1")):
        err = error(svc, "MergeShards", StreamName="s", ShardToMerge=f"shardId-00000000000{a}",
                    AdjacentShardToMerge=f"shardId-00000000000{b}")
        assert (err.code, err.message) == (
            "InvalidArgumentException",
            f"Shards shardId-00000000000{a} and shardId-00000000000{b} in stream s under account {ACCOUNT} are not "
            "an adjacent pair of shards eligible for merging")
    assert len(list_all(svc, "s")) == 3


def test_merge_of_a_closed_shard(svc):
    create(svc, "s", 2)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000001",
         NewStartingHashKey=str(even_ranges(2)[1][0] + 10))
    err = error(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000000",
                AdjacentShardToMerge="shardId-000000000001")
    assert err.message == (f"Shard shardId-000000000001 in stream s under account {ACCOUNT} has already been merged "
                           "or split, and thus is not eligible for merging or splitting.")
    err = error(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000000",
                AdjacentShardToMerge="shardId-000000000007")
    assert err.message == f"Could not find shard shardId-000000000007 in stream s under account {ACCOUNT}."
    call(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000000",
         AdjacentShardToMerge="shardId-000000000002")
    assert_covers_hash_space(svc, "s")


# UpdateShardCount


@pytest.mark.parametrize("initial,target", [(1, 2), (2, 4), (4, 2), (3, 5), (5, 3), (4, 5), (10, 13), (7, 4), (3, 3)])
def test_update_shard_count_gives_even_ranges_with_lineage(svc, initial, target):
    create(svc, "s", initial)
    out = call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=target, ScalingType="UNIFORM_SCALING")
    assert out == {"StreamName": "s", "StreamARN": svc.stream_arn("s"), "CurrentShardCount": initial,
                   "TargetShardCount": target}
    assert assert_covers_hash_space(svc, "s") == even_ranges(target)
    assert_lineage(svc, "s")
    open_ids = {s["ShardId"]: hash_range(s) for s in list_all(svc, "s", ShardFilter={"Type": "AT_LATEST"})}
    rng = random.Random(initial * 100 + target)
    keys = [0, MAX_HASH] + [lo for lo, _ in even_ranges(target)] + [rng.randrange(MAX_HASH) for _ in range(50)]
    for key in keys:
        lo, hi = open_ids[follow(svc, "s", key)]
        assert lo <= key <= hi
    if initial == target:
        assert len(list_all(svc, "s")) == initial  # already uniform: nothing to do


def test_update_shard_count_after_manual_resharding(svc):
    create(svc, "s", 2)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey="12345")
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=6, ScalingType="UNIFORM_SCALING")
    assert assert_covers_hash_space(svc, "s") == even_ranges(6)
    assert_lineage(svc, "s")
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=3, ScalingType="UNIFORM_SCALING")
    assert assert_covers_hash_space(svc, "s") == even_ranges(3)
    assert_lineage(svc, "s")
    for key in (0, 12344, 12345, 1 << 127, MAX_HASH):
        follow(svc, "s", key)


def test_update_shard_count_limits(svc):
    create(svc, "s", 4)
    err = error(svc, "UpdateShardCount", StreamName="s", TargetShardCount=9, ScalingType="UNIFORM_SCALING")
    assert (err.code, err.message) == (
        "LimitExceededException",
        "UpdateShardCount cannot scale up over double your current open shard count. "
        "Current open shard count: 4, Target shard count: 9")
    err = error(svc, "UpdateShardCount", StreamName="s", TargetShardCount=1, ScalingType="UNIFORM_SCALING")
    assert (err.code, err.message) == (
        "LimitExceededException",
        "UpdateShardCount cannot scale down below half your current open shard count. "
        "Current open shard count: 4, Target shard count: 1")
    err = error(svc, "UpdateShardCount", StreamName="s", TargetShardCount=100000000000, ScalingType="UNIFORM_SCALING")
    assert (err.code, err.message) == (
        "LimitExceededException",
        "Target shard count or number of open shards cannot be greater than 10000. "
        "Current open shard count: 4, Target shard count: 100000000000")
    assert len(list_all(svc, "s")) == 4
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=2, ScalingType="UNIFORM_SCALING")
    assert len(open_ranges(svc, "s")) == 2


def test_update_shard_count_respects_the_account_shard_limit(tmp_path):
    svc = make_service(tmp_path, shard_limit=5)
    create(svc, "s", 3)
    err = error(svc, "UpdateShardCount", StreamName="s", TargetShardCount=6, ScalingType="UNIFORM_SCALING")
    assert err.code == "LimitExceededException"
    assert "Current shard count for the account: 3. Limit: 5. Number of additional shards that would have " \
           "resulted from this request: 3." in err.message
    assert len(list_all(svc, "s")) == 3
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=5, ScalingType="UNIFORM_SCALING")
    assert len(open_ranges(svc, "s")) == 5
    svc.store.close()


def test_resharding_survives_a_restart(tmp_path):
    svc = make_service(tmp_path)
    create(svc, "s", 2)
    call(svc, "UpdateShardCount", StreamName="s", TargetShardCount=3, ScalingType="UNIFORM_SCALING")
    before = list_all(svc, "s")
    svc.store.close()
    again = make_service(tmp_path)
    assert list_all(again, "s") == before
    assert assert_covers_hash_space(again, "s") == even_ranges(3)
    # New shards keep getting fresh indexes and uids after the restart.
    latest = list_all(again, "s", ShardFilter={"Type": "AT_LATEST"})
    last = next(s for s in latest if hash_range(s) == even_ranges(3)[2])
    call(again, "SplitShard", StreamName="s", ShardToSplit=last["ShardId"],
         NewStartingHashKey=str(even_ranges(3)[2][0] + 99))
    assert list_all(again, "s")[-1]["ShardId"] == sequence.shard_id(len(before) + 1)
    uids = [s.uid for st in again.streams.values() for s in st.shards]
    assert len(uids) == len(set(uids))
    again.store.close()


# Records and readers across a reshard


def put(svc, name, data: bytes, key: str = "pk", explicit: int | None = None) -> dict:
    params = {"StreamName": name, "Data": data, "PartitionKey": key}
    if explicit is not None:
        params["ExplicitHashKey"] = str(explicit)
    return OPERATIONS["PutRecord"](svc, params)


def test_records_go_to_the_children_after_a_split(svc):
    create(svc, "s", 1)
    middle = 1 << 127
    assert put(svc, "s", b"before", explicit=5)["ShardId"] == "shardId-000000000000"
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(middle))
    assert put(svc, "s", b"low", explicit=middle - 1)["ShardId"] == "shardId-000000000001"
    assert put(svc, "s", b"high", explicit=middle)["ShardId"] == "shardId-000000000002"
    for i in range(20):
        key = f"key-{i}"
        expected = "shardId-000000000001" if int(hashlib.md5(key.encode()).hexdigest(), 16) < middle \
            else "shardId-000000000002"
        out = put(svc, "s", b"x", key=key)
        assert out["ShardId"] == expected
        assert sequence.parse(out["SequenceNumber"]).shard_index == int(expected[-1])


def test_get_records_on_a_closed_parent_ends_with_child_shards(svc):
    create(svc, "s", 1)
    first = put(svc, "s", b"one")
    middle = 1 << 127
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(middle))
    iterator = call(svc, "GetShardIterator", StreamName="s", ShardId="shardId-000000000000",
                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    out = call(svc, "GetRecords", ShardIterator=iterator)
    assert [r["SequenceNumber"] for r in out["Records"]] == [first["SequenceNumber"]]
    assert out["Records"][0]["Data"] == b"one"
    assert out["NextShardIterator"] is None
    assert out["ChildShards"] == [
        {"ShardId": "shardId-000000000001", "ParentShards": ["shardId-000000000000"],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(middle - 1)}},
        {"ShardId": "shardId-000000000002", "ParentShards": ["shardId-000000000000"],
         "HashKeyRange": {"StartingHashKey": str(middle), "EndingHashKey": str(MAX_HASH)}},
    ]
    # A merge child names both parents.
    call(svc, "MergeShards", StreamName="s", ShardToMerge="shardId-000000000001",
         AdjacentShardToMerge="shardId-000000000002")
    iterator = call(svc, "GetShardIterator", StreamName="s", ShardId="shardId-000000000002",
                    ShardIteratorType="LATEST")["ShardIterator"]
    out = call(svc, "GetRecords", ShardIterator=iterator)
    assert out["NextShardIterator"] is None
    assert out["ChildShards"] == [
        {"ShardId": "shardId-000000000003", "ParentShards": ["shardId-000000000001", "shardId-000000000002"],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(MAX_HASH)}}]


def test_a_reader_waiting_on_the_parent_is_woken_by_the_split(svc):
    create(svc, "s", 1)
    shard = svc.streams["s"].shard("shardId-000000000000")
    result = {}

    def wait():
        started = time.monotonic()
        result["woken"] = records.wait_for_append(shard, shard.next_index, timeout=10)
        result["waited"] = time.monotonic() - started

    reader = threading.Thread(target=wait)
    reader.start()
    time.sleep(0.2)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey="1000")
    reader.join(5)
    assert result["woken"] is True
    assert result["waited"] < 5


# ListShards


def test_list_shards_pages_with_next_token(svc):
    create(svc, "s", 5)
    page = call(svc, "ListShards", StreamName="s", MaxResults=2)
    seen = [s["ShardId"] for s in page["Shards"]]
    assert seen == ["shardId-000000000000", "shardId-000000000001"]
    while "NextToken" in page:
        page = call(svc, "ListShards", NextToken=page["NextToken"], MaxResults=2)
        seen += [s["ShardId"] for s in page["Shards"]]
    assert seen == [sequence.shard_id(i) for i in range(5)]
    assert "NextToken" not in call(svc, "ListShards", StreamName="s")
    assert [s["ShardId"] for s in list_all(svc, "s", ExclusiveStartShardId="shardId-000000000002")] == \
        ["shardId-000000000003", "shardId-000000000004"]
    assert [s["ShardId"] for s in list_all(svc, "s", ExclusiveStartShardId="3")] == ["shardId-000000000004"]
    assert call(svc, "ListShards", StreamARN=svc.stream_arn("s"))["Shards"] == list_all(svc, "s")


def test_list_shards_default_page_is_1000(tmp_path):
    svc = make_service(tmp_path, shard_limit=2000)
    create(svc, "big", 1001)
    page = call(svc, "ListShards", StreamName="big")
    assert len(page["Shards"]) == 1000 and "NextToken" in page
    rest = call(svc, "ListShards", NextToken=page["NextToken"])
    assert [s["ShardId"] for s in rest["Shards"]] == ["shardId-000000001000"]
    assert len(call(svc, "ListShards", StreamName="big", MaxResults=10000)["Shards"]) == 1001
    svc.store.close()


def test_list_shards_next_token_refuses_other_members(svc):
    create(svc, "s", 3)
    token = call(svc, "ListShards", StreamName="s", MaxResults=1)["NextToken"]
    for member, value in (("StreamName", "s"), ("ExclusiveStartShardId", "shardId-000000000000"),
                          ("StreamCreationTimestamp", time.time()), ("ShardFilter", {"Type": "AT_LATEST"})):
        err = error(svc, "ListShards", NextToken=token, **{member: value})
        assert (err.code, err.message) == ("InvalidArgumentException",
                                           f"NextToken and {member} cannot be provided together.")
    err = error(svc, "ListShards")
    assert (err.code, err.message) == ("InvalidArgumentException", "Either NextToken or StreamName should be provided.")
    for bad in ("garbage!", token[:-4] + "AAAA", "c29tZXRoaW5n"):
        err = error(svc, "ListShards", NextToken=bad)
        assert (err.code, err.message) == ("InvalidArgumentException", "Invalid NextToken.")


def test_list_shards_next_token_expires_and_is_bound_to_its_stream(svc):
    create(svc, "s", 3)
    stream = svc.streams["s"]
    old = shards_module.encode_token(svc, stream, 0, None, issued=time.time() - 301)
    assert error(svc, "ListShards", NextToken=old).code == "ExpiredNextTokenException"
    fresh = shards_module.encode_token(svc, stream, 0, None)
    assert [s["ShardId"] for s in call(svc, "ListShards", NextToken=fresh)["Shards"]] == \
        ["shardId-000000000001", "shardId-000000000002"]
    call(svc, "DeleteStream", StreamName="s")
    create(svc, "s", 3)
    err = error(svc, "ListShards", NextToken=fresh)
    assert (err.code, err.message) == ("ResourceNotFoundException", f"Stream s under account {ACCOUNT} not found.")


def test_list_shards_stream_creation_timestamp(svc):
    create(svc, "s", 2)
    created = svc.streams["s"].created
    assert len(list_all(svc, "s", StreamCreationTimestamp=created)) == 2
    err = error(svc, "ListShards", StreamName="s", StreamCreationTimestamp=created - 3600)
    assert err.code == "ResourceNotFoundException"
    assert error(svc, "ListShards", StreamName="missing").code == "ResourceNotFoundException"


def test_list_shards_filters(svc):
    create(svc, "s", 2)
    time.sleep(0.05)
    before_split = time.time()
    time.sleep(0.05)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(1 << 100))
    time.sleep(0.05)
    after_split = time.time()

    def ids(shard_filter):
        return [s["ShardId"] for s in list_all(svc, "s", ShardFilter=shard_filter)]

    everything = ["shardId-000000000000", "shardId-000000000001", "shardId-000000000002", "shardId-000000000003"]
    assert [s["ShardId"] for s in list_all(svc, "s")] == everything
    assert ids({"Type": "FROM_TRIM_HORIZON"}) == everything
    assert ids({"Type": "AT_LATEST"}) == ["shardId-000000000001", "shardId-000000000002", "shardId-000000000003"]
    assert ids({"Type": "AT_TRIM_HORIZON"}) == ["shardId-000000000000", "shardId-000000000001"]
    assert ids({"Type": "AT_TIMESTAMP", "Timestamp": before_split}) == ["shardId-000000000000", "shardId-000000000001"]
    assert ids({"Type": "AT_TIMESTAMP", "Timestamp": before_split - 86400}) == \
        ["shardId-000000000000", "shardId-000000000001"]
    assert ids({"Type": "AT_TIMESTAMP", "Timestamp": after_split}) == \
        ["shardId-000000000001", "shardId-000000000002", "shardId-000000000003"]
    assert ids({"Type": "FROM_TIMESTAMP", "Timestamp": before_split}) == everything
    assert ids({"Type": "FROM_TIMESTAMP", "Timestamp": after_split}) == \
        ["shardId-000000000001", "shardId-000000000002", "shardId-000000000003"]
    assert ids({"Type": "AFTER_SHARD_ID", "ShardId": "shardId-000000000001"}) == \
        ["shardId-000000000002", "shardId-000000000003"]
    err = error(svc, "ListShards", StreamName="s", ShardFilter={"Type": "AFTER_SHARD_ID"})
    assert (err.code, err.message) == (
        "InvalidArgumentException", "ShardId must be supplied in a ShardFilter with a Type of AFTER_SHARD_ID")
    err = error(svc, "ListShards", StreamName="s", ShardFilter={"Type": "AT_TIMESTAMP"})
    assert err.message == "Timestamp must be supplied in a ShardFilter with a Type of FROM_TIMESTAMP or AT_TIMESTAMP"


def test_list_shards_next_token_keeps_the_filter(svc):
    create(svc, "s", 2)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(1 << 100))
    page = call(svc, "ListShards", StreamName="s", ShardFilter={"Type": "AT_LATEST"}, MaxResults=1)
    seen = [s["ShardId"] for s in page["Shards"]]
    while "NextToken" in page:
        page = call(svc, "ListShards", NextToken=page["NextToken"], MaxResults=1)
        seen += [s["ShardId"] for s in page["Shards"]]
    assert seen == ["shardId-000000000001", "shardId-000000000002", "shardId-000000000003"]


def test_list_shards_hides_shards_closed_before_retention(svc):
    create(svc, "s", 1)
    call(svc, "SplitShard", StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(1 << 127))
    parent = svc.streams["s"].shard("shardId-000000000000")
    parent.closed_at = time.time() - 25 * 3600  # closed longer ago than the 24 h retention
    assert [s["ShardId"] for s in list_all(svc, "s")] == ["shardId-000000000001", "shardId-000000000002"]
    assert [s["ShardId"] for s in list_all(svc, "s", ShardFilter={"Type": "AT_TRIM_HORIZON"})] == \
        ["shardId-000000000001", "shardId-000000000002"]
