"""Enhanced fan-out through boto3 against a real server: consumers, SubscribeToShard (read from
boto3's `EventStream`), and DeleteStream with registered consumers."""
from __future__ import annotations

import datetime
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError, EventStreamError

from conftest import client_for, start_server

ACCOUNT = "000000000000"
HEARTBEAT_S = 0.25
LIFETIME_S = 2.0


def error_of(excinfo) -> tuple[str, str]:
    err = excinfo.value.response["Error"]
    return err["Code"], err.get("Message", "")


def sid(index: int) -> str:
    return "shardId-%012d" % index


@pytest.fixture(scope="module")
def fanout(tmp_path_factory):
    """A server with short subscriptions and heartbeats, so their ends can be seen."""
    proc = start_server(tmp_path_factory, subscription_s=LIFETIME_S, subscription_heartbeat_s=HEARTBEAT_S)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def k(fanout):
    return client_for(fanout.url)


def new_stream(k, shards: int = 1) -> tuple[str, str]:
    name = "fan-" + uuid.uuid4().hex[:10]
    k.create_stream(StreamName=name, ShardCount=shards)
    return name, k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def new_consumer(k, stream_arn: str, name: str | None = None) -> str:
    return k.register_stream_consumer(StreamARN=stream_arn, ConsumerName=name or "c-" + uuid.uuid4().hex[:8])[
        "Consumer"]["ConsumerARN"]


class Subscriber:
    """Reads one `subscribe_to_shard` EventStream in a thread, noting when each event came."""

    def __init__(self, k, consumer_arn: str, shard_id: str = sid(0), **position):
        self.started = time.monotonic()
        self.response = k.subscribe_to_shard(ConsumerARN=consumer_arn, ShardId=shard_id, StartingPosition=position)
        self.events: list[tuple[float, dict]] = []
        self.error: BaseException | None = None
        self.ended = False
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for event in self.response["EventStream"]:
                with self.changed:
                    self.events.append((time.monotonic(), event["SubscribeToShardEvent"]))
                    self.changed.notify_all()
        except BaseException as exc:  # an error event, or the stream closed under us by close()
            self.error = exc
        finally:
            with self.changed:
                self.ended = True
                self.changed.notify_all()

    def wait_for(self, predicate, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"timed out; events so far: {self.events}"
                self.changed.wait(remaining)

    def records(self) -> list[tuple[float, dict]]:
        return [(t, r) for t, e in self.events for r in e["Records"]]

    def data(self) -> list[bytes]:
        return [r["Data"] for _, r in self.records()]

    def close(self) -> None:
        self.response["EventStream"].close()
        self.thread.join(5)


# The control plane


def test_register_describe_list_deregister(k):
    name, arn = new_stream(k)
    created = time.time()
    consumer = k.register_stream_consumer(StreamARN=arn, ConsumerName="reader")["Consumer"]
    assert consumer["ConsumerName"] == "reader"
    assert consumer["ConsumerStatus"] == "ACTIVE"  # this server has no state delays
    assert consumer["ConsumerARN"].startswith(f"{arn}/consumer/reader:")
    assert abs(int(consumer["ConsumerARN"].rsplit(":", 1)[1]) - created) <= 2
    assert isinstance(consumer["ConsumerCreationTimestamp"], datetime.datetime)

    by_arn = k.describe_stream_consumer(ConsumerARN=consumer["ConsumerARN"])["ConsumerDescription"]
    by_name = k.describe_stream_consumer(StreamARN=arn, ConsumerName="reader")["ConsumerDescription"]
    assert by_arn == by_name
    assert by_arn == {**consumer, "StreamARN": arn}
    summary = k.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["ConsumerCount"] == 1

    for i in range(4):
        k.register_stream_consumer(StreamARN=arn, ConsumerName=f"extra-{i}")
    page = k.list_stream_consumers(StreamARN=arn, MaxResults=2)
    seen = [c["ConsumerName"] for c in page["Consumers"]]
    assert len(seen) == 2 and page.get("NextToken")
    while page.get("NextToken"):
        page = k.list_stream_consumers(StreamARN=arn, NextToken=page["NextToken"], MaxResults=2)
        assert len(page["Consumers"]) <= 2
        seen += [c["ConsumerName"] for c in page["Consumers"]]
    assert sorted(seen) == sorted(["reader"] + [f"extra-{i}" for i in range(4)])
    assert len(seen) == 5
    everyone = k.list_stream_consumers(StreamARN=arn)
    assert "NextToken" not in everyone and len(everyone["Consumers"]) == 5
    assert all(c["ConsumerStatus"] == "ACTIVE" for c in everyone["Consumers"])
    # boto3's paginator follows the same tokens.
    paged = [c["ConsumerName"] for p in k.get_paginator("list_stream_consumers").paginate(
        StreamARN=arn, PaginationConfig={"PageSize": 2}) for c in p["Consumers"]]
    assert paged == seen

    k.deregister_stream_consumer(ConsumerARN=consumer["ConsumerARN"])
    k.deregister_stream_consumer(StreamARN=arn, ConsumerName="extra-0")
    left = sorted(c["ConsumerName"] for c in k.list_stream_consumers(StreamARN=arn)["Consumers"])
    assert left == ["extra-1", "extra-2", "extra-3"]
    with pytest.raises(ClientError) as e:
        k.describe_stream_consumer(ConsumerARN=consumer["ConsumerARN"])
    assert error_of(e)[0] == "ResourceNotFoundException"
    k.delete_stream(StreamName=name, EnforceConsumerDeletion=True)


def test_consumer_errors(k):
    name, arn = new_stream(k)
    new_consumer(k, arn, "dup")
    with pytest.raises(ClientError) as e:
        k.register_stream_consumer(StreamARN=arn, ConsumerName="dup")
    assert error_of(e) == ("ResourceInUseException",
                           f"Consumer dup under stream {name} already exists for account {ACCOUNT}.")
    missing_arn = arn.replace(name, "no-such-stream")
    with pytest.raises(ClientError) as e:
        k.register_stream_consumer(StreamARN=missing_arn, ConsumerName="x")
    assert error_of(e) == ("ResourceNotFoundException", f"Stream no-such-stream under account {ACCOUNT} not found.")
    with pytest.raises(ClientError) as e:
        k.list_stream_consumers(StreamARN=missing_arn)
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        k.describe_stream_consumer(StreamARN=arn, ConsumerName="nobody")
    code, message = error_of(e)
    assert code == "ResourceNotFoundException" and "nobody" in message
    with pytest.raises(ClientError) as e:
        k.describe_stream_consumer(ConsumerARN=f"{arn}/consumer/nobody:1700000000")
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        k.describe_stream_consumer(StreamARN=arn)
    assert error_of(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        k.deregister_stream_consumer(StreamARN=arn, ConsumerName="nobody")
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        k.list_stream_consumers(StreamARN=arn, NextToken="bogus-token")
    assert error_of(e)[0] == "InvalidArgumentException"
    for i in range(19):
        new_consumer(k, arn, f"n{i}")
    with pytest.raises(ClientError) as e:  # 20 per stream
        k.register_stream_consumer(StreamARN=arn, ConsumerName="one-too-many")
    assert error_of(e) == ("LimitExceededException",
                           f"Consumer limit of 20 reached for stream {name} under account {ACCOUNT}.")
    k.delete_stream(StreamName=name, EnforceConsumerDeletion=True)


# SubscribeToShard


def test_records_put_after_subscribing_arrive_at_once(k):
    name, arn = new_stream(k)
    consumer = new_consumer(k, arn)
    sub = Subscriber(k, consumer, Type="LATEST")
    try:
        time.sleep(0.1)
        latencies = []
        sent = []
        for i in range(5):
            put_at = time.monotonic()
            out = k.put_record(StreamName=name, Data=f"live-{i}".encode(), PartitionKey="p")
            sent.append(out["SequenceNumber"])
            sub.wait_for(lambda s: len(s.records()) == i + 1, timeout=2)
            latencies.append(sub.records()[-1][0] - put_at)
        assert max(latencies) < 0.5, latencies
        assert sub.data() == [f"live-{i}".encode() for i in range(5)]
        assert [r["SequenceNumber"] for _, r in sub.records()] == sent
        for _, event in sub.events:
            assert isinstance(event["MillisBehindLatest"], int) and event["MillisBehindLatest"] >= 0
            if event["Records"]:
                assert event["ContinuationSequenceNumber"] == event["Records"][-1]["SequenceNumber"]
                assert event["MillisBehindLatest"] == 0  # caught up
        assert all(isinstance(r["ApproximateArrivalTimestamp"], datetime.datetime) for _, r in sub.records())
        assert all(r["PartitionKey"] == "p" for _, r in sub.records())
    finally:
        sub.close()


def test_starting_positions(k):
    name, arn = new_stream(k)
    seqs = [k.put_record(StreamName=name, Data=f"r{i}".encode(), PartitionKey="p")["SequenceNumber"]
            for i in range(3)]
    time.sleep(0.05)
    between = datetime.datetime.now(datetime.timezone.utc)
    time.sleep(0.05)
    seqs.append(k.put_record(StreamName=name, Data=b"r3", PartitionKey="p")["SequenceNumber"])
    cases = [
        ({"Type": "TRIM_HORIZON"}, [b"r0", b"r1", b"r2", b"r3"]),
        ({"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": seqs[1]}, [b"r1", b"r2", b"r3"]),
        ({"Type": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": seqs[1]}, [b"r2", b"r3"]),
        ({"Type": "AT_TIMESTAMP", "Timestamp": between}, [b"r3"]),
        ({"Type": "LATEST"}, None),
    ]
    live: list[bytes] = []  # put while an earlier case was subscribed
    for n, (position, backlog) in enumerate(cases):
        sub = Subscriber(k, new_consumer(k, arn), **position)
        try:
            # The backlog comes first, then a record put now.
            sub.wait_for(lambda s: len(s.events) >= 1)
            new = f"new-{n}".encode()
            k.put_record(StreamName=name, Data=new, PartitionKey="p")
            sub.wait_for(lambda s: new in s.data())
            expected = [new] if backlog is None else backlog + live + [new]
            assert sub.data() == expected, position
            seqs_seen = [int(r["SequenceNumber"]) for _, r in sub.records()]
            assert seqs_seen == sorted(seqs_seen)
            live.append(new)
        finally:
            sub.close()
    # Resuming from a ContinuationSequenceNumber (AFTER_SEQUENCE_NUMBER) picks up exactly where
    # the last event stood.
    sub = Subscriber(k, new_consumer(k, arn), Type="TRIM_HORIZON")
    try:
        sub.wait_for(lambda s: len(s.records()) == 4 + len(cases))
        continuation = sub.events[-1][1]["ContinuationSequenceNumber"]
    finally:
        sub.close()
    k.put_record(StreamName=name, Data=b"after-resume", PartitionKey="p")
    sub = Subscriber(k, new_consumer(k, arn), Type="AFTER_SEQUENCE_NUMBER", SequenceNumber=continuation)
    try:
        sub.wait_for(lambda s: len(s.records()) >= 1)
        assert sub.data() == [b"after-resume"]
    finally:
        sub.close()


def test_backlog_reports_millis_behind_latest(k):
    name, arn = new_stream(k)
    # 3 MiB of backlog: more than one event carries (a shard's 2 MiB/s of enhanced fan-out).
    for _ in range(3):
        k.put_records(StreamName=name, Records=[{"Data": b"x" * (256 << 10), "PartitionKey": "p"}
                                                for _ in range(4)])
    time.sleep(0.3)
    sub = Subscriber(k, new_consumer(k, arn), Type="TRIM_HORIZON")
    try:
        sub.wait_for(lambda s: len(s.records()) == 12, timeout=10)
        with_records = [e for _, e in sub.events if e["Records"]]
        assert len(with_records) >= 2
        for event in with_records:
            assert event["ContinuationSequenceNumber"] == event["Records"][-1]["SequenceNumber"]
        # Behind while the backlog lasts (its records are 300 ms old), caught up at its end.
        assert with_records[0]["MillisBehindLatest"] >= 250
        assert with_records[-1]["MillisBehindLatest"] == 0
    finally:
        sub.close()


def test_heartbeats_and_subscription_end(k):
    name, arn = new_stream(k)
    consumer = new_consumer(k, arn)
    sub = Subscriber(k, consumer, Type="LATEST")
    sub.wait_for(lambda s: s.ended, timeout=LIFETIME_S + 3)
    elapsed = sub.events[-1][0] - sub.started
    assert LIFETIME_S - 0.3 <= elapsed <= LIFETIME_S + 1.0
    assert sub.error is None
    times = [sub.started] + [t for t, _ in sub.events]
    assert max(b - a for a, b in zip(times, times[1:])) < HEARTBEAT_S + 0.3
    assert all(e["Records"] == [] and e["MillisBehindLatest"] == 0 for _, e in sub.events)
    assert all("ContinuationSequenceNumber" in e for _, e in sub.events)
    # The pair (consumer, shard) is free again.
    Subscriber(k, consumer, Type="LATEST").close()


def test_one_subscription_per_consumer_and_shard(k):
    name, arn = new_stream(k, shards=2)
    consumer = new_consumer(k, arn)
    sub = Subscriber(k, consumer, Type="LATEST")
    try:
        with pytest.raises(ClientError) as e:
            k.subscribe_to_shard(ConsumerARN=consumer, ShardId=sid(0), StartingPosition={"Type": "LATEST"})
        assert error_of(e) == ("ResourceInUseException",
                               f"Another active subscription exists for this consumer: {ACCOUNT}:{name}:{sid(0)}:"
                               f"{consumer.split('/consumer/')[1].split(':')[0]}")
        other = Subscriber(k, consumer, sid(1), Type="LATEST")  # another shard is fine
        other.close()
    finally:
        sub.close()
    # A client that went away frees the pair once the server notices (at its next event).
    deadline = time.monotonic() + HEARTBEAT_S * 4 + 1
    while True:
        try:
            Subscriber(k, consumer, Type="LATEST").close()
            break
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ResourceInUseException"
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_subscribe_errors(k):
    name, arn = new_stream(k)
    consumer = new_consumer(k, arn)
    with pytest.raises(ClientError) as e:
        k.subscribe_to_shard(ConsumerARN=consumer, ShardId=sid(5), StartingPosition={"Type": "LATEST"})
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        k.subscribe_to_shard(ConsumerARN=f"{arn}/consumer/ghost:1700000000", ShardId=sid(0),
                             StartingPosition={"Type": "LATEST"})
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        k.subscribe_to_shard(ConsumerARN=consumer, ShardId=sid(0), StartingPosition={"Type": "AT_SEQUENCE_NUMBER"})
    assert error_of(e)[0] == "InvalidArgumentException"
    with pytest.raises(ClientError) as e:
        k.subscribe_to_shard(ConsumerARN=consumer, ShardId=sid(0),
                             StartingPosition={"Type": "AT_SEQUENCE_NUMBER", "SequenceNumber": "12345"})
    assert error_of(e)[0] == "InvalidArgumentException"


def test_a_closed_shard_ends_with_child_shards(k):
    name, arn = new_stream(k)
    k.put_record(StreamName=name, Data=b"before", PartitionKey="p")
    sub = Subscriber(k, new_consumer(k, arn), Type="TRIM_HORIZON")
    sub.wait_for(lambda s: s.data() == [b"before"])
    middle = 1 << 127
    k.split_shard(StreamName=name, ShardToSplit=sid(0), NewStartingHashKey=str(middle))
    sub.wait_for(lambda s: s.ended, timeout=30)
    assert sub.error is None
    last = sub.events[-1][1]
    assert last["ChildShards"] == [
        {"ShardId": sid(1), "ParentShards": [sid(0)],
         "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(middle - 1)}},
        {"ShardId": sid(2), "ParentShards": [sid(0)],
         "HashKeyRange": {"StartingHashKey": str(middle), "EndingHashKey": str(2**128 - 1)}},
    ]
    assert last.get("ContinuationSequenceNumber") is None  # nothing more to resume from
    assert sub.data() == [b"before"]
    # Subscribing to the closed parent replays what it holds, then ends the same way.
    sub = Subscriber(k, new_consumer(k, arn), Type="TRIM_HORIZON")
    sub.wait_for(lambda s: s.ended, timeout=30)
    assert sub.data() == [b"before"] and sub.events[-1][1]["ChildShards"] == last["ChildShards"]


def test_deleting_the_stream_ends_a_subscription_with_an_error(k):
    name, arn = new_stream(k)
    sub = Subscriber(k, new_consumer(k, arn), Type="LATEST")
    sub.wait_for(lambda s: len(s.events) >= 1)
    k.delete_stream(StreamName=name, EnforceConsumerDeletion=True)
    sub.wait_for(lambda s: s.ended, timeout=30)
    assert isinstance(sub.error, EventStreamError)
    assert sub.error.response["Error"]["Code"] == "ResourceNotFoundException"


# Consumer states, on a server with state delays


def test_a_consumer_that_is_not_active_cannot_subscribe(tmp_path_factory):
    """CREATING and DELETING last `update_stream_ms`. The consumer that is to be DELETING is made
    ACTIVE by a server without delays; the same data directory is then served with a ten-minute
    delay, so both states hold for the whole test however slowly its calls go (a 400 ms window
    closed between DeregisterStreamConsumer and DescribeStreamConsumer on a loaded CI machine)."""
    proc = start_server(tmp_path_factory)
    try:
        k = client_for(proc.url)
        name, arn = new_stream(k)
        live = k.register_stream_consumer(StreamARN=arn, ConsumerName="live")["Consumer"]["ConsumerARN"]
        sub = Subscriber(k, live, Type="LATEST")
        k.put_record(StreamName=name, Data=b"now", PartitionKey="p")
        sub.wait_for(lambda s: s.data() == [b"now"])
        sub.close()
    finally:
        proc.stop()
    proc.settings.update_stream_ms = 600_000
    proc.start()
    try:
        k = client_for(proc.url)
        consumer = k.register_stream_consumer(StreamARN=arn, ConsumerName="early")["Consumer"]
        assert consumer["ConsumerStatus"] == "CREATING"
        with pytest.raises(ClientError) as e:
            k.subscribe_to_shard(ConsumerARN=consumer["ConsumerARN"], ShardId=sid(0),
                                 StartingPosition={"Type": "LATEST"})
        code, message = error_of(e)
        assert code == "ResourceInUseException" and "early" in message and "ACTIVE" in message
        k.deregister_stream_consumer(ConsumerARN=live)
        assert k.describe_stream_consumer(ConsumerARN=live)["ConsumerDescription"]["ConsumerStatus"] == "DELETING"
        with pytest.raises(ClientError) as e:
            k.subscribe_to_shard(ConsumerARN=live, ShardId=sid(0), StartingPosition={"Type": "LATEST"})
        assert error_of(e)[0] == "ResourceInUseException"
    finally:
        proc.stop()


# DeleteStream with consumers


def test_delete_stream_with_consumers(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]
    consumer = new_consumer(kinesis, arn, "keeper")
    policy = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::'
              f'{ACCOUNT}:root"}},"Action":"kinesis:DescribeStreamSummary","Resource":"{arn}"}}]}}')
    kinesis.put_resource_policy(ResourceARN=arn, Policy=policy)
    kinesis.put_resource_policy(ResourceARN=consumer, Policy=policy.replace(arn, consumer))
    for enforce in ({}, {"EnforceConsumerDeletion": False}):
        with pytest.raises(ClientError) as e:
            kinesis.delete_stream(StreamName=stream_name, **enforce)
        assert error_of(e) == (
            "ResourceInUseException",
            f"Stream {stream_name} under account {ACCOUNT} has registered consumers. Either deregister the "
            "consumers or set EnforceConsumerDeletion to true.")
    assert kinesis.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"] == \
        "ACTIVE"

    kinesis.delete_stream(StreamARN=arn, EnforceConsumerDeletion=True)
    with pytest.raises(ClientError) as e:
        kinesis.describe_stream_summary(StreamName=stream_name)
    assert error_of(e)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        kinesis.describe_stream_consumer(ConsumerARN=consumer)
    assert error_of(e)[0] == "ResourceNotFoundException"

    # A new stream of the same name starts with nothing of the old one's.
    kinesis.create_stream(StreamName=stream_name, ShardCount=1)
    assert kinesis.list_stream_consumers(StreamARN=arn)["Consumers"] == []
    assert kinesis.get_resource_policy(ResourceARN=arn)["Policy"] == "{}"
    assert kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["ConsumerCount"] == 0
    again = new_consumer(kinesis, arn, "keeper")
    assert kinesis.get_resource_policy(ResourceARN=again)["Policy"] == "{}"
    kinesis.delete_stream(StreamName=stream_name, EnforceConsumerDeletion=True)


def test_delete_stream_after_deregistering_needs_no_enforcement(kinesis, stream_name):
    kinesis.create_stream(StreamName=stream_name, ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]
    consumer = new_consumer(kinesis, arn)
    kinesis.deregister_stream_consumer(ConsumerARN=consumer)
    kinesis.delete_stream(StreamName=stream_name)
    assert stream_name not in kinesis.list_streams(Limit=10000)["StreamNames"]
