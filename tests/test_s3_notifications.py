"""S3 event notifications through a real server: PutBucketNotificationConfiguration and its
checks, the s3:TestEvent, events of PutObject / multipart / CopyObject / DeleteObject(s) /
Firehose deliveries sent to SQS, SNS (→ SQS) and a Python function, and a notification of an
acknowledged write surviving kill -9.

Expected shapes and errors: LocalStack's recordings of AWS
(tests/aws/services/s3/test_s3_notifications_{sqs,sns,lambda}.snapshot.json).
"""
from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import urllib.request
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server, wait_for

ACCOUNT, REGION = "000000000000", "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/s3-reader"
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
SEQUENCER = re.compile(r"[0-9A-F]{18}")
HANDLERS = {  # each appends the event it is given to the file SEEN_FILE names
    "python3.12": ("app.py", '''
import fcntl, json, os
def handler(event, context):
    with open(os.environ["SEEN_FILE"], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(event) + "\\n")
'''),
    "nodejs24.x": ("app.js", '''
const fs = require("fs");
exports.handler = async (event) => { fs.appendFileSync(process.env.SEEN_FILE, JSON.stringify(event) + "\\n"); };
'''),
}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def s3(srv):
    return client_for(srv.url, "s3", s3={"addressing_style": "path"})


@pytest.fixture(scope="module")
def sqs(srv):
    return client_for(srv.url, "sqs")


@pytest.fixture(scope="module")
def sns(srv):
    return client_for(srv.url, "sns")


def new_bucket(s3) -> str:
    name = "notif-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    return name


def new_queue(sqs) -> tuple[str, str]:
    url = sqs.create_queue(QueueName="q-" + uuid.uuid4().hex[:10])["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def drain(sqs, url: str, count: int, timeout: float = 60.0) -> list[dict]:
    """`count` message bodies (JSON) from the queue (deleted from it); fails if fewer come in
    `timeout` s, or more within the receive that completes them."""
    got: list[dict] = []

    def enough():
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            got.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return len(got) >= count
    try:
        wait_for(enough, timeout)
    except AssertionError:
        raise AssertionError(f"{len(got)} of {count} messages: {got}") from None
    assert len(got) == count, got
    return got


def records(bodies: list[dict]) -> list[dict]:
    return [r for body in bodies for r in body["Records"]]


def error(call) -> dict:
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response


def check_record(record: dict, event: str, bucket: str, key: str, config_id: str, size=None, etag=None) -> None:
    """`record` is S3's record of `event` for `key`, with every field AWS sends."""
    assert ISO_MS.fullmatch(record.pop("eventTime"))
    obj = record["s3"].pop("object")
    assert SEQUENCER.fullmatch(obj.pop("sequencer"))
    owner = record["s3"]["bucket"]["ownerIdentity"]["principalId"]
    assert re.fullmatch(r"A[0-9A-Z]+", owner)
    response = record.pop("responseElements")
    assert re.fullmatch(r"[0-9A-F]{16}", response["x-amz-request-id"]) and len(response["x-amz-id-2"]) == 64
    assert record == {
        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": REGION, "eventName": event,
        "userIdentity": {"principalId": owner}, "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "s3": {"s3SchemaVersion": "1.0", "configurationId": config_id,
               "bucket": {"name": bucket, "ownerIdentity": {"principalId": owner}, "arn": f"arn:aws:s3:::{bucket}"}},
    }
    expected = {"key": key} if size is None else {"key": key, "size": size, "eTag": etag}
    assert obj == expected


def make_function(srv, tmp_path, runtime: str = "python3.12") -> tuple[str, str, str]:
    """A function that appends each event it gets to a file: (name, ARN, that file)."""
    client = client_for(srv.url, "lambda")
    name = "fn-" + uuid.uuid4().hex[:10]
    seen = str(tmp_path / f"{name}.jsonl")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(*HANDLERS[runtime])
    arn = client.create_function(FunctionName=name, Runtime=runtime, Role=ROLE, Handler="app.handler",
                                 Code={"ZipFile": buf.getvalue()},
                                 Environment={"Variables": {"SEEN_FILE": seen}})["FunctionArn"]
    return name, arn, seen


def seen_events(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


# ---------------------------------------------------------------------------------------------
# the configuration


def test_configuration_round_trip_and_test_event(s3, sqs, sns, srv, tmp_path):
    bucket = new_bucket(s3)
    url, queue_arn = new_queue(sqs)
    topic = sns.create_topic(Name="t-" + uuid.uuid4().hex[:8])["TopicArn"]
    _, function_arn, _ = make_function(srv, tmp_path)
    assert s3.get_bucket_notification_configuration(Bucket=bucket).keys() == {"ResponseMetadata"}
    config = {
        "QueueConfigurations": [{"Id": "queue-1", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"],
                                 "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".txt"},
                                                                    {"Name": "PREFIX", "Value": "in/"}]}}}],
        "TopicConfigurations": [{"TopicArn": topic, "Events": ["s3:ObjectRemoved:*", "s3:ObjectRestore:Post"]}],
        "LambdaFunctionConfigurations": [{"LambdaFunctionArn": function_arn,
                                          "Events": ["s3:ObjectCreated:Put"],
                                          "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "fn/"}]}}}],
    }
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=config)
    got = s3.get_bucket_notification_configuration(Bucket=bucket)
    got.pop("ResponseMetadata")
    topic_id = got["TopicConfigurations"][0].pop("Id")
    assert base64.b64decode(topic_id).decode().count("-") == 4  # S3's generated Ids: a base64 UUID
    function_id = got["LambdaFunctionConfigurations"][0].pop("Id")
    assert got == {
        "QueueConfigurations": [{"Id": "queue-1", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"],
                                 "Filter": {"Key": {"FilterRules": [{"Name": "Suffix", "Value": ".txt"},
                                                                    {"Name": "Prefix", "Value": "in/"}]}}}],
        "TopicConfigurations": [{"TopicArn": topic, "Events": ["s3:ObjectRemoved:*", "s3:ObjectRestore:Post"]}],
        "LambdaFunctionConfigurations": [{"LambdaFunctionArn": function_arn, "Events": ["s3:ObjectCreated:Put"],
                                          "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "fn/"}]}}}],
    }
    assert function_id != topic_id
    [test] = drain(sqs, url, 1)
    assert ISO_MS.fullmatch(test.pop("Time")) and re.fullmatch(r"[0-9A-F]{16}", test.pop("RequestId"))
    assert test.pop("HostId")
    assert test == {"Service": "Amazon S3", "Event": "s3:TestEvent", "Bucket": bucket}
    # An empty configuration turns notifications off; nothing is validated or sent.
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
    assert s3.get_bucket_notification_configuration(Bucket=bucket).keys() == {"ResponseMetadata"}
    s3.put_object(Bucket=bucket, Key="in/a.txt", Body=b"x")
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None


def test_validation_errors(s3, sqs, srv):
    bucket = new_bucket(s3)
    _, queue_arn = new_queue(sqs)
    put = s3.put_bucket_notification_configuration

    def queue_config(**entry):
        return {"QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"], **entry}]}

    err = error(lambda: put(Bucket="no-such-" + bucket, NotificationConfiguration={}))
    assert err["Error"]["Code"] == "NoSuchBucket" and err["ResponseMetadata"]["HTTPStatusCode"] == 404
    for kind, arn_key, name in (("QueueConfigurations", "QueueArn", "Queue"), ("TopicConfigurations", "TopicArn",
                                "Topic"), ("LambdaFunctionConfigurations", "LambdaFunctionArn", "CloudFunction")):
        err = error(lambda: put(Bucket=bucket, NotificationConfiguration={
            kind: [{arn_key: "invalid-arn", "Events": ["s3:ObjectCreated:*"]}]}))
        assert err["Error"] == {"Code": "InvalidArgument", "Message": "The ARN could not be parsed",
                                "ArgumentName": name, "ArgumentValue": "invalid-arn"}
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=queue_config(Events=["s3:ObjectCreated:Nope"])))
    assert err["Error"]["Code"] == "InvalidArgument"
    assert err["Error"]["Message"] == "The event is not supported for notifications"
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=queue_config(
        Filter={"Key": {"FilterRules": [{"Name": "INVALID", "Value": "x"}]}})))
    assert err["Error"] == {"Code": "InvalidArgument", "Message": "filter rule name must be either prefix or suffix",
                            "ArgumentName": "FilterRule.Name", "ArgumentValue": "INVALID"}
    for rule in ({"Name": "prefix"}, {"Value": "x"}, {}):
        err = error(lambda: put(Bucket=bucket, NotificationConfiguration=queue_config(
            Filter={"Key": {"FilterRules": [rule]}})))
        assert err["Error"]["Code"] == "MalformedXML"
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=queue_config(
        Filter={"Key": {"FilterRules": [{"Name": "prefix", "Value": "a"}, {"Name": "Prefix", "Value": "b"}]}})))
    assert err["Error"]["Message"] == "Cannot specify more than one prefix rule in a filter."
    # Two configurations that could take one event of one key.
    twice = {"QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]},
                                     {"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:Put"]}]}
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=twice))
    assert err["Error"]["Message"] == ("Configurations overlap. Configurations on the same bucket cannot share a "
                                       "common event type.")
    twice["QueueConfigurations"][0]["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": "a/"}]}}
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=twice))
    assert err["Error"]["Message"].startswith("Configuration is ambiguously defined.")
    twice["QueueConfigurations"][1]["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": "b/"}]}}
    put(Bucket=bucket, NotificationConfiguration=twice, SkipDestinationValidation=True)  # disjoint prefixes
    twice["QueueConfigurations"][0]["Id"] = twice["QueueConfigurations"][1]["Id"] = "same"
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration=twice))
    assert err["Error"]["Message"] == "Same ID used for multiple configurations. IDs must be unique."
    # Destinations that do not exist: all named at once (S3's numbered arguments).
    missing_queues = [f"arn:aws:sqs:{REGION}:{ACCOUNT}:missing-{n}" for n in (1, 2)]
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration={"QueueConfigurations": [
        {"QueueArn": missing_queues[0], "Events": ["s3:ObjectCreated:*"]},
        {"QueueArn": missing_queues[1], "Events": ["s3:ObjectRemoved:*"]}]}))
    missing = "The destination queue does not exist"
    assert err["Error"] == {"Code": "InvalidArgument",
                            "Message": "Unable to validate the following destination configurations",
                            "ArgumentName1": missing_queues[0], "ArgumentValue1": missing,
                            "ArgumentName2": missing_queues[1], "ArgumentValue2": missing}
    function = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:missing"
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration={"LambdaFunctionConfigurations": [
        {"LambdaFunctionArn": function, "Events": ["s3:ObjectCreated:*"]}]}))
    assert err["Error"] == {"Code": "InvalidArgument",
                            "Message": "Unable to validate the following destination configurations",
                            "ArgumentName1": f"{function}, null",
                            "ArgumentValue1": f"Not authorized to invoke function [{function}]"}
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT}:missing"
    err = error(lambda: put(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [
        {"TopicArn": topic, "Events": ["s3:ObjectCreated:*"]}]}))
    assert err["Error"]["ArgumentValue1"] == "The destination topic does not exist"
    # x-amz-skip-destination-validation: kept as given.
    put(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [
        {"Id": "id123", "TopicArn": topic, "Events": ["s3:ObjectCreated:*"]}]}, SkipDestinationValidation=True)
    assert s3.get_bucket_notification_configuration(Bucket=bucket)["TopicConfigurations"] == [
        {"Id": "id123", "TopicArn": topic, "Events": ["s3:ObjectCreated:*"]}]
    # An empty filter value is kept (S3's answer: test_filter_rules_empty_value's recording).
    put(Bucket=bucket, NotificationConfiguration=queue_config(
        Filter={"Key": {"FilterRules": [{"Name": "suffix", "Value": ""}]}}), SkipDestinationValidation=True)
    [got] = s3.get_bucket_notification_configuration(Bucket=bucket)["QueueConfigurations"]
    assert got["Filter"] == {"Key": {"FilterRules": [{"Name": "Suffix", "Value": ""}]}}
    put(Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [
        {"Id": "id123", "TopicArn": topic, "Events": ["s3:ObjectCreated:*"]}]}, SkipDestinationValidation=True)
    # A failed request left the stored configuration as it was.
    error(lambda: put(Bucket=bucket, NotificationConfiguration=queue_config(Events=["bad"])))
    assert s3.get_bucket_notification_configuration(Bucket=bucket)["TopicConfigurations"][0]["Id"] == "id123"


# ---------------------------------------------------------------------------------------------
# events


def test_writes_notify_sqs_and_sns_with_filters(s3, sqs, sns):
    bucket = new_bucket(s3)
    url, queue_arn = new_queue(sqs)
    fan_url, fan_arn = new_queue(sqs)
    topic = sns.create_topic(Name="t-" + uuid.uuid4().hex[:8])["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=fan_arn, Attributes={"RawMessageDelivery": "false"})
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "QueueConfigurations": [{"Id": "to-queue", "QueueArn": queue_arn,
                                 "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:Delete"],
                                 "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "up/"},
                                                                    {"Name": "suffix", "Value": ".txt"}]}}}],
        "TopicConfigurations": [{"Id": "to-topic", "TopicArn": topic, "Events": ["s3:ObjectCreated:Put"],
                                 "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "pub/"}]}}}]})
    assert drain(sqs, url, 1)[0]["Event"] == "s3:TestEvent"
    [note] = drain(sqs, fan_url, 1)
    assert note["Subject"] == "Amazon S3 Notification" and json.loads(note["Message"])["Event"] == "s3:TestEvent"

    key = "up/my file@1.txt"
    body = b"hello world"
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    s3.put_object(Bucket=bucket, Key="up/skip.bin", Body=b"no")       # suffix does not match
    s3.put_object(Bucket=bucket, Key="other/a.txt", Body=b"no")       # prefix does not match
    s3.put_object(Bucket=bucket, Key="pub/x y", Body=b"published")    # the topic's
    part = os.urandom(5 * 1024 * 1024)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="up/big.txt")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="up/big.txt", UploadId=upload, PartNumber=n, Body=data)["ETag"]
             for n, data in ((1, part), (2, b"tail"))]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="up/big.txt", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags)]})
    s3.copy_object(Bucket=bucket, Key="up/copy.txt", CopySource={"Bucket": bucket, "Key": key})
    s3.delete_object(Bucket=bucket, Key=key)
    s3.delete_object(Bucket=bucket, Key="up/never-there.txt")        # nothing removed: no event
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "up/copy.txt"}, {"Key": "up/skip.bin"}]})

    got = records(drain(sqs, url, 5))
    # Nothing for the keys the filters leave out (the dispatcher sends in the order of the writes,
    # and the last write's message has come).
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") is None
    md5 = hashlib.md5(body).hexdigest()
    expected = [("ObjectCreated:Put", "up/my+file%401.txt", len(body), md5),
                ("ObjectCreated:CompleteMultipartUpload", "up/big.txt", len(part) + 4, done["ETag"].strip('"')),
                ("ObjectCreated:Copy", "up/copy.txt", len(body), md5),
                ("ObjectRemoved:Delete", "up/my+file%401.txt", None, None),
                ("ObjectRemoved:Delete", "up/copy.txt", None, None)]
    assert sorted((r["eventName"], r["s3"]["object"]["key"]) for r in got) == sorted(e[:2] for e in expected)
    # A key's events carry growing sequencers.
    put_seq, delete_seq = (next(r["s3"]["object"]["sequencer"] for r in got if r["s3"]["object"]["key"] ==
                                "up/my+file%401.txt" and r["eventName"] == name)
                           for name in ("ObjectCreated:Put", "ObjectRemoved:Delete"))
    assert delete_seq > put_seq
    by_event = {(r["eventName"], r["s3"]["object"]["key"]): r for r in got}
    for event, encoded, size, etag in expected:
        check_record(by_event[(event, encoded)], event, bucket, encoded, "to-queue", size, etag)

    [note] = drain(sqs, fan_url, 1)
    assert note["Subject"] == "Amazon S3 Notification" and note["TopicArn"] == topic
    [record] = json.loads(note["Message"])["Records"]
    check_record(record, "ObjectCreated:Put", bucket, "pub/x+y", "to-topic", 9, hashlib.md5(b"published").hexdigest())


def test_uploads_run_python_and_node_functions(s3, srv, tmp_path):
    """PutObject, a multipart upload and a Firehose delivery run a Python function, and a PutObject
    a Node.js function, each invoked asynchronously with S3's event."""
    bucket = new_bucket(s3)
    _, python_arn, python_seen = make_function(srv, tmp_path)
    node = "nodejs24.x" in json.load(urllib.request.urlopen(srv.url + "/_kinesim/health"))["runtimes"]
    configs = [{"Id": "python", "LambdaFunctionArn": python_arn, "Events": ["s3:ObjectCreated:*"],
                "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": ".csv"}]}}}]
    if node:
        _, node_arn, node_seen = make_function(srv, tmp_path, "nodejs24.x")
        configs.append({"Id": "node", "LambdaFunctionArn": node_arn, "Events": ["s3:ObjectCreated:Put"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "node/"},
                                                           {"Name": "suffix", "Value": ".json"}]}}})
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "LambdaFunctionConfigurations": configs})
    s3.put_object(Bucket=bucket, Key="ignored.txt", Body=b"no")
    s3.put_object(Bucket=bucket, Key="data/day 1.csv", Body=b"a,b\n1,2\n")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="big.csv")["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key="big.csv", UploadId=upload, PartNumber=1, Body=b"x,y\n")["ETag"]
    done = s3.complete_multipart_upload(Bucket=bucket, Key="big.csv", UploadId=upload, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": etag}]})
    firehose = client_for(srv.url, "firehose")
    stream = "fh-" + uuid.uuid4().hex[:8]
    firehose.create_delivery_stream(DeliveryStreamName=stream, ExtendedS3DestinationConfiguration={
        "RoleARN": f"arn:aws:iam::{ACCOUNT}:role/firehose", "BucketARN": f"arn:aws:s3:::{bucket}",
        "Prefix": "fh/", "FileExtension": ".csv", "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1}})
    firehose.put_record(DeliveryStreamName=stream, Record={"Data": b"3,4\n"})
    if node:
        s3.put_object(Bucket=bucket, Key="node/x y.json", Body=b"{}")

    events = wait_for(lambda: len(seen_events(python_seen)) >= 3 and seen_events(python_seen), 60)
    by_key = {e["Records"][0]["s3"]["object"]["key"]: e["Records"][0] for e in events}
    assert len(events) == 3 and len(by_key) == 3
    check_record(by_key.pop("data/day+1.csv"), "ObjectCreated:Put", bucket, "data/day+1.csv", "python", 8,
                 hashlib.md5(b"a,b\n1,2\n").hexdigest())
    check_record(by_key.pop("big.csv"), "ObjectCreated:CompleteMultipartUpload", bucket, "big.csv", "python", 4,
                 done["ETag"].strip('"'))
    [(key, delivered)] = by_key.items()
    [obj] = [o for o in s3.list_objects_v2(Bucket=bucket, Prefix="fh/")["Contents"]]
    assert key == obj["Key"] and key.endswith(".csv")
    check_record(delivered, "ObjectCreated:Put", bucket, key, "python", 4, obj["ETag"].strip('"'))
    if node:
        [event] = wait_for(lambda: seen_events(node_seen), 60)
        check_record(event["Records"][0], "ObjectCreated:Put", bucket, "node/x+y.json", "node", 2,
                     hashlib.md5(b"{}").hexdigest())


def test_firehose_delivery_notifies(s3, sqs, srv):
    bucket = new_bucket(s3)
    url, queue_arn = new_queue(sqs)
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "QueueConfigurations": [{"Id": "deliveries", "QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]})
    drain(sqs, url, 1)  # the test event
    firehose = client_for(srv.url, "firehose")
    name = "fh-" + uuid.uuid4().hex[:8]
    firehose.create_delivery_stream(DeliveryStreamName=name, ExtendedS3DestinationConfiguration={
        "RoleARN": f"arn:aws:iam::{ACCOUNT}:role/firehose", "BucketARN": f"arn:aws:s3:::{bucket}",
        "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1}})
    firehose.put_record(DeliveryStreamName=name, Record={"Data": b"delivered\n"})
    [record] = records(drain(sqs, url, 1))
    [obj] = s3.list_objects_v2(Bucket=bucket)["Contents"]
    check_record(record, "ObjectCreated:Put", bucket, obj["Key"], "deliveries", obj["Size"], obj["ETag"].strip('"'))


def test_acknowledged_writes_notify_after_kill_9(tmp_path_factory, monkeypatch):
    # The first server holds every message back (KINESIM_S3_NOTIFICATION_DELAY): at the kill, all
    # of them are only in its outbox. The restarted one delivers at once.
    monkeypatch.setenv("KINESIM_S3_NOTIFICATION_DELAY", "600")
    proc = start_server(tmp_path_factory)
    outbox = os.path.join(proc.settings.data_dir, "s3", ".notifications", "outbox")
    try:
        s3 = client_for(proc.url, "s3", s3={"addressing_style": "path"})
        sqs = client_for(proc.url, "sqs")
        bucket = new_bucket(s3)
        url, queue_arn = new_queue(sqs)
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]})
        keys = [f"k/{n:04d}" for n in range(100)]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda k: s3.put_object(Bucket=bucket, Key=k, Body=k.encode()), keys))
        proc.kill()  # SIGKILL right after the last answer: no shutdown code runs
        assert len([n for n in os.listdir(outbox) if n.endswith(".json")]) == len(keys)
        monkeypatch.delenv("KINESIM_S3_NOTIFICATION_DELAY")
        proc.start()
        seen: set[str] = set()

        def all_keys():
            for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
                body = json.loads(m["Body"])
                seen.update(r["s3"]["object"]["key"] for r in body.get("Records", []))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            return seen >= set(keys)
        wait_for(all_keys, 90)  # at least once: a message sent just before the kill may come twice
        assert seen == set(keys)
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------
# deploy


SAM_TEMPLATE = """
Transform: AWS::Serverless-2016-10-31
Parameters:
  SeenFile:
    Type: String
Resources:
  Uploads:
    Type: AWS::S3::Bucket
  Handler:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: app.handler
      CodeUri: src/
      Environment:
        Variables:
          SEEN_FILE: !Ref SeenFile
      Events:
        Csv:
          Type: S3
          Properties:
            Bucket: !Ref Uploads
            Events: s3:ObjectCreated:*
            Filter:
              S3Key:
                Rules:
                  - Name: suffix
                    Value: .csv
"""


def test_sam_s3_event_deploys_and_runs_the_function(srv, s3, tmp_path, capsys):
    """A SAM `S3` event: the translator makes the bucket's NotificationConfiguration (and the
    function's permission); `kinesim deploy` puts it, and an upload runs the function."""
    from kinesim.deploy import cli
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text(HANDLERS["python3.12"][1])
    (tmp_path / "template.yaml").write_text(SAM_TEMPLATE)
    seen = str(tmp_path / "seen.jsonl")
    stack = "s3-events-" + uuid.uuid4().hex[:6]
    code = cli.main([str(tmp_path / "template.yaml"), "--stack-name", stack, "--endpoint-url", srv.url,
                     "--parameter-overrides", f"SeenFile={seen}"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    [bucket] = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith(stack)]
    [config] = s3.get_bucket_notification_configuration(Bucket=bucket)["LambdaFunctionConfigurations"]
    assert config["Events"] == ["s3:ObjectCreated:*"]
    assert config["Filter"] == {"Key": {"FilterRules": [{"Name": "Suffix", "Value": ".csv"}]}}
    s3.put_object(Bucket=bucket, Key="in/report.csv", Body=b"1,2\n")
    [event] = wait_for(lambda: seen_events(seen), 60)
    check_record(event["Records"][0], "ObjectCreated:Put", bucket, "in/report.csv", config["Id"], 4,
                 hashlib.md5(b"1,2\n").hexdigest())


def test_cloudformation_shape_becomes_the_api_request():
    """CloudFormation's NotificationConfiguration (one Event per entry, Function/Queue/Topic,
    Filter.S3Key.Rules) as the PutBucketNotificationConfiguration request."""
    from kinesim.deploy.s3_notifications import put_arguments
    from kinesim.deploy.template import DeployError
    rules = {"S3Key": {"Rules": [{"Name": "prefix", "Value": "in/"}, {"Name": "suffix", "Value": ".csv"}]}}
    assert put_arguments({
        "LambdaConfigurations": [{"Event": "s3:ObjectCreated:*", "Function": "arn:fn", "Filter": rules},
                                 {"Event": "s3:ObjectRemoved:*", "Function": "arn:fn"}],
        "QueueConfigurations": [{"Event": "s3:ObjectRestore:Post", "Queue": "arn:q"}],
        "TopicConfigurations": [{"Event": "s3:ObjectTagging:*", "Topic": "arn:t"}],
    }) == {"NotificationConfiguration": {
        "LambdaFunctionConfigurations": [
            {"LambdaFunctionArn": "arn:fn", "Events": ["s3:ObjectCreated:*"], "Filter": {"Key": {"FilterRules": [
                {"Name": "prefix", "Value": "in/"}, {"Name": "suffix", "Value": ".csv"}]}}},
            {"LambdaFunctionArn": "arn:fn", "Events": ["s3:ObjectRemoved:*"]}],
        "QueueConfigurations": [{"QueueArn": "arn:q", "Events": ["s3:ObjectRestore:Post"]}],
        "TopicConfigurations": [{"TopicArn": "arn:t", "Events": ["s3:ObjectTagging:*"]}]}}
    assert put_arguments(None) == {"NotificationConfiguration": {}}
    assert put_arguments({"EventBridgeConfiguration": {"EventBridgeEnabled": True}}) == {
        "NotificationConfiguration": {"EventBridgeConfiguration": {}}}
    for bad in ({"LambdaConfigurations": [{"Event": "s3:ObjectCreated:*"}]},
                {"QueueConfigurations": [{"Event": "e", "Queue": "q", "Filter": {"S3Key": {"Rules": [{"N": 1}]}}}]},
                {"Topics": []}):
        with pytest.raises(DeployError):
            put_arguments(bad)
