"""SQS event source mappings end to end: boto3 against a real server, real handlers in worker
processes. The handler (HANDLER below) appends every event it is sent to a file named by its
environment, so a test sees exactly what each invocation carried.

Shapes and error texts are AWS's, from its answers recorded by LocalStack
(tests/aws/services/lambda_/event_source_mapping/test_lambda_integration_sqs.snapshot.json).
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import time
import uuid
import zipfile

import pytest
from botocore.exceptions import ClientError

from kinesim.config import Settings
from kinesim.deploy import cli
from kinesim.server import ServerProcess, free_port

from conftest import client_for

REGION, ACCOUNT = "us-east-1", "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/queue-reader-role"

# What a message body asks the handler to do (anything else: nothing).
#   fail...     raise (the whole batch fails)
#   report...   listed in batchItemFailures
#   badreport.. an itemIdentifier that is no message of the batch (AWS: the whole batch failed)
#   slow...     sleep 50 ms (keeps a batch in flight)
HANDLER = '''
import fcntl, json, os, time

def handler(event, context):
    start = time.time()
    failures = []
    error = None
    for record in event["Records"]:
        body = record["body"]
        if body.startswith("fail"):
            error = "failing on " + body
        if body.startswith("report"):
            failures.append({"itemIdentifier": record["messageId"]})
        if body.startswith("badreport"):
            failures.append({"itemIdentifier": "not-a-message-of-the-batch"})
        if body.startswith("slow"):
            time.sleep(0.05)
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps({"start": start, "end": time.time(), "event": event}) + "\\n")
    if error:
        raise ValueError(error)
    return {"batchItemFailures": failures}
'''

BASE = {"BatchSize", "EventSourceArn", "EventSourceMappingArn", "FunctionArn", "FunctionResponseTypes",
        "LastModified", "MaximumBatchingWindowInSeconds", "State", "StateTransitionReason", "UUID"}
TOO_BIG = "Maximum batch window in seconds must be greater than 0 if maximum batch size is greater than 10"


def handler_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", HANDLER)
    return buf.getvalue()


def wait_until(predicate, timeout: float = 60.0, what: str = "condition", step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(step)


def error_of(e) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"]["Message"], r["ResponseMetadata"]["HTTPStatusCode"]


def shape(response: dict) -> set:
    return set(response) - {"ResponseMetadata"}


class Seen:
    def __init__(self, path: str):
        self.path = path

    def invocations(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def records(self) -> list[dict]:
        return [r for inv in self.invocations() for r in inv["event"]["Records"]]

    def bodies(self) -> list[str]:
        return [r["body"] for r in self.records()]


@pytest.fixture(scope="module")
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture
def function(lam, tmp_path):
    """A function whose handler logs its events: (name, Seen)."""
    name = "sqs-fn-" + uuid.uuid4().hex[:8]
    seen = Seen(str(tmp_path / "seen.jsonl"))
    lam.create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                        Code={"ZipFile": handler_zip()}, Timeout=30,
                        Environment={"Variables": {"SEEN_FILE": seen.path}})
    yield name, seen
    lam.delete_function(FunctionName=name)


def make_queue(sqs, fifo: bool = False, **attributes) -> tuple[str, str]:
    name = "q-" + uuid.uuid4().hex[:8] + (".fifo" if fifo else "")
    if fifo:
        attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true", **attributes}
    url = sqs.create_queue(QueueName=name, Attributes={k: str(v) for k, v in attributes.items()})["QueueUrl"]
    return url, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def queue_size(sqs, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(int(attrs[k]) for k in ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                       "ApproximateNumberOfMessagesDelayed"))


def enabled(lam, uuid_: str) -> dict:
    return wait_until(lambda: (m := lam.get_event_source_mapping(UUID=uuid_))["State"] == "Enabled" and m,
                      what="mapping enabled")


# API: shapes and validation


def test_create_get_list_update_delete(lam, sqs, function):
    name, _ = function
    _, arn = make_queue(sqs)
    created = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)
    assert created["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert shape(created) == BASE
    assert (created["State"], created["StateTransitionReason"], created["BatchSize"],
            created["MaximumBatchingWindowInSeconds"], created["FunctionResponseTypes"]) == \
        ("Creating", "USER_INITIATED", 10, 0, [])
    assert created["FunctionArn"] == f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
    uuid_ = created["UUID"]
    assert created["EventSourceMappingArn"] == f"arn:aws:lambda:{REGION}:{ACCOUNT}:event-source-mapping:{uuid_}"
    got = enabled(lam, uuid_)
    assert shape(got) == BASE and got["StateTransitionReason"] == "USER_INITIATED"
    listed = lam.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
    assert [m["UUID"] for m in listed] == [uuid_] and set(listed[0]) == BASE

    # AWS's recorded refusal, on Update as on Create.
    with pytest.raises(ClientError) as e:
        lam.update_event_source_mapping(UUID=uuid_, BatchSize=11)
    assert error_of(e) == ("InvalidParameterValueException", TOO_BIG, 400)

    updated = lam.update_event_source_mapping(
        UUID=uuid_, BatchSize=500, MaximumBatchingWindowInSeconds=2, FunctionResponseTypes=["ReportBatchItemFailures"],
        ScalingConfig={"MaximumConcurrency": 2},
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"k": ["v"]}})}]})
    assert updated["ResponseMetadata"]["HTTPStatusCode"] == 202 and updated["State"] == "Updating"
    assert shape(updated) == BASE | {"ScalingConfig", "FilterCriteria"}
    assert (updated["BatchSize"], updated["MaximumBatchingWindowInSeconds"], updated["FunctionResponseTypes"],
            updated["ScalingConfig"]) == (500, 2, ["ReportBatchItemFailures"], {"MaximumConcurrency": 2})
    cleared = lam.update_event_source_mapping(UUID=uuid_, ScalingConfig={}, FilterCriteria={"Filters": []})
    assert shape(cleared) == BASE

    disabled = lam.update_event_source_mapping(UUID=uuid_, Enabled=False)
    assert disabled["State"] == "Disabling"
    assert lam.get_event_source_mapping(UUID=uuid_)["State"] == "Disabled"
    deleted = lam.delete_event_source_mapping(UUID=uuid_)
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 202 and deleted["State"] == "Deleting"
    with pytest.raises(ClientError) as e:
        lam.get_event_source_mapping(UUID=uuid_)
    assert error_of(e)[0] == "ResourceNotFoundException"
    assert lam.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"] == []


def test_refusals(lam, sqs, function):
    name, _ = function
    _, arn = make_queue(sqs)
    _, fifo_arn = make_queue(sqs, fifo=True)
    invalid = "InvalidParameterValueException"
    cases = [
        ({"EventSourceArn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:no-such-queue"},
         (invalid, "Error occurred while ReceiveMessage. SQS Error Code: AWS.SimpleQueueService.NonExistentQueue. "
                   "SQS Error Message: The specified queue does not exist.", 400)),
        ({"EventSourceArn": arn, "BatchSize": 11}, (invalid, TOO_BIG, 400)),
        ({"EventSourceArn": fifo_arn, "BatchSize": 11}, (invalid, TOO_BIG, 400)),
        ({"EventSourceArn": fifo_arn, "BatchSize": 10, "MaximumBatchingWindowInSeconds": 1},
         (invalid, "Batching window is not supported for FIFO queues", 400)),
        ({"EventSourceArn": arn, "StartingPosition": "LATEST"},
         (invalid, "StartingPosition is not valid for SQS event sources.", 400)),
        ({"EventSourceArn": arn, "ParallelizationFactor": 2},
         (invalid, "Unsupported ParallelizationFactor parameter for given event source mapping type.", 400)),
        ({"EventSourceArn": arn, "DestinationConfig": {"OnFailure": {"Destination": arn}}},
         (invalid, "Unsupported DestinationConfig parameter for given event source mapping type.", 400)),
        ({"EventSourceArn": arn, "FilterCriteria": {"Filters": [{"Pattern": json.dumps({"eventSource": "aws:sqs"})}]}},
         (invalid, "Invalid filter pattern definition.", 400)),
        ({"EventSourceArn": arn, "FunctionName": name + "-missing"}, (invalid, "Function does not exist", 400)),
    ]
    for params, expected in cases:
        with pytest.raises(ClientError) as e:
            lam.create_event_source_mapping(**{"FunctionName": name, **params})
        assert error_of(e) == expected, params
    unchecked = client_for(lam.meta.endpoint_url, "lambda", parameter_validation=False)
    with pytest.raises(ClientError) as e:  # the model's bounds: 2..1000
        unchecked.create_event_source_mapping(FunctionName=name, EventSourceArn=arn,
                                              ScalingConfig={"MaximumConcurrency": 1})
    assert error_of(e)[0] == "ValidationException" and "scalingConfig.maximumConcurrency" in error_of(e)[1]

    # Up to 10,000 with a window; created disabled, AWS answers "Disabled" at once (recorded).
    big = lam.create_event_source_mapping(FunctionName=name, EventSourceArn=arn, BatchSize=10000,
                                          MaximumBatchingWindowInSeconds=1, Enabled=False)
    assert big["State"] == "Disabled" and big["BatchSize"] == 10000
    with pytest.raises(ClientError) as e:
        lam.create_event_source_mapping(FunctionName=name, EventSourceArn=arn)
    assert error_of(e) == ("ResourceConflictException",
                           f'An event source mapping with SQS arn (" {arn} ") and function (" {name} ") already '
                           f"exists. Please update or delete the existing mapping with UUID {big['UUID']}", 409)
    with pytest.raises(ClientError) as e:
        lam.update_event_source_mapping(UUID=big["UUID"], MaximumRetryAttempts=3)
    assert error_of(e) == (invalid, "Unsupported MaximumRetryAttempts parameter for given event source mapping type.",
                           400)
    lam.delete_event_source_mapping(UUID=big["UUID"])
    fifo = lam.create_event_source_mapping(FunctionName=name, EventSourceArn=fifo_arn)
    assert fifo["BatchSize"] == 10 and shape(fifo) == BASE
    lam.delete_event_source_mapping(UUID=fifo["UUID"])


# delivery


def test_messages_reach_the_function_in_aws_event_and_are_deleted(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    attributes = {"Author": {"DataType": "String", "StringValue": "John Grisham"},
                  "WeeksOn": {"DataType": "Number", "StringValue": "6"},
                  "Cover": {"DataType": "Binary", "BinaryValue": b"\x00\x01png"}}
    sent = sqs.send_message(QueueUrl=url, MessageBody='{"title": "The Whistler"}', MessageAttributes=attributes)
    plain = sqs.send_message(QueueUrl=url, MessageBody="no attributes")
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"]
    try:
        wait_until(lambda: len(seen.records()) == 2, what="both messages delivered")
        by_id = {r["messageId"]: r for r in seen.records()}
        record = by_id[sent["MessageId"]]
        assert list(record) == ["messageId", "receiptHandle", "body", "attributes", "messageAttributes",
                                "md5OfMessageAttributes", "md5OfBody", "eventSource", "eventSourceARN", "awsRegion"]
        assert record["body"] == '{"title": "The Whistler"}'
        assert list(record["attributes"]) == ["ApproximateReceiveCount", "SentTimestamp", "SenderId",
                                              "ApproximateFirstReceiveTimestamp"]
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert abs(int(record["attributes"]["SentTimestamp"]) / 1000 - time.time()) < 120
        assert record["messageAttributes"] == {
            "Author": {"stringValue": "John Grisham", "stringListValues": [], "binaryListValues": [],
                       "dataType": "String"},
            "WeeksOn": {"stringValue": "6", "stringListValues": [], "binaryListValues": [], "dataType": "Number"},
            "Cover": {"binaryValue": base64.b64encode(b"\x00\x01png").decode(), "stringListValues": [],
                      "binaryListValues": [], "dataType": "Binary"}}
        assert record["md5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest() == sent["MD5OfMessageBody"]
        assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == ("aws:sqs", arn, REGION)
        other = by_id[plain["MessageId"]]
        assert other["messageAttributes"] == {} and other["md5OfMessageAttributes"] is None
        wait_until(lambda: queue_size(sqs, url) == 0, what="the handled messages deleted")
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_partial_batch_failure_returns_only_the_failures_and_redrive_moves_them(lam, sqs, function):
    name, seen = function
    dlq_url, dlq_arn = make_queue(sqs)
    url, arn = make_queue(sqs, VisibilityTimeout=1,
                          RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    bodies = ["ok-1", "report-2", "ok-3", "report-4"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)])
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name,
                                            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"]
    try:
        moved = []

        def in_dead_letter_queue():
            moved.extend(m["Body"] for m in sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10,
                                                                 WaitTimeSeconds=1).get("Messages", []))
            return len(moved) == 2
        wait_until(in_dead_letter_queue, what="the reported messages in the dead-letter queue")
        assert sorted(moved) == ["report-2", "report-4"]
        wait_until(lambda: queue_size(sqs, url) == 0, what="the source queue empty")
        counts = {b: [r["attributes"]["ApproximateReceiveCount"] for r in seen.records() if r["body"] == b]
                  for b in bodies}
        # Handled once; a reported message is received maxReceiveCount times, then redriven.
        assert counts == {"ok-1": ["1"], "ok-3": ["1"], "report-2": ["1", "2"], "report-4": ["1", "2"]}
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_invalid_item_failure_answer_fails_the_whole_batch(lam, sqs, function):
    name, seen = function
    dlq_url, dlq_arn = make_queue(sqs)
    url, arn = make_queue(sqs, VisibilityTimeout=1,
                          RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "ok"},
                                                  {"Id": "2", "MessageBody": "badreport"}])
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name,
                                            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"]
    try:
        moved = []

        def in_dead_letter_queue():
            moved.extend(m["Body"] for m in sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10,
                                                                 WaitTimeSeconds=1).get("Messages", []))
            return len(moved) == 2
        wait_until(in_dead_letter_queue, what="the whole batch in the dead-letter queue")
        assert sorted(moved) == ["badreport", "ok"]
        assert sorted(seen.bodies()) == ["badreport", "ok"]  # one invocation, then redriven
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_batching_window_gathers_more_than_one_receive(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    for i in range(0, 25, 5):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(j), "MessageBody": f"m{i + j}"} for j in range(5)])
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=100,
                                            MaximumBatchingWindowInSeconds=1)["UUID"]
    try:
        wait_until(lambda: len(seen.records()) == 25, what="the 25 messages delivered")
        # Everything was in the queue already: one batch, gathered over three receives.
        assert [len(inv["event"]["Records"]) for inv in seen.invocations()] == [25]
        assert sorted(seen.bodies()) == sorted(f"m{i}" for i in range(25))
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_maximum_concurrency_caps_concurrent_batches(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    for i in range(0, 20, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(j), "MessageBody": f"slow-{i + j}"}
                                                      for j in range(10)])
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=1,
                                            ScalingConfig={"MaximumConcurrency": 2})["UUID"]
    try:
        wait_until(lambda: len(seen.records()) == 20, what="the 20 messages delivered")
        spans = [(inv["start"], inv["end"]) for inv in seen.invocations()]
        most = max(sum(1 for s, e in spans if s <= at < e) for at, _ in spans)
        assert most <= 2
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_function_error_leaves_the_batch_to_the_visibility_timeout(lam, sqs, function):
    name, seen = function
    dlq_url, dlq_arn = make_queue(sqs)
    url, arn = make_queue(sqs, VisibilityTimeout=1,
                          RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    sqs.send_message(QueueUrl=url, MessageBody="fail-always")
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=1)["UUID"]
    try:
        got = wait_until(lambda: sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=1).get("Messages"),
                         what="the failing message in the dead-letter queue")
        assert got[0]["Body"] == "fail-always"
        receives = [r["attributes"]["ApproximateReceiveCount"] for r in seen.records()]
        assert receives == ["1", "2"]
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_filtered_out_messages_are_deleted_without_invoking(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    for body in ['{"kind": "drop"}', "not json at all", '{"kind": "keep", "n": 1}']:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    uuid_ = lam.create_event_source_mapping(
        EventSourceArn=arn, FunctionName=name,
        FilterCriteria={"Filters": [{"Pattern": json.dumps({"body": {"kind": ["keep"]}})}]})["UUID"]
    try:
        wait_until(lambda: queue_size(sqs, url) == 0, what="every message gone from the queue")
        wait_until(lambda: seen.bodies(), what="the matching message delivered")
        assert seen.bodies() == ['{"kind": "keep", "n": 1}']
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_fifo_order_kept_per_group_under_concurrency(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs, fifo=True)
    groups, per_group = 4, 12
    for n in range(per_group):
        sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"g{g}-{n}", "MessageBody": f"slow-g{g}-{n}", "MessageGroupId": f"g{g}"} for g in range(groups)])
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name, BatchSize=3)["UUID"]
    try:
        wait_until(lambda: len(seen.records()) >= groups * per_group, what="every message delivered")
        wait_until(lambda: queue_size(sqs, url) == 0, what="the FIFO queue empty")
        invocations = sorted(seen.invocations(), key=lambda inv: inv["start"])
        for g in range(groups):
            mine = [inv for inv in invocations
                    if any(r["attributes"]["MessageGroupId"] == f"g{g}" for r in inv["event"]["Records"])]
            order = [r["body"] for inv in mine for r in inv["event"]["Records"]
                     if r["attributes"]["MessageGroupId"] == f"g{g}"]
            assert order == [f"slow-g{g}-{n}" for n in range(per_group)]
            # One batch of a group at a time: the next starts after the previous one ended.
            for before, after in zip(mine, mine[1:]):
                assert after["start"] >= before["end"]
        first = seen.records()[0]
        assert list(first["attributes"]) == ["ApproximateReceiveCount", "SentTimestamp", "SequenceNumber",
                                             "MessageGroupId", "SenderId", "MessageDeduplicationId",
                                             "ApproximateFirstReceiveTimestamp"]
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_disable_stops_delivery_and_enable_resumes(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"]
    try:
        enabled(lam, uuid_)
        sqs.send_message(QueueUrl=url, MessageBody="first")
        wait_until(lambda: seen.bodies() == ["first"], what="the first message delivered")
        assert lam.update_event_source_mapping(UUID=uuid_, Enabled=False)["State"] == "Disabling"
        assert lam.get_event_source_mapping(UUID=uuid_)["State"] == "Disabled"
        sqs.send_message(QueueUrl=url, MessageBody="second")
        # Nothing receives it while disabled: another consumer finds it visible, untouched.
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, VisibilityTimeout=0,
                                  MessageSystemAttributeNames=["ApproximateReceiveCount"])["Messages"]
        assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in got] == [("second", "1")]
        assert seen.bodies() == ["first"]
        lam.update_event_source_mapping(UUID=uuid_, Enabled=True)
        wait_until(lambda: seen.bodies() == ["first", "second"], what="delivery resumed")
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_deleted_mapping_stops_at_once(lam, sqs, function):
    name, seen = function
    url, arn = make_queue(sqs)
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"]
    enabled(lam, uuid_)
    lam.delete_event_source_mapping(UUID=uuid_)
    sqs.send_message(QueueUrl=url, MessageBody="after delete")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2, VisibilityTimeout=0)["Messages"]
    assert [m["Body"] for m in got] == ["after delete"] and seen.bodies() == []


def test_queue_deleted_under_a_mapping(lam, sqs, function):
    """No AWS recording says what an SQS mapping shows once its queue is gone: it stays as it was
    (Enabled, no LastProcessingResult, which SQS mappings never show) and reads a queue created
    again under the same name."""
    name, seen = function
    url, arn = make_queue(sqs)
    uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName=name)["UUID"]
    try:
        enabled(lam, uuid_)
        sqs.delete_queue(QueueUrl=url)
        got = lam.get_event_source_mapping(UUID=uuid_)
        assert got["State"] == "Enabled" and shape(got) == BASE
        url = sqs.create_queue(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="to the new queue")
        wait_until(lambda: seen.bodies() == ["to the new queue"], what="the queue created again read")
    finally:
        lam.delete_event_source_mapping(UUID=uuid_)


def test_mapping_resumes_after_kill9(tmp_path):
    """A mapping and the queue's messages survive `kill -9`: after the restart the poller reads
    the queue again (a message in flight at the kill comes back after its visibility timeout)."""
    settings = Settings(port=free_port(), data_dir=str(tmp_path / "data"), log_level="warning")
    seen = Seen(str(tmp_path / "seen.jsonl"))
    proc = ServerProcess(settings).start()
    try:
        lam, sqs = client_for(proc.url, "lambda"), client_for(proc.url, "sqs")
        lam.create_function(FunctionName="survivor", Runtime="python3.12", Role=ROLE, Handler="app.handler",
                            Code={"ZipFile": handler_zip()}, Environment={"Variables": {"SEEN_FILE": seen.path}})
        url, arn = make_queue(sqs, VisibilityTimeout=2)
        uuid_ = lam.create_event_source_mapping(EventSourceArn=arn, FunctionName="survivor")["UUID"]
        sqs.send_message(QueueUrl=url, MessageBody="before")
        wait_until(lambda: seen.bodies() == ["before"], what="delivery before the kill")
        lam.update_event_source_mapping(UUID=uuid_, Enabled=False)
        sqs.send_message(QueueUrl=url, MessageBody="while disabled")
        lam.update_event_source_mapping(UUID=uuid_, Enabled=True)
        proc.kill()
        proc = ServerProcess(settings).start()
        lam, sqs = client_for(proc.url, "lambda"), client_for(proc.url, "sqs")
        assert lam.get_event_source_mapping(UUID=uuid_)["State"] == "Enabled"
        sqs.send_message(QueueUrl=url, MessageBody="after")
        wait_until(lambda: {"while disabled", "after"} <= set(seen.bodies()), what="delivery after the restart",
                   timeout=90)
        wait_until(lambda: queue_size(sqs, url) == 0, what="the queue emptied", timeout=90)
    finally:
        proc.stop()


# deploy

SAM_TEMPLATE = """
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Jobs:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 60
  Worker:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: app.handler
      CodeUri: src/
      Environment:
        Variables:
          SEEN_FILE: {seen}
      Events:
        JobQueue:
          Type: SQS
          Properties:
            Queue: !GetAtt Jobs.Arn
            BatchSize: 5
            FunctionResponseTypes: [ReportBatchItemFailures]
            ScalingConfig:
              MaximumConcurrency: 3
Outputs:
  QueueUrl:
    Value: !Ref Jobs
"""


def test_sam_sqs_event_deploys_and_runs(server, lam, sqs, tmp_path, capsys):
    seen = Seen(str(tmp_path / "seen.jsonl"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(HANDLER)
    template = tmp_path / "template.yaml"
    template.write_text(SAM_TEMPLATE.format(seen=seen.path))
    stack = "sqsmap" + uuid.uuid4().hex[:8]
    code = cli.main([str(template), "--stack-name", stack, "--endpoint-url", server.url])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    try:
        url = next(u for u in sqs.list_queues(QueueNamePrefix=f"{stack}-Jobs")["QueueUrls"])
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        [mapping] = lam.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
        assert (mapping["BatchSize"], mapping["FunctionResponseTypes"], mapping["ScalingConfig"], mapping["State"]) == \
            (5, ["ReportBatchItemFailures"], {"MaximumConcurrency": 3}, "Enabled")
        sqs.send_message(QueueUrl=url, MessageBody="job-1")
        wait_until(lambda: seen.bodies() == ["job-1"], what="the deployed function run")
        wait_until(lambda: queue_size(sqs, url) == 0, what="the job deleted")
    finally:
        code = cli.main([str(template), "--stack-name", stack, "--endpoint-url", server.url, "--delete"])
        out, err = capsys.readouterr()
        assert code == 0, out + err
