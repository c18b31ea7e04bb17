"""`kinesim deploy` against a real server: what it makes is checked through boto3, as a user would."""
from __future__ import annotations

import json
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


# The repository's template, end to end, on a server of its own (its names are fixed).


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    proc = start_server(tmp_path_factory)
    yield proc
    proc.stop()


def test_root_template_deploys_runs_and_deletes(own_server, capsys):
    url = own_server.url
    kinesis, lam = client_for(url), client_for(url, "lambda")

    code, actions, out, err = deploy(capsys, url, str(ROOT / "template.yaml"), "--stack-name", "clicks-demo")
    assert code == 0, err
    assert actions == {"ClicksStream": "created", "ClicksEnrichedStream": "created", "EnrichFunctionRole": "ignored",
                       "EnrichFunction": "created", "EnrichFunctionClicks": "created",
                       "ValidateFunctionRole": "ignored", "ValidateFunction": "created",
                       "ValidateFunctionClicks": "created"}
    assert "ClicksStreamArn          arn:aws:kinesis:us-east-1:000000000000:stream/clicks" in out
    assert "EnrichFunctionName       clicks-enrich" in out

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

    # Clicks in, enriched clicks out: the trigger runs the function, which writes to the second stream.
    sent = [{"user_id": f"u-{i}", "page": page, "ts": 1700000000 + i}
            for i, page in enumerate(["/products/1", "/cart", "/blog/x"])]
    kinesis.put_records(StreamName="clicks", Records=[{"Data": json.dumps(c).encode(), "PartitionKey": c["user_id"]}
                                                      for c in sent] + [{"Data": b"not json", "PartitionKey": "x"}])
    received = sorted((json.loads(r["Data"]) for r in read_all(kinesis, "clicks-enriched", 3)),
                      key=lambda c: c["user_id"])
    assert [(c["user_id"], c["page_category"], c["event_time"]) for c in received] == [
        ("u-0", "product", "2023-11-14T22:13:20.000Z"), ("u-1", "cart", "2023-11-14T22:13:21.000Z"),
        ("u-2", "content", "2023-11-14T22:13:22.000Z")]

    code, actions, out, err = deploy(capsys, url, str(ROOT / "template.yaml"), "--stack-name", "clicks-demo",
                                     "--delete")
    assert code == 0, err
    assert set(actions.values()) == {"deleted", "ignored"} and len(actions) == 8
    # Dependents first: the mappings go before their functions and the stream they read.
    order = list(actions)
    assert order.index("EnrichFunctionClicks") < order.index("EnrichFunction") < order.index("ClicksEnrichedStream")
    assert order.index("ValidateFunctionClicks") < order.index("ClicksStream")
    assert not stream_exists(kinesis, "clicks") and not stream_exists(kinesis, "clicks-enriched")
    assert not function_exists(lam, "clicks-enrich") and not function_exists(lam, "clicks-validate")
    assert lam.list_event_source_mappings()["EventSourceMappings"] == []
    assert stack_state(url, "clicks-demo") is None


# The test template: update in place, replacement, conditions, deletion.


def test_redeploy_unchanged_then_update_in_place(server, kinesis, lam, project, stack, capsys):
    template = str(project / "template.yaml")
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack)
    assert code == 0, err
    assert actions == {"InputStream": "created", "OutputStream": "created", "EnrichFunctionRole": "ignored",
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
    assert actions == {"InputStream": "updated", "OutputStream": "unchanged", "EnrichFunctionRole": "ignored",
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

    # ... and deleted when it leaves the stack; AWS::NoValue removes the variable again.
    code, actions, out, err = deploy(capsys, server.url, template, "--stack-name", stack,
                                     "--parameter-overrides", "StartingPosition=LATEST")
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
                    "  Queue: {Type: AWS::SQS::Queue}\n")
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and "resource Queue: type AWS::SQS::Queue is not supported by kinesim deploy" in err
    assert not stream_exists(kinesis, stack)


def test_an_api_error_names_the_resource_and_keeps_what_was_made(server, kinesis, tmp_path, stack, capsys):
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
    assert code == 1 and actions == {"Good": "created"}
    assert err.startswith("Error: resource Bad (AWS::Kinesis::Stream): IncreaseStreamRetentionPeriod failed: ")
    state = stack_state(server.url, stack)
    assert state["StackStatus"] == "CREATE_FAILED" and set(state["Resources"]) == {"Good"}

    # Fixed, the next deploy carries on from there.
    path.write_text(path.read_text().replace("9000", "48"))
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions == {"Good": "unchanged", "Bad": "created"}
    assert stack_state(server.url, stack)["StackStatus"] == "UPDATE_COMPLETE"
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
    assert actions == {"Role": "ignored", "Hello": "created"}
    role_arn = lam.get_function_configuration(FunctionName=f"{stack}-hello")["Role"]
    assert role_arn.startswith(f"arn:aws:iam::000000000000:role/{stack}-Role-") and f"RoleArn  {role_arn}" in out
    response = lam.invoke(FunctionName=f"{stack}-hello", Payload=json.dumps({"name": "kinesim"}).encode())
    assert json.loads(response["Payload"].read()) == {"greeting": f"hello from {stack} in us-east-1",
                                                      "name": "kinesim"}
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not function_exists(lam, f"{stack}-hello")
