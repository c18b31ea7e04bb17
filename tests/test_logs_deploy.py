"""`kinesim deploy` of AWS::Logs::LogGroup and AWS::Logs::LogStream against the real server: retention
and tags applied, Fn::GetAtt Arn as CloudFormation gives it, a function's `/aws/lambda/F` group
whether it or the function's first log line comes first."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from conftest import client_for
from kinesim.deploy import cli

ACCOUNT = "000000000000"

FUNCTION = """
  Fn:
    Type: AWS::Lambda::Function
    {depends}
    Properties:
      FunctionName: {stack}-fn
      Runtime: python3.11
      Handler: index.handler
      Role: arn:aws:iam::000000000000:role/r
      Code:
        ZipFile: |
          def handler(event, context):
              print("handled", event["n"])
              return event["n"]
"""


def deploy(capsys, url: str, template, stack: str, *extra: str) -> tuple[int, str, str]:
    code = cli.main([str(template), "--stack-name", stack, *extra, "--endpoint-url", url])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def stack():
    return "lg" + uuid.uuid4().hex[:10]


@pytest.fixture
def clients(server):
    return client_for(server.url, "logs"), client_for(server.url, "lambda")


def group_of(logs, name: str) -> dict | None:
    found = [g for g in logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"] if g["logGroupName"] == name]
    return found[0] if found else None


def wait_for_message(logs, group: str, text: str, timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        try:
            messages = [e["message"] for e in logs.filter_log_events(logGroupName=group, filterPattern=f'"{text}"')
                        ["events"]]
        except logs.exceptions.ResourceNotFoundException:
            messages = []
        if messages or time.monotonic() > deadline:
            return messages
        time.sleep(0.2)


def test_log_groups_with_retention_tags_and_a_stream(server, clients, tmp_path, stack, capsys):
    logs, lam = clients
    template = tmp_path / "template.yaml"
    template.write_text(f"""
Resources:
{FUNCTION.format(stack=stack, depends="DependsOn: FnLogs")}
  FnLogs:
    Type: AWS::Logs::LogGroup
    Properties:
      LogGroupName: /aws/lambda/{stack}-fn
      RetentionInDays: 7
      Tags: [{{Key: team, Value: data}}]
  AppLogs:
    Type: AWS::Logs::LogGroup
    Properties:
      RetentionInDays: 1
  Audit:
    Type: AWS::Logs::LogStream
    Properties:
      LogGroupName: !Ref AppLogs
      LogStreamName: audit
Outputs:
  FnLogsArn: {{Value: !GetAtt FnLogs.Arn}}
  AppLogsName: {{Value: !Ref AppLogs}}
""")
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    fn_group = f"/aws/lambda/{stack}-fn"
    outputs = dict(line.split() for line in out.split("Outputs:\n")[1].splitlines() if line.startswith("  "))
    assert outputs["FnLogsArn"] == f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:{fn_group}:*"
    described = group_of(logs, fn_group)
    assert described["retentionInDays"] == 7
    assert logs.list_tags_log_group(logGroupName=fn_group)["tags"] == {"team": "data"}
    app = [g for g in logs.describe_log_groups(logGroupNamePrefix=f"{stack}-AppLogs-")["logGroups"]]
    assert len(app) == 1 and app[0]["retentionInDays"] == 1 and outputs["AppLogsName"] == app[0]["logGroupName"]
    streams = logs.describe_log_streams(logGroupName=app[0]["logGroupName"])["logStreams"]
    assert [s["logStreamName"] for s in streams] == ["audit"]
    # The function logs into the group the template made.
    lam.invoke(FunctionName=f"{stack}-fn", Payload=json.dumps({"n": 41}).encode())
    assert wait_for_message(logs, fn_group, "handled 41") == ["handled 41\n"]
    assert group_of(logs, fn_group)["retentionInDays"] == 7
    # Deleting the stack deletes its groups.
    code, out, err = deploy(capsys, server.url, template, stack, "--delete")
    assert code == 0, err
    assert group_of(logs, fn_group) is None and group_of(logs, app[0]["logGroupName"]) is None


def test_function_group_after_the_function_has_logged(server, clients, tmp_path, stack, capsys):
    logs, lam = clients
    fn_group = f"/aws/lambda/{stack}-fn"
    template = tmp_path / "template.yaml"
    template.write_text(f"Resources:\n{FUNCTION.format(stack=stack, depends='')}")
    assert deploy(capsys, server.url, template, stack)[0] == 0
    lam.invoke(FunctionName=f"{stack}-fn", Payload=json.dumps({"n": 1}).encode())
    assert wait_for_message(logs, fn_group, "handled 1") == ["handled 1\n"]
    assert "retentionInDays" not in group_of(logs, fn_group)

    # The common pattern: the group named after the function (so made after it), with a retention.
    with_group = template.read_text() + """
  FnLogs:
    Type: AWS::Logs::LogGroup
    Properties:
      LogGroupName: !Sub "/aws/lambda/${Fn}"
      RetentionInDays: %s
"""
    template.write_text(with_group % 3)
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    assert group_of(logs, fn_group)["retentionInDays"] == 3
    assert wait_for_message(logs, fn_group, "handled 1") == ["handled 1\n"]  # what it logged before stays
    template.write_text(with_group % 5)
    code, out, err = deploy(capsys, server.url, template, stack)
    assert code == 0, err
    assert group_of(logs, fn_group)["retentionInDays"] == 5
    assert deploy(capsys, server.url, template, stack, "--delete")[0] == 0
    assert group_of(logs, fn_group) is None
