"""SNS through the real server with boto3: topics, subscriptions, Publish/PublishBatch, and the
deliveries to Firehose (the S3 objects), Lambda (the event) and SQS (envelope and raw).

Expected texts are AWS's as LocalStack recorded them from the real service
(tests/aws/services/sns/test_sns.snapshot.json).
"""
from __future__ import annotations

import base64
import io
import json
import os
import re
import time
import urllib.error
import urllib.request
import uuid
import xml.etree.ElementTree as ET
import zipfile

import boto3
import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server

ACCOUNT, REGION = "000000000000", "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/sns-role"
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")

RECORDER = '''
import fcntl, json, os

def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(event) + "\\n")
'''


@pytest.fixture(scope="module")
def sns(server):
    return client_for(server.url, "sns")


@pytest.fixture(scope="module")
def firehose(server):
    return client_for(server.url, "firehose")


@pytest.fixture(scope="module")
def s3(server):
    return client_for(server.url, "s3", s3={"addressing_style": "path"})


@pytest.fixture(scope="module")
def lambda_client(server):
    return client_for(server.url, "lambda")


def uid() -> str:
    return uuid.uuid4().hex[:10]


def error(excinfo) -> tuple[str, str, int]:
    r = excinfo.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


def wait_until(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def topic(sns, fifo: bool = False, **attributes) -> str:
    name = "t-" + uid() + (".fifo" if fifo else "")
    if fifo:
        attributes["FifoTopic"] = "true"
    return sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]


def delivery_stream(firehose, s3) -> tuple[str, str]:
    """A delivery stream that writes every record to S3 at once; (its ARN, its bucket)."""
    bucket = "sns-" + uid()
    s3.create_bucket(Bucket=bucket)
    arn = firehose.create_delivery_stream(
        DeliveryStreamName="fh-" + uid(),
        ExtendedS3DestinationConfiguration={"RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}",
                                            "BufferingHints": {"IntervalInSeconds": 0, "SizeInMBs": 1}})[
        "DeliveryStreamARN"]
    return arn, bucket


def delivered_lines(s3, bucket: str) -> list[str]:
    keys = sorted(o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                  for o in page.get("Contents", []))
    text = b"".join(s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys).decode()
    return text.splitlines()


def recording_function(lambda_client, tmp_path) -> tuple[str, str]:
    """A function that appends each event it gets to a file; (its ARN, the file)."""
    name = "sns-fn-" + uid()
    seen = str(tmp_path / f"{name}.jsonl")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", RECORDER)
    arn = lambda_client.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                        Code={"ZipFile": buf.getvalue()},
                                        Environment={"Variables": {"SEEN_FILE": seen}})["FunctionArn"]
    return arn, seen


def events(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


# ---------------------------------------------------------------- topics


def test_create_topic_is_idempotent_and_described_as_aws_does(sns):
    name = "t-" + uid()
    arn = sns.create_topic(Name=name, Attributes={"DisplayName": "Shown"}, Tags=[{"Key": "k", "Value": "v"}])[
        "TopicArn"]
    assert arn == f"arn:aws:sns:{REGION}:{ACCOUNT}:{name}"
    assert sns.create_topic(Name=name)["TopicArn"] == arn
    assert sns.create_topic(Name=name, Attributes={"DisplayName": "Shown"})["TopicArn"] == arn
    with pytest.raises(ClientError) as e:
        sns.create_topic(Name=name, Attributes={"DisplayName": "Other"})
    assert error(e) == ("InvalidParameter", "Invalid parameter: Attributes Reason: Topic already exists with "
                                            "different attributes", 400)
    with pytest.raises(ClientError) as e:
        sns.create_topic(Name=name, Tags=[{"Key": "k", "Value": "other"}])
    assert error(e) == ("InvalidParameter", "Invalid parameter: Tags Reason: Topic already exists with different "
                                            "tags", 400)
    attrs = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attrs["TopicArn"] == arn and attrs["Owner"] == ACCOUNT and attrs["DisplayName"] == "Shown"
    assert attrs["SubscriptionsConfirmed"] == attrs["SubscriptionsPending"] == attrs["SubscriptionsDeleted"] == "0"
    policy = json.loads(attrs["Policy"])
    assert policy["Statement"][0]["Resource"] == arn and "SNS:Publish" in policy["Statement"][0]["Action"]
    assert json.loads(attrs["EffectiveDeliveryPolicy"])["http"]["defaultHealthyRetryPolicy"]["numRetries"] == 3
    assert "FifoTopic" not in attrs and "ContentBasedDeduplication" not in attrs

    sns.set_topic_attributes(TopicArn=arn, AttributeName="DisplayName", AttributeValue="New")
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["DisplayName"] == "New"
    with pytest.raises(ClientError) as e:
        sns.set_topic_attributes(TopicArn=arn, AttributeName="FifoTopic", AttributeValue="false")
    assert error(e) == ("InvalidParameter", "Invalid parameter: AttributeName", 400)

    sns.delete_topic(TopicArn=arn)
    sns.delete_topic(TopicArn=arn)  # deleting what is gone succeeds
    with pytest.raises(ClientError) as e:
        sns.get_topic_attributes(TopicArn=arn)
    assert error(e) == ("NotFound", "Topic does not exist", 404)


def test_topic_errors(sns):
    for name in ("", "bad name", "x" * 257, "no-fifo-suffix"):
        with pytest.raises(ClientError) as e:
            sns.create_topic(Name=name, Attributes={"FifoTopic": "true"} if name == "no-fifo-suffix" else {})
        assert error(e) == ("InvalidParameter", "Invalid parameter: Topic Name", 400), name
    with pytest.raises(ClientError) as e:
        sns.get_topic_attributes(TopicArn="not-an-arn")
    assert error(e) == ("InvalidParameter", "Invalid parameter: TopicArn Reason: An ARN must have at least 6 "
                                            "elements, not 1", 400)
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=f"arn:aws:sns:{REGION}:{ACCOUNT}:missing-{uid()}", Message="m")
    assert error(e) == ("NotFound", "Topic does not exist", 404)
    with pytest.raises(ClientError) as e:
        sns.set_topic_attributes(TopicArn=topic(sns), AttributeName="Nonsense", AttributeValue="x")
    assert error(e) == ("InvalidParameter", "Invalid parameter: AttributeName", 400)


def test_list_calls_page_by_100(sns):
    made = {topic(sns) for _ in range(101)}
    pages = list(sns.get_paginator("list_topics").paginate())
    listed = [t["TopicArn"] for p in pages for t in p["Topics"]]
    assert made <= set(listed) and len(listed) == len(set(listed))
    assert len(pages) >= 2 and all(len(p["Topics"]) <= 100 for p in pages) and "NextToken" in pages[0]

    arn = next(iter(made))
    subs = {sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:q{i}")[
        "SubscriptionArn"] for i in range(101)}
    pages = list(sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn))
    assert [len(p["Subscriptions"]) for p in pages] == [100, 1]
    assert {s["SubscriptionArn"] for p in pages for s in p["Subscriptions"]} == subs
    for made_topic in made:
        sns.delete_topic(TopicArn=made_topic)


def test_tags(sns):
    arn = topic(sns)
    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "k1", "Value": "v1"}, {"Key": "k2", "Value": "v2"}])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "k1", "Value": "v1"},
                                                                   {"Key": "k2", "Value": "v2"}]
    sns.untag_resource(ResourceArn=arn, TagKeys=["k1"])
    sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "k2", "Value": "v2b"}])
    assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "k2", "Value": "v2b"}]
    with pytest.raises(ClientError) as e:
        sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}])
    assert error(e) == ("InvalidParameter", "Invalid parameter: Duplicated keys are not allowed.", 400)
    with pytest.raises(ClientError) as e:
        sns.list_tags_for_resource(ResourceArn=arn + "-gone")
    assert error(e)[0] == "ResourceNotFound"


def test_fifo_topic(sns):
    arn = topic(sns, fifo=True)
    attrs = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attrs["FifoTopic"] == "true" and attrs["ContentBasedDeduplication"] == "false"
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=arn, Message="m", MessageDeduplicationId="d")
    assert error(e) == ("InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for FIFO "
                                            "topics", 400)
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=arn, Message="m", MessageGroupId="g")
    assert error(e) == ("InvalidParameter", "Invalid parameter: The topic should either have "
                                            "ContentBasedDeduplication enabled or MessageDeduplicationId provided "
                                            "explicitly", 400)
    first = sns.publish(TopicArn=arn, Message="m", MessageGroupId="g", MessageDeduplicationId="d1")
    second = sns.publish(TopicArn=arn, Message="m", MessageGroupId="g", MessageDeduplicationId="d2")
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"]) and len(first["SequenceNumber"]) == 20
    again = sns.publish(TopicArn=arn, Message="m", MessageGroupId="g", MessageDeduplicationId="d1")
    assert (again["MessageId"], again["SequenceNumber"]) == (first["MessageId"], first["SequenceNumber"])

    sns.set_topic_attributes(TopicArn=arn, AttributeName="ContentBasedDeduplication", AttributeValue="true")
    assert "SequenceNumber" in sns.publish(TopicArn=arn, Message="content", MessageGroupId="g")
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn=topic(sns), Message="m", MessageDeduplicationId="d")
    assert error(e) == ("InvalidParameter", "Invalid parameter: MessageDeduplicationId Reason: The request includes "
                                            "MessageDeduplicationId parameter that is not valid for this topic type",
                        400)


# ---------------------------------------------------------------- subscriptions


def test_subscriptions_crud(sns, firehose, s3, lambda_client, tmp_path):
    arn = topic(sns)
    stream_arn, _ = delivery_stream(firehose, s3)
    fn_arn, _ = recording_function(lambda_client, tmp_path)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=stream_arn)
    assert error(e)[0] == "InvalidParameter" and "SubscriptionRoleArn" in error(e)[1]
    fh_sub = sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=stream_arn,
                           Attributes={"SubscriptionRoleArn": ROLE, "RawMessageDelivery": "True"},
                           ReturnSubscriptionArn=True)["SubscriptionArn"]
    assert fh_sub.startswith(arn + ":")
    fn_sub = sns.subscribe(TopicArn=arn, Protocol="lambda", Endpoint=fn_arn)["SubscriptionArn"]
    assert sns.subscribe(TopicArn=arn, Protocol="lambda", Endpoint=fn_arn)["SubscriptionArn"] == fn_sub
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="lambda", Endpoint=fn_arn, Attributes={"RawMessageDelivery": "true"})
    assert error(e) == ("InvalidParameter", "Invalid parameter: Attributes Reason: Subscription already exists with "
                                            "different attributes", 400)

    attrs = sns.get_subscription_attributes(SubscriptionArn=fh_sub)["Attributes"]
    assert attrs["Protocol"] == "firehose" and attrs["Endpoint"] == stream_arn and attrs["TopicArn"] == arn
    assert attrs["RawMessageDelivery"] == "true" and attrs["SubscriptionRoleArn"] == ROLE
    assert attrs["PendingConfirmation"] == "false" and attrs["ConfirmationWasAuthenticated"] == "true"
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["SubscriptionsConfirmed"] == "2"

    by_topic = sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"]
    assert sorted(s["SubscriptionArn"] for s in by_topic) == sorted([fh_sub, fn_sub])
    assert {s["Protocol"] for s in by_topic} == {"firehose", "lambda"}
    everything = [s["SubscriptionArn"] for p in sns.get_paginator("list_subscriptions").paginate()
                  for s in p["Subscriptions"]]
    assert {fh_sub, fn_sub} <= set(everything)

    sns.set_subscription_attributes(SubscriptionArn=fn_sub, AttributeName="FilterPolicy",
                                    AttributeValue='{"kind": ["a"]}')
    attrs = sns.get_subscription_attributes(SubscriptionArn=fn_sub)["Attributes"]
    assert attrs["FilterPolicy"] == '{"kind": ["a"]}' and attrs["FilterPolicyScope"] == "MessageAttributes"
    for name, value, text in [
            ("Fake", "x", "Invalid parameter: AttributeName"),
            ("RawMessageDelivery", "test-ValUe", "Invalid parameter: RawMessageDelivery: Invalid value "
                                                 "[test-ValUe]. Must be true or false."),
            ("RedrivePolicy", '{"deadLetterTargetArn": "x"}', "Invalid parameter: RedrivePolicy: "
                                                               "deadLetterTargetArn is an invalid arn")]:
        with pytest.raises(ClientError) as e:
            sns.set_subscription_attributes(SubscriptionArn=fn_sub, AttributeName=name, AttributeValue=value)
        assert error(e) == ("InvalidParameter", text, 400)
    with pytest.raises(ClientError) as e:
        sns.set_subscription_attributes(SubscriptionArn=fn_sub, AttributeName="FilterPolicy", AttributeValue="{i")
    assert error(e)[1].startswith("Invalid parameter: FilterPolicy: failed to parse JSON.")

    sns.unsubscribe(SubscriptionArn=fn_sub)
    sns.unsubscribe(SubscriptionArn=fn_sub)  # twice is fine
    with pytest.raises(ClientError) as e:
        sns.get_subscription_attributes(SubscriptionArn=fn_sub)
    assert error(e) == ("NotFound", "Subscription does not exist", 404)
    with pytest.raises(ClientError) as e:
        sns.unsubscribe(SubscriptionArn="garbage")
    assert error(e) == ("InvalidParameter", "Invalid parameter: SubscriptionArn Reason: An ARN must have at least 6 "
                                            "elements, not 1", 400)
    sns.delete_topic(TopicArn=arn)  # takes its subscriptions along
    with pytest.raises(ClientError) as e:
        sns.get_subscription_attributes(SubscriptionArn=fh_sub)
    assert error(e)[0] == "NotFound"


def test_subscribe_errors(sns):
    arn = topic(sns)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="test-protocol", Endpoint="x")
    assert error(e) == ("InvalidParameter", "Invalid parameter: Amazon SNS does not support this protocol string: "
                                            "test-protocol", 400)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint="not-an-arn")
    assert error(e) == ("InvalidParameter", "Invalid parameter: SQS endpoint ARN", 400)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:q.fifo")
    assert error(e) == ("InvalidParameter", "Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues "
                                            "can not be subscribed to standard SNS topics", 400)
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:q",
                      Attributes={"RawMessageDelivery": "wrongvalue"})
    assert error(e) == ("InvalidParameter", "Invalid parameter: Attributes Reason: RawMessageDelivery: Invalid value "
                                            "[wrongvalue]. Must be true or false.", 400)
    with pytest.raises(ClientError) as e:  # an endpoint kinesim cannot deliver to is refused, not kept
        sns.subscribe(TopicArn=arn, Protocol="email", Endpoint="someone@example.com")
    assert error(e)[0] == "InvalidParameter" and "kinesim delivers to" in error(e)[1]
    with pytest.raises(ClientError) as e:
        sns.subscribe(TopicArn=arn + "-gone", Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:q")
    assert error(e) == ("NotFound", "Topic does not exist", 404)
    with pytest.raises(ClientError) as e:
        sns.confirm_subscription(TopicArn=arn, Token="abc")
    assert error(e) == ("InvalidParameter", "Invalid parameter: Token", 400)


# ---------------------------------------------------------------- publish


def test_publish_validation(sns):
    arn = topic(sns)
    cases = [
        (dict(Message=""), ("InvalidParameter", "Invalid parameter: Empty message")),
        (dict(Message="m", Subject=""), ("InvalidParameter", "Invalid parameter: Subject")),
        (dict(Message="x" * (256 * 1024 + 1)), ("InvalidParameter", "Invalid parameter: Message too long")),
        (dict(Message="{}", MessageStructure="json"),
         ("InvalidParameter", "Invalid parameter: Message Structure - No default entry in JSON message body")),
        (dict(Message="{x", MessageStructure="json"),
         ("InvalidParameter", "Invalid parameter: Message Structure - JSON message body failed to parse")),
        (dict(Message="m", MessageAttributes={"attr1": {"DataType": "String", "StringValue": ""}}),
         ("ParameterValueInvalid", "The message attribute 'attr1' must contain non-empty message attribute value "
                                   "for message attribute type 'String'.")),
        (dict(Message="m", MessageAttributes={"attr1": {"DataType": "Number", "BinaryValue": b"1"}}),
         ("ParameterValueInvalid", "The message attribute 'attr1' with type 'Number' must use field 'String'.")),
        (dict(Message="m", MessageAttributes={"attr1": {"DataType": "Other", "StringValue": "v"}}),
         ("ParameterValueInvalid", "The message attribute 'attr1' has an invalid message attribute type, the set "
                                   "of supported type prefixes is Binary, Number, and String.")),
        (dict(Message="m", MessageAttributes={"a^b": {"DataType": "String", "StringValue": "v"}}),
         ("ParameterValueInvalid", "Invalid non-alphanumeric character '#x5E' was found in the message attribute "
                                   "name. Can only include alphanumeric characters, hyphens, underscores, or dots.")),
        (dict(Message="m", MessageAttributes={"a..b": {"DataType": "String", "StringValue": "v"}}),
         ("ParameterValueInvalid", "Message attribute name can not have successive '.' character.")),
    ]
    for params, expected in cases:
        with pytest.raises(ClientError) as e:
            sns.publish(TopicArn=arn, **params)
        assert error(e)[:2] == expected, params
    with pytest.raises(ClientError) as e:
        sns.publish(TopicArn="arn:aws", Message="m")
    assert error(e)[:2] == ("InvalidParameter", "Invalid parameter: TopicArn Reason: An ARN must have at least 6 "
                                                "elements, not 2")
    assert re.fullmatch(r"[0-9a-f-]{36}", sns.publish(TargetArn=arn, Message="by target")["MessageId"])


def test_publish_batch_errors(sns):
    arn = topic(sns)
    entry = lambda i, **kw: {"Id": str(i), "Message": f"m{i}", **kw}  # noqa: E731
    for entries, expected in [
            ([entry(i) for i in range(11)], ("TooManyEntriesInBatchRequest",
                                             "The batch request contains more entries than permissible.")),
            ([entry(1), entry(1)], ("BatchEntryIdsNotDistinct",
                                    "Two or more batch entries in the request have the same Id.")),
            ([{"Id": "message.id", "Message": "m"}], ("InvalidBatchEntryId", "The Id of a batch entry in the batch "
                                                      "request contains an impermissible character: message.id")),
            ([entry(i, Message="x" * 30000) for i in range(10)],
             ("BatchRequestTooLong", "The length of all the messages put together is more than the limit.")),
            ([entry(1, Message='{"a": "b"}', MessageStructure="json")],
             ("InvalidParameter", "Invalid parameter: Message Structure - No default entry in JSON message body"))]:
        with pytest.raises(ClientError) as e:
            sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=entries)
        assert error(e)[:2] == expected
    fifo = topic(sns, fifo=True)
    with pytest.raises(ClientError) as e:
        sns.publish_batch(TopicArn=fifo, PublishBatchRequestEntries=[entry(1)])
    assert error(e)[:2] == ("InvalidParameter", "Invalid parameter: The MessageGroupId parameter is required for "
                                                "FIFO topics")
    out = sns.publish_batch(TopicArn=fifo, PublishBatchRequestEntries=[
        entry(i, MessageGroupId="g", MessageDeduplicationId=f"d{i}") for i in range(3)])
    assert [s["Id"] for s in out["Successful"]] == ["0", "1", "2"] and out["Failed"] == []
    seqs = [int(s["SequenceNumber"]) for s in out["Successful"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3


# ---------------------------------------------------------------- deliveries


def test_topic_fans_out_to_a_delivery_stream(sns, firehose, s3):
    arn = topic(sns)
    stream_arn, bucket = delivery_stream(firehose, s3)
    raw_arn, raw_bucket = delivery_stream(firehose, s3)
    sub = sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=stream_arn,
                        Attributes={"SubscriptionRoleArn": ROLE})["SubscriptionArn"]
    sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=raw_arn,
                  Attributes={"SubscriptionRoleArn": ROLE, "RawMessageDelivery": "true"})
    ids = [sns.publish(TopicArn=arn, Message="first", Subject="Greeting",
                       MessageAttributes={"kind": {"DataType": "String", "StringValue": "hello"}})["MessageId"]]
    ids += [s["MessageId"] for s in sns.publish_batch(TopicArn=arn, PublishBatchRequestEntries=[
        {"Id": "a", "Message": "second"}, {"Id": "b", "Message": "third"}])["Successful"]]

    lines = wait_until(lambda: len(delivered_lines(s3, bucket)) >= 3 and delivered_lines(s3, bucket),
                       what="three notifications in S3")
    # One S3 object per record here (a zero buffering interval); their keys do not order them.
    notes = sorted((json.loads(line) for line in lines), key=lambda n: ids.index(n["MessageId"]))
    assert [n["Message"] for n in notes] == ["first", "second", "third"]
    first = notes[0]
    assert first["Type"] == "Notification" and first["TopicArn"] == arn and first["Subject"] == "Greeting"
    assert ISO_MS.fullmatch(first["Timestamp"])
    assert first["UnsubscribeURL"].endswith(f"?Action=Unsubscribe&SubscriptionArn={sub}")
    assert first["MessageAttributes"] == {"kind": {"Type": "String", "Value": "hello"}}
    assert "Subject" not in notes[1] and "MessageAttributes" not in notes[1]
    assert sorted(wait_until(lambda: len(delivered_lines(s3, raw_bucket)) >= 3 and delivered_lines(s3, raw_bucket),
                             what="raw records")) == ["first", "second", "third"]
    # The UnsubscribeURL works as AWS's does: opened as it is, without a signature.
    with urllib.request.urlopen(first["UnsubscribeURL"], timeout=30) as response:
        assert response.status == 200 and b"<UnsubscribeResponse" in response.read()
    with pytest.raises(ClientError) as e:
        sns.get_subscription_attributes(SubscriptionArn=sub)
    assert error(e)[0] == "NotFound"


def test_topic_invokes_a_function_with_the_sns_event(sns, lambda_client, tmp_path):
    arn = topic(sns)
    fn_arn, seen = recording_function(lambda_client, tmp_path)
    sub = sns.subscribe(TopicArn=arn, Protocol="lambda", Endpoint=fn_arn)["SubscriptionArn"]
    msg_id = sns.publish(TopicArn=arn, Message="hello function", MessageAttributes={
        "n": {"DataType": "Number", "StringValue": "42"}, "b": {"DataType": "Binary", "BinaryValue": b"\x01\x02"}})[
        "MessageId"]
    [event] = wait_until(lambda: events(seen), what="the function's invocation")
    [record] = event["Records"]
    assert record["EventSource"] == "aws:sns" and record["EventVersion"] == "1.0"
    assert record["EventSubscriptionArn"] == sub
    note = record["Sns"]
    assert note["Type"] == "Notification" and note["MessageId"] == msg_id and note["TopicArn"] == arn
    assert note["Message"] == "hello function" and note["Subject"] is None
    assert note["MessageAttributes"] == {"n": {"Type": "Number", "Value": "42"},
                                         "b": {"Type": "Binary", "Value": base64.b64encode(b"\x01\x02").decode()}}
    assert note["SignatureVersion"] == "1" and note["Signature"] and note["SigningCertUrl"]
    assert note["UnsubscribeUrl"].endswith(sub) and ISO_MS.fullmatch(note["Timestamp"])

    # MessageStructure=json: the function gets its own protocol's text, others the default.
    sns.publish(TopicArn=arn, MessageStructure="json",
                Message=json.dumps({"default": "for everyone", "lambda": "for functions"}))
    wait_until(lambda: len(events(seen)) == 2, what="the second invocation")
    assert {e["Records"][0]["Sns"]["Message"] for e in events(seen)} == {"hello function", "for functions"}


def test_filter_policies_choose_what_is_delivered(sns, firehose, s3):
    arn = topic(sns)
    attrs_arn, attrs_bucket = delivery_stream(firehose, s3)
    body_arn, body_bucket = delivery_stream(firehose, s3)
    sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=attrs_arn, Attributes={
        "SubscriptionRoleArn": ROLE, "RawMessageDelivery": "true",
        "FilterPolicy": json.dumps({"color": ["red", {"prefix": "bl"}], "size": [{"numeric": [">", 10]}]})})
    sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=body_arn, Attributes={
        "SubscriptionRoleArn": ROLE, "RawMessageDelivery": "true", "FilterPolicyScope": "MessageBody",
        "FilterPolicy": json.dumps({"order": {"state": [{"anything-but": "draft"}]}})})

    def send(message: str, color: str | None = None, size: str | None = None) -> None:
        attributes = {}
        if color:
            attributes["color"] = {"DataType": "String", "StringValue": color}
        if size:
            attributes["size"] = {"DataType": "Number", "StringValue": size}
        sns.publish(TopicArn=arn, Message=message, MessageAttributes=attributes)

    send("red-big", "red", "11")
    send("blue-big", "blue", "100")
    send("red-small", "red", "3")
    send("green-big", "green", "50")
    send("no-attributes")
    send(json.dumps({"order": {"state": "draft"}}))
    send(json.dumps({"order": {"state": "paid"}}), "blue", "12")
    # Filtering is decided before Publish answers and a delivery stream writes its records in
    # order, so once the last matching message is in S3, everything before it that matched is too.
    last = json.dumps({"order": {"state": "paid"}})
    assert sorted(wait_until(lambda: last in delivered_lines(s3, attrs_bucket) and delivered_lines(s3, attrs_bucket),
                             what="filtered by attributes")) == sorted(["red-big", "blue-big", last])
    assert wait_until(lambda: last in delivered_lines(s3, body_bucket) and delivered_lines(s3, body_bucket),
                      what="filtered by body") == [last]


def test_topic_delivers_to_sqs_queues_enveloped_and_raw(server, sns):
    sqs = client_for(server.url, "sqs")
    arn = topic(sns)
    queues = {}
    for raw in ("false", "true"):
        url = sqs.create_queue(QueueName=f"q-{uid()}")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sub = sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn,
                            Attributes={"RawMessageDelivery": raw})["SubscriptionArn"]
        queues[raw] = (url, sub)
    msg_id = sns.publish(TopicArn=arn, Message="Test msg", Subject="S",
                         MessageAttributes={"attr1": {"DataType": "Number", "StringValue": "99.12"}})["MessageId"]

    def receive(url: str) -> list[dict]:
        return sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], WaitTimeSeconds=1).get("Messages", [])

    [enveloped] = wait_until(lambda: receive(queues["false"][0]), what="the enveloped message")
    body = json.loads(enveloped["Body"])
    assert list(body) == ["Type", "MessageId", "TopicArn", "Subject", "Message", "Timestamp", "SignatureVersion",
                          "Signature", "SigningCertURL", "UnsubscribeURL", "MessageAttributes"]
    assert body["MessageId"] == msg_id and body["Message"] == "Test msg" and body["TopicArn"] == arn
    assert body["MessageAttributes"] == {"attr1": {"Type": "Number", "Value": "99.12"}}
    assert body["UnsubscribeURL"].endswith(queues["false"][1])
    [raw] = wait_until(lambda: receive(queues["true"][0]), what="the raw message")
    assert raw["Body"] == "Test msg"
    assert raw["MessageAttributes"] == {"attr1": {"DataType": "Number", "StringValue": "99.12"}}


def _queue(sqs, name: str, **attributes) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def test_fifo_topic_to_fifo_queue_keeps_groups_order_and_deduplicates(server, sns):
    sqs = client_for(server.url, "sqs")
    arn = topic(sns, fifo=True)
    url, queue_arn = _queue(sqs, f"q-{uid()}.fifo", FifoQueue="true")
    sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=queue_arn)
    sent = [sns.publish(TopicArn=arn, Message=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}")
            for i in range(3)]
    sns.publish(TopicArn=arn, Message="m0 again", MessageGroupId="g", MessageDeduplicationId="d0")  # a duplicate
    got: list[dict] = []

    def drain() -> bool:
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"]).get("Messages", []):
            got.append(m)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return len(got) >= 3

    wait_until(drain, what="three FIFO messages")
    bodies = [json.loads(m["Body"]) for m in got]
    assert [b["Message"] for b in bodies] == ["m0", "m1", "m2"]
    assert [b["SequenceNumber"] for b in bodies] == [s["SequenceNumber"] for s in sent]
    assert list(bodies[0]) == ["Type", "MessageId", "SequenceNumber", "TopicArn", "Message", "Timestamp",
                               "UnsubscribeURL"]  # FIFO notifications carry no signature
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"g"}
    assert [m["Attributes"]["MessageDeduplicationId"] for m in got] == ["d0", "d1", "d2"]
    assert not sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages")

    # A standard queue may subscribe to a FIFO topic too (AWS, recorded); it gets no FIFO ids.
    std_url, std_arn = _queue(sqs, f"q-{uid()}")
    sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=std_arn, Attributes={"RawMessageDelivery": "true"})
    sns.publish(TopicArn=arn, Message="to both", MessageGroupId="g", MessageDeduplicationId="d-both")
    [m] = wait_until(lambda: sqs.receive_message(QueueUrl=std_url, WaitTimeSeconds=1).get("Messages"),
                     what="the message in the standard queue")
    assert m["Body"] == "to both"


def test_a_failed_delivery_goes_to_the_redrive_dead_letter_queue(server, sns):
    sqs = client_for(server.url, "sqs")
    arn = topic(sns)
    dlq_url, dlq_arn = _queue(sqs, f"dlq-{uid()}")
    missing = f"arn:aws:sqs:{REGION}:{ACCOUNT}:missing-{uid()}"
    sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=missing, Attributes={
        "RawMessageDelivery": "true", "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn})})
    sns.publish(TopicArn=arn, Message="undeliverable")
    [m] = wait_until(lambda: sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=1).get("Messages"),
                     what="the dead-lettered message")
    assert m["Body"] == "undeliverable"


# ---------------------------------------------------------------- the wire


def raw_post(url: str, body: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url + "/", data=body.encode(), method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8", "X-Amz-Date": "20260101T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sns/aws4_request, "
                         "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64, **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def xml_error(text: str) -> tuple[str, str, str]:
    root = ET.fromstring(text)
    ns = {"s": "http://sns.amazonaws.com/doc/2010-03-31/"}
    assert root.tag == "{http://sns.amazonaws.com/doc/2010-03-31/}ErrorResponse"
    assert root.find("s:RequestId", ns).text
    return tuple(root.find(f"s:Error/s:{k}", ns).text for k in ("Type", "Code", "Message"))


def test_query_protocol_errors_on_the_wire(server):
    status, text = raw_post(server.url, "Action=NoSuchAction&Version=2010-03-31")
    assert (status, xml_error(text)) == (400, ("Sender", "InvalidAction",
                                               "The action NoSuchAction is not valid for this web service."))
    status, text = raw_post(server.url, "Action=Publish&Version=2010-03-31&TopicArn=x")
    assert (status, xml_error(text)) == (400, ("Sender", "ValidationError", "1 validation error detected: Value null "
                                               "at 'message' failed to satisfy constraint: Member must not be null"))
    status, text = raw_post(server.url, "Action=CreatePlatformApplication&Version=2010-03-31&Name=a&Platform=GCM"
                                        "&Attributes.entry.1.key=k&Attributes.entry.1.value=v")
    assert status == 501 and xml_error(text)[1] == "NotImplemented"
    status, text = raw_post(server.url, "Action=ListTopics&Version=2010-03-31", Authorization="")
    assert (status, xml_error(text)[1]) == (403, "MissingAuthenticationToken")
    status, text = raw_post(server.url, "Action=ListTopics&Version=2010-03-31", Origin="https://evil.example")
    assert status == 403 and xml_error(text)[1] == "AccessDenied"
    status, text = raw_post(server.url, "Action=ListTopics&Version=2010-03-31")
    assert status == 200 and "<ListTopicsResult>" in text and "<RequestId>" in text


def test_signatures_are_verified_when_asked(tmp_path_factory):
    proc = start_server(tmp_path_factory, verify_signatures=True, credentials=["good:secret"])
    try:
        good = boto3.client("sns", endpoint_url=proc.url, region_name=REGION, aws_access_key_id="good",
                            aws_secret_access_key="secret")
        arn = good.create_topic(Name="signed")["TopicArn"]
        assert good.publish(TopicArn=arn, Message="signed message")["MessageId"]
        for key, secret, code in (("good", "wrong", "SignatureDoesNotMatch"), ("nobody", "x", "InvalidClientTokenId")):
            bad = boto3.client("sns", endpoint_url=proc.url, region_name=REGION, aws_access_key_id=key,
                               aws_secret_access_key=secret)
            with pytest.raises(ClientError) as e:
                bad.list_topics()
            assert error(e)[0] == code and error(e)[2] == 403
    finally:
        proc.stop()


# ---------------------------------------------------------------- durability and destinations


def test_topics_and_subscriptions_survive_a_kill(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        sns = client_for(proc.url, "sns")
        arn = topic(sns, fifo=True, ContentBasedDeduplication="true")
        sub = sns.subscribe(TopicArn=arn, Protocol="sqs", Endpoint=f"arn:aws:sqs:{REGION}:{ACCOUNT}:q.fifo",
                            Attributes={"RawMessageDelivery": "true"})["SubscriptionArn"]
        sns.tag_resource(ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}])
        proc.kill()
        proc.start()
        sns = client_for(proc.url, "sns")
        assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["ContentBasedDeduplication"] == "true"
        assert sns.get_subscription_attributes(SubscriptionArn=sub)["Attributes"]["RawMessageDelivery"] == "true"
        assert sns.list_tags_for_resource(ResourceArn=arn)["Tags"] == [{"Key": "k", "Value": "v"}]
    finally:
        proc.stop()


def test_on_failure_sns_destination_of_a_mapping(server, sns, firehose, s3, lambda_client, tmp_path):
    """A mapping's OnFailure SNS destination publishes the invocation record to the topic."""
    kinesis = client_for(server.url, "kinesis")
    stream = "sns-src-" + uid()
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    stream_arn = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamARN"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", "def handler(event, context):\n    raise ValueError('always')\n")
    fn = "sns-fail-" + uid()
    lambda_client.create_function(FunctionName=fn, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                  Code={"ZipFile": buf.getvalue()})
    arn = topic(sns)
    fh_arn, bucket = delivery_stream(firehose, s3)
    sns.subscribe(TopicArn=arn, Protocol="firehose", Endpoint=fh_arn,
                  Attributes={"SubscriptionRoleArn": ROLE, "RawMessageDelivery": "true"})
    mapping = lambda_client.create_event_source_mapping(
        FunctionName=fn, EventSourceArn=stream_arn, StartingPosition="TRIM_HORIZON", MaximumRetryAttempts=0,
        DestinationConfig={"OnFailure": {"Destination": arn}})["UUID"]
    try:
        kinesis.put_record(StreamName=stream, Data=b"poison", PartitionKey="k")
        [line] = wait_until(lambda: delivered_lines(s3, bucket), what="the invocation record")
        record = json.loads(line)
        assert record["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert record["KinesisBatchInfo"]["streamArn"] == stream_arn
    finally:
        lambda_client.delete_event_source_mapping(UUID=mapping)
