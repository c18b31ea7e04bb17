"""OnFailure destinations of Kinesis event source mappings that are SQS queues and SNS topics,
through a real server with kinesim's own SQS and SNS services: the invocation record AWS sends
(requestContext, responseContext, version, timestamp, KinesisBatchInfo) arrives as the queue's
message body, or as the `Message` of the topic's notification; a queue that does not exist holds
the shard until it does; only the destination's service is checked when the mapping is made.

Shapes: LocalStack's recordings of AWS (test_lambda_integration_kinesis.snapshot.json,
test_kinesis_event_source_mapping_with_on_failure_destination_config and ..._with_sns_...).
"""
from __future__ import annotations

import json
import re
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from test_efo_mappings import function, lambda_client, map_consumer, register, result_of  # noqa: F401 (fixtures)
from test_mappings_e2e import ISO_MS, stream_arn, wait_until

MESSAGE_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def sns(server):
    return client_for(server.url, "sns")


def queue(sqs, name: str | None = None) -> tuple[str, str]:
    """A new queue's URL and ARN."""
    url = sqs.create_queue(QueueName=name or "dlq-" + uuid.uuid4().hex[:10])["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:us-east-1:000000000000:{name}"


def receive(sqs, url: str) -> dict:
    """The one message the queue gets (long polls until it comes)."""
    def poll():
        return sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, MaxNumberOfMessages=10).get("Messages")
    [message] = wait_until(poll, what="the failure message")
    return message


def map_stream(client, stream: str, function: str, destination: str, **settings) -> dict:
    params = {"StartingPosition": "TRIM_HORIZON", "BatchSize": 1, "MaximumRetryAttempts": 1, **settings}
    return client.create_event_source_mapping(
        EventSourceArn=stream_arn(stream), FunctionName=function,
        DestinationConfig={"OnFailure": {"Destination": destination}}, **params)


def check_record(record: dict, seen, mapping: dict, stream: str, poison: dict) -> None:
    """`record` is AWS's invocation record for the poison batch's last attempt."""
    last = seen.invocations()[-1]
    timestamp = record.pop("timestamp")
    info = record.pop("KinesisBatchInfo")
    assert record == {
        "requestContext": {"requestId": last["request_id"], "functionArn": mapping["FunctionArn"],
                           "condition": "RetryAttemptsExhausted", "approximateInvokeCount": 2},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
    }
    assert ISO_MS.fullmatch(timestamp)
    arrival = info.pop("approximateArrivalOfFirstRecord")
    assert ISO_MS.fullmatch(arrival) and info.pop("approximateArrivalOfLastRecord") == arrival
    assert info == {"shardId": poison["ShardId"], "startSequenceNumber": poison["SequenceNumber"],
                    "endSequenceNumber": poison["SequenceNumber"], "batchSize": 1, "streamArn": stream_arn(stream)}


def test_sqs_destination_receives_the_invocation_record(lambda_client, kinesis, sqs, make_stream, function):
    name, seen = function()
    stream = make_stream()
    url, arn = queue(sqs)
    poison = kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_stream(lambda_client, stream, name, arn)
    assert mapping["DestinationConfig"] == {"OnFailure": {"Destination": arn}}
    message = receive(sqs, url)
    assert seen.batches() == [[b"poison"], [b"poison"]]  # the try and one retry
    check_record(json.loads(message["Body"]), seen, mapping, stream, poison)
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], what="the record after the poison one")
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")


def test_sns_destination_publishes_the_invocation_record(lambda_client, kinesis, sqs, sns, make_stream, function):
    name, seen = function()
    stream = make_stream()
    topic = sns.create_topic(Name="esm-failures-" + uuid.uuid4().hex[:8])["TopicArn"]
    url, arn = queue(sqs)
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    poison = kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_stream(lambda_client, stream, name, topic)
    notification = json.loads(receive(sqs, url)["Body"])
    assert notification["Type"] == "Notification" and notification["TopicArn"] == topic
    assert MESSAGE_ID.fullmatch(notification["MessageId"])
    assert "Subject" not in notification
    check_record(json.loads(notification["Message"]), seen, mapping, stream, poison)
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    wait_until(lambda: seen.batches()[-1:] == [[b"after"]], what="the record after the poison one")
    wait_until(lambda: result_of(lambda_client, mapping["UUID"]) == "OK", what="OK")


def test_enhanced_fan_out_mapping_to_an_sqs_destination(lambda_client, kinesis, sqs, make_stream, function):
    name, seen = function()
    stream = make_stream()
    consumer = register(kinesis, stream)
    url, arn = queue(sqs)
    poison = kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_consumer(lambda_client, consumer, name, BatchSize=1, MaximumRetryAttempts=1,
                           DestinationConfig={"OnFailure": {"Destination": arn}})
    # The record names the stream the records came from, not the consumer.
    check_record(json.loads(receive(sqs, url)["Body"]), seen, mapping, stream, poison)


def test_a_missing_queue_holds_the_shard_until_it_exists(lambda_client, kinesis, sqs, make_stream, function):
    name, seen = function()
    stream = make_stream()
    queue_name = "dlq-later-" + uuid.uuid4().hex[:8]
    kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
    mapping = map_stream(lambda_client, stream, name, queue_arn(queue_name), MaximumRetryAttempts=0)
    uid = mapping["UUID"]
    problem = wait_until(lambda: queue_name in result_of(lambda_client, uid) and result_of(lambda_client, uid),
                         what="the destination problem")
    assert problem.startswith(f"PROBLEM: On-failure destination {queue_arn(queue_name)} unavailable")
    kinesis.put_record(StreamName=stream, Data=b"after", PartitionKey="k")
    # Given up but kept: nothing goes past it until the record is delivered.
    assert seen.batches() == [[b"poison"]]
    url, _ = queue(sqs, queue_name)
    record = json.loads(receive(sqs, url)["Body"])
    assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
    wait_until(lambda: seen.batches() == [[b"poison"], [b"after"]], what="the record after")
    wait_until(lambda: result_of(lambda_client, uid) == "OK", what="OK")


def test_only_the_destination_service_is_checked(lambda_client, make_stream, function):
    name, _ = function()
    stream = make_stream()
    for refused in ("arn:aws:lambda:us-east-1:000000000000:function:elsewhere",
                    "arn:aws:dynamodb:us-east-1:000000000000:table/t"):
        with pytest.raises(ClientError) as caught:
            map_stream(lambda_client, stream, name, refused)
        error = caught.value.response["Error"]
        assert error["Code"] == "InvalidParameterValueException" and refused in error["Message"]
    # A queue or topic that does not exist (yet) is accepted, as AWS accepts it.
    topic = "arn:aws:sns:us-east-1:000000000000:not-yet-" + uuid.uuid4().hex[:8]
    mapping = map_stream(lambda_client, stream, name, queue_arn("not-yet-" + uuid.uuid4().hex[:8]))
    updated = lambda_client.update_event_source_mapping(
        UUID=mapping["UUID"], DestinationConfig={"OnFailure": {"Destination": topic}})
    assert updated["DestinationConfig"] == {"OnFailure": {"Destination": topic}}
    got = lambda_client.get_event_source_mapping(UUID=mapping["UUID"])
    assert got["DestinationConfig"] == {"OnFailure": {"Destination": topic}}
