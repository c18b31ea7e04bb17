"""The example app users start from (examples/cdk-uploads, issue 31), in TypeScript, deployed with the
CDK CLI unchanged: every construct in it hides a custom resource the CDK adds (bucket notifications
to a function and a queue, autoDeleteObjects, logRetention, an AwsCustomResource and a
Provider-backed resource); it deploys, works (an upload reaches the function), updates, and `cdk
destroy` removes everything, the objects it must delete included. A file of its own, so that the
test processes run it beside the other CDK tests."""
from __future__ import annotations

import uuid

import pytest

from cdk_apps import (bootstrapped, cdk_env, cdk_tools, check_destroyed, check_uploads_work,  # noqa: F401
                      example_app)
from conftest import client_for
from tool_setup import outputs_of, run_tool

pytestmark = pytest.mark.timeout(1500)


def test_example_app_in_typescript(tool_server, cdk_tools, bootstrapped, tmp_path):
    app = example_app(tmp_path, cdk_tools)
    stack_name = "cdk-uploads-" + uuid.uuid4().hex[:8]
    # ts-node without its type check (the compiler's job, not kinesim's): 40 s instead of minutes here.
    env = cdk_env(tool_server, cdk_tools, tmp_path / "home", STACK_NAME=stack_name, TS_NODE_TRANSPILE_ONLY="true")
    cli = [cdk_tools.node, cdk_tools.cli]
    cfn, logs = client_for(tool_server.url, "cloudformation"), client_for(tool_server.url, "logs")

    run_tool(cli + ["deploy", "--require-approval", "never", "--no-notices"], env, cwd=app)
    (stack,) = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    outputs = outputs_of(stack)
    assert outputs["Loud"] == "HELLO!"  # the Provider-backed resource's Data
    types = {r["ResourceType"] for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]}
    assert {"Custom::S3BucketNotifications", "Custom::S3AutoDeleteObjects", "Custom::LogRetention", "Custom::AWS",
            "AWS::CloudFormation::CustomResource"} <= types
    group = f"/aws/lambda/{outputs['FunctionName']}"
    (found,) = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    assert found["retentionInDays"] == 7  # logRetention, through Custom::LogRetention
    check_uploads_work(tool_server.url, stack_name, outputs, "hello")

    # An update: the function's environment, the SDK call's parameters and the Provider's resource
    # (a new physical id: the old one is deleted in the clean-up phase) change with the context.
    run_tool(cli + ["deploy", "--require-approval", "never", "--no-notices", "-c", "greeting=bonjour"], env, cwd=app)
    (stack,) = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    outputs = outputs_of(stack)
    assert outputs["Loud"] == "BONJOUR!"
    loud = [r for r in cfn.describe_stack_resources(StackName=stack_name)["StackResources"]
            if r["LogicalResourceId"] == "LoudGreeting"]
    assert loud[0]["PhysicalResourceId"] == "shout-bonjour"
    check_uploads_work(tool_server.url, stack_name, outputs, "bonjour")

    run_tool(cli + ["destroy", "--force", "--no-notices"], env, cwd=app)  # the bucket still holds objects
    check_destroyed(tool_server.url, stack_name, outputs)
