"""The AWS CDK CLI, unchanged, against kinesim (issue 20): `cdk bootstrap aws://ACCOUNT/REGION` (the
CDKToolkit stack from the CLI's own template: staging bucket, roles, the version parameter in SSM),
`cdk deploy --require-approval never` of tests/tools/cdk_app (a JavaScript app: a Kinesis stream
triggering a Python function, code published as a file asset, that forwards records to an SQS
queue), a record reaching the function, and `cdk destroy --force`. Account and region are the
server's (/_kinesim/health). The CLI, aws-cdk-lib and constructs are installed from npm by
tests/tool_setup.py into the tools cache; the app finds them through NODE_PATH."""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from cdk_apps import bootstrapped, cdk_env, cdk_tools  # noqa: F401 - fixtures
from conftest import client_for
from tool_setup import forwarded, outputs_of, python_runtime, run_tool

APP = Path(__file__).parent / "tools" / "cdk_app"
TOOLKIT_STACK = "CDKToolkit"

# A first run installs the CDK (~10-20 s); each CLI run synthesizes the app with node (~10 s here).
pytestmark = pytest.mark.timeout(1500)


def test_cdk_bootstrap_deploy_and_destroy(tool_server, cdk_tools, bootstrapped, tmp_path):
    info = bootstrapped
    account, region = info["account_id"], info["region"]
    app = tmp_path / "app"  # the CLI writes cdk.out/ and cdk.context.json beside cdk.json
    shutil.copytree(APP, app)
    stack_name = "cdk-e2e-" + uuid.uuid4().hex[:8]
    env = cdk_env(tool_server, cdk_tools, tmp_path / "home", KINESIM_CDK_STACK=stack_name,
                  KINESIM_CDK_RUNTIME=python_runtime(info))
    cli = [cdk_tools.node, cdk_tools.cli]
    cfn, kinesis, lam, sqs, s3, ssm = (client_for(tool_server.url, s) for s in ("cloudformation", "kinesis", "lambda",
                                                                              "sqs", "s3", "ssm"))

    (toolkit,) = cfn.describe_stacks(StackName=TOOLKIT_STACK)["Stacks"]
    assert toolkit["StackStatus"] == "CREATE_COMPLETE", toolkit
    toolkit_outputs = outputs_of(toolkit)
    bucket = toolkit_outputs["BucketName"]
    assert bucket == f"cdk-hnb659fds-assets-{account}-{region}"
    assert s3.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    version = ssm.get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]["Value"]
    assert version == toolkit_outputs["BootstrapVersion"] and int(version) >= 6

    run_tool(cli + ["deploy", "--require-approval", "never", "--no-notices"], env, cwd=app)
    (stack,) = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    # The SSM-typed parameter every CDK stack has: its value is the parameter's name, resolved.
    (param,) = stack["Parameters"]
    assert param["ParameterKey"] == "BootstrapVersion" and param["ResolvedValue"] == version, param
    outputs = outputs_of(stack)
    stream, queue_url, function = outputs["StreamName"], outputs["QueueUrl"], outputs["FunctionName"]
    assert kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"
    (mapping,) = lam.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    assert mapping["EventSourceArn"].endswith(f":stream/{stream}")
    # The assets the CLI published: the function's zipped code and the stack template.
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}
    assert any(k.endswith(".zip") for k in keys) and any(k.endswith(".json") for k in keys), keys

    kinesis.put_record(StreamName=stream, Data=b"from-cdk", PartitionKey="k")
    (body,) = forwarded(sqs, queue_url, 1)
    assert body == {"data": "from-cdk", "function": function}, body

    run_tool(cli + ["destroy", "--force", "--no-notices"], env, cwd=app)
    with pytest.raises(ClientError, match=f"Stack with id {stack_name} does not exist"):
        cfn.describe_stacks(StackName=stack_name)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        lam.get_function(FunctionName=function)
    with pytest.raises(ClientError, match="NonExistentQueue|QueueDoesNotExist"):
        sqs.get_queue_attributes(QueueUrl=queue_url)
    # kinesis.Stream's default removal policy is RETAIN (DeletionPolicy: Retain): it outlives the stack.
    assert kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE"
    (toolkit,) = cfn.describe_stacks(StackName=TOOLKIT_STACK)["Stacks"]
    assert toolkit["StackStatus"] == "CREATE_COMPLETE"


def test_cdk_bootstrap_of_two_environments(tool_server, cdk_tools, tmp_path):
    """`cdk bootstrap` of two accounts in two regions (issue 34): each environment gets its own
    CDKToolkit stack, staging bucket and version parameter, as on AWS. The CLI's credentials are
    the environment's account (a 12-digit key id is the account in kinesim)."""
    for account, region in (("111111111111", "eu-west-1"), ("222222222222", "us-west-2")):
        env = cdk_env(tool_server, cdk_tools, tmp_path / account, AWS_ACCESS_KEY_ID=account,
                      AWS_REGION=region, AWS_DEFAULT_REGION=region)
        run_tool([cdk_tools.node, cdk_tools.cli, "bootstrap", f"aws://{account}/{region}", "--no-notices"],
                 env, cwd=tmp_path / account)
    for account, region in (("111111111111", "eu-west-1"), ("222222222222", "us-west-2")):
        kw = dict(endpoint_url=tool_server.url, region_name=region, aws_access_key_id=account,
                  aws_secret_access_key="x")
        stack = boto3.client("cloudformation", **kw).describe_stacks(StackName=TOOLKIT_STACK)["Stacks"][0]
        assert stack["StackId"].startswith(f"arn:aws:cloudformation:{region}:{account}:stack/{TOOLKIT_STACK}/")
        bucket = next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "BucketName")
        assert bucket == f"cdk-hnb659fds-assets-{account}-{region}"
        boto3.client("s3", **kw).head_bucket(Bucket=bucket)
        boto3.client("ssm", **kw).get_parameter(Name="/cdk-bootstrap/hnb659fds/version")
        # the other environment's bucket is not this account's
        other = "222222222222" if account == "111111111111" else "111111111111"
        names = [b["Name"] for b in boto3.client("s3", **kw).list_buckets()["Buckets"]]
        assert bucket in names and not any(other in name for name in names)
