"""Event source mappings whose source is an enhanced fan-out consumer (EventSourceArn = the
consumer's ARN), end to end through a real server: records pushed by the consumer's subscription
reach the handler with the same batching, ordering, retries, bisect and partial-failure rules as a
polled mapping; the subscription is renewed when its lifetime ends; deregistering the consumer
stops the mapping; and a SAM template with AWS::Kinesis::StreamConsumer deploys and runs.

The recording handler and its helpers are test_mappings_e2e's (one handler for both kinds).
"""
from __future__ import annotations

import base64
import json
import textwrap
import threading
import time
import uuid
from collections import defaultdict

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from test_mappings_e2e import HANDLER, ROLE, Seen, deploy, read_stream, stream_arn, wait_until


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def function(lambda_client, tmp_path):
    """make(**settings) -> (name, Seen); functions and their mappings are deleted afterwards."""
    names = []

    def make(**settings):
        name, seen = deploy(lambda_client, tmp_path, **settings)
        names.append(name)
        return name, seen
    yield make
    for name in names:
        for m in lambda_client.list_event_source_mappings(FunctionName=name)["EventSourceMappings"]:
            lambda_client.delete_event_source_mapping(UUID=m["UUID"])
        lambda_client.delete_function(FunctionName=name)


def register(kinesis, stream: str, name: str = "lambda-efo") -> str:
    """Register a consumer of `stream`; its ARN once it is ACTIVE."""
    arn = kinesis.register_stream_consumer(StreamARN=stream_arn(stream), ConsumerName=name)["Consumer"]["ConsumerARN"]
    wait_until(lambda: kinesis.describe_stream_consumer(ConsumerARN=arn)["ConsumerDescription"]["ConsumerStatus"]
               == "ACTIVE", what="the consumer")
    return arn


def map_consumer(client, consumer: str, function: str, **settings) -> dict:
    params = {"StartingPosition": "TRIM_HORIZON", "BatchSize": 10, **settings}
    return client.create_event_source_mapping(EventSourceArn=consumer, FunctionName=function, **params)


def result_of(client, uid: str) -> str:
    return client.get_event_source_mapping(UUID=uid)["LastProcessingResult"]


def error_of(call) -> tuple[str, str]:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]


# the mapping ------------------------------------------------------------------------------------


def test_consumer_arn_is_the_source_and_its_subscription_is_the_mappings(lambda_client, kinesis, make_stream,
                                                                         function):
    name, seen = function()
    stream = make_stream(2)
    consumer = register(kinesis, stream)
    created = map_consumer(lambda_client, consumer, name, StartingPosition="LATEST")
    assert (created["EventSourceArn"], created["State"], created["StartingPosition"]) == (consumer, "Creating", "LATEST")
    uid = created["UUID"]
    assert lambda_client.get_event_source_mapping(UUID=uid)["State"] == "Enabled"
    [listed] = lambda_client.list_event_source_mappings(EventSourceArn=consumer)["EventSourceMappings"]
    assert listed["UUID"] == uid
    out = kinesis.put_record(StreamName=stream, Data=b"pushed", PartitionKey="k")
    [invocation] = wait_until(seen.invocations, what="the invocation")
    [record] = invocation["event"]["Records"]
    assert base64.b64decode(record["kinesis"]["data"]) == b"pushed"
    assert record["eventID"] == f"{out['ShardId']}:{out['SequenceNumber']}"
    assert record["eventSourceARN"] == stream_arn(stream)  # the records' stream, not the consumer
    assert record["invokeIdentityArn"] == ROLE
    # The mapping holds the consumer's subscription to every shard: as on AWS, nobody else may
    # subscribe with that consumer while it reads.
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        code, message = error_of(lambda: kinesis.subscribe_to_shard(
            ConsumerARN=consumer, ShardId=shard["ShardId"], StartingPosition={"Type": "LATEST"}))
        assert code == "ResourceInUseException", message
    wait_until(lambda: result_of(lambda_client, uid) == "OK", what="OK")
    # Deleting the mapping ends its subscriptions: the consumer is free again.
    lambda_client.delete_event_source_mapping(UUID=uid)
    shard_id = out["ShardId"]

    def subscribed() -> bool:
        try:
            response = kinesis.subscribe_to_shard(ConsumerARN=consumer, ShardId=shard_id,
                                                  StartingPosition={"Type": "LATEST"})
        except ClientError as err:
            assert err.response["Error"]["Code"] == "ResourceInUseException"
            return False
        response["EventStream"].close()
        return True
    wait_until(subscribed, what="the consumer's subscription released")


def test_create_errors_for_consumer_sources(lambda_client, kinesis, make_stream, function):
    name, _ = function()
    stream = make_stream()
    consumer = register(kinesis, stream)
    missing = consumer.rsplit(":", 1)[0].replace("/consumer/lambda-efo", "/consumer/nobody") + ":1700000000"
    assert error_of(lambda: map_consumer(lambda_client, missing, name)) == (
        "InvalidParameterValueException", f"Stream not found: {missing}")
    code, message = error_of(lambda: lambda_client.create_event_source_mapping(
        EventSourceArn=consumer, FunctionName=name))
    assert code == "InvalidParameterValueException" and "startingPosition" in message
    map_consumer(lambda_client, consumer, name)
    code, message = error_of(lambda: map_consumer(lambda_client, consumer, name))
    assert code == "ResourceConflictException" and consumer in message
    # The same function may read the stream itself as well: another source ARN.
    plain = lambda_client.create_event_source_mapping(EventSourceArn=stream_arn(stream), FunctionName=name,
                                                      StartingPosition="LATEST")
    assert plain["EventSourceArn"] == stream_arn(stream)


def test_every_record_once_and_in_order_per_shard(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream(4)
    consumer = register(kinesis, stream)
    map_consumer(lambda_client, consumer, name, BatchSize=100, ParallelizationFactor=2)
    put = {}
    for chunk in range(4):
        entries = [{"Data": b"r%d" % (chunk * 500 + i), "PartitionKey": f"key-{i % 50}"} for i in range(500)]
        out = kinesis.put_records(StreamName=stream, Records=entries)
        assert out["FailedRecordCount"] == 0
        for entry, result in zip(entries, out["Records"]):
            put[result["SequenceNumber"]] = (entry["PartitionKey"], entry["Data"])
    wait_until(lambda: len(seen.records()) >= 2000, timeout=60, what="2,000 records")
    records = seen.records()
    assert sorted(r["kinesis"]["sequenceNumber"] for r in records) == sorted(put)  # each once
    by_key = defaultdict(list)
    for r in records:
        seq = r["kinesis"]["sequenceNumber"]
        assert (r["kinesis"]["partitionKey"], base64.b64decode(r["kinesis"]["data"])) == put[seq]
        by_key[r["kinesis"]["partitionKey"]].append(int(seq))
    assert len(by_key) == 50
    for key, seqs in by_key.items():
        assert seqs == sorted(seqs), key
    assert max(len(inv["event"]["Records"]) for inv in seen.invocations()) <= 100
    assert {r["eventID"].split(":")[0] for r in records} == {
        s["ShardId"] for s in kinesis.list_shards(StreamName=stream)["Shards"]}


# errors: the polled mappings' rules ---------------------------------------------------------------


def test_retries_then_bisect_isolate_the_poison_record(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream, dlq = make_stream(), make_stream()
    consumer = register(kinesis, stream)
    out = kinesis.put_records(StreamName=stream, Records=[
        {"Data": b"poison" if i == 5 else b"%d" % i, "PartitionKey": "k"} for i in range(8)])
    poison_seq = out["Records"][5]["SequenceNumber"]
    mapping = map_consumer(lambda_client, consumer, name, BatchSize=8, MaximumRetryAttempts=1,
                           BisectBatchOnFunctionError=True,
                           DestinationConfig={"OnFailure": {"Destination": stream_arn(dlq)}})
    wait_until(lambda: seen.batches()[-1:] == [[b"6", b"7"]], what="the last half")
    p = b"poison"
    assert seen.batches() == [
        [b"0", b"1", b"2", b"3", b"4", p, b"6", b"7"], [b"0", b"1", b"2", b"3"], [b"4", p, b"6", b"7"],
        [b"4", p], [b"4"], [p], [p], [b"6", b"7"]]  # halves, then 1 retry of the poison record alone
    [failure] = read_stream(kinesis, dlq)
    record = json.loads(failure["Data"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == 5
    assert record["requestContext"]["functionArn"] == mapping["FunctionArn"]
    info = record["KinesisBatchInfo"]
    assert (info["batchSize"], info["startSequenceNumber"], info["endSequenceNumber"], info["streamArn"]) == (
        1, poison_seq, poison_seq, stream_arn(stream))
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], what="the record after")
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")


def test_report_batch_item_failures_resumes_from_the_reported_record(lambda_client, kinesis, make_stream, function):
    name, seen = function()
    stream = make_stream()
    consumer = register(kinesis, stream)
    kinesis.put_records(StreamName=stream, Records=[
        {"Data": b"report-once-%d" % i if i in (4, 7) else b"%d" % i, "PartitionKey": "k"} for i in range(10)])
    mapping = map_consumer(lambda_client, consumer, name, FunctionResponseTypes=["ReportBatchItemFailures"])
    full = [b"0", b"1", b"2", b"3", b"report-once-4", b"5", b"6", b"report-once-7", b"8", b"9"]
    wait_until(lambda: len(seen.invocations()) >= 2, what="the retry")
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], what="the record after")
    assert seen.batches() == [full, full[4:], [b"after"]]  # the retry starts at the lowest reported one


# resharding ---------------------------------------------------------------------------------------


def test_split_and_merge_parents_before_children(lambda_client, kinesis, server, make_stream, function):
    name, seen = function()
    stream = make_stream(2)
    consumer = register(kinesis, stream)
    map_consumer(lambda_client, consumer, name, BatchSize=25)
    keys = [f"key-{k}" for k in range(20)]

    def round_(n: int) -> None:
        out = kinesis.put_records(StreamName=stream, Records=[
            {"Data": f"{key}:{n}".encode(), "PartitionKey": key} for key in keys])
        assert out["FailedRecordCount"] == 0

    def active() -> bool:
        return kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"

    stop = threading.Event()
    errors: list[BaseException] = []

    def produce() -> None:  # records keep arriving while the shards change
        producer = client_for(server.url)
        n = 100
        try:
            while not stop.is_set():
                producer.put_records(StreamName=stream, Records=[
                    {"Data": f"bg-{key}:{n}".encode(), "PartitionKey": f"bg-{key}"} for key in keys[:5]])
                n += 1
                time.sleep(0.01)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        for n in range(10):
            round_(n)
        first = kinesis.list_shards(StreamName=stream)["Shards"][0]
        low, high = int(first["HashKeyRange"]["StartingHashKey"]), int(first["HashKeyRange"]["EndingHashKey"])
        kinesis.split_shard(StreamName=stream, ShardToSplit=first["ShardId"], NewStartingHashKey=str((low + high) // 2))
        wait_until(active, what="the split")
        for n in range(10, 20):
            round_(n)
        open_shards = sorted((s for s in kinesis.list_shards(StreamName=stream)["Shards"]
                              if "EndingSequenceNumber" not in s["SequenceNumberRange"]),
                             key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
        kinesis.merge_shards(StreamName=stream, ShardToMerge=open_shards[1]["ShardId"],
                             AdjacentShardToMerge=open_shards[2]["ShardId"])
        wait_until(active, what="the merge")
        for n in range(20, 30):
            round_(n)
    finally:
        stop.set()
        thread.join()
    assert not errors, errors
    wait_until(lambda: {d for d in seen.data() if not d.startswith(b"bg-")} >= {
        f"{key}:{n}".encode() for key in keys for n in range(30)}, timeout=60, what="all 600 records")
    order = defaultdict(list)
    for data in seen.data():
        key, n = data.decode().split(":")
        order[key].append(int(n))
    for key in keys:
        assert order[key] == list(range(30)), key  # once each, parents' records before children's
    for key in keys[:5]:
        assert order[f"bg-{key}"] == sorted(order[f"bg-{key}"]), key
    shards = kinesis.list_shards(StreamName=stream)["Shards"]
    assert len(shards) == 5
    assert {r["eventID"].split(":")[0] for r in seen.records()} == {s["ShardId"] for s in shards}


# the subscription's life -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory):
    """A server whose subscriptions last one second (AWS: five minutes)."""
    proc = start_server(tmp_path_factory, subscription_s=1.0, subscription_heartbeat_s=0.2)
    yield proc
    proc.stop()


def test_subscription_is_renewed_and_deregistering_stops_the_mapping(short_lived, tmp_path):
    kinesis, lam = client_for(short_lived.url), client_for(short_lived.url, "lambda")
    stream = "efo-" + uuid.uuid4().hex[:8]
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    consumer = register(kinesis, stream)
    name, seen = deploy(lam, tmp_path)
    mapping = map_consumer(lam, consumer, name, StartingPosition="LATEST", BatchSize=1)
    uid = mapping["UUID"]
    kinesis.put_record(StreamName=stream, Data=b"first", PartitionKey="k")
    wait_until(lambda: seen.data() == [b"first"], what="the first record")
    # Several lifetimes: a subscription that was not renewed would push nothing more.
    time.sleep(3.5)
    kinesis.put_record(StreamName=stream, Data=b"after renewals", PartitionKey="k")
    wait_until(lambda: seen.data() == [b"first", b"after renewals"], what="the record after the renewals")
    wait_until(lambda: result_of(lam, uid) == "OK", what="OK")

    kinesis.deregister_stream_consumer(ConsumerARN=consumer)
    wait_until(lambda: result_of(lam, uid) == "PROBLEM: Stream consumer not found", what="the problem")
    got = lam.get_event_source_mapping(UUID=uid)
    assert (got["State"], got["EventSourceArn"]) == ("Enabled", consumer)
    kinesis.put_record(StreamName=stream, Data=b"unread", PartitionKey="k")
    time.sleep(1.0)
    assert seen.data() == [b"first", b"after renewals"]
    # A new consumer of the same name is another consumer (another ARN): the mapping stays stopped.
    again = register(kinesis, stream)
    assert again != consumer
    time.sleep(1.0)
    assert seen.data() == [b"first", b"after renewals"]
    assert result_of(lam, uid) == "PROBLEM: Stream consumer not found"
    lam.delete_event_source_mapping(UUID=uid)


def test_checkpoints_survive_a_kill_and_restart(tmp_path_factory, tmp_path):
    proc = start_server(tmp_path_factory)
    try:
        kinesis, lam = client_for(proc.url), client_for(proc.url, "lambda")
        kinesis.create_stream(StreamName="efo-orders", ShardCount=1)
        consumer = register(kinesis, "efo-orders")
        name, seen = deploy(lam, tmp_path)
        map_consumer(lam, consumer, name)
        kinesis.put_records(StreamName="efo-orders", Records=[{"Data": b"a%d" % i, "PartitionKey": "k"}
                                                               for i in range(5)])
        wait_until(lambda: len(seen.data()) == 5, what="the first records")
        wait_until(lambda: result_of(lam, lam.list_event_source_mappings()["EventSourceMappings"][0]["UUID"])
                   == "OK", what="OK")
        proc.kill()
        proc.start()  # same port, same data directory: the mapping subscribes again from its checkpoint
        kinesis = client_for(proc.url)
        kinesis.put_records(StreamName="efo-orders", Records=[{"Data": b"b%d" % i, "PartitionKey": "k"}
                                                               for i in range(5)])
        firsts, seconds = [b"a%d" % i for i in range(5)], [b"b%d" % i for i in range(5)]
        wait_until(lambda: seconds[-1] in seen.data(), what="the records after the restart")
        time.sleep(0.5)
        data = seen.data()
        # At least once: the batch in flight at the kill (if its checkpoint was not written) repeats.
        assert data[:5] == firsts and data[5:] in (seconds, firsts + seconds)
    finally:
        proc.stop()


# deploy -------------------------------------------------------------------------------------------


SAM_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: {stack}-stream
      ShardCount: 2
  Consumer:
    Type: AWS::Kinesis::StreamConsumer
    Properties:
      ConsumerName: {stack}-consumer
      StreamARN: !GetAtt Stream.Arn
      Tags: [{{Key: team, Value: data}}]
  Reader:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {stack}-reader
      Runtime: python3.12
      Handler: index.handler
      Timeout: 10
      Environment:
        Variables:
          SEEN_FILE: {seen}
          STATE_DIR: {state}
      InlineCode: |
{code}
      Events:
        Stream:
          Type: Kinesis
          Properties:
            Stream: !GetAtt Consumer.ConsumerARN
            StartingPosition: TRIM_HORIZON
            BatchSize: 10
Outputs:
  ConsumerRef: {{Value: !Ref Consumer}}
  ConsumerArn: {{Value: !GetAtt Consumer.ConsumerARN}}
  ConsumerName: {{Value: !GetAtt Consumer.ConsumerName}}
  ConsumerStatus: {{Value: !GetAtt Consumer.ConsumerStatus}}
  ConsumerCreated: {{Value: !GetAtt Consumer.ConsumerCreationTimestamp}}
  ConsumerStream: {{Value: !GetAtt Consumer.StreamARN}}
"""


def test_sam_template_with_a_stream_consumer_deploys_and_runs(server, kinesis, lambda_client, tmp_path, capsys):
    from test_deploy import deploy as run_deploy

    stack = "efo" + uuid.uuid4().hex[:8]
    (tmp_path / "state").mkdir()
    seen = Seen(str(tmp_path / "seen.jsonl"))
    path = tmp_path / "template.yaml"
    path.write_text(SAM_TEMPLATE.format(stack=stack, seen=seen.path, state=tmp_path / "state",
                                        code=textwrap.indent(HANDLER.strip("\n"), " " * 8)))
    code, actions, out, err = run_deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions["Consumer"] == "created" and actions["Reader"] == "created"
    [consumer] = kinesis.list_stream_consumers(StreamARN=stream_arn(f"{stack}-stream"))["Consumers"]
    arn = consumer["ConsumerARN"]
    assert consumer["ConsumerName"] == f"{stack}-consumer"
    outputs = dict(line.split(None, 1) for line in out.splitlines() if line.startswith("  Consumer"))
    assert outputs["ConsumerRef"] == outputs["ConsumerArn"] == arn
    assert (outputs["ConsumerName"], outputs["ConsumerStatus"], outputs["ConsumerStream"]) == (
        f"{stack}-consumer", "ACTIVE", stream_arn(f"{stack}-stream"))
    assert outputs["ConsumerCreated"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(consumer["ConsumerCreationTimestamp"].timestamp()))
    assert kinesis.list_tags_for_resource(ResourceARN=arn)["Tags"] == [{"Key": "team", "Value": "data"}]
    [mapping] = lambda_client.list_event_source_mappings(FunctionName=f"{stack}-reader")["EventSourceMappings"]
    assert mapping["EventSourceArn"] == arn
    kinesis.put_records(StreamName=f"{stack}-stream",
                        Records=[{"Data": b"d%d" % i, "PartitionKey": f"k{i}"} for i in range(20)])
    wait_until(lambda: len(seen.data()) >= 20, what="the records")
    assert sorted(seen.data()) == sorted(b"d%d" % i for i in range(20))
    assert run_deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert error_of(lambda: kinesis.describe_stream_consumer(ConsumerARN=arn))[0] == "ResourceNotFoundException"
    assert lambda_client.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"] == []
