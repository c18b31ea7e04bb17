"""Sequence numbers, shard ids and shard iterators as AWS checks them (issue 10, items 6 and 7).

Expected texts are AWS's as recorded by kinesalite's tests against production Kinesis
(test/getShardIterator.js, test/putRecord.js, test/splitShard.js, test/helpers.js)."""
from __future__ import annotations

import base64
import re
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

ACCOUNT = "000000000000"


def error(call, **kw) -> tuple[str, str | None, int]:
    with pytest.raises(ClientError) as e:
        call(**kw)
    resp = e.value.response
    return resp["Error"]["Code"], resp["Error"].get("Message"), resp["ResponseMetadata"]["HTTPStatusCode"]


def seq_from_hex(text: str) -> str:
    return str(int(text, 16))


@pytest.mark.parametrize("given", ["2147483647", "abc-2147483647", "a-00002147483647", "-00002147483647"])
def test_missing_stream_names_the_shard(kinesis, given):
    name = "nope-" + uuid.uuid4().hex[:8]
    assert error(kinesis.get_shard_iterator, StreamName=name, ShardId=given, ShardIteratorType="LATEST") == (
        "ResourceNotFoundException",
        f"Shard shardId-002147483647 in stream {name} under account {ACCOUNT} does not exist", 400)


@pytest.mark.parametrize("given", ["2147483648", "shardId-002147483648", "ABKLFD8", "2.14E4"])
def test_shard_id_text_is_checked_before_the_stream(kinesis, given):
    name = "nope-" + uuid.uuid4().hex[:8]
    assert error(kinesis.get_shard_iterator, StreamName=name, ShardId=given, ShardIteratorType="LATEST") == (
        "ResourceNotFoundException", f"Could not find shard {given} in stream {name} under account {ACCOUNT}.", 400)


def test_shard_id_with_long_zero_padding_resolves(kinesis, make_stream):
    name = make_stream()
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="a-00000000000000", ShardIteratorType="LATEST")
    assert it["ShardIterator"]


def test_at_timestamp_in_the_future_is_refused(kinesis, make_stream):
    name = make_stream()
    future = time.time() + 3600
    code, message, status = error(kinesis.get_shard_iterator, StreamName=name, ShardId="shardId-000000000000",
                                  ShardIteratorType="AT_TIMESTAMP", Timestamp=future)
    assert (code, status) == ("InvalidArgumentException", 400)
    m = re.fullmatch(r"The timestampInMillis parameter cannot be greater than the currentTimestampInMillis\. "
                     r"timestampInMillis: (\d+), currentTimestampInMillis: (\d+)", message)
    assert m and int(m.group(1)) == int(future * 1000) and int(m.group(1)) > int(m.group(2))
    # A moment ago is fine.
    kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000", ShardIteratorType="AT_TIMESTAMP",
                               Timestamp=time.time() - 1)


def test_starting_sequence_number_checks(kinesis, make_stream):
    name = make_stream()
    where = f"used in GetShardIterator on shard shardId-000000000000 in stream {name} under account {ACCOUNT}"

    def at(seq):
        return error(kinesis.get_shard_iterator, StreamName=name, ShardId="shardId-000000000000",
                     ShardIteratorType="AT_SEQUENCE_NUMBER", StartingSequenceNumber=seq)

    assert at("5") == ("InvalidArgumentException", "Invalid StartingSequenceNumber. It encodes shardId-000000000005, "
                       "while it was used in a call to a shard with shardId-000000000000", 400)
    code, _, status = at("0")     # a small ("version 0") number of the right shard
    assert (code, status) == ("InternalFailure", 500)
    large_date = seq_from_hex("13bb2cc3d80000000000000000000000")
    assert at(large_date) == ("InvalidArgumentException", f"StartingSequenceNumber {large_date} {where} is invalid.", 400)
    index_too_high = seq_from_hex("200000000008" + "0" * 34 + "2")
    assert at(index_too_high) == ("InvalidArgumentException",
                                  f"StartingSequenceNumber {index_too_high} {where} is invalid.", 400)
    assert at(seq_from_hex("2" + "0" * 37 + "800000002")) == (
        "InvalidArgumentException", "Invalid StartingSequenceNumber. It encodes shardId--02147483648, while it was "
        "used in a call to a shard with shardId-000000000000", 400)
    version_1 = seq_from_hex("2" + "0" * 45 + "1")
    assert at(version_1) == ("InvalidArgumentException",
                             f"StartingSequenceNumber {version_1} {where} is invalid because it did not come from "
                             "this stream.", 400)
    # Ours still work, and after a record the next one is read.
    first = kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k")["SequenceNumber"]
    kinesis.put_record(StreamName=name, Data=b"b", PartitionKey="k")
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=first)
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=it["ShardIterator"])["Records"]] == [b"b"]


ORDERING_REFUSED = [
    "2" + "0" * 46,                                       # version 0 in the last digit
    "2" + "0" * 45 + "4",                                 # version 4
    "2" + "0" * 45 + "3",                                 # version 3
    "3" + "0" * 45 + "1",                                 # initial 3
    "1ffffffffff7fffffffffffffff000000000007fffffff2",    # initial 1
    "200000000008" + "0" * 34 + "2",                      # record index too high
    "13bb2cc3d80000000000000000000000",                   # date too large (version 0)
    "2ffffffffff7fffffffffffffff000000000007fffffff2",    # all f
]
ORDERING_ACCEPTED = [
    "2" + "0" * 45 + "2",                                 # all 0
    "2" + "0" * 45 + "1",                                 # all 0, version 1
    "2" + "0" * 37 + "800000002",                         # 8 near the end
]


@pytest.mark.parametrize("hex_seq", ORDERING_REFUSED)
def test_sequence_number_for_ordering_refused(kinesis, make_stream, hex_seq):
    name = make_stream()
    seq = seq_from_hex(hex_seq)
    assert error(kinesis.put_record, StreamName=name, Data=b"x", PartitionKey="k",
                 SequenceNumberForOrdering=seq) == (
        "InvalidArgumentException",
        f"ExclusiveMinimumSequenceNumber {seq} used in PutRecord on stream {name} under account {ACCOUNT} is invalid.",
        400)


@pytest.mark.parametrize("hex_seq", ORDERING_ACCEPTED)
def test_sequence_number_for_ordering_accepted(kinesis, make_stream, hex_seq):
    name = make_stream()
    out = kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k", SequenceNumberForOrdering=seq_from_hex(hex_seq))
    assert out["SequenceNumber"]


def test_sequence_number_for_ordering_from_the_future_refused(kinesis, make_stream):
    name = make_stream()
    mine = kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")["SequenceNumber"]
    kinesis.put_record(StreamName=name, Data=b"y", PartitionKey="k", SequenceNumberForOrdering=mine)
    text = "%x" % int(mine)
    future = seq_from_hex(text[:29] + "%09x" % (int(time.time()) + 3600) + text[38:])
    assert error(kinesis.put_record, StreamName=name, Data=b"x", PartitionKey="k",
                 SequenceNumberForOrdering=future)[1] == (
        f"ExclusiveMinimumSequenceNumber {future} used in PutRecord on stream {name} under account {ACCOUNT} is invalid.")


def test_split_and_merge_check_active_first(tmp_path_factory):
    proc = start_server(tmp_path_factory, update_stream_ms=600_000)
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="s", ShardCount=2)
        k.split_shard(StreamName="s", ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**126))
        in_use = ("ResourceInUseException", f"Stream s under account {ACCOUNT} not ACTIVE, instead in state UPDATING",
                  400)
        # A shard that does not exist, one already split, a bad hash key: the stream's state comes first.
        assert error(k.split_shard, StreamName="s", ShardToSplit="shardId-000000000009", NewStartingHashKey="5") == in_use
        assert error(k.split_shard, StreamName="s", ShardToSplit="shard-1", NewStartingHashKey="0") == in_use
        assert error(k.merge_shards, StreamName="s", ShardToMerge="shardId-000000000000",
                     AdjacentShardToMerge="shardId-000000000009") == in_use
        # The shard id's text is checked before anything else.
        assert error(k.split_shard, StreamName="s", ShardToSplit="ABKLFD8", NewStartingHashKey="5") == (
            "ResourceNotFoundException", f"Could not find shard ABKLFD8 in stream s under account {ACCOUNT}.", 400)
        assert error(k.merge_shards, StreamName="gone", ShardToMerge="shardId-000000000000",
                     AdjacentShardToMerge="2.14E4") == (
            "ResourceNotFoundException", f"Could not find shard 2.14E4 in stream gone under account {ACCOUNT}.", 400)
    finally:
        proc.stop()


def test_iterator_looks_like_aws_and_is_opaque(kinesis, make_stream):
    name = make_stream()
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    raw = base64.b64decode(it)
    # kinesalite's assertShardIterator, checked against AWS's: canonical base64, version 1, 16-byte blocks.
    assert base64.b64encode(raw).decode() == it
    assert raw[:8] == b"\x00\x00\x00\x00\x00\x00\x00\x01"
    assert len(raw) >= 152 and (len(raw) - 152) % 16 == 0
    assert name.encode() not in raw and b"shardId" not in raw


def test_iterator_is_tamper_evident_and_accepts_quotes(kinesis, make_stream):
    name = make_stream()
    kinesis.put_record(StreamName=name, Data=b"a", PartitionKey="k")
    it = kinesis.get_shard_iterator(StreamName=name, ShardId="shardId-000000000000",
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    raw = bytearray(base64.b64decode(it))
    for at in (8, 40, len(raw) - 1):
        forged = bytearray(raw)
        forged[at] ^= 1
        assert error(kinesis.get_records, ShardIterator=base64.b64encode(bytes(forged)).decode()) == (
            "InvalidArgumentException", "Invalid ShardIterator.", 400)
    # LocalStack's AWS-validated test_get_records_shard_iterator_with_surrounding_quotes.
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=f'"{it}"')["Records"]] == [b"a"]


def test_iterator_survives_kill9(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="s", ShardCount=1)
        k.put_record(StreamName="s", Data=b"a", PartitionKey="k")
        it = k.get_shard_iterator(StreamName="s", ShardId="shardId-000000000000",
                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        proc.kill()
        proc.start()
        assert [r["Data"] for r in client_for(proc.url).get_records(ShardIterator=it)["Records"]] == [b"a"]
    finally:
        proc.stop()
