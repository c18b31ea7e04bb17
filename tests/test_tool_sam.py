"""The SAM CLI, unchanged, against kinesim (issue 20): `sam build` of examples/sam-stream-to-queue (a Kinesis
stream triggering a Python function that forwards records to an SQS queue, with one package from
requirements.txt), `sam deploy --resolve-s3` (the managed `aws-sam-cli-managed-default` stack and
its bucket, artifacts and template uploaded to it, a change set created and executed), a record
reaching the function, an update through a second change set, an empty redeploy, and `sam delete`.
Everything is checked through boto3 as a user would. The SAM CLI is installed by tests/tool_setup.py
into its own virtualenv in the tools cache."""
from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from tool_setup import (REGION, forwarded, outputs_of, python_runtime, run_tool, sam_cli, server_info,
                        tool_env)

APP = Path(__file__).resolve().parent.parent / "examples" / "sam-stream-to-queue"
MANAGED_STACK = "aws-sam-cli-managed-default"

# A first run installs the SAM CLI (~1-2 min); each deploy waits on stack events.
pytestmark = pytest.mark.timeout(1500)


@pytest.fixture(scope="module")
def sam() -> str:
    return sam_cli()


def sam_env(tool_server, tmp_path: Path) -> dict[str, str]:
    # `sam build` installs requirements with the runtime's interpreter found on the PATH: the
    # one running the tests (its directory also holds pip).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    # SAM_CLI_POLL_DELAY: how often `sam deploy` polls change sets and stack events (default 5 s).
    return tool_env(tool_server.url, tmp_path / "home", PATH=path, SAM_CLI_POLL_DELAY="0.5")


def describe(cfn, name: str) -> dict:
    (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
    return stack


def test_sam_build_deploy_update_and_delete(tool_server, sam, tmp_path):
    info = server_info(tool_server.url)
    runtime = python_runtime(info)
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    template = app / "template.yaml"
    template.write_text(template.read_text().replace("Runtime: python3.11", f"Runtime: {runtime}"))
    env = sam_env(tool_server, tmp_path)
    stack_name = "sam-e2e-" + uuid.uuid4().hex[:8]
    cfn, kinesis, lam, sqs, s3 = (client_for(tool_server.url, s) for s in ("cloudformation", "kinesis", "lambda",
                                                                         "sqs", "s3"))

    # sam build: the function's directory gets the requirement installed beside the handler.
    run_tool([sam, "build"], env, cwd=app, timeout=300)
    built = app / ".aws-sam" / "build" / "Forwarder"
    assert (built / "app.py").exists() and (built / "inflection.py").exists(), sorted(os.listdir(built))

    deploy = [sam, "deploy", "--resolve-s3", "--stack-name", stack_name, "--no-confirm-changeset",
              "--capabilities", "CAPABILITY_IAM", "--region", REGION, "--no-progressbar"]
    out = run_tool(deploy, env, cwd=app).stdout
    assert "Successfully created/updated stack" in out, out

    # The managed stack and its bucket, as --resolve-s3 makes them on AWS.
    managed = describe(cfn, MANAGED_STACK)
    assert managed["StackStatus"] == "CREATE_COMPLETE"
    assert {"Key": "ManagedStackSource", "Value": "AwsSamCli"} in managed["Tags"]
    bucket = outputs_of(managed)["SourceBucket"]
    assert bucket in {b["Name"] for b in s3.list_buckets()["Buckets"]}
    artifacts = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert any(k.endswith(".template") for k in artifacts) and any("." not in k for k in artifacts), artifacts

    stack = describe(cfn, stack_name)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    assert {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]} == {"Greeting": "hello"}
    outputs = outputs_of(stack)
    stream, queue_url, function = outputs["StreamName"], outputs["QueueUrl"], outputs["FunctionName"]
    assert kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["OpenShardCount"] == 1
    config = lam.get_function_configuration(FunctionName=function)
    assert config["Runtime"] == runtime and config["Environment"]["Variables"]["GREETING"] == "hello"
    (mapping,) = lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    assert mapping["EventSourceArn"].endswith(f":stream/{stream}") and mapping["State"] == "Enabled"
    code = lam.get_function(FunctionName=function)["Code"]
    assert code["RepositoryType"] == "S3"

    # A record put on the stream reaches the function, which used the built requirement.
    kinesis.put_record(StreamName=stream, Data=b"PageView", PartitionKey="k")
    (body,) = forwarded(sqs, queue_url, 1)
    assert body["greeting"] == "hello" and body["data"] == "PageView" and body["snake"] == "page_view", body

    # Update: a new parameter value, through a change set, changes the function's environment.
    out = run_tool(deploy + ["--parameter-overrides", "Greeting=bonjour"], env, cwd=app).stdout
    assert "Successfully created/updated stack" in out, out
    stack = describe(cfn, stack_name)
    assert stack["StackStatus"] == "UPDATE_COMPLETE", stack
    assert {p["ParameterKey"]: p["ParameterValue"] for p in stack["Parameters"]} == {"Greeting": "bonjour"}
    assert outputs_of(stack) == outputs, "the update replaced resources it only had to modify"
    config = lam.get_function_configuration(FunctionName=function)
    assert config["Environment"]["Variables"]["GREETING"] == "bonjour"
    change_sets = cfn.list_change_sets(StackName=stack_name)["Summaries"]
    assert all(cs["ChangeSetName"].startswith("samcli-deploy") for cs in change_sets), change_sets
    kinesis.put_record(StreamName=stream, Data=b"ClickEvent", PartitionKey="k")
    (body,) = forwarded(sqs, queue_url, 1)
    assert body["greeting"] == "bonjour" and body["snake"] == "click_event", body

    # The same deployment again: an empty change set, reported and not an error with the flag.
    # (Without --parameter-overrides the saved value is kept: UsePreviousValue.)
    res = run_tool(deploy + ["--no-fail-on-empty-changeset"], env, cwd=app)
    assert "No changes to deploy" in res.stdout + res.stderr, res.stdout + res.stderr
    assert describe(cfn, stack_name)["StackStatus"] == "UPDATE_COMPLETE"
    assert lam.get_function_configuration(FunctionName=function)["Environment"]["Variables"]["GREETING"] == "bonjour"

    # sam delete: the stack and everything it made go; the artifacts it uploaded are removed.
    out = run_tool([sam, "delete", "--stack-name", stack_name, "--no-prompts", "--region", REGION], env,
                   cwd=app).stdout
    assert "Deleted successfully" in out, out
    with pytest.raises(ClientError, match=f"Stack with id {stack_name} does not exist"):
        cfn.describe_stacks(StackName=stack_name)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        kinesis.describe_stream_summary(StreamName=stream)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        lam.get_function(FunctionName=function)
    with pytest.raises(ClientError, match="NonExistentQueue|QueueDoesNotExist"):
        sqs.get_queue_attributes(QueueUrl=queue_url)
    left = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert not any("." not in k for k in left), f"sam delete left the code artifacts: {left}"
    # The managed stack stays for the next deployment, as on AWS.
    assert describe(cfn, MANAGED_STACK)["StackStatus"] == "CREATE_COMPLETE"
