"""`kinesim deploy` against a real server: what it makes is checked through boto3, as a user would."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from kinesim.deploy import cli

from conftest import client_for, start_server

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = Path(__file__).resolve().parent / "templates" / "pipeline.yaml"
IAM_TYPES = ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


def deploy(capsys, url: str, *args: str) -> tuple[int, dict[str, str], str, str]:
    """Run `kinesim deploy`; returns its exit code, each resource's action, stdout and stderr."""
    code = cli.main([*args, "--endpoint-url", url])
    out, err = capsys.readouterr()
    actions = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2].startswith("AWS::"):
            actions[words[1]] = words[0]
    return code, actions, out, err


def stack_state(url: str, name: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}/_kinesim/stacks/{name}") as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise


def stream_exists(kinesis, name: str) -> bool:
    try:
        kinesis.describe_stream_summary(StreamName=name)
        return True
    except ClientError as err:
        assert err.response["Error"]["Code"] == "ResourceNotFoundException"
        return False


def function_exists(lam, name: str) -> bool:
    try:
        lam.get_function(FunctionName=name)
        return True
    except ClientError as err:
        assert err.response["Error"]["Code"] == "ResourceNotFoundException"
        return False


def read_all(kinesis, stream: str, want: int, deadline_s: float = 60.0) -> list[dict]:
    """Records of every shard of `stream`, polling until `want` have arrived or the deadline."""
    iterators = {s["ShardId"]: kinesis.get_shard_iterator(StreamName=stream, ShardId=s["ShardId"],
                                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
                 for s in kinesis.list_shards(StreamName=stream)["Shards"]}
    records: list[dict] = []
    deadline = time.monotonic() + deadline_s
    while len(records) < want and time.monotonic() < deadline:
        for shard, iterator in iterators.items():
            response = kinesis.get_records(ShardIterator=iterator)
            iterators[shard] = response["NextShardIterator"]
            records += response["Records"]
        time.sleep(0.2)
    return records


@pytest.fixture
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def project(tmp_path):
    """The test template beside a copy of the enrich function, as a project directory."""
    shutil.copy(PIPELINE, tmp_path / "template.yaml")
    shutil.copytree(ROOT / "lambdas" / "enrich", tmp_path / "enrich",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture
def stack():
    return "t" + uuid.uuid4().hex[:10]


def s3_client(url: str):
    return client_for(url, "s3", s3={"addressing_style": "path"})


def bucket_exists(s3, name: str) -> bool:
    try:
        s3.head_bucket(Bucket=name)
        return True
    except ClientError as err:
        assert err.response["Error"]["Code"] == "404"
        return False


def delivery_stream_exists(firehose, name: str) -> bool:
    try:
        firehose.describe_delivery_stream(DeliveryStreamName=name)
        return True
    except ClientError as err:
        assert err.response["Error"]["Code"] == "ResourceNotFoundException"
        return False


def object_keys(s3, bucket: str, prefix: str = "") -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def wait_for_keys(s3, bucket: str, prefixes: list[str], deadline_s: float = 60.0) -> dict[str, list[str]]:
    """The keys under each prefix, polling until every prefix holds at least one."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = {prefix: object_keys(s3, bucket, prefix) for prefix in prefixes}
        if all(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def empty_bucket(s3, bucket: str) -> None:
    for key in object_keys(s3, bucket):
        s3.delete_object(Bucket=bucket, Key=key)


def destination(firehose, name: str) -> dict:
    (dest,) = firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]["Destinations"]
    return dest["ExtendedS3DestinationDescription"]


# The repository's template, end to end, on a server of its own (its names are fixed). Firehose
# buffers run 100 times faster there: IntervalInSeconds 60 flushes after 0.6 s.


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    proc = start_server(tmp_path_factory, firehose_interval_scale=0.01)
    yield proc
    proc.stop()


def test_root_template_deploys_runs_and_deletes(own_server, capsys):
    url = own_server.url
    kinesis, lam, firehose, s3 = client_for(url), client_for(url, "lambda"), client_for(url, "firehose"), \
        s3_client(url)

    code, actions, out, err = deploy(capsys, url, str(ROOT / "template.yaml"), "--stack-name", "clicks-demo")
    assert code == 0, err
    assert actions == {"ClicksStream": "created", "ClicksEnrichedStream": "created", "EnrichFunctionRole": "created",
                       "EnrichFunction": "created", "EnrichFunctionClicks": "created",
                       "ValidateFunctionRole": "created", "ValidateFunction": "created",
                       "ValidateFunctionClicks": "created", "ArchiveBucket": "created", "DeliveryRole": "created",
                       "ClicksToS3": "created", "PageViewsStream": "created", "PageViewsBucket": "created",
                       "PageViewsToS3": "created"}
    assert "ClicksStreamArn          arn:aws:kinesis:us-east-1:000000000000:stream/clicks" in out
    assert "EnrichFunctionName       clicks-enrich" in out
    assert "ArchiveBucketName        clicks-archive" in out
    assert "ClicksToS3Arn            arn:aws:firehose:us-east-1:000000000000:deliverystream/clicks-archive" in out

    clicks = kinesis.describe_stream_summary(StreamName="clicks")["StreamDescriptionSummary"]
    assert clicks["OpenShardCount"] == 2 and clicks["RetentionPeriodHours"] == 24
    assert stream_exists(kinesis, "clicks-enriched")
    enrich = lam.get_function_configuration(FunctionName="clicks-enrich")
    assert (enrich["Runtime"], enrich["Handler"], enrich["Timeout"], enrich["MemorySize"]) == \
        ("python3.11", "app.handler", 30, 256)
    assert enrich["Environment"]["Variables"] == {"OUTPUT_STREAM": "clicks-enriched"}
    assert enrich["Role"].startswith("arn:aws:iam::000000000000:role/clicks-demo-EnrichFunctionRole-")
    (mapping,) = lam.list_event_source_mappings(FunctionName="clicks-enrich")["EventSourceMappings"]
    assert mapping["EventSourceArn"] == clicks["StreamARN"] and mapping["BatchSize"] == 100
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    (validating,) = lam.list_event_source_mappings(FunctionName="clicks-validate")["EventSourceMappings"]
    assert validating["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert validating["MaximumRetryAttempts"] == 2
    assert bucket_exists(s3, "clicks-archive")
    delivery = firehose.describe_delivery_stream(DeliveryStreamName="clicks-archive")["DeliveryStreamDescription"]
    assert delivery["DeliveryStreamStatus"] == "ACTIVE" and delivery["DeliveryStreamType"] == "KinesisStreamAsSource"
    enriched = kinesis.describe_stream_summary(StreamName="clicks-enriched")["StreamDescriptionSummary"]
    assert delivery["Source"]["KinesisStreamSourceDescription"]["KinesisStreamARN"] == enriched["StreamARN"]
    archive = destination(firehose, "clicks-archive")
    assert archive["BucketARN"] == "arn:aws:s3:::clicks-archive" and archive["CompressionFormat"] == "GZIP"
    assert archive["BufferingHints"] == {"IntervalInSeconds": 60, "SizeInMBs": 64}
    assert archive["Prefix"] == "page_category=!{partitionKeyFromQuery:page_category}/!{timestamp:yyyy/MM/dd}/"
    assert archive["DynamicPartitioningConfiguration"]["Enabled"] is True

    # Clicks in, enriched clicks out: the trigger runs the function, which writes to the second stream.
    sent = [{"user_id": f"u-{i}", "page": page, "ts": 1700000000 + i}
            for i, page in enumerate(["/products/1", "/cart", "/blog/x"])]
    put_at = time.time()
    kinesis.put_records(StreamName="clicks", Records=[{"Data": json.dumps(c).encode(), "PartitionKey": c["user_id"]}
                                                      for c in sent] + [{"Data": b"not json", "PartitionKey": "x"}])
    received = sorted((json.loads(r["Data"]) for r in read_all(kinesis, "clicks-enriched", 3)),
                      key=lambda c: c["user_id"])
    assert [(c["user_id"], c["page_category"], c["event_time"]) for c in received] == [
        ("u-0", "product", "2023-11-14T22:13:20.000Z"), ("u-1", "cart", "2023-11-14T22:13:21.000Z"),
        ("u-2", "content", "2023-11-14T22:13:22.000Z")]

    # ... and Firehose archives the enriched clicks: gzipped JSON lines, one folder per category and day.
    categories = {"product": "u-0", "cart": "u-1", "content": "u-2"}
    found = wait_for_keys(s3, "clicks-archive", [f"page_category={c}/" for c in categories])
    days = {time.strftime("%Y/%m/%d", time.gmtime(t)) for t in (put_at, time.time())}
    for category, user in categories.items():
        keys = found[f"page_category={category}/"]
        assert keys, f"nothing delivered under page_category={category}/: {object_keys(s3, 'clicks-archive')}"
        lines = b"".join(gzip.decompress(s3.get_object(Bucket="clicks-archive", Key=k)["Body"].read())
                         for k in keys).splitlines()
        assert [(c["user_id"], c["page_category"]) for c in map(json.loads, lines)] == [(user, category)]
        for key in keys:
            assert re.fullmatch(rf"page_category={category}/\d{{4}}/\d{{2}}/\d{{2}}/clicks-archive-1-[-0-9a-f]+\.gz",
                                key), key
            assert key.split("/", 1)[1][:10] in days
    assert object_keys(s3, "clicks-archive", "errors/") == []

    # CloudFormation deletes only empty buckets: the stack delete stops there, saying so, having
    # deleted the rest, dependents first (the mappings before their functions and the stream they read).
    code, actions, out, err = deploy(capsys, url, str(ROOT / "template.yaml"), "--stack-name", "clicks-demo",
                                     "--delete")
    assert code == 1
    assert "resource ArchiveBucket (AWS::S3::Bucket): DeleteBucket failed: BucketNotEmpty" in err
    assert "aws s3 rm s3://clicks-archive --recursive" in err and "DeletionPolicy: Retain" in err
    assert set(actions.values()) == {"deleted"} and len(actions) == 13 and "ArchiveBucket" not in actions
    order = list(actions)
    assert order.index("EnrichFunctionClicks") < order.index("EnrichFunction") < order.index("ClicksEnrichedStream")
    assert order.index("ValidateFunctionClicks") < order.index("ClicksStream")
    assert order.index("ClicksToS3") < order.index("ClicksEnrichedStream")
    assert not delivery_stream_exists(firehose, "clicks-archive") and bucket_exists(s3, "clicks-archive")
    state = stack_state(url, "clicks-demo")
    assert state["StackStatus"] == "DELETE_FAILED" and list(state["Resources"]) == ["ArchiveBucket"]
    assert not stream_exists(kinesis, "clicks") and not stream_exists(kinesis, "clicks-enriched")
    assert not function_exists(lam, "clicks-enrich") and not function_exists(lam, "clicks-validate")
    assert lam.list_event_source_mappings()["EventSourceMappings"] == []

    # ... and, the bucket emptied, deleting again finishes the job.
    empty_bucket(s3, "clicks-archive")
    code, actions, out, err = deploy(capsys, url, str(ROOT / "template.yaml"), "--stack-name", "clicks-demo",
                                     "--delete")
    assert code == 0, err
    assert actions == {"ArchiveBucket": "deleted"}
    assert not bucket_exists(s3, "clicks-archive")
    assert stack_state(url, "clicks-demo") is None


# The test template: update in place, replacement, conditions, deletion.


def test_redeploy_unchanged_then_update_in_place(server, kinesis, lam, project, stack, capsys):
    template = str(project / "template.yaml")
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack)
    assert code == 0, err
    assert actions == {"InputStream": "created", "OutputStream": "created", "EnrichFunctionRole": "created",
                       "EnrichFunction": "created", "EnrichFunctionInput": "created"}
    function_name = stack_state(server.url, stack)["Resources"]["EnrichFunction"]["PhysicalResourceId"]
    assert function_name.startswith(f"{stack}-EnrichFunction-")  # generated, as CloudFormation does
    before = lam.get_function_configuration(FunctionName=function_name)
    (mapping,) = lam.list_event_source_mappings(FunctionName=function_name)["EventSourceMappings"]
    assert mapping["BatchSize"] == 10
    tags = kinesis.list_tags_for_stream(StreamName=f"{stack}-in")["Tags"]
    assert tags == [{"Key": "stack", "Value": stack}]

    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack)
    assert code == 0, err
    assert {lid: a for lid, a in actions.items() if lid != "EnrichFunctionRole"} == \
        dict.fromkeys(["InputStream", "OutputStream", "EnrichFunction", "EnrichFunctionInput"], "unchanged")
    assert lam.get_function_configuration(FunctionName=function_name)["RevisionId"] == before["RevisionId"]

    # New code, a new timeout, a bigger batch, one more shard: all updated in place.
    with open(project / "enrich" / "app.py", "a") as f:
        f.write("\n# a change to the code\n")
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack,
                                     "--parameter-overrides", "BatchSize=25", "Timeout=20", "ShardCount=2")
    assert code == 0, err
    assert actions == {"InputStream": "updated", "OutputStream": "unchanged", "EnrichFunctionRole": "unchanged",
                       "EnrichFunction": "updated", "EnrichFunctionInput": "updated"}
    after = lam.get_function_configuration(FunctionName=function_name)
    assert after["Timeout"] == 20 and after["CodeSha256"] != before["CodeSha256"]
    (updated,) = lam.list_event_source_mappings(FunctionName=function_name)["EventSourceMappings"]
    assert updated["UUID"] == mapping["UUID"] and updated["BatchSize"] == 25
    assert kinesis.describe_stream_summary(StreamName=f"{stack}-in")["StreamDescriptionSummary"]["OpenShardCount"] == 2

    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack, "--delete")
    assert code == 0, err
    assert not stream_exists(kinesis, f"{stack}-in") and not function_exists(lam, function_name)


def test_replacement_conditions_and_removed_resources(server, kinesis, lam, project, stack, capsys):
    template = str(project / "template.yaml")
    assert deploy(capsys, server.url, template, "--stack-name", stack)[0] == 0
    state = stack_state(server.url, stack)
    function_name = state["Resources"]["EnrichFunction"]["PhysicalResourceId"]
    old_uuid = state["Resources"]["EnrichFunctionInput"]["PhysicalResourceId"]

    # StartingPosition cannot change on a mapping: CloudFormation replaces it.
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack,
                                     "--parameter-overrides", "StartingPosition=LATEST")
    assert code == 0, err
    assert actions["EnrichFunctionInput"] == "replaced" and "(StartingPosition changed)" in out
    (mapping,) = lam.list_event_source_mappings(FunctionName=function_name)["EventSourceMappings"]
    assert mapping["UUID"] != old_uuid and mapping["StartingPosition"] == "LATEST"

    # A resource whose condition becomes true is created (with a generated name), and the
    # function that refers to it through Fn::If is updated.
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack,
                                     "--parameter-overrides", "StartingPosition=LATEST", "WithArchive=true")
    assert code == 0, err
    assert actions["ArchiveStream"] == "created" and actions["EnrichFunction"] == "updated"
    archive = stack_state(server.url, stack)["Resources"]["ArchiveStream"]["PhysicalResourceId"]
    assert archive.startswith(f"{stack}-ArchiveStream-") and stream_exists(kinesis, archive)
    assert f"ArchiveStreamName  {archive}" in out
    variables = lam.get_function_configuration(FunctionName=function_name)["Environment"]["Variables"]
    assert variables == {"OUTPUT_STREAM": f"{stack}-out", "ARCHIVE_STREAM": archive}

    # ... and deleted when it leaves the stack; AWS::NoValue removes the variable again. (A parameter
    # not overridden keeps its previous value, as with `aws cloudformation deploy`: it is set back.)
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack,
                                     "--parameter-overrides", "StartingPosition=LATEST", "WithArchive=false")
    assert code == 0, err
    assert actions["ArchiveStream"] == "deleted" and actions["EnrichFunction"] == "updated"
    assert not stream_exists(kinesis, archive)
    variables = lam.get_function_configuration(FunctionName=function_name)["Environment"]["Variables"]
    assert variables == {"OUTPUT_STREAM": f"{stack}-out"}
    assert "ArchiveStream" not in stack_state(server.url, stack)["Resources"]

    assert deploy(capsys, server.url, template, "--stack-name", stack, "--delete")[0] == 0
    assert stack_state(server.url, stack) is None
    assert lam.list_event_source_mappings(FunctionName=function_name)["EventSourceMappings"] == []
    # Deleting a stack that is gone is not an error.
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack, "--delete")
    assert code == 0 and "does not exist" in out


# Template errors: reported with the resource and property, before anything is made.


BAD_TEMPLATES = {
    "misspelt property": ("""
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: {name}
      ShardCount: 1
      RetentionPeriodHourz: 48
""", ["resource Stream, property RetentionPeriodHourz", "Did you mean 'RetentionPeriodHours'?"]),
    "unknown resource type": ("""
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {name}}}
  Thing:
    Type: AWS::Kinesis::Streamz
""", ["resource Thing", "AWS::Kinesis::Streamz"]),
    "bad GetAtt": ("""
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {name}}}
  Copy:
    Type: AWS::Kinesis::Stream
    Properties:
      Name: {name}-copy
      Tags: [{{Key: source, Value: !GetAtt Stream.StreamArn}}]
""", ["resource Copy, property Tags", "'StreamArn'"]),
}


@pytest.mark.parametrize("case", sorted(BAD_TEMPLATES))
def test_template_errors_name_resource_and_property(server, kinesis, tmp_path, stack, case, capsys):
    text, expected = BAD_TEMPLATES[case]
    path = tmp_path / "template.yaml"
    path.write_text(text.format(name=stack))
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 1 and actions == {}
    assert err.startswith("Error: template.yaml has 1 error(s) (cfn-lint")
    for words in expected:
        assert words in err
    assert not stream_exists(kinesis, stack)


def test_errors_found_without_lint(server, kinesis, tmp_path, stack, capsys):
    path = tmp_path / "template.yaml"
    path.write_text(BAD_TEMPLATES["bad GetAtt"][0].format(name=stack))
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1
    assert err.strip() == ("Error: Template error: resource Copy, property Tags: resource Stream does not support "
                           "attribute type StreamArn in Fn::GetAtt")

    path.write_text(f"Resources:\n  S: {{Type: AWS::Kinesis::Stream, Properties: {{Name: {stack}}}}}\n"
                    "  Table: {Type: AWS::DynamoDB::Table}\n")
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and "resource Table: kinesim does not emulate Amazon DynamoDB: AWS::DynamoDB::Table" in err
    assert not stream_exists(kinesis, stack)


def test_an_api_error_names_the_resource_and_rolls_back(server, kinesis, tmp_path, stack, capsys):
    path = tmp_path / "template.yaml"
    path.write_text(f"""
Resources:
  Good:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-good, ShardCount: 1}}
  Bad:
    Type: AWS::Kinesis::Stream
    DependsOn: Good
    Properties: {{Name: {stack}-bad, ShardCount: 1, RetentionPeriodHours: 9000}}
""")
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    # Good created, then both deleted by the rollback (Bad whatever it got to).
    assert code == 1 and actions == {"Good": "deleted", "Bad": "deleted"}
    assert err.startswith("Error: resource Bad (AWS::Kinesis::Stream): IncreaseStreamRetentionPeriod failed: ")
    state = stack_state(server.url, stack)
    assert state["StackStatus"] == "ROLLBACK_COMPLETE" and state["Resources"] == {}
    assert not stream_exists(kinesis, f"{stack}-good")

    # Fixed, the next deploy replaces the rolled-back stack.
    path.write_text(path.read_text().replace("9000", "48"))
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions == {"Good": "created", "Bad": "created"}
    assert stack_state(server.url, stack)["StackStatus"] == "CREATE_COMPLETE"
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not stream_exists(kinesis, f"{stack}-good") and not stream_exists(kinesis, f"{stack}-bad")


def test_plain_cloudformation_function_with_inline_code(server, lam, tmp_path, stack, capsys):
    path = tmp_path / "template.yaml"
    path.write_text(f"""
AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement: [{{Effect: Allow, Principal: {{Service: lambda.amazonaws.com}}, Action: sts:AssumeRole}}]
  Hello:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {stack}-hello
      Runtime: python3.11
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Environment:
        Variables:
          GREETING: !Sub "hello from ${{AWS::StackName}} in ${{AWS::Region}}"
      Code:
        ZipFile: |
          import os
          def handler(event, context):
              return {{"greeting": os.environ["GREETING"], "name": event["name"]}}
Outputs:
  RoleArn:
    Value: !GetAtt Role.Arn
""")
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions == {"Role": "created", "Hello": "created"}
    role_arn = lam.get_function_configuration(FunctionName=f"{stack}-hello")["Role"]
    assert role_arn.startswith(f"arn:aws:iam::000000000000:role/{stack}-Role-") and f"RoleArn  {role_arn}" in out
    # The role is IAM's, readable as on AWS (stored, not enforced).
    assert client_for(server.url, "iam").get_role(RoleName=role_arn.rsplit("/", 1)[1])["Role"]["Arn"] == role_arn
    response = lam.invoke(FunctionName=f"{stack}-hello", Payload=json.dumps({"name": "kinesim"}).encode())
    assert json.loads(response["Payload"].read()) == {"greeting": f"hello from {stack} in us-east-1",
                                                      "name": "kinesim"}
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not function_exists(lam, f"{stack}-hello")


# Firehose delivery streams and S3 buckets: generated names, updates through UpdateDestination,
# removed properties, replacement, non-empty buckets and DeletionPolicy Retain.

DELIVERY_TEMPLATE = """
Parameters:
  Suffix: {Type: String, Default: a}
  Prefix: {Type: String, Default: raw/}
  Interval: {Type: Number, Default: 60}
  Team: {Type: String, Default: data}
Conditions:
  HasPrefix: !Not [!Equals [!Ref Prefix, ""]]
Resources:
  Bucket:
    Type: AWS::S3::Bucket
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement: [{Effect: Allow, Principal: {Service: firehose.amazonaws.com}, Action: sts:AssumeRole}]
  Delivery:
    Type: AWS::KinesisFirehose::DeliveryStream
    Properties:
      DeliveryStreamName: !Sub "${AWS::StackName}-${Suffix}"
      ExtendedS3DestinationConfiguration:
        BucketARN: !GetAtt Bucket.Arn
        RoleARN: !GetAtt Role.Arn
        Prefix: !If [HasPrefix, !Ref Prefix, !Ref AWS::NoValue]
        BufferingHints: {IntervalInSeconds: !Ref Interval, SizeInMBs: 1}
      Tags: [{Key: team, Value: !Ref Team}]
Outputs:
  BucketName: {Value: !Ref Bucket}
  BucketDomainName: {Value: !GetAtt Bucket.DomainName}
  DeliveryArn: {Value: !GetAtt Delivery.Arn}
"""


def deliver(firehose, s3, stream: str, bucket: str, prefix: str, data: bytes) -> str:
    """Put one record; the key of the object it was delivered in (under `prefix`)."""
    before = set(object_keys(s3, bucket, prefix))
    firehose.put_record_batch(DeliveryStreamName=stream, Records=[{"Data": data}])
    deadline = time.monotonic() + 30
    while not (new := set(object_keys(s3, bucket, prefix)) - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(new) == 1, f"no new object under {prefix!r}: {object_keys(s3, bucket)}"
    (key,) = new
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    return key


def test_delivery_stream_and_bucket_update_replace_delete(own_server, tmp_path, stack, capsys):
    url = own_server.url
    firehose, s3 = client_for(url, "firehose"), s3_client(url)
    path = tmp_path / "template.yaml"
    path.write_text(DELIVERY_TEMPLATE)
    template = str(path)

    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack)
    assert code == 0, err
    assert actions == {"Bucket": "created", "Role": "created", "Delivery": "created"}
    bucket = stack_state(url, stack)["Resources"]["Bucket"]["PhysicalResourceId"]
    # Generated as CloudFormation does: stack-logicalid-suffix, lower case.
    assert re.fullmatch(rf"{stack}-bucket-[a-z0-9]{{12}}", bucket) and bucket_exists(s3, bucket)
    assert f"BucketName        {bucket}" in out and f"BucketDomainName  {bucket}.s3.amazonaws.com" in out
    name = f"{stack}-a"
    arn = f"arn:aws:firehose:us-east-1:000000000000:deliverystream/{name}"
    assert f"DeliveryArn       {arn}" in out
    described = firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]
    assert described["DeliveryStreamType"] == "DirectPut" and described["VersionId"] == "1"
    dest = destination(firehose, name)
    assert dest["BucketARN"] == f"arn:aws:s3:::{bucket}" and dest["Prefix"] == "raw/"
    assert dest["BufferingHints"] == {"IntervalInSeconds": 60, "SizeInMBs": 1}
    assert firehose.list_tags_for_delivery_stream(DeliveryStreamName=name)["Tags"] == [{"Key": "team", "Value": "data"}]
    assert deliver(firehose, s3, name, bucket, "raw/", b"one\n").startswith("raw/")

    # Unchanged, then a new prefix, interval and tag: updated in place (UpdateDestination).
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack)
    assert code == 0 and actions["Delivery"] == "unchanged" and actions["Bucket"] == "unchanged", err
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack, "--parameter-overrides",
                                     "Prefix=archive/", "Interval=120", "Team=web")
    assert code == 0, err
    assert actions == {"Bucket": "unchanged", "Role": "unchanged", "Delivery": "updated"}
    described = firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]
    assert described["DeliveryStreamARN"] == arn and described["VersionId"] == "2"
    dest = destination(firehose, name)
    assert dest["Prefix"] == "archive/" and dest["BufferingHints"] == {"IntervalInSeconds": 120, "SizeInMBs": 1}
    assert firehose.list_tags_for_delivery_stream(DeliveryStreamName=name)["Tags"] == [{"Key": "team", "Value": "web"}]
    assert deliver(firehose, s3, name, bucket, "archive/", b"two\n").startswith("archive/")

    # A property removed from the template is unset, not left as it was: the default
    # YYYY/MM/DD/HH/ prefix again.
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack, "--parameter-overrides",
                                     "Prefix=", "Interval=120", "Team=web")
    assert code == 0 and actions["Delivery"] == "updated", err
    assert destination(firehose, name)["Prefix"] == ""
    key = deliver(firehose, s3, name, bucket, "", b"three\n")
    assert re.fullmatch(rf"\d{{4}}/\d{{2}}/\d{{2}}/\d{{2}}/{name}-3-.+", key), key

    # A new name is a new delivery stream: CloudFormation replaces it.
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack, "--parameter-overrides",
                                     "Suffix=b", "Prefix=", "Interval=120", "Team=web")
    assert code == 0, err
    # Replaced under its new name first; the old one goes in the cleanup phase.
    assert re.search(r"^replaced +Delivery ", out, re.M) and actions["Delivery"] == "deleted"
    assert "(DeliveryStreamName changed)" in out
    assert not delivery_stream_exists(firehose, name) and delivery_stream_exists(firehose, f"{stack}-b")

    # The bucket holds objects: deleting the stack stops at it, with what to do about it.
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack, "--delete")
    assert code == 1 and actions == {"Delivery": "deleted", "Role": "deleted"}
    assert err.startswith("Error: resource Bucket (AWS::S3::Bucket): DeleteBucket failed: BucketNotEmpty: "
                          "The bucket you tried to delete is not empty.")
    assert bucket_exists(s3, bucket) and len(object_keys(s3, bucket)) == 3
    assert stack_state(url, stack)["StackStatus"] == "DELETE_FAILED"
    empty_bucket(s3, bucket)
    code, actions, out, err = deploy(capsys, url, template, "--stack-name", stack, "--delete")
    assert code == 0 and actions == {"Bucket": "deleted"}, err
    assert not bucket_exists(s3, bucket) and stack_state(url, stack) is None


def test_kinesis_source_is_replaced_and_retained_buckets_stay(own_server, tmp_path, stack, capsys):
    url = own_server.url
    firehose, s3, kinesis = client_for(url, "firehose"), s3_client(url), client_for(url)
    path = tmp_path / "template.yaml"
    path.write_text(f"""
Parameters:
  Source: {{Type: String, Default: One}}
Conditions:
  FromOne: !Equals [!Ref Source, One]
Resources:
  One: {{Type: AWS::Kinesis::Stream, Properties: {{Name: {stack}-one, ShardCount: 1}}}}
  Two: {{Type: AWS::Kinesis::Stream, Properties: {{Name: {stack}-two, ShardCount: 1}}}}
  Archive:
    Type: AWS::S3::Bucket
    DeletionPolicy: Retain
    Properties: {{BucketName: {stack}-archive}}
  Delivery:
    Type: AWS::KinesisFirehose::DeliveryStream
    Properties:
      DeliveryStreamType: KinesisStreamAsSource
      KinesisStreamSourceConfiguration:
        KinesisStreamARN: !If [FromOne, !GetAtt One.Arn, !GetAtt Two.Arn]
        RoleARN: arn:aws:iam::000000000000:role/firehose
      S3DestinationConfiguration:
        BucketARN: !GetAtt Archive.Arn
        RoleARN: arn:aws:iam::000000000000:role/firehose
        BufferingHints: {{IntervalInSeconds: 60, SizeInMBs: 1}}
""")
    code, actions, out, err = deploy(capsys, url, str(path), "--stack-name", stack)
    assert code == 0, err
    name = stack_state(url, stack)["Resources"]["Delivery"]["PhysicalResourceId"]
    assert name.startswith(f"{stack}-Delivery-")  # generated: the template names none
    source = firehose.describe_delivery_stream(DeliveryStreamName=name)["DeliveryStreamDescription"]["Source"]
    assert source["KinesisStreamSourceDescription"]["KinesisStreamARN"].endswith(f"/{stack}-one")
    kinesis.put_record(StreamName=f"{stack}-one", Data=b'{"n": 1}\n', PartitionKey="k")
    assert wait_for_keys(s3, f"{stack}-archive", [""])[""], "nothing delivered from the source stream"

    # Another source stream: a new delivery stream (KinesisStreamSourceConfiguration is create-only).
    code, actions, out, err = deploy(capsys, url, str(path), "--stack-name", stack, "--parameter-overrides",
                                     "Source=Two")
    assert code == 0, err
    assert re.search(r"^replaced +Delivery ", out, re.M) and "(KinesisStreamSourceConfiguration changed)" in out
    new_name = stack_state(url, stack)["Resources"]["Delivery"]["PhysicalResourceId"]
    assert new_name != name and not delivery_stream_exists(firehose, name)
    source = firehose.describe_delivery_stream(DeliveryStreamName=new_name)["DeliveryStreamDescription"]["Source"]
    assert source["KinesisStreamSourceDescription"]["KinesisStreamARN"].endswith(f"/{stack}-two")

    # DeletionPolicy Retain: the bucket and what it holds outlive the stack ...
    code, actions, out, err = deploy(capsys, url, str(path), "--stack-name", stack, "--delete")
    assert code == 0, err
    assert actions["Archive"] == "retained" and actions["Delivery"] == "deleted"
    assert bucket_exists(s3, f"{stack}-archive") and object_keys(s3, f"{stack}-archive")
    # ... and a new stack does not take it over: as in CloudFormation, the name is taken.
    code, actions, out, err = deploy(capsys, url, str(path), "--stack-name", stack)
    assert code == 1
    assert f"resource Archive (AWS::S3::Bucket): {stack}-archive already exists" in err
    assert deploy(capsys, url, str(path), "--stack-name", stack, "--delete")[0] == 0
    empty_bucket(s3, f"{stack}-archive")
    s3.delete_bucket(Bucket=f"{stack}-archive")
