"""`kinesim deploy` behaving like CloudFormation, through the real server: the whole template
checked before anything exists, rollback of a failed create or update, recovery after a killed
deploy, AWS::Include, and AWS::Lambda::Permission (with Lambda's AddPermission / RemovePermission
/ GetPolicy)."""
from __future__ import annotations

import json
import urllib.request

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, start_server
from test_deploy import deploy, function_exists, s3_client, stack_state, stream_exists


@pytest.fixture
def lam(server):
    return client_for(server.url, "lambda")


@pytest.fixture
def stack():
    import uuid
    return "c" + uuid.uuid4().hex[:10]


def lines_of(out: str) -> list[tuple[str, str]]:
    """(action, logical id) of every progress line, in order (a resource may have several)."""
    found = []
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2].startswith("AWS::"):
            found.append((words[0], words[1]))
    return found


def shard_count(kinesis, name: str) -> int:
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["OpenShardCount"]


def invoke(lam, name: str) -> dict:
    return json.loads(lam.invoke(FunctionName=name, Payload=b"{}")["Payload"].read())


def put_state(url: str, name: str, state: dict) -> None:
    request = urllib.request.Request(f"{url}/_kinesim/stacks/{name}", data=json.dumps(state).encode(), method="PUT",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request).close()


def function_yaml(name: str, version: str, timeout: int = 3, depends: str = "") -> str:
    return f"""
  Fn:
    Type: AWS::Lambda::Function
    {depends}
    Properties:
      FunctionName: {name}
      Runtime: python3.12
      Handler: index.handler
      Role: arn:aws:iam::000000000000:role/r
      Timeout: {timeout}
      Code:
        ZipFile: |
          def handler(event, context):
              return {{"version": "{version}"}}
"""


# Checked before anything is created


def test_every_problem_is_named_at_once_and_nothing_is_created(server, kinesis, lam, tmp_path, stack, capsys):
    path = tmp_path / "template.yaml"
    path.write_text(f"""
Resources:
  Good:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-good, ShardCount: 1}}
  Misspelt:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-misspelt, RetentionHours: 48}}
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{{AttributeName: id, KeyType: HASH}}]
      AttributeDefinitions: [{{AttributeName: id, AttributeType: S}}]
      BillingMode: PAY_PER_REQUEST
  Rule:
    Type: AWS::Events::Rule
    Properties: {{ScheduleExpression: rate(1 minute)}}
  Java:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: {stack}-java
      Runtime: java21
      Handler: example.Handler::handleRequest
      Role: arn:aws:iam::000000000000:role/r
      Code: {{S3Bucket: code-bucket, S3Key: app.jar}}
{function_yaml(f"{stack}-python", "1")}
""")
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and actions == {}
    problems = err.splitlines()
    assert problems[0] == "Error: 4 problems found before anything was created or changed:"
    assert problems[1].startswith("  resource Table: kinesim does not emulate Amazon DynamoDB: AWS::DynamoDB::Table")
    assert problems[2].startswith("  resource Rule: kinesim does not emulate Amazon EventBridge: AWS::Events::Rule")
    assert problems[3].startswith("  resource Java: Runtime java21 cannot run on this kinesim server (it runs ")
    assert problems[4].startswith("  resource Misspelt (AWS::Kinesis::Stream): property RetentionHours of "
                                  "AWS::Kinesis::Stream is not supported by kinesim deploy")
    assert stack_state(server.url, stack) is None
    assert not stream_exists(kinesis, f"{stack}-good") and not function_exists(lam, f"{stack}-python")

    # With cfn-lint on, the template is valid CloudFormation: the same check speaks.
    path.write_text(path.read_text().replace("RetentionHours", "RetentionPeriodHours"))
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 1 and actions == {} and err.startswith("Error: 3 problems found before anything")
    assert stack_state(server.url, stack) is None and not stream_exists(kinesis, f"{stack}-good")


def test_runtimes_come_from_the_server(server, tmp_path, stack, capsys):
    with urllib.request.urlopen(f"{server.url}/_kinesim/health") as response:
        runtimes = json.loads(response.read()).get("runtimes")
    assert runtimes and "python3.12" in runtimes and "java21" not in runtimes
    path = tmp_path / "template.yaml"
    path.write_text("Resources:" + function_yaml(f"{stack}-f", "1").replace("python3.12", "dotnet8"))
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and f"Runtime dotnet8 cannot run on this kinesim server (it runs {', '.join(runtimes)})" in err


# Rollback


def test_failed_create_rolls_back_and_the_next_deploy_replaces_the_stack(server, kinesis, lam, tmp_path, stack,
                                                                         capsys):
    path = tmp_path / "template.yaml"
    template = f"""
Resources:
  Good:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-good, ShardCount: 1}}
{function_yaml(f"{stack}-fn", "1")}
  Bad:
    Type: AWS::Kinesis::Stream
    DependsOn: [Good, Fn]
    Properties: {{Name: {stack}-bad, RetentionPeriodHours: 9000}}
"""
    path.write_text(template)
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and "IncreaseStreamRetentionPeriod failed" in err and "rolled back (ROLLBACK_COMPLETE)" in err
    steps = lines_of(out)
    assert sorted(steps[:2]) == [("created", "Fn"), ("created", "Good")]
    assert sorted(steps[2:]) == [("deleted", "Bad"), ("deleted", "Fn"), ("deleted", "Good")]
    assert "Rolling back: deleting what was created" in out
    state = stack_state(server.url, stack)
    assert state["StackStatus"] == "ROLLBACK_COMPLETE" and state["Resources"] == {}
    for name in ("good", "bad"):
        assert not stream_exists(kinesis, f"{stack}-{name}")
    assert not function_exists(lam, f"{stack}-fn")

    path.write_text(template.replace("9000", "48"))
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 0, err
    assert "is ROLLBACK_COMPLETE (its creation failed): deleting it and creating it anew" in out
    new_state = stack_state(server.url, stack)
    assert new_state["StackStatus"] == "CREATE_COMPLETE" and new_state["StackId"] != state["StackId"]
    assert invoke(lam, f"{stack}-fn") == {"version": "1"}
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0


def update_templates(stack: str) -> tuple[str, str]:
    before = f"""
Resources:
  Shards:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-shards, ShardCount: 1}}
{function_yaml(f"{stack}-fn", "1")}
  Removed:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-removed}}
  Renamed:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-old-name}}
  Trigger:
    Type: AWS::Lambda::EventSourceMapping
    Properties: {{FunctionName: !Ref Fn, EventSourceArn: !GetAtt Shards.Arn, StartingPosition: LATEST}}
"""
    after = f"""
Resources:
  Shards:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-shards, ShardCount: 2}}
{function_yaml(f"{stack}-fn", "2", timeout=10)}
  Renamed:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-new-name}}
  Added:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {stack}-added}}
  Trigger:
    Type: AWS::Lambda::EventSourceMapping
    Properties: {{FunctionName: !Ref Fn, EventSourceArn: !GetAtt Shards.Arn, StartingPosition: TRIM_HORIZON}}
  Bad:
    Type: AWS::Kinesis::Stream
    DependsOn: [Shards, Fn, Renamed, Added, Trigger]
    Properties: {{Name: {stack}-bad, RetentionPeriodHours: 9000}}
"""
    return before, after


def test_failed_update_returns_every_resource_to_the_previous_template(server, kinesis, lam, tmp_path, stack,
                                                                       capsys):
    path = tmp_path / "template.yaml"
    before, after = update_templates(stack)
    path.write_text(before)
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")[0] == 0
    kinesis.put_record(StreamName=f"{stack}-old-name", Data=b"kept", PartitionKey="k")

    path.write_text(after)
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and "rolled back (UPDATE_ROLLBACK_COMPLETE)" in err
    steps = lines_of(out)
    assert {("updated", "Shards"), ("updated", "Fn"), ("replaced", "Renamed"), ("created", "Added")} <= set(steps)
    assert {("deleted", "Added"), ("deleted", "Renamed"), ("kept", "Renamed"), ("restored", "Shards"),
            ("restored", "Fn")} <= set(steps)
    # The mapping was replaced in place (a second one for the same stream and function would
    # conflict): the rollback deletes the new one and makes the old one again.
    assert {("replaced", "Trigger"), ("deleted", "Trigger"), ("created", "Trigger")} <= set(steps)
    # Removed resources are deleted only once everything else succeeded: never here.
    assert not any(lid == "Removed" for _, lid in steps)
    assert stack_state(server.url, stack)["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"

    assert shard_count(kinesis, f"{stack}-shards") == 1
    assert invoke(lam, f"{stack}-fn") == {"version": "1"}
    assert lam.get_function_configuration(FunctionName=f"{stack}-fn")["Timeout"] == 3
    (mapping,) = lam.list_event_source_mappings(FunctionName=f"{stack}-fn")["EventSourceMappings"]
    assert mapping["StartingPosition"] == "LATEST"
    assert mapping["UUID"] == stack_state(server.url, stack)["Resources"]["Trigger"]["PhysicalResourceId"]
    assert stream_exists(kinesis, f"{stack}-removed")
    # The replaced stream was never deleted: its records are still there.
    shard = kinesis.list_shards(StreamName=f"{stack}-old-name")["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=f"{stack}-old-name", ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]] == [b"kept"]
    for name in ("new-name", "added", "bad"):
        assert not stream_exists(kinesis, f"{stack}-{name}")

    # Fixed, the update goes through; the cleanup phase deletes the old and the removed.
    path.write_text(after.replace("9000", "48"))
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 0, err
    assert stack_state(server.url, stack)["StackStatus"] == "UPDATE_COMPLETE"
    assert {("deleted", "Removed"), ("deleted", "Renamed")} <= set(lines_of(out))
    assert shard_count(kinesis, f"{stack}-shards") == 2 and invoke(lam, f"{stack}-fn") == {"version": "2"}
    assert not stream_exists(kinesis, f"{stack}-removed") and not stream_exists(kinesis, f"{stack}-old-name")
    assert stream_exists(kinesis, f"{stack}-new-name")
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not stream_exists(kinesis, f"{stack}-new-name") and not function_exists(lam, f"{stack}-fn")


def test_a_deploy_killed_with_the_server_is_carried_on_when_it_starts_again(tmp_path_factory, tmp_path, stack,
                                                                           capsys):
    """The state a server killed mid-update leaves (written before each call): one resource being
    created, one being updated, the operation under way. Started again, the server carries the
    operation on: it deletes the first and sends the second again, and the update completes."""
    server = start_server(tmp_path_factory)
    try:
        kinesis = client_for(server.url)
        path = tmp_path / "template.yaml"
        before, _ = update_templates(stack)
        path.write_text(before)
        assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")[0] == 0
        state = stack_state(server.url, stack)
        # What the killed operation did: it created a stream and split Shards to 2 shards.
        kinesis.create_stream(StreamName=f"{stack}-half", ShardCount=1)
        kinesis.update_shard_count(StreamName=f"{stack}-shards", TargetShardCount=2, ScalingType="UNIFORM_SCALING")
        shards = state["Resources"]["Shards"]
        state["Resources"]["Shards"] = {**shards, "Status": "UPDATE_IN_PROGRESS",
                                        "Target": {**shards["Properties"], "ShardCount": 2}}
        state["Resources"]["Half"] = {"Type": "AWS::Kinesis::Stream", "PhysicalResourceId": f"{stack}-half",
                                      "Properties": {**shards["Properties"], "Name": f"{stack}-half"},
                                      "Attributes": {}, "DependsOn": [], "Status": "CREATE_IN_PROGRESS"}
        state.update(StackStatus="UPDATE_IN_PROGRESS", Operation={"Kind": "deploy"})
        put_state(server.url, stack, state)
        server.kill()
        server.start()
        cfn = client_for(server.url, "cloudformation")
        cfn.get_waiter("stack_update_complete").wait(StackName=stack, WaiterConfig={"Delay": 0.2, "MaxAttempts": 600})
        assert not stream_exists(kinesis, f"{stack}-half")
        assert shard_count(kinesis, f"{stack}-shards") == 1
        after = stack_state(server.url, stack)
        assert after["StackStatus"] == "UPDATE_COMPLETE" and set(after["Resources"]) == set(state["Resources"]) - {"Half"}
        assert all("Status" not in record for record in after["Resources"].values()) and "Operation" not in after
        events = [(e["LogicalResourceId"], e["ResourceStatus"]) for e in cfn.describe_stack_events(StackName=stack)[
            "StackEvents"]]
        assert ("Half", "DELETE_COMPLETE") in events and events[0] == (stack, "UPDATE_COMPLETE")
        assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    finally:
        server.stop()


# AWS::Include


def test_include_inlines_local_and_s3_snippets_before_the_sam_transform(server, kinesis, lam, tmp_path, stack,
                                                                         capsys):
    s3 = s3_client(server.url)
    bucket = f"{stack}-snippets"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="outputs.yaml",
                  Body=b"Outputs:\n  StreamArn:\n    Value: !GetAtt Clicks.Arn\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import os\ndef handler(event, context):\n"
                                             "    return {'mode': os.environ['MODE']}\n")
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "streams.yaml").write_text(f"Clicks:\n  Type: AWS::Kinesis::Stream\n"
                                                        f"  Properties: {{Name: {stack}-clicks, ShardCount: 1}}\n")
    (tmp_path / "snippets" / "env.yaml").write_text("Variables:\n  MODE: included\n")
    path = tmp_path / "template.yaml"
    path.write_text(f"""
Transform:
  - AWS::Serverless-2016-10-31
  - Name: AWS::Include
    Parameters: {{Location: s3://{bucket}/outputs.yaml}}
Resources:
  Fn::Transform:
    Name: AWS::Include
    Parameters: {{Location: ./snippets/streams.yaml}}
  App:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {stack}-app
      CodeUri: src
      Handler: app.handler
      Runtime: python3.12
      Environment:
        Fn::Transform:
          Name: AWS::Include
          Parameters: {{Location: snippets/env.yaml}}
      Events:
        Clicks:
          Type: Kinesis
          Properties: {{Stream: !GetAtt Clicks.Arn, StartingPosition: LATEST}}
""")
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 0, err
    assert actions["Clicks"] == "created" and actions["App"] == "created"
    arn = kinesis.describe_stream_summary(StreamName=f"{stack}-clicks")["StreamDescriptionSummary"]["StreamARN"]
    assert f"StreamArn  {arn}" in out
    assert invoke(lam, f"{stack}-app") == {"mode": "included"}
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0


def test_an_included_api_definition_is_not_a_swagger_error(server, tmp_path, stack, capsys):
    """Before, SAM saw the Fn::Transform where a Swagger document belongs and said the document
    was invalid; inlined first, the template says what it really needs."""
    (tmp_path / "api.yaml").write_text("openapi: 3.0.1\ninfo: {title: api, version: '1'}\npaths: {}\n")
    path = tmp_path / "template.yaml"
    path.write_text("""
Transform: AWS::Serverless-2016-10-31
Resources:
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: prod
      DefinitionBody:
        Fn::Transform:
          Name: AWS::Include
          Parameters: {Location: api.yaml}
""")
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1
    assert "Swagger" not in err and "kinesim does not emulate Amazon API Gateway: AWS::ApiGateway::RestApi" in err

    path.write_text(path.read_text().replace("api.yaml", "missing.yaml"))
    code, _, _, err = deploy(capsys, server.url, str(path), "--stack-name", stack, "--no-lint")
    assert code == 1 and "Transform AWS::Include: cannot read missing.yaml" in err


# AWS::Lambda::Permission


def policy(lam, name: str, **qualifier) -> dict:
    return json.loads(lam.get_policy(FunctionName=name, **qualifier)["Policy"])


def test_permissions_deploy_into_the_function_policy(server, lam, tmp_path, stack, capsys):
    path = tmp_path / "template.yaml"
    template = f"""
Resources:
{function_yaml(f"{stack}-fn", "1")}
  FromBucket:
    Type: AWS::Lambda::Permission
    Properties:
      FunctionName: !Ref Fn
      Action: lambda:InvokeFunction
      Principal: s3.amazonaws.com
      SourceArn: arn:aws:s3:::{stack}-bucket
      SourceAccount: !Ref AWS::AccountId
  FromAccount:
    Type: AWS::Lambda::Permission
    Properties:
      FunctionName: !GetAtt Fn.Arn
      Action: lambda:InvokeFunction
      Principal: "111122223333"
Outputs:
  Sid:
    Value: !Ref FromBucket
  Id:
    Value: !GetAtt FromAccount.Id
"""
    path.write_text(template)
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions == {"Fn": "created", "FromBucket": "created", "FromAccount": "created"}
    assert "kinesim does not enforce resource policies" in out
    outputs = dict(line.split() for line in out.split("Outputs:")[1].splitlines() if line.startswith("  "))
    assert outputs["Sid"].startswith(f"{stack}-FromBucket-") and outputs["Id"].startswith(f"{stack}-FromAccount-")
    arn = lam.get_function_configuration(FunctionName=f"{stack}-fn")["FunctionArn"]
    assert policy(lam, f"{stack}-fn") == {"Version": "2012-10-17", "Id": "default", "Statement": [
        {"Sid": outputs["Sid"], "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"},
         "Action": "lambda:InvokeFunction", "Resource": arn,
         "Condition": {"StringEquals": {"AWS:SourceAccount": "000000000000"},
                       "ArnLike": {"AWS:SourceArn": f"arn:aws:s3:::{stack}-bucket"}}},
        {"Sid": outputs["Id"], "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
         "Action": "lambda:InvokeFunction", "Resource": arn}]}

    # Every property is create-only: a change replaces the statement.
    path.write_text(template.replace(f"{stack}-bucket", f"{stack}-other"))
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    assert actions["FromBucket"] == "deleted" and ("replaced", "FromBucket") in lines_of(out)
    statements = policy(lam, f"{stack}-fn")["Statement"]
    assert [s["Sid"].split("-")[1] for s in statements] == ["FromAccount", "FromBucket"]
    assert statements[1]["Condition"]["ArnLike"] == {"AWS:SourceArn": f"arn:aws:s3:::{stack}-other"}
    assert outputs["Sid"] not in {s["Sid"] for s in statements}

    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not function_exists(lam, f"{stack}-fn")


def error_of(call, **kwargs) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    error = caught.value.response
    return error["Error"]["Code"], error["Error"]["Message"], error["ResponseMetadata"]["HTTPStatusCode"]


def test_permission_api_answers_as_aws(server, lam, stack):
    # Texts from AWS's recorded answers (LocalStack's test_lambda_api.snapshot.json).
    name = f"{stack}-fn"
    lam.create_function(FunctionName=name, Runtime="python3.12", Role="arn:aws:iam::000000000000:role/r",
                        Handler="index.handler", Code={"ZipFile": _zip("def handler(e, c):\n    return 1\n")})
    arn = lam.get_function_configuration(FunctionName=name)["FunctionArn"]
    assert error_of(lam.get_policy, FunctionName=name) == (
        "ResourceNotFoundException", "The resource you requested does not exist.", 404)
    assert error_of(lam.remove_permission, FunctionName=name, StatementId="s3") == (
        "ResourceNotFoundException", "No policy is associated with the given resource.", 404)
    revision = lam.get_function_configuration(FunctionName=name)["RevisionId"]
    added = lam.add_permission(FunctionName=name, StatementId="s3", Action="lambda:InvokeFunction",
                               Principal="s3.amazonaws.com", SourceArn="arn:aws:s3:::b", RevisionId=revision)
    assert added["ResponseMetadata"]["HTTPStatusCode"] == 201
    assert json.loads(added["Statement"]) == {
        "Sid": "s3", "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"},
        "Action": "lambda:InvokeFunction", "Resource": arn,
        "Condition": {"ArnLike": {"AWS:SourceArn": "arn:aws:s3:::b"}}}
    got = lam.get_policy(FunctionName=arn)
    assert got["RevisionId"] == lam.get_function_configuration(FunctionName=name)["RevisionId"] != revision
    assert error_of(lam.add_permission, FunctionName=name, StatementId="s3", Action="lambda:InvokeFunction",
                    Principal="s3.amazonaws.com") == (
        "ResourceConflictException",
        "The statement id (s3) provided already exists. Please provide a new statement id, or remove the existing "
        "statement.", 409)
    assert error_of(lam.add_permission, FunctionName=name, StatementId="x", Action="lambda:InvokeFunction",
                    Principal="invalid.nonaws.com") == (
        "InvalidParameterValueException",
        "The provided principal was invalid. Please check the principal and try again.", 400)
    assert error_of(lam.add_permission, FunctionName=f"{name}:$LATEST", StatementId="x",
                    Action="lambda:InvokeFunction", Principal="*") == (
        "InvalidParameterValueException", "We currently do not support adding policies for $LATEST.", 400)
    assert error_of(lam.add_permission, FunctionName=name, StatementId="example.com",
                    Action="lambda:InvokeFunction", Principal="*")[0] == "ValidationException"
    assert error_of(lam.add_permission, FunctionName=f"{stack}-missing", StatementId="x",
                    Action="lambda:InvokeFunction", Principal="*") == (
        "ResourceNotFoundException", f"Function not found: {arn.replace(name, f'{stack}-missing')}", 404)
    assert error_of(lam.add_permission, FunctionName=name, StatementId="x", Action="lambda:InvokeFunction",
                    Principal="*", RevisionId="wrong") == (
        "PreconditionFailedException", "The Revision Id provided does not match the latest Revision Id. Call the "
        "GetPolicy API to retrieve the latest Revision Id", 412)
    lam.add_permission(FunctionName=name, StatementId="alexa", Action="lambda:InvokeFunction",
                       Principal="alexa-appkit.amazon.com", EventSourceToken="amzn1.ask.skill.1",
                       SourceAccount="000000000000", FunctionUrlAuthType="NONE")
    assert policy(lam, name)["Statement"][1]["Condition"] == {"StringEquals": {
        "AWS:SourceAccount": "000000000000", "lambda:EventSourceToken": "amzn1.ask.skill.1",
        "lambda:FunctionUrlAuthType": "NONE"}}
    assert error_of(lam.remove_permission, FunctionName=name, StatementId="nope") == (
        "ResourceNotFoundException", "Statement nope is not found in resource policy.", 404)
    assert error_of(lam.remove_permission, FunctionName=f"{stack}-missing", StatementId="s3") == (
        "ResourceNotFoundException", f"No policy found for: {arn.replace(name, f'{stack}-missing')}", 404)
    lam.remove_permission(FunctionName=name, StatementId="s3")
    lam.remove_permission(FunctionName=name, StatementId="alexa")
    assert error_of(lam.get_policy, FunctionName=name)[0] == "ResourceNotFoundException"

    # A version has a policy of its own, on its qualified ARN.
    version = lam.publish_version(FunctionName=name)["Version"]
    lam.add_permission(FunctionName=f"{arn}:{version}", StatementId="v", Action="lambda:InvokeFunction",
                       Principal="sns.amazonaws.com")
    assert [(s["Sid"], s["Resource"]) for s in policy(lam, name, Qualifier=version)["Statement"]] == \
        [("v", f"{arn}:{version}")]
    assert error_of(lam.get_policy, FunctionName=name)[0] == "ResourceNotFoundException"
    assert error_of(lam.add_permission, FunctionName=name, Qualifier="77", StatementId="x",
                    Action="lambda:InvokeFunction", Principal="*") == (
        "ResourceNotFoundException", f"Function not found: {arn}:77", 404)

    # The policy is the function's: it survives a configuration update and goes with the function.
    lam.add_permission(FunctionName=name, StatementId="kept", Action="lambda:InvokeFunction", Principal="*")
    lam.update_function_configuration(FunctionName=name, Timeout=5)
    assert [s["Sid"] for s in policy(lam, name)["Statement"]] == ["kept"]
    lam.delete_function(FunctionName=name)
    lam.create_function(FunctionName=name, Runtime="python3.12", Role="arn:aws:iam::000000000000:role/r",
                        Handler="index.handler", Code={"ZipFile": _zip("def handler(e, c):\n    return 1\n")})
    assert error_of(lam.get_policy, FunctionName=name)[0] == "ResourceNotFoundException"
    lam.delete_function(FunctionName=name)


def _zip(source: str) -> bytes:
    import io
    import zipfile
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("index.py", source)
    return buffer.getvalue()


def test_a_permission_on_an_alias(server, lam, tmp_path, stack, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def handler(event, context):\n    return 'live'\n")
    path = tmp_path / "template.yaml"
    path.write_text(f"""
Transform: AWS::Serverless-2016-10-31
Resources:
  App:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {stack}-app
      CodeUri: src
      Handler: app.handler
      Runtime: python3.12
      AutoPublishAlias: live
  FromTopic:
    Type: AWS::Lambda::Permission
    Properties:
      FunctionName: !Ref AppAliaslive
      Action: lambda:InvokeFunction
      Principal: sns.amazonaws.com
      SourceArn: !Sub "arn:aws:sns:${{AWS::Region}}:${{AWS::AccountId}}:{stack}-topic"
""")
    code, actions, out, err = deploy(capsys, server.url, str(path), "--stack-name", stack)
    assert code == 0, err
    (statement,) = policy(lam, f"{stack}-app", Qualifier="live")["Statement"]
    assert statement["Resource"].endswith(f":function:{stack}-app:live")
    assert statement["Sid"].startswith(f"{stack}-FromTopic-")
    assert error_of(lam.get_policy, FunctionName=f"{stack}-app")[0] == "ResourceNotFoundException"
    assert deploy(capsys, server.url, str(path), "--stack-name", stack, "--delete")[0] == 0
    assert not function_exists(lam, f"{stack}-app")


def test_include_refuses_macros_cycles_and_missing_locations(tmp_path):
    from kinesim.deploy.template import TemplateError, inline_includes

    def include(location: str) -> dict:
        return {"Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": location}}}

    (tmp_path / "loop.yaml").write_text("Fn::Transform: {Name: AWS::Include, Parameters: {Location: loop.yaml}}\n")
    with pytest.raises(TemplateError, match=r"loop.yaml includes itself"):
        inline_includes({"Resources": include("loop.yaml")}, tmp_path)
    with pytest.raises(TemplateError, match=r"Fn::Transform MyMacro is not supported by kinesim deploy: it runs a "
                                            r"CloudFormation macro; only AWS::Include is inlined"):
        inline_includes({"Resources": {"Fn::Transform": {"Name": "MyMacro"}}}, tmp_path)
    with pytest.raises(TemplateError, match=r"Parameters.Location is required"):
        inline_includes({"Resources": {"Fn::Transform": {"Name": "AWS::Include"}}}, tmp_path)
    with pytest.raises(TemplateError, match=r"https://example.com/x.yaml is not a local file or an s3:// URI"):
        inline_includes({"Resources": include("https://example.com/x.yaml")}, tmp_path)
    # A snippet from a parent directory is read (as `aws cloudformation package` reads it), and the
    # map beside an Fn::Transform keeps its own keys.
    (tmp_path / "shared.yaml").write_text("A: {Type: AWS::Kinesis::Stream}\nB: {Type: AWS::Kinesis::Stream}\n")
    (tmp_path / "app").mkdir()
    out = inline_includes({"Resources": {**include("../shared.yaml"), "B": {"Type": "AWS::S3::Bucket"}}},
                          tmp_path / "app")
    assert out == {"Resources": {"A": {"Type": "AWS::Kinesis::Stream"}, "B": {"Type": "AWS::S3::Bucket"}}}
