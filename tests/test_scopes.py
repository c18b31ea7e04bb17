"""Accounts and regions kept apart as on AWS (issue 34), through boto3 as users call it.

The region is the one a request is signed for; the account is a 12-digit access key id itself, the
role's account for credentials STS issued, an IAM user's key's account, else the server's. Every
service keeps each (account, region) apart: the same names hold different contents, ARNs and queue
URLs carry the pair, and what AWS refuses across regions is refused here too."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import zipfile

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import start_server, wait_for
from kinesim.config import Settings
from kinesim.server import ServerProcess, free_port, wait_ready
from kinesim.scopes import Resolver, Scope, account_of_key, key_id

A, B = "111111111111", "222222222222"
ROLE = "arn:aws:iam::{}:role/lambda-role"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


def client(srv, service: str, account: str = "test", region: str = "us-east-1", **creds):
    creds = creds or {"aws_access_key_id": account, "aws_secret_access_key": "x"}
    return boto3.client(service, endpoint_url=srv.url, region_name=region,
                        config=Config(retries={"max_attempts": 1}), **creds)


def code(text: str = "def handler(event, context):\n    return event\n") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("app.py", text)
    return buf.getvalue()


def error(e: pytest.ExceptionInfo) -> tuple[str, str, int]:
    r = e.value.response
    return r["Error"]["Code"], r["Error"].get("Message", ""), r["ResponseMetadata"]["HTTPStatusCode"]


# Who and where a request is (kinesim/scopes.py)

def test_key_ids_carry_their_account_as_aws_encodes_it():
    # The example key of AWS's documentation decodes to its documented account (Tal Be'ery's
    # decoding of AWS key ids, which `sts get-access-key-info` answers alike).
    assert account_of_key("ASIAY34FZKBOKMUTVV7A") == "609629065308"
    for account in (A, "000000000000", "999999999999"):
        for prefix in ("AKIA", "ASIA"):
            made = key_id(prefix, account)
            assert len(made) == 20 and made.startswith(prefix) and account_of_key(made) == account
    assert account_of_key("test") is None


def test_the_scope_of_a_credential():
    resolver = Resolver(Scope("000000000000", "us-east-1"), issued_account=lambda key: None,
                        iam_has_key=lambda key, account: key == known)
    known = key_id("AKIA", B)
    assert resolver.of_credential(None) == Scope("000000000000", "us-east-1")
    assert resolver.of_credential([A, "20260101", "eu-west-1", "kinesis", "aws4_request"]) == Scope(A, "eu-west-1")
    assert resolver.of_credential(["test", "20260101", "ap-south-2", "s3"]) == Scope("000000000000", "ap-south-2")
    # not a region: the server's own ("local" is a common placeholder)
    assert resolver.of_credential([A, "20260101", "local", "sqs"]) == Scope(A, "us-east-1")
    assert resolver.of_credential([known, "d", "us-west-2", "sqs"]) == Scope(B, "us-west-2")
    # an AKIA key no IAM of kinesim holds (a real one, say) is the server's account
    assert resolver.of_credential([key_id("AKIA", A), "d", "us-west-2", "sqs"]) == Scope("000000000000", "us-west-2")


# Isolation: the same names, different contents, in every service

def test_streams_by_account_and_region(srv):
    where = [("test", "us-east-1"), ("test", "eu-west-1"), (A, "us-east-1"), (B, "eu-west-1")]
    for account, region in where:
        k = client(srv, "kinesis", account, region)
        k.create_stream(StreamName="orders", ShardCount=1)
        k.put_record(StreamName="orders", Data=f"{account}/{region}".encode(), PartitionKey="p")
    for account, region in where:
        k = client(srv, "kinesis", account, region)
        summary = k.describe_stream_summary(StreamName="orders")["StreamDescriptionSummary"]
        owner = "000000000000" if account == "test" else account
        assert summary["StreamARN"] == f"arn:aws:kinesis:{region}:{owner}:stream/orders"
        shard = k.list_shards(StreamName="orders")["Shards"][0]["ShardId"]
        it = k.get_shard_iterator(StreamName="orders", ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        records = k.get_records(ShardIterator=it["ShardIterator"])["Records"]
        assert [r["Data"] for r in records] == [f"{account}/{region}".encode()]
    # a stream of another region or account is not found by its ARN (Kinesis's own answer)
    k = client(srv, "kinesis", A, "us-east-1")
    with pytest.raises(ClientError) as e:
        k.describe_stream_summary(StreamARN=f"arn:aws:kinesis:eu-west-1:{A}:stream/orders")
    assert error(e)[0] == "ResourceNotFoundException"
    assert client(srv, "kinesis", A, "ap-southeast-2").list_streams()["StreamNames"] == []


def test_queues_by_account_and_region(srv):
    urls = {}
    for account, region in [(A, "us-east-1"), (A, "eu-west-1"), (B, "us-east-1")]:
        sqs = client(srv, "sqs", account, region)
        urls[account, region] = url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        assert url.endswith(f"/{account}/jobs")
        sqs.send_message(QueueUrl=url, MessageBody=f"{account}/{region}")
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        assert arn == f"arn:aws:sqs:{region}:{account}:jobs"
    for (account, region), url in urls.items():
        sqs = client(srv, "sqs", account, region)
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert [m["Body"] for m in got] == [f"{account}/{region}"]
    # a queue of another account, by URL: not this account's
    with pytest.raises(ClientError) as e:
        client(srv, "sqs", A, "us-east-1").get_queue_url(QueueName="jobs", QueueOwnerAWSAccountId="333333333333")
    assert error(e)[0] == "AWS.SimpleQueueService.NonExistentQueue"


def test_functions_parameters_logs_and_repositories_by_account_and_region(srv):
    where = [(A, "us-east-1"), (A, "eu-west-1"), (B, "us-east-1")]
    for account, region in where:
        lam = client(srv, "lambda", account, region)
        arn = lam.create_function(FunctionName="echo", Runtime="python3.12", Role=ROLE.format(account),
                                  Handler="app.handler", Code={"ZipFile": code()},
                                  Environment={"Variables": {"WHERE": f"{account}/{region}"}})["FunctionArn"]
        assert arn == f"arn:aws:lambda:{region}:{account}:function:echo"
        client(srv, "ssm", account, region).put_parameter(Name="/app/where", Value=f"{account}/{region}",
                                                          Type="String")
        client(srv, "logs", account, region).create_log_group(logGroupName=f"/app/{account}/{region}")
        repo = client(srv, "ecr", account, region).create_repository(repositoryName="app")["repository"]
        assert repo["repositoryArn"] == f"arn:aws:ecr:{region}:{account}:repository/app"
    for account, region in where:
        lam = client(srv, "lambda", account, region)
        variables = lam.get_function_configuration(FunctionName="echo")["Environment"]["Variables"]
        assert variables["WHERE"] == f"{account}/{region}"
        out = lam.invoke(FunctionName="echo", Payload=b'{"n": 1}')
        assert json.loads(out["Payload"].read()) == {"n": 1}
        value = client(srv, "ssm", account, region).get_parameter(Name="/app/where")["Parameter"]["Value"]
        assert value == f"{account}/{region}"
        groups = client(srv, "logs", account, region).describe_log_groups(logGroupNamePrefix="/app/")["logGroups"]
        assert [g["logGroupName"] for g in groups] == [f"/app/{account}/{region}"]
    assert client(srv, "lambda", B, "eu-west-1").list_functions()["Functions"] == []
    # a function of another region, by its ARN: not found
    with pytest.raises(ClientError) as e:
        client(srv, "lambda", A, "us-east-1").get_function(
            FunctionName=f"arn:aws:lambda:eu-west-1:{A}:function:echo")
    assert error(e)[0] == "ResourceNotFoundException"


def test_a_functions_own_calls_land_in_its_account_and_region(srv):
    lam = client(srv, "lambda", B, "eu-south-1")
    lam.create_function(FunctionName="maker", Runtime="python3.12", Role=ROLE.format(B), Handler="app.handler",
                        Timeout=30, Code={"ZipFile": code(
                            "import boto3\n"
                            "def handler(event, context):\n"
                            "    sqs = boto3.client('sqs')\n"
                            "    return sqs.create_queue(QueueName='made-inside')['QueueUrl']\n")})
    out = lam.invoke(FunctionName="maker", Payload=b"{}")
    assert json.loads(out["Payload"].read()).endswith(f"/{B}/made-inside")
    client(srv, "sqs", B, "eu-south-1").get_queue_url(QueueName="made-inside")
    with pytest.raises(ClientError):
        client(srv, "sqs", B, "us-east-1").get_queue_url(QueueName="made-inside")


def test_a_mapping_to_a_stream_of_another_region_is_refused(srv):
    k = client(srv, "kinesis", A, "us-west-2")
    k.create_stream(StreamName="clicks", ShardCount=1)
    arn = k.describe_stream_summary(StreamName="clicks")["StreamDescriptionSummary"]["StreamARN"]
    lam = client(srv, "lambda", A, "eu-central-1")
    lam.create_function(FunctionName="sink", Runtime="python3.12", Role=ROLE.format(A), Handler="app.handler",
                        Code={"ZipFile": code()})
    with pytest.raises(ClientError) as e:
        lam.create_event_source_mapping(FunctionName="sink", EventSourceArn=arn, StartingPosition="LATEST")
    # AWS's answer (LocalStack's recording, test_lambda_integration_kinesis.snapshot.json)
    assert error(e) == ("InvalidParameterValueException", f"Stream not found: {arn}", 400)


def test_topics_by_region_and_delivery_to_a_queue_of_another_region(srv):
    east, west = client(srv, "sns", A, "us-east-1"), client(srv, "sns", A, "eu-west-1")
    topic = east.create_topic(Name="events")["TopicArn"]
    assert topic == f"arn:aws:sns:us-east-1:{A}:events"
    other = client(srv, "sns", B, "us-east-1")
    assert other.create_topic(Name="events")["TopicArn"] == f"arn:aws:sns:us-east-1:{B}:events"
    assert [t["TopicArn"] for t in other.list_topics()["Topics"]] == [f"arn:aws:sns:us-east-1:{B}:events"]
    # another region's topic: AWS answers InvalidParameter (LocalStack's recording, test_cross_region_access)
    with pytest.raises(ClientError) as e:
        west.get_topic_attributes(TopicArn=topic)
    assert error(e)[:2] == ("InvalidParameter", "Invalid parameter: TopicArn")
    with pytest.raises(ClientError) as e:
        west.publish(TopicArn=topic, Message="x")
    assert error(e)[0] == "InvalidParameter"
    # SNS delivers to a queue of another region (test_cross_region_delivery_sqs)
    sqs = client(srv, "sqs", A, "eu-west-1")
    url = sqs.create_queue(QueueName="from-east")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    east.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    east.publish(TopicArn=topic, Message="hello west")
    got = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"))
    assert got[0]["Body"] == "hello west"


def test_firehose_by_region_and_no_source_stream_of_another_region(srv):
    s3 = client(srv, "s3", A, "us-east-1")
    s3.create_bucket(Bucket="scoped-deliveries")
    k = client(srv, "kinesis", A, "us-east-1")
    k.create_stream(StreamName="feed", ShardCount=1)
    stream_arn = k.describe_stream_summary(StreamName="feed")["StreamDescriptionSummary"]["StreamARN"]
    for account, region in ((A, "us-east-1"), (A, "eu-west-1"), (B, "us-east-1")):
        fh = client(srv, "firehose", account, region)
        arn = fh.create_delivery_stream(
            DeliveryStreamName="out", ExtendedS3DestinationConfiguration={
                "RoleARN": ROLE.format(account), "BucketARN": "arn:aws:s3:::scoped-deliveries",
                "Prefix": f"{region}/", "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1}})
        assert arn["DeliveryStreamARN"] == f"arn:aws:firehose:{region}:{account}:deliverystream/out"
    west = client(srv, "firehose", A, "eu-west-1")
    with pytest.raises(ClientError) as e:
        west.create_delivery_stream(
            DeliveryStreamName="from-east", DeliveryStreamType="KinesisStreamAsSource",
            KinesisStreamSourceConfiguration={"KinesisStreamARN": stream_arn, "RoleARN": ROLE.format(A)},
            ExtendedS3DestinationConfiguration={"RoleARN": ROLE.format(A),
                                                "BucketARN": "arn:aws:s3:::scoped-deliveries"})
    assert error(e)[0] == "InvalidArgumentException"
    assert client(srv, "firehose", B, "eu-west-1").list_delivery_streams()["DeliveryStreamNames"] == []


def test_iam_is_per_account_and_sts_answers_for_the_caller(srv):
    for account in (A, B):
        user = client(srv, "iam", account).create_user(UserName="ci")["User"]
        assert user["Arn"] == f"arn:aws:iam::{account}:user/ci"
    # IAM is global: the same account's users from any region
    assert [u["UserName"] for u in client(srv, "iam", A, "eu-west-1").list_users()["Users"]] == ["ci"]
    assert client(srv, "sts", A, "eu-west-1").get_caller_identity()["Account"] == A
    # an IAM user's key signs for its own account
    key = client(srv, "iam", B).create_access_key(UserName="ci")["AccessKey"]
    as_user = dict(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    identity = client(srv, "sts", **as_user).get_caller_identity()
    assert identity["Account"] == B and identity["Arn"] == f"arn:aws:iam::{B}:user/ci"
    client(srv, "kinesis", **as_user).create_stream(StreamName="made-by-ci", ShardCount=1)
    assert "made-by-ci" in client(srv, "kinesis", B).list_streams()["StreamNames"]
    assert client(srv, "sts").get_access_key_info(AccessKeyId=key["AccessKeyId"])["Account"] == B


def test_assume_role_into_another_account(srv):
    iam = client(srv, "iam", B)
    iam.create_role(RoleName="deployer", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{A}:root"},
                                                "Action": "sts:AssumeRole"}]}))
    creds = client(srv, "sts", A).assume_role(RoleArn=f"arn:aws:iam::{B}:role/deployer",
                                              RoleSessionName="s1")["Credentials"]
    as_role = dict(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                   aws_session_token=creds["SessionToken"])
    identity = client(srv, "sts", **as_role).get_caller_identity()
    assert identity["Account"] == B and identity["Arn"] == f"arn:aws:sts::{B}:assumed-role/deployer/s1"
    client(srv, "sqs", region="eu-north-1", **as_role).create_queue(QueueName="assumed")
    url = client(srv, "sqs", B, "eu-north-1").get_queue_url(QueueName="assumed")["QueueUrl"]
    assert url.endswith(f"/{B}/assumed")
    with pytest.raises(ClientError):
        client(srv, "sqs", A, "eu-north-1").get_queue_url(QueueName="assumed")


def test_one_template_deployed_to_two_regions(srv):
    template = json.dumps({"Resources": {
        "Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "stacked"}},
        "S": {"Type": "AWS::Kinesis::Stream", "Properties": {"Name": "stacked", "ShardCount": 1}}},
        "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["S", "Arn"]}, "Export": {"Name": "stacked-arn"}}}})
    for region in ("us-east-1", "eu-west-1"):
        client(srv, "cloudformation", A, region).create_stack(StackName="app", TemplateBody=template)
    for region in ("us-east-1", "eu-west-1"):
        cfn = client(srv, "cloudformation", A, region)
        cfn.get_waiter("stack_create_complete").wait(StackName="app", WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        stack = cfn.describe_stacks(StackName="app")["Stacks"][0]
        assert stack["StackId"].startswith(f"arn:aws:cloudformation:{region}:{A}:stack/app/")
        assert stack["Outputs"][0]["OutputValue"] == f"arn:aws:kinesis:{region}:{A}:stream/stacked"
        assert "stacked" in client(srv, "kinesis", A, region).list_streams()["StreamNames"]
        client(srv, "sqs", A, region).get_queue_url(QueueName="stacked")
    assert client(srv, "cloudformation", B, "us-east-1").list_exports()["Exports"] == []


def test_a_custom_resource_answers_the_engine_of_its_stacks_region(srv):
    provider = ("import cfnresponse\n"
                "def handler(event, context):\n"
                "    cfnresponse.send(event, context, cfnresponse.SUCCESS, {'Where': context.invoked_function_arn},"
                " 'thing')\n")
    template = json.dumps({"Resources": {
        "Provider": {"Type": "AWS::Lambda::Function", "Properties": {
            "Runtime": "python3.12", "Handler": "index.handler", "Role": ROLE.format(B), "Timeout": 30,
            "Code": {"ZipFile": provider}}},
        "Thing": {"Type": "Custom::Thing", "Properties": {"ServiceToken": {"Fn::GetAtt": ["Provider", "Arn"]}}}},
        "Outputs": {"Where": {"Value": {"Fn::GetAtt": ["Thing", "Where"]}}}})
    cfn = client(srv, "cloudformation", B, "ap-southeast-1")
    cfn.create_stack(StackName="custom", TemplateBody=template)
    cfn.get_waiter("stack_create_complete").wait(StackName="custom", WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    outputs = cfn.describe_stacks(StackName="custom")["Stacks"][0]["Outputs"]
    assert outputs[0]["OutputValue"] == f"arn:aws:lambda:ap-southeast-1:{B}:function:" + \
        client(srv, "lambda", B, "ap-southeast-1").list_functions()["Functions"][0]["FunctionName"]


# Durable: scopes come back after a restart, and old data directories are the server's own scope

def test_scoped_resources_survive_a_restart(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    try:
        k = client(proc, "kinesis", A, "ap-northeast-1")
        k.create_stream(StreamName="kept", ShardCount=2)
        k.put_record(StreamName="kept", Data=b"before", PartitionKey="p")
        client(proc, "kinesis").create_stream(StreamName="kept", ShardCount=1)
        client(proc, "sqs", B, "sa-east-1").create_queue(QueueName="kept")
        proc.kill()
        proc.start()
        k = client(proc, "kinesis", A, "ap-northeast-1")
        shards = k.list_shards(StreamName="kept")["Shards"]
        assert len(shards) == 2
        data = []
        for shard in shards:
            it = k.get_shard_iterator(StreamName="kept", ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
            data += [r["Data"] for r in k.get_records(ShardIterator=it["ShardIterator"])["Records"]]
        assert data == [b"before"]
        assert len(client(proc, "kinesis").list_shards(StreamName="kept")["Shards"]) == 1
        client(proc, "sqs", B, "sa-east-1").get_queue_url(QueueName="kept")
    finally:
        proc.stop()


def _old_code(tmp_path) -> str | None:
    """The kinesim of the commit before accounts and regions, exported from git (None: no history)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = tmp_path / "old"
    target.mkdir()
    archive = subprocess.run(["git", "-C", root, "archive", "c244965", "kinesim", "firehose"],
                             capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return str(target)


def test_a_data_directory_written_before_scopes_is_served_unchanged(tmp_path_factory, tmp_path):
    old = _old_code(tmp_path)
    if old is None or shutil.which("tar") is None:
        pytest.skip("needs git history with commit c244965 (a clone, not an archive) and tar")
    data = str(tmp_path_factory.mktemp("old-data"))
    settings = Settings(port=free_port(), data_dir=data, create_stream_ms=0, delete_stream_ms=0,
                        update_stream_ms=0, log_level="warning")
    assert not os.path.exists(os.path.join(old, "kinesim", "scopes.py"))

    class OldServer(ServerProcess):
        def command(self) -> list[str]:
            cmd = super().command()
            # Without the --kafka-* flags and their values: the old code has no Kafka.
            return [arg for n, arg in enumerate(cmd)
                    if not arg.startswith("--kafka-") and not cmd[n - 1].startswith("--kafka-")]

        def start(self, timeout: float = 30.0, preexec_fn=None) -> "OldServer":
            # run from the old tree: `python -m kinesim` (and the server's child) import it first
            self.proc = subprocess.Popen(self.command(), cwd=old)
            wait_ready(self.url, timeout, self.proc)
            return self

    with OldServer(settings) as before:
        k = client(before, "kinesis")
        k.create_stream(StreamName="legacy", ShardCount=1)
        k.put_record(StreamName="legacy", Data=b"old", PartitionKey="p")
        client(before, "lambda").create_function(FunctionName="legacy", Runtime="python3.12",
                                                 Role=ROLE.format("000000000000"), Handler="app.handler",
                                                 Code={"ZipFile": code()})
        client(before, "s3").create_bucket(Bucket="legacy")
        client(before, "s3").put_object(Bucket="legacy", Key="k", Body=b"object")
        url = client(before, "sqs").create_queue(QueueName="legacy")["QueueUrl"]
        client(before, "sqs").send_message(QueueUrl=url, MessageBody="queued")
    with ServerProcess(settings) as after:
        k = client(after, "kinesis")
        shard = k.list_shards(StreamName="legacy")["Shards"][0]["ShardId"]
        it = k.get_shard_iterator(StreamName="legacy", ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        assert [r["Data"] for r in k.get_records(ShardIterator=it["ShardIterator"])["Records"]] == [b"old"]
        out = client(after, "lambda").invoke(FunctionName="legacy", Payload=b'{"a": 1}')
        assert json.loads(out["Payload"].read()) == {"a": 1}
        assert client(after, "s3").get_object(Bucket="legacy", Key="k")["Body"].read() == b"object"
        sqs = client(after, "sqs")
        url = sqs.get_queue_url(QueueName="legacy")["QueueUrl"]
        assert [m["Body"] for m in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]] == ["queued"]
        # the server's own scope only: another account sees none of it
        assert client(after, "kinesis", A).list_streams()["StreamNames"] == []
        new = client(after, "kinesis", A)
        new.create_stream(StreamName="legacy", ShardCount=1)
        new.put_record(StreamName="legacy", Data=b"new", PartitionKey="p")
        shard = new.list_shards(StreamName="legacy")["Shards"][0]["ShardId"]
        it = new.get_shard_iterator(StreamName="legacy", ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        assert [r["Data"] for r in new.get_records(ShardIterator=it["ShardIterator"])["Records"]] == [b"new"]


# Another account's resources: allowed by their resource policies, refused without

def _grant(principal: str, actions: list[str], resource: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": principal}, "Action": actions, "Resource": resource}]})


def test_a_stream_and_its_consumer_shared_with_another_account(srv):
    owner, other = client(srv, "kinesis", A, "eu-west-3"), client(srv, "kinesis", B, "eu-west-3")
    owner.create_stream(StreamName="shared", ShardCount=1)
    owner.put_record(StreamName="shared", Data=b"for B", PartitionKey="p")
    arn = owner.describe_stream_summary(StreamName="shared")["StreamDescriptionSummary"]["StreamARN"]
    with pytest.raises(ClientError) as e:
        other.describe_stream_summary(StreamARN=arn)
    assert error(e) == ("AccessDeniedException", f"User: arn:aws:iam::{B}:root is not authorized to perform: "
                        f"kinesis:DescribeStreamSummary on resource: {arn} because no resource-based policy "
                        "allows the kinesis:DescribeStreamSummary action", 400)
    owner.put_resource_policy(ResourceARN=arn, Policy=_grant(B, [
        "kinesis:DescribeStreamSummary", "kinesis:ListShards", "kinesis:GetShardIterator", "kinesis:GetRecords"], arn))
    assert other.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]["StreamName"] == "shared"
    shard = other.list_shards(StreamARN=arn)["Shards"][0]["ShardId"]
    it = other.get_shard_iterator(StreamARN=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["Data"] for r in other.get_records(StreamARN=arn, ShardIterator=it)["Records"]] == [b"for B"]
    # not granted: writing, and managing the policy (only the owner may, whatever the policy says)
    with pytest.raises(ClientError) as e:
        other.put_record(StreamARN=arn, Data=b"x", PartitionKey="p")
    assert error(e)[0] == "AccessDeniedException"
    with pytest.raises(ClientError) as e:
        other.delete_resource_policy(ResourceARN=arn)
    assert error(e)[0] == "AccessDeniedException"
    # the same stream name in B's own account is B's, not A's
    assert other.list_streams()["StreamNames"] == []

    consumer = owner.register_stream_consumer(StreamARN=arn, ConsumerName="fan")["Consumer"]["ConsumerARN"]
    wait_for(lambda: owner.describe_stream_consumer(ConsumerARN=consumer)["ConsumerDescription"]["ConsumerStatus"]
             == "ACTIVE")
    start = {"Type": "TRIM_HORIZON"}
    with pytest.raises(ClientError) as e:
        other.subscribe_to_shard(ConsumerARN=consumer, ShardId=shard, StartingPosition=start)
    assert error(e)[0] == "AccessDeniedException" and "kinesis:SubscribeToShard" in error(e)[1]
    owner.put_resource_policy(ResourceARN=consumer, Policy=_grant(f"arn:aws:iam::{B}:root", [
        "kinesis:SubscribeToShard", "kinesis:DescribeStreamConsumer"], consumer))
    events = other.subscribe_to_shard(ConsumerARN=consumer, ShardId=shard, StartingPosition=start)["EventStream"]
    try:
        got = next(e["SubscribeToShardEvent"] for e in events if e["SubscribeToShardEvent"]["Records"])
    finally:
        events.close()  # end the subscription now
    assert [r["Data"] for r in got["Records"]] == [b"for B"]


def test_a_queue_shared_with_another_account(srv):
    owner, other = client(srv, "sqs", A, "ca-central-1"), client(srv, "sqs", B, "ca-central-1")
    url = owner.create_queue(QueueName="inbox")["QueueUrl"]
    arn = owner.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    with pytest.raises(ClientError) as e:
        other.send_message(QueueUrl=url, MessageBody="knock")
    assert error(e) == ("AccessDenied", "Access to the resource https://sqs.ca-central-1.amazonaws.com/ is denied.",
                        403)
    owner.set_queue_attributes(QueueUrl=url, Attributes={"Policy": _grant(
        B, ["sqs:SendMessage", "sqs:GetQueueUrl"], arn)})
    assert other.get_queue_url(QueueName="inbox", QueueOwnerAWSAccountId=A)["QueueUrl"] == url
    other.send_message(QueueUrl=url, MessageBody="knock")
    assert [m["Body"] for m in owner.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]] == ["knock"]
    with pytest.raises(ClientError) as e:
        other.receive_message(QueueUrl=url)
    assert error(e)[0] == "AccessDenied"


def test_a_function_shared_with_another_account(srv):
    owner, other = client(srv, "lambda", A, "us-east-2"), client(srv, "lambda", B, "us-east-2")
    arn = owner.create_function(FunctionName="shared-fn", Runtime="python3.12", Role=ROLE.format(A),
                                Handler="app.handler", Code={"ZipFile": code()})["FunctionArn"]
    with pytest.raises(ClientError) as e:
        other.invoke(FunctionName=arn, Payload=b"{}")
    assert error(e) == ("AccessDeniedException", f"User: arn:aws:iam::{B}:root is not authorized to perform: "
                        f"lambda:InvokeFunction on resource: {arn} because no resource-based policy allows the "
                        "lambda:InvokeFunction action", 403)
    owner.add_permission(FunctionName="shared-fn", StatementId="b", Action="lambda:InvokeFunction", Principal=B)
    out = other.invoke(FunctionName=arn, Payload=b'{"from": "B"}')
    assert json.loads(out["Payload"].read()) == {"from": "B"}
    with pytest.raises(ClientError) as e:
        other.get_function(FunctionName=arn)  # not granted
    assert error(e)[0] == "AccessDeniedException"
    with pytest.raises(ClientError) as e:
        other.invoke(FunctionName="shared-fn", Payload=b"{}")  # by name: B's own, which it has not
    assert error(e)[0] == "ResourceNotFoundException"


def test_a_bucket_shared_with_another_account(srv):
    owner, other = client(srv, "s3", A), client(srv, "s3", B)
    owner.create_bucket(Bucket="shared-bucket-34")
    owner.put_object(Bucket="shared-bucket-34", Key="data/one.txt", Body=b"one")
    with pytest.raises(ClientError) as e:
        other.get_object(Bucket="shared-bucket-34", Key="data/one.txt")
    assert error(e) == ("AccessDenied", "Access Denied", 403)
    owner.put_bucket_policy(Bucket="shared-bucket-34", Policy=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{B}:root"}, "Action": "s3:GetObject",
         "Resource": "arn:aws:s3:::shared-bucket-34/data/*"}]}))
    assert other.get_object(Bucket="shared-bucket-34", Key="data/one.txt")["Body"].read() == b"one"
    with pytest.raises(ClientError) as e:
        other.put_object(Bucket="shared-bucket-34", Key="data/two.txt", Body=b"two")
    assert error(e)[0] == "AccessDenied"
    with pytest.raises(ClientError) as e:
        other.list_objects_v2(Bucket="shared-bucket-34")
    assert error(e)[0] == "AccessDenied"
    # the owner's own calls are not checked; B's listing has none of A's buckets
    owner.list_objects_v2(Bucket="shared-bucket-34")
    assert "shared-bucket-34" not in [b["Name"] for b in other.list_buckets()["Buckets"]]


def test_a_topic_shared_with_another_account(srv):
    owner, other = client(srv, "sns", A, "ap-south-1"), client(srv, "sns", B, "ap-south-1")
    topic = owner.create_topic(Name="alerts")["TopicArn"]
    sqs = client(srv, "sqs", A, "ap-south-1")
    url = sqs.create_queue(QueueName="alerts-inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    owner.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    # the default policy lets the topic's own account in only
    with pytest.raises(ClientError) as e:
        other.publish(TopicArn=topic, Message="from B")
    assert error(e) == ("AuthorizationError", f"User: arn:aws:iam::{B}:root is not authorized to perform: "
                        f"SNS:Publish on resource: {topic} because no resource-based policy allows the "
                        "SNS:Publish action", 403)
    owner.set_topic_attributes(TopicArn=topic, AttributeName="Policy", AttributeValue=_grant(B, ["SNS:Publish"], topic))
    other.publish(TopicArn=topic, Message="from B")
    got = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages"))
    assert got[0]["Body"] == "from B"
    with pytest.raises(ClientError) as e:
        other.delete_topic(TopicArn=topic)
    assert error(e)[0] == "AuthorizationError"
    assert other.list_topics()["Topics"] == []


def test_signatures_verified_in_every_account(tmp_path_factory):
    proc = start_server(tmp_path_factory, verify_signatures=True, credentials=["AKIDKINESIMTEST0001:secret"])
    try:
        own = dict(aws_access_key_id="AKIDKINESIMTEST0001", aws_secret_access_key="secret")
        creds = client(proc, "sts", **own).assume_role(RoleArn=f"arn:aws:iam::{B}:role/admin",
                                                      RoleSessionName="setup")["Credentials"]
        as_role = dict(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                       aws_session_token=creds["SessionToken"])
        iam = client(proc, "iam", **as_role)
        iam.create_user(UserName="app")
        key = iam.create_access_key(UserName="app")["AccessKey"]
        as_user = dict(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
        assert client(proc, "sts", **as_user).get_caller_identity()["Arn"] == f"arn:aws:iam::{B}:user/app"
        client(proc, "kinesis", region="eu-west-1", **as_user).create_stream(StreamName="signed", ShardCount=1)
        assert client(proc, "kinesis", region="eu-west-1", **as_role).list_streams()["StreamNames"] == ["signed"]
        with pytest.raises(ClientError) as e:  # a wrong secret for the same key
            client(proc, "kinesis", aws_access_key_id=key["AccessKeyId"], aws_secret_access_key="wrong").list_streams()
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403)
        # the engine of another account's stacks signs for that account, and is accepted
        cfn = client(proc, "cloudformation", region="eu-west-1", **as_role)
        cfn.create_stack(StackName="s", TemplateBody=json.dumps({"Resources": {"Q": {
            "Type": "AWS::SQS::Queue", "Properties": {"QueueName": "from-stack"}}}}))
        cfn.get_waiter("stack_create_complete").wait(StackName="s", WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        client(proc, "sqs", region="eu-west-1", **as_user).get_queue_url(QueueName="from-stack")
    finally:
        proc.stop()


def test_a_bucket_notifies_only_queues_of_its_region(srv):
    s3, sqs = client(srv, "s3", A, "eu-west-2"), client(srv, "sqs", A, "us-west-1")
    s3.create_bucket(Bucket="notifying-34", CreateBucketConfiguration={"LocationConstraint": "eu-west-2"})
    url = sqs.create_queue(QueueName="elsewhere")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    with pytest.raises(ClientError) as e:
        s3.put_bucket_notification_configuration(Bucket="notifying-34", NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"]}]})
    assert error(e)[:2] == ("InvalidArgument", "The notification destination service region is not valid for "
                                               "the bucket location constraint")


def test_made_up_accounts_cannot_exhaust_the_server(tmp_path, monkeypatch):
    import kinesim.services
    from kinesim.edge import Edge
    from werkzeug.test import Client
    monkeypatch.setattr(kinesim.services, "MAX_SCOPES", 3)
    edge = Edge(Settings(data_dir=str(tmp_path)))
    try:
        web = Client(edge)

        def call(account: str, target: str = "Kinesis_20131202.ListStreams", body: str = "{}"):
            auth = (f"AWS4-HMAC-SHA256 Credential={account}/20261129/us-east-1/kinesis/aws4_request, "
                    "SignedHeaders=host;x-amz-date, Signature=0")
            return web.post("/", data=body, headers={"Authorization": auth, "X-Amz-Date": "20261129T000000Z",
                                                     "X-Amz-Target": target,
                                                     "Content-Type": "application/x-amz-json-1.1"})
        assert [call(a).status_code for a in ("111111111111", "222222222222")] == [200, 200]
        refused = call("333333333333")
        assert refused.status_code == 400 and json.loads(refused.data)["__type"] == "LimitExceededException"
        assert call("111111111111").status_code == 200  # the scopes made are still served
        # a query-protocol service answers it in its own shape
        query = web.post("/", data="Action=ListTopics&Version=2010-03-31", headers={
            "Authorization": "AWS4-HMAC-SHA256 Credential=444444444444/20261129/us-east-1/sns/aws4_request, "
                             "SignedHeaders=host, Signature=0", "X-Amz-Date": "20261129T000000Z",
            "Content-Type": "application/x-www-form-urlencoded"})
        assert query.status_code == 400 and b"<Code>LimitExceededException</Code>" in query.data
    finally:
        edge.close()


def test_a_reset_empties_every_account_and_region(tmp_path_factory):
    import requests
    proc = start_server(tmp_path_factory)
    try:
        k, sqs = client(proc, "kinesis", A, "eu-west-1"), client(proc, "sqs", B, "us-west-2")
        k.create_stream(StreamName="gone", ShardCount=1)
        k.put_record(StreamName="gone", Data=b"x", PartitionKey="p")
        sqs.create_queue(QueueName="gone")
        lam = client(proc, "lambda", A, "eu-west-1")
        lam.create_function(FunctionName="gone", Runtime="python3.12", Role=ROLE.format(A), Handler="app.handler",
                            Code={"ZipFile": code()})
        code_dir = os.path.join(proc.settings.data_dir, "scopes", A, "eu-west-1", "functions", "gone")
        assert os.path.isdir(code_dir)  # the scope's files are its own
        assert requests.post(f"{proc.url}/_kinesim/reset", params={"services": "sqs"}).status_code == 200
        assert sqs.list_queues().get("QueueUrls", []) == []
        assert k.list_streams()["StreamNames"] == ["gone"]  # not named: kept
        assert requests.post(f"{proc.url}/_kinesim/reset").status_code == 200
        assert k.list_streams()["StreamNames"] == [] and lam.list_functions()["Functions"] == []
        assert not os.path.exists(code_dir)
        k.create_stream(StreamName="gone", ShardCount=1)  # the scope works on after the reset
        assert k.describe_stream_summary(StreamName="gone")["StreamDescriptionSummary"]["OpenShardCount"] == 1
    finally:
        proc.stop()


def test_a_delivery_of_another_scope_resumes_after_kill_9(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.1)
    try:
        s3 = client(proc, "s3", A, "eu-west-1")
        s3.create_bucket(Bucket="resumed-34", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        fh = client(proc, "firehose", A, "eu-west-1")
        fh.create_delivery_stream(DeliveryStreamName="out", ExtendedS3DestinationConfiguration={
            "RoleARN": ROLE.format(A), "BucketARN": "arn:aws:s3:::resumed-34",
            "BufferingHints": {"IntervalInSeconds": 60, "SizeInMBs": 1}})
        wait_for(lambda: fh.describe_delivery_stream(DeliveryStreamName="out")["DeliveryStreamDescription"]
                 ["DeliveryStreamStatus"] == "ACTIVE")
        fh.put_record(DeliveryStreamName="out", Record={"Data": b"kept through kill -9\n"})
        proc.kill()  # acknowledged, buffered (6 s interval): delivered by the restarted server
        proc.start()
        s3 = client(proc, "s3", A, "eu-west-1")
        keys = wait_for(lambda: s3.list_objects_v2(Bucket="resumed-34").get("Contents"), timeout=120)
        body = s3.get_object(Bucket="resumed-34", Key=keys[0]["Key"])["Body"].read()
        assert body == b"kept through kill -9\n"
    finally:
        proc.stop()
