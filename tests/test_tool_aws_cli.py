"""The AWS CLI's CloudFormation commands, unchanged, against kinesim (issue 20): `aws cloudformation
deploy` of plain templates (tests/tools/cfn_app) — a producer stack exporting its stream's ARN and a
consumer stack importing it with Fn::ImportValue; a redeploy without --parameter-overrides keeping
the previous parameter values (UsePreviousValue: a ShardCount of 4 stays 4, not the Default); an
empty change set; a failing update ending UPDATE_ROLLBACK_COMPLETE with the old resources intact;
`delete-stack` + `wait stack-delete-complete`. The `aws` is the one on the PATH (or the project
venv's, or awscli v1 installed by tests/tool_setup.py); results are read with both the CLI and boto3."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import client_for, wait_for
from tool_setup import aws_cli, outputs_of, run_tool, tool_env

APP = Path(__file__).parent / "tools" / "cfn_app"
# docs/deploy.md's example template (section "Deploy with the tools you have") is the producer.
PRODUCER = (Path(__file__).resolve().parent.parent / "examples" / "stream-stack.yaml").read_text()
CONSUMER = (APP / "consumer.yaml").read_text()
# awscli 1.x's `deploy` waits on the stack with a 30 s poll after a first immediate one.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def env(tool_server, tmp_path_factory) -> dict[str, str]:
    return tool_env(tool_server.url, tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def aws(env) -> str:
    return aws_cli(env)


@pytest.fixture(scope="module")
def kinesis(tool_server):
    return client_for(tool_server.url)


def cli(aws: str, env: dict[str, str], *args: str, expect: int | None = 0):
    return run_tool([aws, *args], env, expect=expect)


_last_deploy = {"second": 0}


def deploy(aws, env, tmp_path: Path, stack: str, template: str, *args: str, expect: int | None = 0):
    path = tmp_path / f"{stack}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(template)
    # The CLI names its change set after the current second (awscli's deployer.py:
    # "awscli-cloudformation-package-deploy-" + str(int(time.time()))), and change sets stay after
    # they are executed or fail, as on AWS: a second deploy of a stack within the same second is
    # refused with AlreadyExistsException, there as here. Each deploy starts in a later second.
    wait_for(lambda: int(time.time()) > _last_deploy["second"], timeout=5, interval=0.05)
    try:
        return cli(aws, env, "cloudformation", "deploy", "--template-file", str(path), "--stack-name", stack, *args,
                   expect=expect)
    finally:
        _last_deploy["second"] = int(time.time())


def describe(aws, env, stack: str) -> dict:
    (found,) = json.loads(cli(aws, env, "cloudformation", "describe-stacks", "--stack-name", stack,
                              "--output", "json").stdout)["Stacks"]
    return found


def parameters(stack: dict) -> dict[str, str]:
    return {p["ParameterKey"]: p["ParameterValue"] for p in stack.get("Parameters", [])}


def delete(aws, env, stack: str) -> None:
    cli(aws, env, "cloudformation", "delete-stack", "--stack-name", stack)
    cli(aws, env, "cloudformation", "wait", "stack-delete-complete", "--stack-name", stack)
    res = cli(aws, env, "cloudformation", "describe-stacks", "--stack-name", stack, expect=None)
    assert res.returncode != 0 and f"Stack with id {stack} does not exist" in res.stderr, res.stderr


def summary(kinesis, stream: str) -> dict:
    return kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]


def with_stream_tags(template: str) -> str:
    """The producer with one change to its stream (a tag), so a redeploy has something to do."""
    marker = "      RetentionPeriodHours: !Ref RetentionHours\n"
    assert marker in template
    return template.replace(marker, marker + "      Tags:\n        - {Key: version, Value: '2'}\n")


def test_exports_imports_and_previous_parameter_values(aws, env, kinesis, tmp_path):
    suffix = uuid.uuid4().hex[:8]
    producer, consumer = f"producer-{suffix}", f"consumer-{suffix}"

    res = deploy(aws, env, tmp_path, producer, PRODUCER, "--parameter-overrides", "ShardCount=4")
    assert f"Successfully created/updated stack - {producer}" in res.stdout, res.stdout
    stack = describe(aws, env, producer)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    assert parameters(stack) == {"ShardCount": "4", "RetentionHours": "24"}
    outputs = outputs_of(stack)
    stream, arn = outputs["StreamName"], outputs["StreamArn"]
    assert summary(kinesis, stream)["OpenShardCount"] == 4
    assert summary(kinesis, stream)["StreamARN"] == arn
    exports = json.loads(cli(aws, env, "cloudformation", "list-exports", "--output", "json").stdout)["Exports"]
    assert {"ExportingStackId": stack["StackId"], "Name": f"{producer}-StreamArn", "Value": arn} in exports

    deploy(aws, env, tmp_path, consumer, CONSUMER, "--parameter-overrides", f"ProducerStack={producer}")
    consumer_stack = describe(aws, env, consumer)
    assert consumer_stack["StackStatus"] == "CREATE_COMPLETE", consumer_stack
    (reader,) = kinesis.list_stream_consumers(StreamARN=arn)["Consumers"]
    assert reader["ConsumerName"] == f"{consumer}-reader"
    assert outputs_of(consumer_stack)["ConsumerArn"] == reader["ConsumerARN"]
    imports = json.loads(cli(aws, env, "cloudformation", "list-imports", "--export-name", f"{producer}-StreamArn",
                             "--output", "json").stdout)["Imports"]
    assert imports == [consumer]

    # A redeploy without --parameter-overrides sends UsePreviousValue for every parameter: the
    # shard count set to 4 stays 4 (the template's Default is 1).
    updated = with_stream_tags(PRODUCER)
    res = deploy(aws, env, tmp_path, producer, updated)
    assert f"Successfully created/updated stack - {producer}" in res.stdout, res.stdout
    stack = describe(aws, env, producer)
    assert stack["StackStatus"] == "UPDATE_COMPLETE", stack
    assert parameters(stack) == {"ShardCount": "4", "RetentionHours": "24"}
    assert outputs_of(stack) == outputs
    assert summary(kinesis, stream)["OpenShardCount"] == 4
    assert {"Key": "version", "Value": "2"} in kinesis.list_tags_for_stream(StreamName=stream)["Tags"]

    # The same again: an empty change set fails `deploy` (awscli 1.x) unless told not to.
    res = deploy(aws, env, tmp_path, producer, updated, expect=255)
    assert f"No changes to deploy. Stack {producer} is up to date" in res.stdout + res.stderr, res.stdout + res.stderr
    res = deploy(aws, env, tmp_path, producer, updated, "--no-fail-on-empty-changeset")
    assert "No changes to deploy" in res.stdout + res.stderr
    assert describe(aws, env, producer)["StackStatus"] == "UPDATE_COMPLETE"

    # The importer goes first; then the exporter, its stream and its export.
    delete(aws, env, consumer)
    assert kinesis.list_stream_consumers(StreamARN=arn)["Consumers"] == []
    delete(aws, env, producer)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        summary(kinesis, stream)
    exports = json.loads(cli(aws, env, "cloudformation", "list-exports", "--output", "json").stdout)["Exports"]
    assert not any(e["Name"] == f"{producer}-StreamArn" for e in exports), exports


FAILING_RESOURCES = """\
  Extra:
    Type: AWS::Kinesis::Stream
    Properties:
      ShardCount: 1
  Broken:
    Type: AWS::Kinesis::Stream
    DependsOn: [Stream, Extra]
    Properties:
      ShardCount: 1
      RetentionPeriodHours: 9000

"""


def test_failed_update_rolls_back_to_the_old_resources(aws, env, kinesis, tmp_path):
    name = f"rollback-{uuid.uuid4().hex[:8]}"
    deploy(aws, env, tmp_path, name, PRODUCER)
    before = describe(aws, env, name)
    stream = outputs_of(before)["StreamName"]
    kinesis.put_record(StreamName=stream, Data=b"kept", PartitionKey="k")

    # The update raises the stream's retention, adds a stream, then fails on a retention above
    # the 8760-hour maximum: everything returns to the previous template and parameters.
    broken = PRODUCER.replace("Outputs:", FAILING_RESOURCES + "Outputs:")
    res = deploy(aws, env, tmp_path, name, broken, "--parameter-overrides", "RetentionHours=48", expect=255)
    assert "Failed to create/update the stack" in res.stdout + res.stderr, res.stdout + res.stderr

    after = describe(aws, env, name)
    assert after["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE", after
    assert after["StackId"] == before["StackId"]
    assert parameters(after) == {"ShardCount": "1", "RetentionHours": "24"}
    assert outputs_of(after) == outputs_of(before)
    assert summary(kinesis, stream)["RetentionPeriodHours"] == 24
    shard = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard,
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]] == [b"kept"]

    resources = json.loads(cli(aws, env, "cloudformation", "list-stack-resources", "--stack-name", name,
                               "--output", "json").stdout)["StackResourceSummaries"]
    assert [r["LogicalResourceId"] for r in resources] == ["Stream"], resources

    events = json.loads(cli(aws, env, "cloudformation", "describe-stack-events", "--stack-name", name,
                            "--output", "json").stdout)["StackEvents"]
    statuses = [(e["LogicalResourceId"], e["ResourceStatus"]) for e in events]
    assert statuses[0] == (name, "UPDATE_ROLLBACK_COMPLETE"), statuses  # newest first
    assert ("Broken", "CREATE_FAILED") in statuses and ("Extra", "DELETE_COMPLETE") in statuses, statuses
    extra = next(e["PhysicalResourceId"] for e in events
                 if e["LogicalResourceId"] == "Extra" and e["ResourceStatus"] == "CREATE_COMPLETE")
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        summary(kinesis, extra)

    delete(aws, env, name)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        summary(kinesis, stream)
