"""SQS through the real server with boto3 (JSON 1.0, errors with their query codes): queues and
their attributes, send/receive/delete and the batch forms, visibility, long polling, dead-letter
queues, FIFO ordering and deduplication, MD5 digests, durability across kill -9."""
from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from kinesim.config import Settings
from kinesim.protocol.errors import AwsError
from kinesim.server import ServerProcess
from kinesim.sqs.service import SqsService
from kinesim.store import Store


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture
def queue(sqs):
    def make(name: str | None = None, **attributes: str) -> str:
        name = name or "q-" + uuid.uuid4().hex[:12]
        if attributes.get("FifoQueue") == "true" and not name.endswith(".fifo"):
            name += ".fifo"
        return sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return make


def error(call, **kwargs) -> dict:
    with pytest.raises(ClientError) as info:
        call(**kwargs)
    return info.value.response["Error"] | {"Status": info.value.response["ResponseMetadata"]["HTTPStatusCode"]}


def receive(sqs, url: str, **kwargs) -> list[dict]:
    return sqs.receive_message(QueueUrl=url, **kwargs).get("Messages", [])


# ---------------------------------------------------------------------------------------------
# queues


def test_queue_lifecycle_urls_and_listing(sqs, server, queue):
    prefix = "life-" + uuid.uuid4().hex[:8]
    urls = [queue(f"{prefix}-{i}") for i in range(3)]
    # `<endpoint the client used>/<account>/<name>`: what SDKs send back.
    assert urls[0] == f"{server.url}/000000000000/{prefix}-0"
    assert sqs.get_queue_url(QueueName=f"{prefix}-1")["QueueUrl"] == urls[1]
    assert sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == urls
    first = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2)
    assert first["QueueUrls"] == urls[:2] and first["NextToken"]
    rest = sqs.list_queues(QueueNamePrefix=prefix, MaxResults=2, NextToken=first["NextToken"])
    assert rest["QueueUrls"] == urls[2:] and "NextToken" not in rest
    paged = [u for page in sqs.get_paginator("list_queues").paginate(QueueNamePrefix=prefix, MaxResults=1)
             for u in page.get("QueueUrls", [])]
    assert paged == urls
    sqs.delete_queue(QueueUrl=urls[1])
    assert sqs.list_queues(QueueNamePrefix=prefix)["QueueUrls"] == [urls[0], urls[2]]
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix="no-such-prefix-" + uuid.uuid4().hex)
    err = error(sqs.get_queue_url, QueueName=f"{prefix}-1")
    assert (err["Code"], err["QueryErrorCode"], err["Message"], err["Status"]) == (
        "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "The specified queue does not exist.", 400)
    assert error(sqs.send_message, QueueUrl=urls[1], MessageBody="x")["Code"] == \
        "AWS.SimpleQueueService.NonExistentQueue"


def test_create_is_idempotent_with_same_attributes(sqs, queue):
    name = "idem-" + uuid.uuid4().hex[:8]
    url = queue(name, DelaySeconds="5")
    assert queue(name, DelaySeconds="5") == url
    assert queue(name) == url  # no attributes given: nothing differs
    err = error(sqs.create_queue, QueueName=name, Attributes={"DelaySeconds": "6"})
    assert (err["Code"], err["QueryErrorCode"], err["Message"]) == (
        "QueueAlreadyExists", "QueueNameExists",
        "A queue already exists with the same name and a different value for attribute DelaySeconds")


def test_queue_attributes_defaults_set_and_checked(sqs, queue):
    url = queue()
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    created = attrs.pop("CreatedTimestamp")
    assert abs(int(created) - time.time()) < 600 and attrs.pop("LastModifiedTimestamp")
    assert attrs == {  # AWS's answer for a new standard queue (LocalStack's recorded snapshot)
        "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesDelayed": "0",
        "ApproximateNumberOfMessagesNotVisible": "0", "DelaySeconds": "0", "MaximumMessageSize": "1048576",
        "MessageRetentionPeriod": "345600", "QueueArn": f"arn:aws:sqs:us-east-1:000000000000:{url.rsplit('/', 1)[1]}",
        "ReceiveMessageWaitTimeSeconds": "0", "SqsManagedSseEnabled": "true", "VisibilityTimeout": "30"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45", "DelaySeconds": "2"})
    got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    assert got["Attributes"] == {"VisibilityTimeout": "45", "DelaySeconds": "2"}
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)
    err = error(sqs.set_queue_attributes, QueueUrl=url, Attributes={"VisibilityTimeout": "43201"})
    assert (err["Code"], err["Message"]) == ("InvalidAttributeValue", "Invalid value for the parameter VisibilityTimeout.")
    err = error(sqs.set_queue_attributes, QueueUrl=url, Attributes={"FifoQueue": "true"})
    assert (err["Code"], err["Message"]) == ("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    err = error(sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["Nope"])
    assert (err["Code"], err["Message"]) == ("InvalidAttributeName", "Unknown Attribute Nope.")
    err = error(sqs.create_queue, QueueName="bad name!")
    assert (err["Code"], err["QueryErrorCode"]) == ("InvalidParameterValue", "InvalidParameterValueException")
    err = error(sqs.create_queue, QueueName="std-" + uuid.uuid4().hex[:6], Attributes={"DeduplicationScope": "queue"})
    assert err["Message"] == "You can specify the DeduplicationScope only when FifoQueue is set to true."


def test_tags(sqs, queue):
    url = queue()
    sqs.tag_queue(QueueUrl=url, Tags={"team": "data", "env": "dev"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "data"}
    sqs.untag_queue(QueueUrl=url, TagKeys=["team"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_purge_and_its_60_second_rule(sqs, queue):
    url = queue()
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
    sqs.purge_queue(QueueUrl=url)
    assert receive(sqs, url) == []
    err = error(sqs.purge_queue, QueueUrl=url)
    assert (err["Code"], err["Status"]) == ("AWS.SimpleQueueService.PurgeQueueInProgress", 403)


# ---------------------------------------------------------------------------------------------
# messages


def _attributes_md5(attributes: dict) -> str:
    """The developer guide's algorithm, written out independently of the server's."""
    out = b""
    for name in sorted(attributes):
        value = attributes[name]
        out += struct.pack(">I", len(name.encode())) + name.encode()
        out += struct.pack(">I", len(value["DataType"].encode())) + value["DataType"].encode()
        if "BinaryValue" in value:
            out += b"\x02" + struct.pack(">I", len(value["BinaryValue"])) + value["BinaryValue"]
        else:
            out += b"\x01" + struct.pack(">I", len(value["StringValue"].encode())) + value["StringValue"].encode()
    return hashlib.md5(out).hexdigest()


def test_send_receive_delete_with_attributes_and_md5s(sqs, queue):
    url = queue()
    attributes = {"Foo": {"DataType": "String", "StringValue": "Bar"},
                  "Blob": {"DataType": "Binary", "BinaryValue": b"\x00\xffbin"},
                  "N": {"DataType": "Number.int", "StringValue": "42"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody="héllo", MessageAttributes=attributes)
    assert sent["MD5OfMessageBody"] == hashlib.md5("héllo".encode()).hexdigest()
    assert sent["MD5OfMessageAttributes"] == _attributes_md5(attributes)
    # AWS's own digest for {"Foo": "Bar"} (recorded in LocalStack's test_sqs snapshot).
    single = sqs.send_message(QueueUrl=url, MessageBody="msg",
                              MessageAttributes={"Foo": {"DataType": "String", "StringValue": "Bar"}})
    assert single["MD5OfMessageAttributes"] == "ae7155c6026991b6d54b11589678bf9c"

    got = receive(sqs, url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
    assert [m["Body"] for m in got] == ["héllo", "msg"]
    first = got[0]
    assert first["MessageId"] == sent["MessageId"] and first["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert first["MessageAttributes"] == attributes and first["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    assert set(first["Attributes"]) == {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
                                        "ApproximateFirstReceiveTimestamp"}
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesNotVisible"]) == ("0", "2")
    # A filter on names: the digest covers what is returned.
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    again = receive(sqs, url, MessageAttributeNames=["F.*"], AttributeNames=["ApproximateReceiveCount"])[0]
    assert again["MessageAttributes"] == {"Foo": attributes["Foo"]}
    assert again["MD5OfMessageAttributes"] == "ae7155c6026991b6d54b11589678bf9c"
    assert again["Attributes"] == {"ApproximateReceiveCount": "2"}

    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])  # deleted already: fine
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[1]["ReceiptHandle"])
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"])
    assert counts["Attributes"] == {"ApproximateNumberOfMessagesNotVisible": "0"}
    err = error(sqs.delete_message, QueueUrl=url, ReceiptHandle="garbage")
    assert (err["Code"], err["Message"]) == ("ReceiptHandleIsInvalid",
                                             'The input receipt handle "garbage" is not a valid receipt handle.')


def test_send_checks(sqs, queue):
    url = queue(MaximumMessageSize="1024")
    err = error(sqs.send_message, QueueUrl=url, MessageBody="")
    assert (err["Code"], err["QueryErrorCode"], err["Message"]) == (
        "MissingParameter", "MissingRequiredParameterException", "The request must contain the parameter MessageBody.")
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x" * 1025)
    assert err["Message"] == "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x",
                MessageAttributes={"ErrorDetails": {"DataType": "String", "StringValue": ""}})
    assert err["Message"] == "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'."
    err = error(sqs.send_message, QueueUrl=url, MessageBody="bad \x01 char")
    assert err["Code"] == "InvalidMessageContents"
    err = error(sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=11)
    assert err["Message"] == ("Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and "
                              "10, if provided.")
    err = error(sqs.receive_message, QueueUrl=url, WaitTimeSeconds=21)
    assert err["Message"] == "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided."


def test_batches(sqs, queue):
    url = queue(MaximumMessageSize="1024")
    out = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "one"}, {"Id": "b", "MessageBody": "x" * 2000}, {"Id": "c", "MessageBody": "three"}])
    assert sorted(e["Id"] for e in out["Successful"]) == ["a", "c"]
    assert out["Successful"][0]["MD5OfMessageBody"] == hashlib.md5(b"one").hexdigest()
    assert out["Failed"] == [{"Id": "b", "SenderFault": True, "Code": "InvalidParameterValue", "Message":
                              "One or more parameters cannot be validated. Reason: Message must be shorter than "
                              "1024 bytes."}]
    err = error(sqs.send_message_batch, QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "m"} for i in range(11)])
    assert (err["Code"], err["Message"]) == ("AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                                             "Maximum number of entries per request are 10. You have sent 11.")
    err = error(sqs.send_message_batch, QueueUrl=url, Entries=[{"Id": "x", "MessageBody": "m"}] * 2)
    assert err["Code"] == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    err = error(sqs.send_message_batch, QueueUrl=url, Entries=[{"Id": "bad id!", "MessageBody": "m"}])
    assert err["Code"] == "AWS.SimpleQueueService.InvalidBatchEntryId"
    err = error(sqs.send_message_batch, QueueUrl=url, Entries=[])
    assert err["Code"] == "AWS.SimpleQueueService.EmptyBatchRequest"

    got = receive(sqs, url, MaxNumberOfMessages=10)
    assert sorted(m["Body"] for m in got) == ["one", "three"]
    changed = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": got[0]["ReceiptHandle"], "VisibilityTimeout": 0},
        {"Id": "z", "ReceiptHandle": "nonsense", "VisibilityTimeout": 0}])
    assert [e["Id"] for e in changed["Successful"]] == ["a"]
    assert changed["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"
    again = receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=20)
    assert [m["Body"] for m in again] == [got[0]["Body"]]
    deleted = sqs.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": "1", "ReceiptHandle": again[0]["ReceiptHandle"]}, {"Id": "2", "ReceiptHandle": got[1]["ReceiptHandle"]}])
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["1", "2"] and not deleted["Failed"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_delay_visibility_expiry_and_long_poll_wake_on_timeout(sqs, queue):
    url = queue()
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert attrs["Attributes"] == {"ApproximateNumberOfMessagesDelayed": "1"}
    # A long poll answers when the delay ends, long before its 20 s.
    first = receive(sqs, url, WaitTimeSeconds=20, VisibilityTimeout=1)
    assert [m["Body"] for m in first] == ["later"]
    assert receive(sqs, url) == []  # in flight
    second = receive(sqs, url, WaitTimeSeconds=20, AttributeNames=["ApproximateReceiveCount"])
    assert second[0]["MessageId"] == first[0]["MessageId"]
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"


def test_long_poll_is_woken_by_a_send(sqs, server, queue):
    url = queue(ReceiveMessageWaitTimeSeconds="20")  # the queue's wait applies when the call names none
    results: list = []
    poller = threading.Thread(target=lambda: results.append((receive(client_for(server.url, "sqs"), url),
                                                             time.monotonic())))
    started = time.monotonic()
    poller.start()
    sqs.send_message(QueueUrl=url, MessageBody="wake up")
    poller.join(60)
    messages, answered = results[0]
    assert [m["Body"] for m in messages] == ["wake up"]
    assert answered - started < 15  # woken by the send, not by the end of its 20 s


def test_empty_long_poll_waits_its_time(sqs, queue):
    url = queue()
    started = time.monotonic()
    assert receive(sqs, url, WaitTimeSeconds=1) == []
    assert time.monotonic() - started >= 0.9


def test_dead_letter_queue_redrive(sqs, queue):
    dlq = queue()
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = queue(VisibilityTimeout="0",
                   RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sent = sqs.send_message(QueueUrl=source, MessageBody="poison",
                            MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}})
    assert len(receive(sqs, source)) == 1
    assert len(receive(sqs, source)) == 1
    assert receive(sqs, source) == []  # received twice: moved, not handed out a third time
    moved = receive(sqs, dlq, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
    assert [m["MessageId"] for m in moved] == [sent["MessageId"]]
    assert moved[0]["Attributes"]["DeadLetterQueueSourceArn"] == source_arn
    assert moved[0]["Attributes"]["ApproximateReceiveCount"] == "3"
    assert moved[0]["MessageAttributes"] == {"k": {"DataType": "String", "StringValue": "v"}}
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [source]
    err = error(sqs.create_queue, QueueName="redrive-" + uuid.uuid4().hex[:6], Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 0})})
    assert err["Code"] == "InvalidParameterValue" and "valid values are from 1 to 1000" in err["Message"]
    missing = "arn:aws:sqs:us-east-1:000000000000:no-such-queue-" + uuid.uuid4().hex[:6]
    err = error(sqs.create_queue, QueueName="redrive-" + uuid.uuid4().hex[:6], Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": missing, "maxReceiveCount": 1})})
    assert err["Message"].endswith("Reason: Dead letter target does not exist.")


# ---------------------------------------------------------------------------------------------
# FIFO


def test_fifo_ordering_and_group_blocking(sqs, queue):
    url = queue(FifoQueue="true", ContentBasedDeduplication="true")
    sequences = []
    for group, body in [("g1", "a1"), ("g2", "b1"), ("g1", "a2"), ("g1", "a3"), ("g2", "b2")]:
        sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
        sequences.append(int(sent["SequenceNumber"]))
    assert sequences == sorted(sequences) and len(set(sequences)) == 5
    head = receive(sqs, url, MessageSystemAttributeNames=["MessageGroupId", "SequenceNumber"])
    assert [m["Body"] for m in head] == ["a1"]
    assert head[0]["Attributes"] == {"MessageGroupId": "g1", "SequenceNumber": str(sequences[0])}
    # g1 has a message in flight: only g2's come out, in order.
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["b1", "b2"]
    assert receive(sqs, url, MaxNumberOfMessages=10) == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=head[0]["ReceiptHandle"])
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["a2", "a3"]


def test_fifo_deduplication_and_checks(sqs, queue):
    url = queue(FifoQueue="true")
    first = sqs.send_message(QueueUrl=url, MessageBody="one", MessageGroupId="g", MessageDeduplicationId="d1")
    dup = sqs.send_message(QueueUrl=url, MessageBody="other body", MessageGroupId="g", MessageDeduplicationId="d1")
    assert dup["MessageId"] == first["MessageId"] and dup["SequenceNumber"] == first["SequenceNumber"]
    assert [m["Body"] for m in receive(sqs, url, MaxNumberOfMessages=10)] == ["one"]
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x", MessageDeduplicationId="d2")
    assert (err["Code"], err["Message"]) == ("MissingParameter", "The request must contain the parameter MessageGroupId.")
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="g")
    assert err["Message"] == ("The queue should either have ContentBasedDeduplication enabled or "
                              "MessageDeduplicationId provided explicitly")
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d3",
                DelaySeconds=2)
    assert err["Message"] == ("Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter "
                              "that is not valid for this queue type.")
    err = error(sqs.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="group 123",
                MessageDeduplicationId="d4")
    assert err["Message"] == ("Value group 123 for parameter MessageGroupId is invalid. Reason: MessageGroupId can "
                              "only include alphanumeric and punctuation characters. 1 to 128 in length.")
    err = error(sqs.create_queue, QueueName="no-suffix-" + uuid.uuid4().hex[:6], Attributes={"FifoQueue": "true"})
    assert err["Code"] == "InvalidParameterValue"
    err = error(sqs.set_queue_attributes, QueueUrl=url, Attributes={"FifoQueue": "false"})
    assert err["Message"] == "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    std = queue()
    err = error(sqs.send_message, QueueUrl=std, MessageBody="x", MessageDeduplicationId="d")
    assert err["Code"] == "InvalidParameterValue"


def test_fifo_expired_receipt_handle(sqs, queue):
    url = queue(FifoQueue="true", ContentBasedDeduplication="true", VisibilityTimeout="0")
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
    old = receive(sqs, url)[0]["ReceiptHandle"]
    newer = receive(sqs, url, VisibilityTimeout=60)[0]["ReceiptHandle"]
    err = error(sqs.delete_message, QueueUrl=url, ReceiptHandle=old)
    assert err["Message"] == f"Value {old} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
    sqs.delete_message(QueueUrl=url, ReceiptHandle=newer)
    assert receive(sqs, url) == []


# ---------------------------------------------------------------------------------------------
# wire details


def test_json_1_0_answers_and_query_error_header(server):
    import urllib.request
    req = urllib.request.Request(server.url, data=b'{"QueueName": "missing-' + uuid.uuid4().hex.encode() + b'"}',
                                 method="POST", headers={
                                     "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.GetQueueUrl",
                                     "X-Amz-Date": "20260101T000000Z",
                                     "Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sqs/aws4_request, "
                                                      "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=30)
    answer = info.value
    assert answer.code == 400 and answer.headers["Content-Type"] == "application/x-amz-json-1.0"
    assert answer.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert json.loads(answer.read()) == {"__type": "com.amazonaws.sqs#QueueDoesNotExist",
                                         "message": "The specified queue does not exist."}


# ---------------------------------------------------------------------------------------------
# durability


def test_queues_and_messages_survive_kill_and_restart(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    settings = proc.settings
    try:
        sqs = client_for(proc.url, "sqs")
        url = sqs.create_queue(QueueName="durable", Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
        fifo = sqs.create_queue(QueueName="durable.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        ids = [sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["MessageId"] for i in range(3)]
        got = receive(sqs, url, MaxNumberOfMessages=2)
        assert [m["Body"] for m in got] == ["m0", "m1"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])  # m0 gone; m1 in flight
        dedup = sqs.send_message(QueueUrl=fifo, MessageBody="f", MessageGroupId="g", MessageDeduplicationId="d")
    finally:
        proc.kill()
    proc = ServerProcess(settings).start()
    try:
        sqs = client_for(proc.url, "sqs")
        assert sqs.get_queue_url(QueueName="durable")["QueueUrl"] == url
        assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == \
            {"VisibilityTimeout": "1"}
        seen: dict[str, dict] = {}
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:  # m1 comes back when its timeout ends
            for m in receive(sqs, url, MaxNumberOfMessages=10, WaitTimeSeconds=20, VisibilityTimeout=60,
                             AttributeNames=["ApproximateReceiveCount"]):
                seen[m["Body"]] = m
        assert sorted(seen) == ["m1", "m2"]
        assert seen["m1"]["MessageId"] == ids[1] and seen["m1"]["Attributes"]["ApproximateReceiveCount"] == "2"
        # The deduplication window outlives the restart.
        again = sqs.send_message(QueueUrl=fifo, MessageBody="f", MessageGroupId="g", MessageDeduplicationId="d")
        assert again["MessageId"] == dedup["MessageId"]
        assert len(receive(sqs, fifo, MaxNumberOfMessages=10)) == 1
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------
# the in-process sender other services deliver through


def test_destination_sender(tmp_path):
    store = Store(str(tmp_path))
    service = SqsService(Settings(), store)
    try:
        url = service.call("CreateQueue", {"QueueName": "onfailure"})["QueueUrl"]
        fifo = service.call("CreateQueue", {"QueueName": "f.fifo", "Attributes": {"FifoQueue": "true"}})["QueueUrl"]
        arn = "arn:aws:sqs:us-east-1:000000000000:onfailure"
        service.send_to_arn(arn, b'{"requestContext": {}}', {
            "MessageAttributes": {"source": {"DataType": "String", "StringValue": "lambda"}}})
        service.send_to_arn("arn:aws:sqs:us-east-1:000000000000:f.fifo", b"in order",
                            {"MessageGroupId": "g", "MessageDeduplicationId": "1"})
        got = service.call("ReceiveMessage", {"QueueUrl": url, "MessageAttributeNames": ["All"]})["Messages"]
        assert got[0]["Body"] == '{"requestContext": {}}'
        assert got[0]["MessageAttributes"] == {"source": {"DataType": "String", "StringValue": "lambda"}}
        assert service.call("ReceiveMessage", {"QueueUrl": fifo})["Messages"][0]["Body"] == "in order"
        with pytest.raises(AwsError) as info:
            service.send_to_arn("arn:aws:sqs:us-east-1:000000000000:nope", b"x", None)
        assert info.value.code == "QueueDoesNotExist"
        assert info.value.query_error == "AWS.SimpleQueueService.NonExistentQueue;Sender"  # type: ignore[attr-defined]
    finally:
        service.close()
        store.close()


def test_binary_attribute_round_trip_base64_on_the_wire(sqs, queue):
    url = queue()
    blob = bytes(range(256))
    sent = sqs.send_message(QueueUrl=url, MessageBody="b",
                            MessageAttributes={"raw": {"DataType": "Binary.gz", "BinaryValue": blob}})
    got = receive(sqs, url, MessageAttributeNames=["raw"])[0]
    assert got["MessageAttributes"]["raw"] == {"DataType": "Binary.gz", "BinaryValue": blob}
    assert got["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"] == \
        _attributes_md5({"raw": {"DataType": "Binary.gz", "BinaryValue": blob}})


def test_add_and_remove_permission(sqs, queue):
    url = queue()
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.add_permission(QueueUrl=url, Label="cross", AWSAccountIds=["000000000000", "111122223333"],
                       Actions=["ReceiveMessage"])
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert policy == {"Version": "2008-10-17", "Id": f"{arn}/SQSDefaultPolicy", "Statement": [{
        "Sid": "cross", "Effect": "Allow",
        "Principal": {"AWS": ["arn:aws:iam::000000000000:root", "arn:aws:iam::111122223333:root"]},
        "Action": "SQS:ReceiveMessage", "Resource": arn}]}
    err = error(sqs.add_permission, QueueUrl=url, Label="cross", AWSAccountIds=["000000000000"], Actions=["*"])
    assert err["Message"] == "Value cross for parameter Label is invalid. Reason: Already exists."
    sqs.remove_permission(QueueUrl=url, Label="cross")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    err = error(sqs.remove_permission, QueueUrl=url, Label="cross")
    assert err["Message"] == "Value cross for parameter Label is invalid. Reason: can't find label."


def test_message_move_task_redrives_dead_letters_to_their_source(sqs, queue):
    dlq = queue()
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    err = error(sqs.start_message_move_task, SourceArn=dlq_arn)
    assert err["Message"] == "Source queue must be configured as a Dead Letter Queue."
    source = queue(VisibilityTimeout="0",
                   RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    source_arn = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=source, MessageBody=body)
    assert len(receive(sqs, source, MaxNumberOfMessages=10)) == 2
    assert receive(sqs, source, MaxNumberOfMessages=10) == []  # both moved to the dead-letter queue
    assert sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"] == \
        {"ApproximateNumberOfMessages": "2"}
    assert sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    [task] = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"], task["ApproximateNumberOfMessagesToMove"]) == \
        ("COMPLETED", 2, 2)
    back = receive(sqs, source, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert sorted(m["Body"] for m in back) == ["a", "b"]
    assert all("DeadLetterQueueSourceArn" not in m["Attributes"] for m in back)
    assert source_arn.endswith(source.rsplit("/", 1)[1])
    missing = "arn:aws:sqs:us-east-1:000000000000:gone-" + uuid.uuid4().hex[:6]
    err = error(sqs.start_message_move_task, SourceArn=dlq_arn, DestinationArn=missing)
    assert (err["Code"], err["Status"]) == ("ResourceNotFoundException", 404)
    err = error(sqs.cancel_message_move_task, TaskHandle="not a handle")
    assert err["Message"] == "Value for parameter TaskHandle is invalid."


def test_retention_drops_old_messages_durably(tmp_path):
    """White-box (the retention period is at least 60 s): a message past it is gone from the
    counts, from receives and from the store."""
    store = Store(str(tmp_path))
    service = SqsService(Settings(), store)
    url = service.call("CreateQueue", {"QueueName": "short", "Attributes": {"MessageRetentionPeriod": "60"}})["QueueUrl"]
    old = service.call("SendMessage", {"QueueUrl": url, "MessageBody": "old"})["MessageId"]
    service.call("SendMessage", {"QueueUrl": url, "MessageBody": "new"})
    service.queues["short"].messages[old].sent -= 61
    counts = service.call("GetQueueAttributes", {"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages"]})
    assert counts["Attributes"] == {"ApproximateNumberOfMessages": "1"}
    service.close()
    restarted = SqsService(Settings(), store)
    assert [m["Body"] for m in restarted.call("ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10})[
        "Messages"]] == ["new"]
    restarted.close()
    store.close()


def test_long_polls_past_the_cap_answer_at_once(tmp_path_factory):
    """Waiting receives hold a request thread each: past --max-long-polls a receive answers at once
    (empty), so long polls cannot starve other clients. With a cap of 1, of two 20 s polls on an
    empty queue one answers while the other still waits, and the waiting one gets the next send."""
    proc = start_server(tmp_path_factory, max_long_polls=1)
    try:
        sqs = client_for(proc.url, "sqs")
        url = sqs.create_queue(QueueName="capped")["QueueUrl"]
        answers: dict[int, list] = {}

        def poll(i: int) -> None:
            answers[i] = receive(sqs, url, WaitTimeSeconds=20)

        threads = [threading.Thread(target=poll, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 15  # well inside the 20 s a waiting poll would take
        while not answers and time.monotonic() < deadline:
            threads[0].join(0.05)
        assert len(answers) == 1, "one of the two polls must answer at once"
        first = next(iter(answers))
        assert answers[first] == []
        sqs.send_message(QueueUrl=url, MessageBody="for the waiting poll")
        for t in threads:
            t.join(30)
        assert [m["Body"] for m in answers[1 - first]] == ["for the waiting poll"]
    finally:
        proc.stop()


def test_a_server_started_with_a_missing_aws_profile_still_answers(tmp_path_factory, monkeypatch):
    # The services read botocore's models without a botocore Session (which reads the AWS config
    # of the server's environment, and raised ProfileNotFound: SQS, S3 and ECR answered 500).
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    proc = start_server(tmp_path_factory)
    monkeypatch.delenv("AWS_PROFILE")
    try:
        sqs = client_for(proc.url, "sqs")
        url = sqs.create_queue(QueueName="profiled")["QueueUrl"]
        assert sqs.get_queue_url(QueueName="profiled")["QueueUrl"] == url
        s3 = client_for(proc.url, "s3")
        s3.create_bucket(Bucket="profiled-bucket")
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["profiled-bucket"]
        assert client_for(proc.url, "ecr").describe_repositories()["repositories"] == []
    finally:
        proc.stop()
