"""Retention through boto3 against a real server: expired records are no longer returned and their
rows leave the store; the retention period's limits and AWS's messages.

Time is shortened only through the server's documented `retention_hour_s` setting (seconds in one
hour of a retention period): at 0.125, the 24-hour minimum lasts 3 seconds.
"""
from __future__ import annotations

import os
import sqlite3
import time

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

ACCOUNT = "000000000000"
HOUR_S = 0.125
RETENTION_S = 24 * HOUR_S  # a new stream's 24 hours


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def sid(index: int) -> str:
    return "shardId-%012d" % index


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    proc = start_server(tmp_path_factory, retention_hour_s=HOUR_S, retention_sweep_s=0.2)
    yield proc
    proc.stop()


def stored_sequence_numbers(proc, sequence_numbers: list[str]) -> set[str]:
    """Which of these records still have a row in the server's SQLite file."""
    conn = sqlite3.connect(os.path.join(proc.settings.data_dir, "kinesim.db"), timeout=10)
    try:
        marks = ",".join("?" * len(sequence_numbers))
        return {seq for (seq,) in conn.execute(f"SELECT seq FROM records WHERE seq IN ({marks})", sequence_numbers)}
    finally:
        conn.close()


def read_shard(k, name: str, shard_id: str = sid(0)) -> list[dict]:
    iterator = k.get_shard_iterator(StreamName=name, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"]
    records: list[dict] = []
    while iterator:
        resp = k.get_records(ShardIterator=iterator)
        records += resp["Records"]
        if not resp["Records"] or resp.get("MillisBehindLatest", 0) == 0:
            break
        iterator = resp.get("NextShardIterator")
    return records


def test_expired_records_are_not_returned_and_their_rows_are_deleted(short):
    k = client_for(short.url)
    k.create_stream(StreamName="expiring", ShardCount=1)
    old = [k.put_record(StreamName="expiring", Data=f"old-{i}".encode(), PartitionKey="p")["SequenceNumber"]
           for i in range(5)]
    stored = read_shard(k, "expiring")
    assert [r["Data"] for r in stored] == [f"old-{i}".encode() for i in range(5)]
    # Times from when the records arrived (the server's clock is this machine's), not from when the
    # puts were started: on a busy machine five puts can take a good part of a second.
    old_arrived = max(r["ApproximateArrivalTimestamp"].timestamp() for r in stored)
    assert stored_sequence_numbers(short, old) == set(old)
    # An iterator taken now, while the old records are live, points at the first of them.
    early_iterator = k.get_shard_iterator(StreamName="expiring", ShardId=sid(0),
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    time.sleep(max(0.0, old_arrived + RETENTION_S * 0.75 - time.time()))
    new_put = time.time()
    new = [k.put_record(StreamName="expiring", Data=f"new-{i}".encode(), PartitionKey="p")["SequenceNumber"]
           for i in range(3)]
    time.sleep(max(0.0, old_arrived + RETENTION_S + 0.2 - time.time()))
    assert time.time() < new_put + RETENTION_S - 0.5, "too slow to see the old expired and the new not"

    # Reads hide the expired records at once, whatever the sweeper has done.
    assert [r["Data"] for r in read_shard(k, "expiring")] == [f"new-{i}".encode() for i in range(3)]
    assert [r["SequenceNumber"] for r in k.get_records(ShardIterator=early_iterator)["Records"]] == new
    at_old = k.get_shard_iterator(StreamName="expiring", ShardId=sid(0), ShardIteratorType="AT_SEQUENCE_NUMBER",
                                  StartingSequenceNumber=old[2])["ShardIterator"]
    assert [r["SequenceNumber"] for r in k.get_records(ShardIterator=at_old)["Records"]] == new

    # The sweeper deletes their rows; the live records stay.
    deadline = time.monotonic() + 30
    while stored_sequence_numbers(short, old):
        assert time.monotonic() < deadline, "expired rows still stored"
        time.sleep(0.05)
    assert stored_sequence_numbers(short, new) == set(new)

    # Sequence numbers go on increasing after the expired records are gone.
    after = k.put_record(StreamName="expiring", Data=b"later", PartitionKey="p")["SequenceNumber"]
    assert int(after) > int(new[-1])


def test_longer_retention_keeps_records(short):
    k = client_for(short.url)
    k.create_stream(StreamName="keeping", ShardCount=1)
    k.create_stream(StreamName="default", ShardCount=1)
    k.increase_stream_retention_period(StreamName="keeping", RetentionPeriodHours=72)
    kept = k.put_record(StreamName="keeping", Data=b"kept", PartitionKey="p")["SequenceNumber"]
    dropped = k.put_record(StreamName="default", Data=b"dropped", PartitionKey="p")["SequenceNumber"]
    time.sleep(RETENTION_S + 0.2)  # past 24 "hours"
    assert [r["Data"] for r in read_shard(k, "keeping")] == [b"kept"]
    assert read_shard(k, "default") == []
    deadline = time.monotonic() + 30  # the sweeper's next rounds delete the row
    while stored_sequence_numbers(short, [kept, dropped]) != {kept}:
        assert time.monotonic() < deadline, stored_sequence_numbers(short, [kept, dropped])
        time.sleep(0.05)


def test_closed_shards_are_listed_until_retention_has_passed(short):
    k = client_for(short.url)
    k.create_stream(StreamName="resharded", ShardCount=1)
    k.put_record(StreamName="resharded", Data=b"in-parent", PartitionKey="p")
    k.split_shard(StreamName="resharded", ShardToSplit=sid(0), NewStartingHashKey=str(1 << 127))
    listed = [s["ShardId"] for s in k.list_shards(StreamName="resharded")["Shards"]]
    assert listed == [sid(0), sid(1), sid(2)]
    time.sleep(RETENTION_S + 0.3)
    assert [s["ShardId"] for s in k.list_shards(StreamName="resharded")["Shards"]] == [sid(1), sid(2)]
    assert [s["ShardId"] for s in k.describe_stream(StreamName="resharded")["StreamDescription"]["Shards"]] == \
        [sid(1), sid(2)]
    with pytest.raises(ClientError) as e:
        k.get_shard_iterator(StreamName="resharded", ShardId=sid(0), ShardIteratorType="TRIM_HORIZON")
    assert error_of(e) == ("ResourceNotFoundException",
                           f"Shard {sid(0)} in stream resharded under account {ACCOUNT} does not exist")


# IncreaseStreamRetentionPeriod / DecreaseStreamRetentionPeriod


def retention(kinesis, name: str) -> int:
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["RetentionPeriodHours"]


def test_increase_and_decrease(kinesis, make_stream):
    name = make_stream()
    assert retention(kinesis, name) == 24
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=168)
    assert retention(kinesis, name) == 168
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=168)  # same value: fine
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=8760)
    assert retention(kinesis, name) == 8760
    arn = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    kinesis.decrease_stream_retention_period(StreamARN=arn, RetentionPeriodHours=48)
    assert retention(kinesis, name) == 48
    kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=24)
    assert retention(kinesis, name) == 24
    assert kinesis.describe_stream(StreamName=name)["StreamDescription"]["RetentionPeriodHours"] == 24


@pytest.mark.parametrize("op", ["increase", "decrease"])
def test_retention_bounds(kinesis, make_stream, op):
    name = make_stream()
    if op == "decrease":
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=100)
    call = getattr(kinesis, f"{op}_stream_retention_period")
    for hours in (23, 1, 0, -5):
        with pytest.raises(ClientError) as e:
            call(StreamName=name, RetentionPeriodHours=hours)
        assert error_of(e) == ("InvalidArgumentException",
                               f"Minimum allowed retention period is 24 hours. Requested retention period ({hours} "
                               "hours) is too short.")
    for hours in (8761, 100000):
        with pytest.raises(ClientError) as e:
            call(StreamName=name, RetentionPeriodHours=hours)
        assert error_of(e) == ("InvalidArgumentException",
                               f"Maximum allowed retention period is 8760 hours. Requested retention period ({hours} "
                               "hours) is too long.")
    assert retention(kinesis, name) == (24 if op == "increase" else 100)


def test_increase_to_less_and_decrease_to_more(kinesis, make_stream):
    name = make_stream()
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=48)
    with pytest.raises(ClientError) as e:
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=36)
    assert error_of(e) == ("InvalidArgumentException",
                           f"Requested retention period (36 hours) for stream {name} can not be shorter than existing "
                           "retention period (48 hours). Use DecreaseRetentionPeriod API.")
    with pytest.raises(ClientError) as e:
        kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=72)
    assert error_of(e) == ("InvalidArgumentException",
                           f"Requested retention period (72 hours) for stream {name} can not be longer than existing "
                           "retention period (48 hours). Use IncreaseRetentionPeriod API.")
    assert retention(kinesis, name) == 48
    with pytest.raises(ClientError) as e:
        kinesis.increase_stream_retention_period(StreamName="no-such-stream", RetentionPeriodHours=48)
    assert error_of(e) == ("ResourceNotFoundException", f"Stream no-such-stream under account {ACCOUNT} not found.")


def test_retention_change_needs_an_active_stream(tmp_path_factory):
    proc = start_server(tmp_path_factory, update_stream_ms=600_000)  # UPDATING outlasts the test
    try:
        k = client_for(proc.url)
        k.create_stream(StreamName="busy", ShardCount=2)
        k.split_shard(StreamName="busy", ShardToSplit=sid(0), NewStartingHashKey="1000")
        for call in (k.increase_stream_retention_period, k.decrease_stream_retention_period):
            with pytest.raises(ClientError) as e:
                call(StreamName="busy", RetentionPeriodHours=48)
            assert error_of(e) == ("ResourceInUseException",
                                   f"Stream busy under account {ACCOUNT} not ACTIVE, instead in state UPDATING")
    finally:
        proc.stop()
