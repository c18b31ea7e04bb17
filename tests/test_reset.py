"""POST /_kinesim/reset (issue 32): every service's state, or the named services', as a freshly
started server has it; the services that hold a reset one carry on with their own state; a stack
operation under way is stopped first; requests in flight meanwhile get answers, the server stays
up; only this machine may ask, and no page of another site."""
from __future__ import annotations

import io
import json
import os
import sqlite3
import threading
import time
import zipfile

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from kinesim import reset as resets
from tests.conftest import client_for, start_server, wait_for

pytestmark = pytest.mark.timeout(300)

ROLE = "arn:aws:iam::000000000000:role/r"
HANDLER = "def handler(event, context):\n    print('got', len(event.get('Records', [])))\n    return 'ran'\n"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def aws(srv):
    return lambda service: client_for(srv.url, service)


@pytest.fixture(autouse=True)
def clean(srv):
    reset(srv)


def reset(srv, services: str | None = None, **kwargs) -> requests.Response:
    answer = requests.post(f"{srv.url}/_kinesim/reset", params={"services": services} if services else None,
                           **kwargs)
    return answer


def code_zip(code: str = HANDLER) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", code)
    return buf.getvalue()


def database(srv) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{os.path.join(srv.settings.data_dir, 'kinesim.db')}?mode=ro", uri=True)


def stored(srv) -> dict[str, int]:
    """What the store holds: documents by kind, records, Firehose buffer rows."""
    with database(srv) as db:
        found = dict(db.execute("SELECT kind, count(*) FROM documents GROUP BY kind").fetchall())
        found["<records>"] = db.execute("SELECT count(*) FROM records").fetchone()[0]
        found["<firehose buffers>"] = db.execute("SELECT count(*) FROM firehose_buffer").fetchone()[0]
    return found


def make_function(aws, name: str = "fn") -> str:
    return aws("lambda").create_function(FunctionName=name, Runtime="python3.12", Role=ROLE, Handler="app.handler",
                                         Code={"ZipFile": code_zip()})["FunctionArn"]


def stream_arn(aws, name: str) -> str:
    return aws("kinesis").describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def make_everything(aws) -> None:
    """Resources of every service, with work under way: a mapping polling, a Firehose buffer,
    an S3 notification, STS credentials, a stack."""
    kinesis, s3, sqs, lam = aws("kinesis"), aws("s3"), aws("sqs"), aws("lambda")
    kinesis.create_stream(StreamName="orders", ShardCount=2)
    arn = stream_arn(aws, "orders")
    kinesis.put_resource_policy(ResourceARN=arn, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "kinesis:GetRecords",
         "Resource": arn}]}))
    kinesis.register_stream_consumer(StreamARN=arn, ConsumerName="reader")
    kinesis.put_record(StreamName="orders", Data=b"order 1", PartitionKey="p")
    kinesis.update_account_settings(MinimumThroughputBillingCommitment={"Status": "ENABLED"})
    s3.create_bucket(Bucket="uploads")
    s3.put_object(Bucket="uploads", Key="a.txt", Body=b"a")
    queue = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody="job 1")
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(Bucket="uploads", NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]})
    s3.put_object(Bucket="uploads", Key="b.txt", Body=b"b")
    topic = aws("sns").create_topic(Name="events")["TopicArn"]
    aws("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    make_function(aws)
    lam.invoke(FunctionName="fn")
    lam.publish_version(FunctionName="fn")
    lam.create_alias(FunctionName="fn", Name="live", FunctionVersion="1")
    lam.put_function_event_invoke_config(FunctionName="fn", MaximumRetryAttempts=0)
    lam.publish_layer_version(LayerName="tools", Content={"ZipFile": code_zip("X = 1\n")})
    lam.invoke(FunctionName="fn", InvocationType="Event", Payload=b"{}")
    lam.create_event_source_mapping(FunctionName="fn", EventSourceArn=arn, StartingPosition="TRIM_HORIZON",
                                    BatchSize=1)
    aws("firehose").create_delivery_stream(
        DeliveryStreamName="archive", ExtendedS3DestinationConfiguration={
            "BucketARN": "arn:aws:s3:::uploads", "RoleARN": ROLE,
            "BufferingHints": {"IntervalInSeconds": 900, "SizeInMBs": 128}})
    aws("firehose").put_record(DeliveryStreamName="archive", Record={"Data": b"buffered\n"})
    logs = aws("logs")
    logs.create_log_group(logGroupName="app")
    logs.create_log_stream(logGroupName="app", logStreamName="one")
    logs.put_log_events(logGroupName="app", logStreamName="one", logEvents=[{"timestamp": 1, "message": "hi"}])
    iam = aws("iam")
    iam.create_user(UserName="alice")
    iam.create_access_key(UserName="alice")
    iam.create_role(RoleName="worker", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    iam.create_policy(PolicyName="read", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
    aws("sts").assume_role(RoleArn="arn:aws:iam::000000000000:role/worker", RoleSessionName="tests")
    aws("ssm").put_parameter(Name="/app/colour", Value="blue", Type="String")
    aws("ecr").create_repository(repositoryName="images")
    cfn = aws("cloudformation")
    cfn.create_stack(StackName="queues", TemplateBody=json.dumps(
        {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "stacked"}}}}))
    wait_for(lambda: cfn.describe_stacks(StackName="queues")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE")
    wait_for(lambda: aws("logs").describe_log_groups(logGroupNamePrefix="/aws/lambda/fn")["logGroups"])
    wait_for(lambda: lam.list_event_source_mappings(FunctionName="fn")["EventSourceMappings"][0]["State"]
             == "Enabled")


def assert_fresh(aws, srv) -> None:
    """No resource of any service is left, in the APIs, the store or on disk."""
    assert aws("kinesis").list_streams()["StreamNames"] == []
    assert aws("kinesis").describe_account_settings()["MinimumThroughputBillingCommitment"]["Status"] == "DISABLED"
    assert aws("s3").list_buckets()["Buckets"] == []
    assert "QueueUrls" not in aws("sqs").list_queues()
    assert aws("sns").list_topics()["Topics"] == [] and aws("sns").list_subscriptions()["Subscriptions"] == []
    assert aws("lambda").list_functions()["Functions"] == []
    assert aws("lambda").list_event_source_mappings()["EventSourceMappings"] == []
    assert aws("lambda").list_layers()["Layers"] == []
    assert aws("firehose").list_delivery_streams()["DeliveryStreamNames"] == []
    assert aws("logs").describe_log_groups()["logGroups"] == []
    assert aws("iam").list_users()["Users"] == [] and aws("iam").list_roles()["Roles"] == []
    assert aws("iam").list_policies(Scope="Local")["Policies"] == []
    assert aws("ssm").describe_parameters()["Parameters"] == []
    assert aws("ecr").describe_repositories()["repositories"] == []
    assert aws("cloudformation").list_stacks()["StackSummaries"] == []
    assert {k: v for k, v in stored(srv).items() if v} == {"meta": len(resets.KEPT_META)}
    data = srv.settings.data_dir
    assert [os.path.join(top, f) for top, _, files in os.walk(os.path.join(data, "s3")) for f in files] == []
    assert not os.path.exists(os.path.join(data, "functions")) and not os.path.exists(os.path.join(data, "layers"))
    assert os.listdir(os.path.join(data, "logs")) == []


def test_everything_is_reset_and_made_again(srv, aws):
    make_everything(aws)
    kinds = [kind for kind, count in stored(srv).items() if count and not kind.startswith("<")]
    assert [kind for kind in kinds if resets.owner(kind) is None] == []  # reset.py knows every kind
    assert {resets.owner(kind) for kind in kinds} >= {"kinesis", "lambda", "firehose", "sqs", "sns", "logs", "iam",
                                                      "sts", "ssm", "ecr", "cloudformation"}
    answer = reset(srv)
    assert answer.status_code == 200 and answer.json()["reset"] == list(resets.SERVICES)
    assert_fresh(aws, srv)
    # The same names again, working as on a fresh server: the function runs, the stream takes records.
    aws("kinesis").create_stream(StreamName="orders", ShardCount=1)
    aws("kinesis").put_record(StreamName="orders", Data=b"order 1", PartitionKey="p")
    iterator = aws("kinesis").get_shard_iterator(StreamName="orders", ShardId="shardId-000000000000",
                                                 ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["Data"] for r in aws("kinesis").get_records(ShardIterator=iterator)["Records"]] == [b"order 1"]
    make_function(aws)
    assert aws("lambda").invoke(FunctionName="fn")["Payload"].read() == b'"ran"'
    aws("s3").create_bucket(Bucket="uploads")
    assert aws("s3").list_objects_v2(Bucket="uploads")["KeyCount"] == 0


def test_named_services_only_and_their_holders_carry_on(srv, aws):
    """Resetting S3 and SQS makes the Lambda service anew (it holds both): its function and its
    Kinesis mapping stay and carry on polling; Kinesis's records stay."""
    kinesis = aws("kinesis")
    kinesis.create_stream(StreamName="orders", ShardCount=1)
    kinesis.put_record(StreamName="orders", Data=b"before", PartitionKey="p")
    aws("s3").create_bucket(Bucket="uploads")
    aws("sqs").create_queue(QueueName="jobs")
    aws("ssm").put_parameter(Name="/app/colour", Value="blue", Type="String")
    make_function(aws)
    aws("lambda").create_event_source_mapping(FunctionName="fn", EventSourceArn=stream_arn(aws, "orders"),
                                              StartingPosition="TRIM_HORIZON", BatchSize=1)
    wait_for(lambda: "got 1" in logs_of(srv, "fn"))

    answer = reset(srv, "s3,SQS")
    assert answer.status_code == 200 and answer.json()["reset"] == ["s3", "sqs"]
    assert aws("s3").list_buckets()["Buckets"] == [] and "QueueUrls" not in aws("sqs").list_queues()
    assert kinesis.list_streams()["StreamNames"] == ["orders"]
    assert aws("ssm").get_parameter(Name="/app/colour")["Parameter"]["Value"] == "blue"
    assert [f["FunctionName"] for f in aws("lambda").list_functions()["Functions"]] == ["fn"]
    kinesis.put_record(StreamName="orders", Data=b"after", PartitionKey="p")
    wait_for(lambda: logs_of(srv, "fn").count("got 1") == 2)  # the mapping resumed from its checkpoint
    assert stored(srv)["<records>"] == 2

    assert reset(srv, "lambda").json()["reset"] == ["lambda"]
    assert aws("lambda").list_functions()["Functions"] == []
    assert logs_of(srv, "fn").count("got 1") == 2  # its logs are CloudWatch Logs': kept
    assert reset(srv, "logs").json()["reset"] == ["logs"]
    assert aws("logs").describe_log_groups()["logGroups"] == []
    assert kinesis.list_streams()["StreamNames"] == ["orders"]


def logs_of(srv, function: str) -> str:
    events = requests.get(f"{srv.url}/_kinesim/logs/{function}").json()["events"]
    return "".join(e["message"] for e in events)


def test_unknown_services_are_refused_and_nothing_is_reset(srv, aws):
    aws("kinesis").create_stream(StreamName="orders", ShardCount=1)
    answer = reset(srv, "kinesis,dynamodb,nope")
    assert answer.status_code == 400
    assert answer.json()["message"].startswith("Unknown services 'dynamodb', 'nope': kinesim resets kinesis, ")
    assert aws("kinesis").list_streams()["StreamNames"] == ["orders"]
    assert requests.get(f"{srv.url}/_kinesim/reset").status_code == 405


def test_only_this_machine_and_no_page_of_another_site(srv, aws, tmp_path):
    aws("kinesis").create_stream(StreamName="orders", ShardCount=1)
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        answer = reset(srv, headers=headers)
        assert answer.status_code == 403 and "AccessDenied" in answer.text  # the guard's, as for every route
    assert reset(srv, headers={"Origin": "http://localhost:3000"}).status_code == 200  # this machine's pages
    assert aws("kinesis").list_streams()["StreamNames"] == []

    from kinesim.config import Settings
    from kinesim.edge import Edge
    edge = Edge(Settings(data_dir=str(tmp_path)))
    try:
        edge.kinesis.store.put_document("stream-left", "x", {})
        calls = []

        def start_response(status, headers):
            calls.append(status)
        environ = {"PATH_INFO": "/_kinesim/reset", "REQUEST_METHOD": "POST", "REMOTE_ADDR": "192.0.2.7",
                   "QUERY_STRING": ""}
        body = json.loads(b"".join(edge.flask(environ, start_response)))
        assert calls == ["403 Forbidden"] and body["message"] == "/_kinesim/reset answers this machine only"
        assert edge.store.document_kinds() == ["meta", "stream-left"]
    finally:
        edge.close()


def test_a_stack_operation_under_way_is_stopped_first(srv, aws):
    """A custom resource whose provider never answers would hold its stack's operation for an
    hour: the reset stops it, and nothing of it comes back afterwards."""
    function_arn = make_function(aws, "silent")
    cfn = aws("cloudformation")
    cfn.create_stack(StackName="waiting", TemplateBody=json.dumps(
        {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "made-first"}},
                       "Thing": {"Type": "Custom::Thing", "DependsOn": "Q",
                                 "Properties": {"ServiceToken": function_arn}}}}))
    wait_for(lambda: any(e["LogicalResourceId"] == "Thing" and e["ResourceStatus"] == "CREATE_IN_PROGRESS"
                         for e in cfn.describe_stack_events(StackName="waiting")["StackEvents"]))
    started = time.monotonic()
    assert reset(srv).status_code == 200
    assert time.monotonic() - started < 20
    time.sleep(1)  # what a cancelled operation would still write
    assert_fresh(aws, srv)


def test_requests_in_flight_during_resets_get_answers(srv, aws):
    stop = threading.Event()
    failures: list[str] = []

    def busy(work) -> None:
        while not stop.is_set():
            try:
                work()
            except ClientError:
                # An answer: AWS's error for what the reset deleted meanwhile, or a request caught
                # half-way through a service being closed (S3's InternalError: its files went).
                pass
            except Exception as err:  # noqa: BLE001 - a dropped connection, a server gone
                failures.append(repr(err))

    kinesis, sqs, s3 = (boto3.client(name, endpoint_url=srv.url, region_name="us-east-1", aws_access_key_id="test",
                                     aws_secret_access_key="test", config=Config(retries={"max_attempts": 0}))
                        for name in ("kinesis", "sqs", "s3"))

    def kinesis_work():
        try:
            kinesis.create_stream(StreamName="busy", ShardCount=1)
        except ClientError:
            pass
        kinesis.put_record(StreamName="busy", Data=b"x", PartitionKey="p")

    def sqs_work():
        url = sqs.create_queue(QueueName="busy")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m")
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)

    def s3_work():
        try:
            s3.create_bucket(Bucket="busy")
        except ClientError:
            pass
        s3.put_object(Bucket="busy", Key="k", Body=b"x" * 10_000)

    threads = [threading.Thread(target=busy, args=(work,)) for work in (kinesis_work, sqs_work, s3_work)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(5):
            time.sleep(0.3)
            assert reset(srv).status_code == 200
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert failures == []
    assert requests.get(f"{srv.url}/_kinesim/health").status_code == 200
    assert reset(srv).status_code == 200
    assert kinesis.list_streams()["StreamNames"] == [] and s3.list_buckets()["Buckets"] == []
