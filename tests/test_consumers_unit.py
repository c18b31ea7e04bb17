"""Consumers (enhanced fan-out), SubscribeToShard, tags and resource policies, called through
`KinesisService.call` as the edge calls them (no HTTP)."""
from __future__ import annotations

import base64
import json
import threading
import time
from types import SimpleNamespace

import pytest
from botocore.eventstream import EventStreamBuffer

from kinesim.kinesis import consumers
from kinesim.protocol import codec
from kinesim.protocol.errors import AwsError

from conftest import make_service

ACCOUNT = "000000000000"


def create_stream(svc, name="s", shards=1) -> str:
    svc.call("CreateStream", {"StreamName": name, "ShardCount": shards})
    return svc.stream_arn(name)


def register(svc, stream_arn, name="c") -> dict:
    return svc.call("RegisterStreamConsumer", {"StreamARN": stream_arn, "ConsumerName": name})["Consumer"]


def put(svc, stream="s", data=b"x", key="k", **extra) -> dict:
    # Requests arrive as the JSON protocol sends them: blobs base64-encoded.
    return svc.call("PutRecord", {"StreamName": stream, "Data": base64.b64encode(data).decode(),
                                  "PartitionKey": key, **extra})


def error(fn, *args) -> AwsError:
    with pytest.raises(AwsError) as e:
        fn(*args)
    return e.value


class Reader:
    """Iterates a SubscribeToShard response in a thread, recording each frame and when it came."""

    def __init__(self, response):
        assert response.content_type == "application/vnd.amazon.eventstream"
        self.chunks = response.encoded(lambda body: codec.encode_response(body, "json")[0], "application/json")
        self.frames: list[tuple[float, dict, bytes]] = []
        self.changed = threading.Condition()
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        buf = EventStreamBuffer()
        try:
            for chunk in self.chunks:
                buf.add_data(chunk)
                for message in buf:
                    with self.changed:
                        self.frames.append((time.monotonic(), message.headers, message.payload))
                        self.changed.notify_all()
        finally:
            with self.changed:
                self.done = True
                self.changed.notify_all()

    def wait_for(self, predicate, timeout=30.0):
        deadline = time.monotonic() + timeout
        with self.changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"timed out; frames so far: {[f[1] for f in self.frames]}"
                self.changed.wait(remaining)

    def events(self) -> list[tuple[float, dict]]:
        """(arrival time, parsed payload) of every SubscribeToShardEvent so far."""
        return [(t, json.loads(p)) for t, h, p in self.frames if h.get(":event-type") == "SubscribeToShardEvent"]

    def records(self) -> list[tuple[float, dict]]:
        return [(t, r) for t, e in self.events() for r in e["Records"]]

    def close(self):
        self.chunks.close()
        self.thread.join(5)
        assert not self.thread.is_alive()


def subscribe(svc, consumer_arn, shard="shardId-000000000000", kind="LATEST", **position) -> Reader:
    response = svc.call("SubscribeToShard", {"ConsumerARN": consumer_arn, "ShardId": shard,
                                             "StartingPosition": {"Type": kind, **position}})
    reader = Reader(response)
    reader.wait_for(lambda r: len(r.frames) >= 1)
    return reader


# consumers: the control plane

def test_register_describe_list_deregister(svc):
    stream_arn = create_stream(svc)
    before = time.time()
    consumer = register(svc, stream_arn, "app-1")
    assert consumer["ConsumerName"] == "app-1"
    assert consumer["ConsumerStatus"] == "ACTIVE"  # update_stream_ms=0
    created = consumer["ConsumerCreationTimestamp"]
    assert before - 1 <= created <= time.time()
    assert consumer["ConsumerARN"] == f"{stream_arn}/consumer/app-1:{int(created)}"

    by_arn = svc.call("DescribeStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})["ConsumerDescription"]
    by_name = svc.call("DescribeStreamConsumer",
                       {"StreamARN": stream_arn, "ConsumerName": "app-1"})["ConsumerDescription"]
    assert by_arn == by_name == {**consumer, "StreamARN": stream_arn}

    register(svc, stream_arn, "app-2")
    listed = svc.call("ListStreamConsumers", {"StreamARN": stream_arn})
    assert [c["ConsumerName"] for c in listed["Consumers"]] == ["app-1", "app-2"]
    assert "NextToken" not in listed
    assert svc.call("DescribeStreamSummary", {"StreamName": "s"})["StreamDescriptionSummary"]["ConsumerCount"] == 2

    svc.call("DeregisterStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})
    svc.call("DeregisterStreamConsumer", {"StreamARN": stream_arn, "ConsumerName": "app-2"})
    assert svc.call("ListStreamConsumers", {"StreamARN": stream_arn})["Consumers"] == []
    e = error(svc.call, "DescribeStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})
    assert (e.code, e.message) == ("ResourceNotFoundException",
                                   f"Consumer {consumer['ConsumerARN']}, account {ACCOUNT} not found.")


def test_consumer_states_apply_lazily(tmp_path, monkeypatch):
    """CREATING and DELETING last update_stream_ms of wall-clock time; the consumers module reads a
    clock the test moves, so the states end when the test says, not when a busy machine lets it."""
    clock = [time.time()]
    monkeypatch.setattr(consumers, "time", SimpleNamespace(time=lambda: clock[0], monotonic=time.monotonic))
    svc = make_service(tmp_path, update_stream_ms=1000)
    arn = create_stream(svc)
    consumer = register(svc, arn)
    assert consumer["ConsumerStatus"] == "CREATING"
    e = error(svc.call, "SubscribeToShard", {"ConsumerARN": consumer["ConsumerARN"], "ShardId": "shardId-000000000000",
                                             "StartingPosition": {"Type": "LATEST"}})
    assert e.code == "ResourceInUseException"
    assert e.message == (f"Consumer c with creation timestamp {int(consumer['ConsumerCreationTimestamp'])} "
                         f"under stream: s , account {ACCOUNT} is not in ACTIVE status.")
    clock[0] += 0.9
    assert describe_status(svc, consumer) == "CREATING"
    clock[0] += 0.2
    assert describe_status(svc, consumer) == "ACTIVE"

    svc.call("DeregisterStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})
    clock[0] += 0.9
    listed = svc.call("ListStreamConsumers", {"StreamARN": arn})["Consumers"]
    assert [c["ConsumerStatus"] for c in listed] == ["DELETING"]
    clock[0] += 0.2
    assert svc.call("ListStreamConsumers", {"StreamARN": arn})["Consumers"] == []
    svc.store.close()


def describe_status(svc, consumer: dict) -> str:
    return svc.call("DescribeStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})[
        "ConsumerDescription"]["ConsumerStatus"]


def test_consumers_survive_restart(tmp_path):
    svc = make_service(tmp_path)
    arn = create_stream(svc)
    consumer = register(svc, arn)
    svc.call("TagResource", {"ResourceARN": consumer["ConsumerARN"], "Tags": {"team": "data"}})
    svc.store.close()
    again = make_service(tmp_path)
    assert again.call("DescribeStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})[
        "ConsumerDescription"]["ConsumerName"] == "c"
    assert again.call("ListTagsForResource", {"ResourceARN": consumer["ConsumerARN"]})["Tags"] == [
        {"Key": "team", "Value": "data"}]
    again.store.close()


def test_register_errors(svc):
    arn = create_stream(svc)
    register(svc, arn, "dup")
    e = error(register, svc, arn, "dup")
    assert (e.code, e.message) == ("ResourceInUseException",
                                   f"Consumer dup under stream s already exists for account {ACCOUNT}.")
    for i in range(19):
        register(svc, arn, f"c{i}")
    e = error(register, svc, arn, "one-too-many")
    assert e.code == "LimitExceededException" and "20" in e.message
    assert len(svc.call("ListStreamConsumers", {"StreamARN": arn})["Consumers"]) == 20

    missing = svc.stream_arn("nope")
    e = error(register, svc, missing, "c")
    assert (e.code, e.message) == ("ResourceNotFoundException", f"Stream nope under account {ACCOUNT} not found.")
    e = error(svc.call, "RegisterStreamConsumer", {"StreamARN": arn, "ConsumerName": "bad name!"})
    assert e.code == "ValidationException" and "consumerName" in e.message


def test_describe_and_deregister_errors(svc):
    arn = create_stream(svc)
    e = error(svc.call, "DescribeStreamConsumer", {"StreamARN": arn, "ConsumerName": "ghost"})
    assert (e.code, e.message) == ("ResourceNotFoundException", f"Consumer ghost, account {ACCOUNT} not found.")
    e = error(svc.call, "DeregisterStreamConsumer", {"StreamARN": arn})
    assert e.code == "InvalidArgumentException"
    consumer = register(svc, arn)
    # The ARN carries the creation time: another time names another (nonexistent) consumer.
    stale = consumer["ConsumerARN"].rsplit(":", 1)[0] + ":1"
    e = error(svc.call, "DescribeStreamConsumer", {"ConsumerARN": stale})
    assert e.code == "ResourceNotFoundException"


def test_list_stream_consumers_pages(svc):
    arn = create_stream(svc)
    names = [f"c{i:02d}" for i in range(7)]
    for n in names:
        register(svc, arn, n)
    seen, token = [], None
    while True:
        params = {"StreamARN": arn, "MaxResults": 3}
        if token:
            params["NextToken"] = token
        page = svc.call("ListStreamConsumers", params)
        assert len(page["Consumers"]) <= 3
        seen += [c["ConsumerName"] for c in page["Consumers"]]
        token = page.get("NextToken")
        if not token:
            break
    assert seen == names
    e = error(svc.call, "ListStreamConsumers", {"StreamARN": arn, "NextToken": "bogus"})
    assert e.code == "InvalidArgumentException"
    created = svc.call("DescribeStreamSummary", {"StreamName": "s"})["StreamDescriptionSummary"][
        "StreamCreationTimestamp"]
    assert len(svc.call("ListStreamConsumers", {"StreamARN": arn, "StreamCreationTimestamp": created})[
        "Consumers"]) == 7
    e = error(svc.call, "ListStreamConsumers", {"StreamARN": arn, "StreamCreationTimestamp": created - 3600})
    assert e.code == "ResourceNotFoundException"


# SubscribeToShard

def test_subscribe_pushes_records_within_milliseconds(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    reader = subscribe(svc, consumer["ConsumerARN"])
    assert reader.frames[0][1][":event-type"] == "initial-response"
    assert reader.frames[0][1][":message-type"] == "event"
    latencies = []
    sent = []
    for i in range(5):
        data = f"record-{i}".encode()
        t0 = time.monotonic()
        resp = put(svc, data=data, key=f"k{i}")
        sent.append((resp["SequenceNumber"], data, f"k{i}"))
        reader.wait_for(lambda r: len(r.records()) > i)
        latencies.append(reader.records()[i][0] - t0)
    assert max(latencies) < 0.1, latencies
    got = [r for _, r in reader.records()]
    assert [(r["SequenceNumber"], base64.b64decode(r["Data"]), r["PartitionKey"]) for r in got] == sent
    assert all(abs(r["ApproximateArrivalTimestamp"] - time.time()) < 60 for r in got)
    last = reader.events()[-1][1]
    assert last["ContinuationSequenceNumber"] == sent[-1][0]
    assert last["MillisBehindLatest"] == 0
    assert "ChildShards" not in last
    reader.close()


def test_subscribe_from_trim_horizon_and_sequence_numbers(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    seqs = [put(svc, data=f"r{i}".encode())["SequenceNumber"] for i in range(4)]
    reader = subscribe(svc, consumer["ConsumerARN"], kind="TRIM_HORIZON")
    reader.wait_for(lambda r: len(r.records()) == 4)
    assert [r["SequenceNumber"] for _, r in reader.records()] == seqs
    reader.close()

    reader = subscribe(svc, consumer["ConsumerARN"], kind="AT_SEQUENCE_NUMBER", SequenceNumber=seqs[1])
    reader.wait_for(lambda r: len(r.records()) == 3)
    assert [r["SequenceNumber"] for _, r in reader.records()] == seqs[1:]
    reader.close()

    reader = subscribe(svc, consumer["ConsumerARN"], kind="AFTER_SEQUENCE_NUMBER", SequenceNumber=seqs[3])
    put(svc, data=b"later")
    reader.wait_for(lambda r: len(r.records()) == 1)
    assert base64.b64decode(reader.records()[0][1]["Data"]) == b"later"
    reader.close()


def test_subscribe_at_timestamp(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    put(svc, data=b"old")
    time.sleep(0.05)
    cut = time.time()
    time.sleep(0.05)
    put(svc, data=b"new")
    reader = subscribe(svc, consumer["ConsumerARN"], kind="AT_TIMESTAMP", Timestamp=cut)
    reader.wait_for(lambda r: len(r.records()) == 1)
    assert base64.b64decode(reader.records()[0][1]["Data"]) == b"new"
    reader.close()


def test_continuation_resumes_where_an_empty_subscription_stood(tmp_path):
    svc = make_service(tmp_path, subscription_heartbeat_s=0.1)
    arn = create_stream(svc)
    consumer = register(svc, arn)
    first = put(svc, data=b"one")["SequenceNumber"]
    reader = subscribe(svc, consumer["ConsumerARN"], kind="LATEST")
    reader.wait_for(lambda r: len(r.events()) >= 2)  # heartbeats, no records
    assert all(e["Records"] == [] for _, e in reader.events())
    continuation = reader.events()[-1][1]["ContinuationSequenceNumber"]
    assert continuation == first
    reader.close()
    put(svc, data=b"two")
    reader = subscribe(svc, consumer["ConsumerARN"], kind="AFTER_SEQUENCE_NUMBER", SequenceNumber=continuation)
    reader.wait_for(lambda r: len(r.records()) == 1)
    assert base64.b64decode(reader.records()[0][1]["Data"]) == b"two"
    reader.close()
    svc.store.close()


def test_heartbeats_and_lifetime(tmp_path):
    svc = make_service(tmp_path, subscription_s=0.6, subscription_heartbeat_s=0.15)
    arn = create_stream(svc)
    consumer = register(svc, arn)
    start = time.monotonic()
    reader = subscribe(svc, consumer["ConsumerARN"])
    reader.wait_for(lambda r: r.done, timeout=5)
    elapsed = time.monotonic() - start
    assert 0.5 <= elapsed < 2.0
    beats = reader.events()
    assert len(beats) >= 3
    assert all(e["Records"] == [] and e["MillisBehindLatest"] == 0 for _, e in beats)
    gaps = [b[0] - a[0] for a, b in zip(beats, beats[1:])]
    assert max(gaps) < 0.5
    # The subscription ended, so the pair is free again.
    subscribe(svc, consumer["ConsumerARN"]).close()
    svc.store.close()


def test_one_subscription_per_consumer_and_shard(svc):
    arn = create_stream(svc, shards=2)
    consumer = register(svc, arn)
    other = register(svc, arn, "other")
    reader = subscribe(svc, consumer["ConsumerARN"])
    e = error(subscribe, svc, consumer["ConsumerARN"])
    assert (e.code, e.message) == ("ResourceInUseException", "Another active subscription exists for this consumer: "
                                   f"{ACCOUNT}:s:shardId-000000000000:c")
    # Another shard, or another consumer on the same shard, is fine.
    second = subscribe(svc, consumer["ConsumerARN"], shard="shardId-000000000001")
    third = subscribe(svc, other["ConsumerARN"])
    for r in (reader, second, third):
        r.close()
    subscribe(svc, consumer["ConsumerARN"]).close()


def test_subscribe_errors_are_plain_aws_errors(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    e = error(svc.call, "SubscribeToShard", {"ConsumerARN": consumer["ConsumerARN"], "ShardId": "shardId-000000000009",
                                             "StartingPosition": {"Type": "LATEST"}})
    assert e.code == "ResourceNotFoundException" and "shardId-000000000009" in e.message
    e = error(svc.call, "SubscribeToShard", {"ConsumerARN": consumer["ConsumerARN"] + "9",
                                             "ShardId": "shardId-000000000000", "StartingPosition": {"Type": "LATEST"}})
    assert e.code == "ResourceNotFoundException"
    e = error(svc.call, "SubscribeToShard", {"ConsumerARN": consumer["ConsumerARN"], "ShardId": "shardId-000000000000",
                                             "StartingPosition": {"Type": "AT_SEQUENCE_NUMBER"}})
    assert e.code == "InvalidArgumentException"
    e = error(svc.call, "SubscribeToShard", {"ConsumerARN": consumer["ConsumerARN"], "ShardId": "shardId-000000000000",
                                             "StartingPosition": {"Type": "SOMEWHERE"}})
    assert e.code == "ValidationException"
    # None of these left a subscription behind.
    subscribe(svc, consumer["ConsumerARN"]).close()


def test_deregistering_ends_the_subscription(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    reader = subscribe(svc, consumer["ConsumerARN"])
    svc.call("DeregisterStreamConsumer", {"ConsumerARN": consumer["ConsumerARN"]})
    reader.wait_for(lambda r: r.done, timeout=30)
    last = reader.frames[-1][1]
    assert last[":message-type"] == "exception"
    assert last[":exception-type"] == "ResourceNotFoundException"


def test_closed_shard_ends_with_child_shards(svc):
    arn = create_stream(svc)
    consumer = register(svc, arn)
    before = put(svc, data=b"before")["SequenceNumber"]
    reader = subscribe(svc, consumer["ConsumerARN"], kind="TRIM_HORIZON")
    reader.wait_for(lambda r: len(r.records()) == 1)
    svc.call("SplitShard", {"StreamName": "s", "ShardToSplit": "shardId-000000000000",
                            "NewStartingHashKey": str(2**127)})
    reader.wait_for(lambda r: r.done, timeout=30)
    assert [r["SequenceNumber"] for _, r in reader.records()] == [before]
    last = reader.events()[-1][1]
    assert last["ContinuationSequenceNumber"] is None
    assert last["Records"] == []
    assert sorted(c["ShardId"] for c in last["ChildShards"]) == ["shardId-000000000001", "shardId-000000000002"]
    assert all(c["ParentShards"] == ["shardId-000000000000"] for c in last["ChildShards"])
    # A subscription to the closed shard from the start replays it and ends at once.
    reader = subscribe(svc, consumer["ConsumerARN"], kind="TRIM_HORIZON")
    reader.wait_for(lambda r: r.done, timeout=30)
    events = reader.events()
    assert [r["SequenceNumber"] for _, e in events for r in e["Records"]] == [before]
    assert events[-1][1]["ChildShards"] and events[-1][1]["ContinuationSequenceNumber"] is None


# tags

def test_stream_tags(svc):
    create_stream(svc)
    svc.call("AddTagsToStream", {"StreamName": "s", "Tags": {"b": "2", "a": "1", "ü0 _./=+-@:": ""}})
    svc.call("AddTagsToStream", {"StreamName": "s", "Tags": {"a": "one"}})
    out = svc.call("ListTagsForStream", {"StreamName": "s"})
    assert out == {"Tags": [{"Key": "a", "Value": "one"}, {"Key": "b", "Value": "2"},
                            {"Key": "ü0 _./=+-@:", "Value": ""}], "HasMoreTags": False}
    page = svc.call("ListTagsForStream", {"StreamName": "s", "Limit": 1, "ExclusiveStartTagKey": "a"})
    assert page == {"Tags": [{"Key": "b", "Value": "2"}], "HasMoreTags": True}
    svc.call("RemoveTagsFromStream", {"StreamARN": svc.stream_arn("s"), "TagKeys": ["a", "not-there"]})
    assert [t["Key"] for t in svc.call("ListTagsForStream", {"StreamName": "s"})["Tags"]] == ["b", "ü0 _./=+-@:"]
    assert svc.call("ListTagsForResource", {"ResourceARN": svc.stream_arn("s")})["Tags"][0] == {"Key": "b",
                                                                                               "Value": "2"}


def test_tag_limits_and_characters(svc):
    create_stream(svc)
    svc.call("AddTagsToStream", {"StreamName": "s", "Tags": {f"k{i}": "v" for i in range(45)}})
    e = error(svc.call, "AddTagsToStream", {"StreamName": "s", "Tags": {f"n{i}": "v" for i in range(6)}})
    assert (e.code, e.message) == ("InvalidArgumentException",
                                   f"Failed to add tags to stream s under account {ACCOUNT} because a given stream "
                                   "cannot have more than 50 tags associated with it.")
    # Overwriting existing keys does not count against the limit.
    svc.call("AddTagsToStream", {"StreamName": "s", "Tags": {**{f"k{i}": "w" for i in range(10)},
                                                              **{f"n{i}": "v" for i in range(5)}}})
    assert len(svc.call("ListTagsForStream", {"StreamName": "s"})["Tags"]) == 50
    for bad in ("a;b", "tab\there", "a,b"):
        e = error(svc.call, "AddTagsToStream", {"StreamName": "s", "Tags": {"x": bad}})
        assert (e.code, e.message) == ("InvalidArgumentException",
                                       "Some tags contain invalid characters. Valid characters: Unicode letters, "
                                       "digits, white space, _ . / = + - % @ :.")
    e = error(svc.call, "RemoveTagsFromStream", {"StreamName": "s", "TagKeys": ["50%"]})
    assert e.message.startswith(f"Failed to remove tags from stream s under account {ACCOUNT} because some tags "
                                "contained illegal characters.")
    e = error(svc.call, "AddTagsToStream", {"StreamName": "ghost", "Tags": {"a": "b"}})
    assert (e.code, e.message) == ("ResourceNotFoundException", f"Stream ghost under account {ACCOUNT} not found.")
    e = error(svc.call, "AddTagsToStream", {"StreamName": "s", "Tags": {"k" * 129: "v"}})
    assert e.code == "ValidationException"


def test_consumer_tags_by_resource_arn(svc):
    arn = create_stream(svc)
    consumer_arn = svc.call("RegisterStreamConsumer", {"StreamARN": arn, "ConsumerName": "c",
                                                       "Tags": {"env": "dev"}})["Consumer"]["ConsumerARN"]
    svc.call("TagResource", {"ResourceARN": consumer_arn, "Tags": {"team": "data"}})
    assert svc.call("ListTagsForResource", {"ResourceARN": consumer_arn})["Tags"] == [
        {"Key": "env", "Value": "dev"}, {"Key": "team", "Value": "data"}]
    svc.call("UntagResource", {"ResourceARN": consumer_arn, "TagKeys": ["env"]})
    assert svc.call("ListTagsForResource", {"ResourceARN": consumer_arn})["Tags"] == [{"Key": "team", "Value": "data"}]
    # The stream's own tags are separate.
    assert svc.call("ListTagsForStream", {"StreamName": "s"})["Tags"] == []
    e = error(svc.call, "TagResource", {"ResourceARN": svc.stream_arn("ghost"), "Tags": {"a": "b"}})
    assert e.code == "ResourceNotFoundException"
    e = error(svc.call, "ListTagsForResource", {"ResourceARN": f"{arn}/consumer/ghost:1"})
    assert e.code == "ResourceNotFoundException"


# resource policies

POLICY = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kinesis:*",
     "Resource": "*"}]})


def test_resource_policy_lifecycle(tmp_path):
    svc = make_service(tmp_path)
    arn = create_stream(svc)
    assert svc.call("GetResourcePolicy", {"ResourceARN": arn}) == {"Policy": "{}"}
    svc.call("PutResourcePolicy", {"ResourceARN": arn, "Policy": POLICY})
    assert svc.call("GetResourcePolicy", {"ResourceARN": arn}) == {"Policy": POLICY}
    consumer_arn = register(svc, arn)["ConsumerARN"]
    svc.call("PutResourcePolicy", {"ResourceARN": consumer_arn, "Policy": "{}"})
    svc.store.close()

    svc = make_service(tmp_path)  # policies are durable
    assert svc.call("GetResourcePolicy", {"ResourceARN": arn}) == {"Policy": POLICY}
    svc.call("DeleteResourcePolicy", {"ResourceARN": arn})
    assert svc.call("GetResourcePolicy", {"ResourceARN": arn}) == {"Policy": "{}"}
    e = error(svc.call, "DeleteResourcePolicy", {"ResourceARN": arn})
    assert (e.code, e.message) == ("ResourceNotFoundException", f"No resource policy found for resource ARN {arn}.")
    # Deregistering a consumer takes its policy with it.
    svc.call("DeregisterStreamConsumer", {"ConsumerARN": consumer_arn})
    assert consumer_arn not in svc.policies and consumer_arn not in svc.store.documents("policy")
    svc.store.close()


def test_resource_policy_errors(svc):
    arn = create_stream(svc)
    for bad in ("not json", "[1, 2]", '{"Version": '):
        e = error(svc.call, "PutResourcePolicy", {"ResourceARN": arn, "Policy": bad})
        assert e.code == "InvalidArgumentException"
    assert svc.call("GetResourcePolicy", {"ResourceARN": arn}) == {"Policy": "{}"}
    ghost = svc.stream_arn("ghost")
    for op, extra in (("PutResourcePolicy", {"Policy": POLICY}), ("GetResourcePolicy", {}),
                      ("DeleteResourcePolicy", {})):
        e = error(svc.call, op, {"ResourceARN": ghost, **extra})
        assert (e.code, e.message) == ("ResourceNotFoundException", f"Stream {ghost} under account {ACCOUNT} not found.")
