"""The web console's overview and its queues, topics and log groups pages against a real server: every
kind of resource made through boto3 is listed with its state and health line, the data directory's
size grows after puts, SQS depth / in flight / delayed and dead-letter queues, Kinesis queues' depth
and in flight, SNS subscriptions and their endpoints, log groups' stored bytes, streams, retention
and last event."""
from __future__ import annotations

import io
import json
import re
import time
import uuid
import zipfile

import pytest
import requests

from conftest import client_for, start_server, wait_for
from kinesim.webconsole.figures import counted, plural

API = "/_kinesim/console/api"
ROLE = "arn:aws:iam::000000000000:role/r"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def aws(server):
    class Clients:
        kinesis = client_for(server.url, "kinesis")
        sqs = client_for(server.url, "sqs")
        sns = client_for(server.url, "sns")
        logs = client_for(server.url, "logs")
        s3 = client_for(server.url, "s3", s3={"addressing_style": "path"})
        firehose = client_for(server.url, "firehose")
        lambda_ = client_for(server.url, "lambda")
    return Clients


def get(server, path: str) -> dict:
    answer = requests.get(server.url + API + path, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def on_demand_stream(aws) -> tuple[str, str]:
    name = _name("ov-stream")
    aws.kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    aws.kinesis.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    return name, aws.kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def queue_arn(aws, url: str) -> str:
    return aws.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


# "1 objects", "1 open shards"...: a count of one with a plural noun.
ONE_MANY = re.compile(r"(?<![\d,.])1 (open )?(objects|records|errors|readers|shards|streams|days|batches|dead letters|"
                      r"subscriptions|endpoints|files|rows)\b")


def rows_by_name(doc: dict, kind: str) -> dict[str, dict]:
    """The rows of a kind by what tells them apart: their id (a mapping's UUID), else their name."""
    return {row.get("id", row["name"]): row for k in doc["kinds"] if k["kind"] == kind for row in k["rows"]}


def test_every_kind_is_listed_with_state_and_health(server, aws):
    stream, stream_arn = on_demand_stream(aws)
    aws.kinesis.put_records(StreamName=stream, Records=[{"Data": b'{"n": %d}' % i, "PartitionKey": str(i)}
                                                        for i in range(20)])
    bucket = _name("ov-bucket")
    aws.s3.create_bucket(Bucket=bucket)
    channel = _name("ov-channel")
    aws.kinesis.create_channel(
        ChannelName=channel, ServiceExecutionRoleARN=ROLE,
        StreamConfigurationList=[{"StreamARN": stream_arn, "RecordConfiguration": {"RecordFormatType": "JSON"}}],
        S3DestinationConfiguration={"StorageConfiguration": {"BucketARN": f"arn:aws:s3:::{bucket}",
                                                             "ExpectedBucketOwner": "000000000000",
                                                             "CompressionType": "NONE"}})
    function = _name("ov-fn")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("app.py", "def handler(event, context):\n    return len(event['Records'])\n")
    aws.lambda_.create_function(FunctionName=function, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                Code={"ZipFile": code.getvalue()}, Timeout=10)
    mapping = aws.lambda_.create_event_source_mapping(FunctionName=function, EventSourceArn=stream_arn,
                                                      StartingPosition="TRIM_HORIZON")["UUID"]
    delivery = _name("ov-delivery")
    aws.firehose.create_delivery_stream(DeliveryStreamName=delivery, ExtendedS3DestinationConfiguration={
        "RoleARN": ROLE, "BucketARN": f"arn:aws:s3:::{bucket}"})
    queue = _name("ov-queue")
    aws.sqs.create_queue(QueueName=queue)
    kinesis_queue = _name("ov-kq")
    aws.kinesis.create_queue(QueueName=kinesis_queue, StreamConfigurationList=[{"StreamARN": stream_arn}])
    topic = _name("ov-topic")
    aws.sns.create_topic(Name=topic)
    group = "/ov/" + _name("group")
    aws.logs.create_log_group(logGroupName=group)

    expected = {"streams": stream, "channels": channel, "functions": function, "mappings": mapping,
                "delivery-streams": delivery, "buckets": bucket, "queues": queue, "topics": topic,
                "log-groups": group}

    def listed():
        doc = get(server, "/overview")
        return doc if all(name in rows_by_name(doc, kind) for kind, name in expected.items()) else None
    doc = wait_for(listed, timeout=60)
    assert doc["errors"] == []
    assert [k["kind"] for k in doc["kinds"]] == ["streams", "channels", "functions", "mappings", "delivery-streams",
                                                 "buckets", "queues", "topics", "log-groups", "queries"]
    for kind, name in expected.items():
        row = rows_by_name(doc, kind)[name]
        assert row["state"] and row["health"], (kind, row)
        assert row["href"].startswith("/_kinesim/console/"), (kind, row)
        assert doc["headline"]["counts"][kind] == len(rows_by_name(doc, kind))
    assert doc["headline"]["records_in_per_s"] == round(sum(r["figures"]["records_per_s"]
                                                          for r in rows_by_name(doc, "streams").values()), 1)
    assert rows_by_name(doc, "streams")[stream]["state"] == "ACTIVE"
    assert rows_by_name(doc, "functions")[function]["href"] == f"/_kinesim/console/functions/{function}"
    assert rows_by_name(doc, "queues")[kinesis_queue]["health"].startswith(f"from stream {stream}")
    assert "kept forever" in rows_by_name(doc, "log-groups")[group]["health"]
    assert rows_by_name(doc, "queries") == {}  # none without Spark (tests/test_web_console_queries.py)
    # A mapping is named by what it connects, its UUID second; counts agree with their nouns.
    row = rows_by_name(doc, "mappings")[mapping]
    assert (row["name"], row["detail"]) == (f"{function} ← {stream}", mapping)
    assert row["href"] == f"/_kinesim/console/functions/{function}" and "→" not in row["health"]
    for kind in doc["kinds"]:
        for r in kind["rows"]:
            assert not ONE_MANY.search(r["health"]), r["health"]
    # the mapping reads the stream: its 20 records are checkpointed, and the overview says so
    wait_for(lambda: rows_by_name(get(server, "/overview"), "mappings")[mapping]["figures"]["lag_records"] == 0,
             timeout=60)


def test_counts_agree_with_their_nouns():
    assert [counted(n, "object") for n in (0, 1, 2, 1024)] == ["0 objects", "1 object", "2 objects", "1,024 objects"]
    assert counted(1, "batch", "batches") == "1 batch" and counted(3, "batch", "batches") == "3 batches"
    assert plural(1, "dead letter") == "dead letter" and plural(0, "dead letter") == "dead letters"


def test_data_dir_size_grows_after_puts(server, aws):
    first = wait_for(lambda: get(server, "/overview")["data_dir"]["measured"] and get(server, "/overview")["data_dir"])
    assert first["path"] == server.settings.data_dir and first["in_memory"] is False
    assert first["bytes"] > 0 and first["files"] > 0
    stream = _name("ov-big")
    aws.kinesis.create_stream(StreamName=stream, ShardCount=1)
    aws.kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    for _ in range(4):  # 4 MB
        aws.kinesis.put_records(StreamName=stream, Records=[{"Data": b"x" * 10_000, "PartitionKey": str(i)}
                                                            for i in range(100)])
    wait_for(lambda: (get(server, "/overview")["data_dir"]["bytes"] or 0) >= first["bytes"] + 4_000_000, timeout=60)


def test_sqs_depth_in_flight_delayed_and_dead_letter_queue(server, aws):
    dlq = aws.sqs.create_queue(QueueName=_name("ov-dlq"))["QueueUrl"]
    main_name = _name("ov-main")
    main = aws.sqs.create_queue(QueueName=main_name, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": queue_arn(aws, dlq), "maxReceiveCount": 1})})["QueueUrl"]
    fifo_name = _name("ov-fifo") + ".fifo"
    aws.sqs.create_queue(QueueName=fifo_name, Attributes={"FifoQueue": "true"})
    for i in range(5):
        aws.sqs.send_message(QueueUrl=main, MessageBody=f"m{i}")
    aws.sqs.send_message(QueueUrl=main, MessageBody="later", DelaySeconds=600)
    received = aws.sqs.receive_message(QueueUrl=main, MaxNumberOfMessages=2, VisibilityTimeout=600)["Messages"]
    assert len(received) == 2

    queues = {q["name"]: q for q in get(server, "/queues")["queues"]}
    row = queues[main_name]
    assert (row["type"], row["fifo"], row["visible"], row["in_flight"], row["delayed"]) == ("sqs", False, 3, 2, 1)
    assert row["dead_letter"] == {"name": dlq.rsplit("/", 1)[-1], "arn": queue_arn(aws, dlq), "exists": True,
                                  "max_receives": 1, "depth": 0}
    assert queues[dlq.rsplit("/", 1)[-1]]["dead_letter_for"] == [main_name]
    assert queues[fifo_name]["fifo"] is True
    assert row["health"] == f"3 visible · 2 in flight · 1 delayed · DLQ {dlq.rsplit('/', 1)[-1]}: 0"

    # Received once (maxReceiveCount 1) and visible again: the next receive moves it to the DLQ.
    for message in aws.sqs.receive_message(QueueUrl=main, MaxNumberOfMessages=3, VisibilityTimeout=0)["Messages"]:
        assert message["Body"].startswith("m")
    assert aws.sqs.receive_message(QueueUrl=main, MaxNumberOfMessages=10).get("Messages", []) == []
    queues = {q["name"]: q for q in get(server, "/queues")["queues"]}
    assert (queues[main_name]["visible"], queues[main_name]["dead_letter"]["depth"]) == (0, 3)
    assert queues[dlq.rsplit("/", 1)[-1]]["visible"] == 3


def test_kinesis_queue_depth_and_in_flight(server, aws):
    stream, stream_arn = on_demand_stream(aws)
    name = _name("ov-kq")
    arn = aws.kinesis.create_queue(QueueName=name, StreamConfigurationList=[
        {"StreamARN": stream_arn, "StartingPosition": {"Type": "TRIM_HORIZON"}}])["QueueDescription"]["QueueARN"]
    aws.kinesis.put_records(StreamName=stream, Records=[{"Data": b"r", "PartitionKey": str(i)} for i in range(5)])
    row = {q["name"]: q for q in get(server, "/queues")["queues"]}[name]
    assert (row["type"], row["stream"], row["visible"], row["untaken"], row["in_flight"]) == ("kinesis", stream, 5, 5, 0)
    assert row["dead_letter"]["name"] == "built-in" and row["dead_letter"]["depth"] == 0
    got = aws.kinesis.receive_queue_records(QueueARN=arn, Limit=2, VisibilityTimeoutSeconds=600)["QueueRecords"]
    assert len(got) == 2
    row = {q["name"]: q for q in get(server, "/queues")["queues"]}[name]
    assert (row["visible"], row["in_flight"]) == (3, 2)


def test_topics_list_subscriptions_and_missing_endpoints(server, aws):
    topic_name = _name("ov-topic")
    topic = aws.sns.create_topic(Name=topic_name)["TopicArn"]
    queue_name = _name("ov-sub")
    queue = aws.sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sub = aws.sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn(aws, queue),
                            Attributes={"RawMessageDelivery": "true"})["SubscriptionArn"]
    doc = get(server, "/topics")
    row = {t["name"]: t for t in doc["topics"]}[topic_name]
    assert (row["subscriptions"], row["pending"], row["health"]) == (1, 0, "1 subscription (sqs)")
    found = {s["arn"]: s for s in doc["subscriptions"]}[sub]
    assert (found["topic"], found["protocol"], found["endpoint"], found["confirmed"], found["raw"]) == \
        (topic_name, "sqs", queue_arn(aws, queue), True, True)
    assert found["target"] == {"kind": "queue", "name": queue_name, "exists": True, "href": "/_kinesim/console/queues"}
    aws.sqs.delete_queue(QueueUrl=queue)
    doc = get(server, "/topics")
    assert {s["arn"]: s for s in doc["subscriptions"]}[sub]["target"]["exists"] is False
    assert {t["name"]: t for t in doc["topics"]}[topic_name]["health"] == "1 subscription (sqs) · 1 endpoint missing"


def test_log_groups_stored_bytes_streams_retention_and_last_event(server, aws):
    group = "/ov/" + _name("logs")
    aws.logs.create_log_group(logGroupName=group)
    now = int(time.time() * 1000)
    for stream, stamps in (("a", [now - 5000, now - 4000]), ("b", [now - 1000])):
        aws.logs.create_log_stream(logGroupName=group, logStreamName=stream)
        aws.logs.put_log_events(logGroupName=group, logStreamName=stream,
                                logEvents=[{"timestamp": t, "message": f"event at {t}"} for t in stamps])
    aws.logs.put_retention_policy(logGroupName=group, retentionInDays=7)
    described = aws.logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]
    row = {g["name"]: g for g in get(server, "/log-groups")["log_groups"]}[group]
    assert row["stored_bytes"] == described["storedBytes"] > 0
    assert (row["streams"], row["retention_days"], row["last_event"], row["function"]) == (2, 7, now - 1000, None)
    assert row["health"].endswith("· 2 streams · kept 7 days")
