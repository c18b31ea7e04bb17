"""What the CDK tests share (tests/test_tool_cdk*.py): the CLI's environment against a kinesim
server, the CDK installed and `cdk bootstrap` once per module, and the example app users start from
(examples/cdk-uploads): a copy of it with its node_modules, and what it must do once deployed and
once destroyed."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from conftest import client_for
from tool_setup import CDK_EXAMPLE, cdk, forwarded, run_tool, server_info, tool_env


@pytest.fixture(scope="module")
def cdk_tools():
    return cdk()


def cdk_env(tool_server, cdk_tools, home: Path, **extra: str) -> dict[str, str]:
    info = server_info(tool_server.url)
    return tool_env(tool_server.url, home, **{"AWS_REGION": info["region"], "AWS_DEFAULT_REGION": info["region"],
                                              "NODE_PATH": cdk_tools.node_modules,
                                              "PATH": f"{Path(cdk_tools.node).parent}{os.pathsep}"
                                                      f"{os.environ.get('PATH', '')}", **extra})


@pytest.fixture(scope="module")
def bootstrapped(tool_server, cdk_tools, tmp_path_factory):
    """`cdk bootstrap` of the server's account and region, once for the module's apps."""
    info = server_info(tool_server.url)
    home = tmp_path_factory.mktemp("bootstrap")
    run_tool([cdk_tools.node, cdk_tools.cli, "bootstrap", f"aws://{info['account_id']}/{info['region']}",
              "--no-notices"], cdk_env(tool_server, cdk_tools, home), cwd=home)
    return info


def example_app(tmp_path: Path, cdk_tools) -> Path:
    """The example as a user has it after `npm install`: its node_modules are the tools cache's
    (installed from its own package.json)."""
    app = tmp_path / "cdk-uploads"
    shutil.copytree(CDK_EXAMPLE, app, ignore=shutil.ignore_patterns("node_modules", "cdk.out", "cdk.context.json"))
    (app / "node_modules").symlink_to(cdk_tools.node_modules)
    return app


def check_uploads_work(url: str, stack_name: str, outputs: dict[str, str], greeting: str) -> None:
    """An upload under in/ reaches the function, which forwards it to the queue; one under raw/
    reaches the queue as S3's own event; the AwsCustomResource wrote the parameter."""
    s3, sqs, ssm = (client_for(url, s) for s in ("s3", "sqs", "ssm"))
    bucket, queue_url = outputs["BucketName"], outputs["QueueUrl"]
    s3.put_object(Bucket=bucket, Key="in/hello.txt", Body=b"hello")
    s3.put_object(Bucket=bucket, Key="raw/data.bin", Body=b"0123456789")
    messages = [m for m in forwarded(sqs, queue_url, 2, timeout=180) if m.get("Event") != "s3:TestEvent"]
    while len(messages) < 2:  # S3's test event, sent when the configuration was put, came first
        messages += forwarded(sqs, queue_url, 1, timeout=180)
    by_kind = {("function" if "key" in m else "s3"): m for m in messages}
    assert by_kind["function"] == {"key": "in/hello.txt", "size": 5, "greeting": greeting}, messages
    (record,) = by_kind["s3"]["Records"]
    assert (record["eventName"], record["s3"]["object"]["key"]) == ("ObjectCreated:Put", "raw/data.bin")
    assert ssm.get_parameter(Name=f"/{stack_name}/greeting")["Parameter"]["Value"] == greeting


def check_destroyed(url: str, stack_name: str, outputs: dict[str, str]) -> None:
    cfn, s3, lam, sqs, ssm = (client_for(url, s) for s in ("cloudformation", "s3", "lambda", "sqs", "ssm"))
    with pytest.raises(ClientError, match=f"Stack with id {stack_name} does not exist"):
        cfn.describe_stacks(StackName=stack_name)
    with pytest.raises(ClientError, match="NoSuchBucket"):  # autoDeleteObjects emptied it first
        s3.list_objects_v2(Bucket=outputs["BucketName"])
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        lam.get_function(FunctionName=outputs["FunctionName"])
    with pytest.raises(ClientError, match="NonExistentQueue|QueueDoesNotExist"):
        sqs.get_queue_attributes(QueueUrl=outputs["QueueUrl"])
    with pytest.raises(ClientError, match="ParameterNotFound"):  # the AwsCustomResource's onDelete
        ssm.get_parameter(Name=f"/{stack_name}/greeting")
    leftover = [f["FunctionName"] for f in lam.list_functions()["Functions"] if f["FunctionName"].startswith(stack_name)]
    assert leftover == []
