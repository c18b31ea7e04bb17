"""Nested stacks (AWS::CloudFormation::Stack) through the real server's CloudFormation API: a
child made from a TemplateURL in kinesim's S3, its outputs read by the parent (Fn::GetAtt
Child.Outputs.X), updated through the parent, rolled back and deleted with it; and `kinesim
deploy` of a parent whose TemplateURL is a local file (packaged recursively)."""
from __future__ import annotations

import json
import re
import uuid

import pytest
from botocore.exceptions import ClientError

from kinesim.deploy.package import package_template
from kinesim.deploy.template import load_template

from conftest import client_for, wait_for
from test_deploy import deploy, s3_client, stream_exists

CHILD = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Prefix: {Type: String}
  Visibility: {Type: Number, Default: "30"}
  Zones: {Type: CommaDelimitedList, Default: "a,b"}
Resources:
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {Name: !Sub "${Prefix}-stream", ShardCount: 1}
  Queue:
    Type: AWS::SQS::Queue
    Properties: {QueueName: !Sub "${Prefix}-queue", VisibilityTimeout: !Ref Visibility}
Outputs:
  StreamArn: {Value: !GetAtt Stream.Arn}
  QueueUrl: {Value: !Ref Queue}
  Visibility: {Value: !Ref Visibility}
  Zones: {Value: !Join ["+", !Ref Zones]}
"""

PARENT = """
AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  ChildUrl: {Type: String}
  Prefix: {Type: String}
  Visibility: {Type: String, Default: "30"}
Resources:
  Child:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: !Ref ChildUrl
      Parameters:
        Prefix: !Ref Prefix
        Visibility: !Ref Visibility
        Zones: [x, y, z]
      Tags: [{Key: team, Value: data}]
Outputs:
  ChildId: {Value: !Ref Child}
  StreamArn: {Value: !GetAtt Child.Outputs.StreamArn}
  Visibility: {Value: !Sub "visibility ${Child.Outputs.Visibility}"}
  Zones: {Value: !GetAtt [Child, Outputs.Zones]}
"""


@pytest.fixture(scope="module")
def cfn(server):
    return client_for(server.url, "cloudformation")


@pytest.fixture(scope="module")
def s3(server):
    return s3_client(server.url)


@pytest.fixture(scope="module")
def sqs(server):
    return client_for(server.url, "sqs")


@pytest.fixture(scope="module")
def bucket(s3):
    name = "nested-" + uuid.uuid4().hex[:10]
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def name():
    return "n" + uuid.uuid4().hex[:10]


def upload(server, s3, bucket: str, key: str, body: str) -> str:
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    return f"{server.url}/{bucket}/{key}"


def settled(cfn, stack: str, timeout: float = 120.0) -> dict:
    """The stack once no operation is under way on it."""
    def done():
        found = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        return found if not found["StackStatus"].endswith("_IN_PROGRESS") else None
    return wait_for(done, timeout)


def outputs(stack: dict) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs") or []}


def parameters(**values: str) -> list[dict]:
    return [{"ParameterKey": k, "ParameterValue": v} for k, v in values.items()]


def child_of(cfn, parent: str) -> dict:
    resource = cfn.describe_stack_resource(StackName=parent, LogicalResourceId="Child")["StackResourceDetail"]
    assert resource["ResourceType"] == "AWS::CloudFormation::Stack"
    return cfn.describe_stacks(StackName=resource["PhysicalResourceId"])["Stacks"][0]


def visibility(sqs, queue_url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"]


def test_child_is_created_updated_and_deleted_with_its_parent(server, cfn, s3, sqs, kinesis, bucket, name):
    url = upload(server, s3, bucket, f"{name}/child.yaml", CHILD)
    cfn.create_stack(StackName=name, TemplateBody=PARENT, Parameters=parameters(ChildUrl=url, Prefix=name))
    parent = settled(cfn, name)
    assert parent["StackStatus"] == "CREATE_COMPLETE", parent.get("StackStatusReason")

    # The child: named as CloudFormation names nested stacks, its id the parent's Ref.
    child = child_of(cfn, name)
    assert re.fullmatch(rf"{name}-Child-[A-Z0-9]{{12}}", child["StackName"])
    assert child["StackStatus"] == "CREATE_COMPLETE"
    assert child["Tags"] == [{"Key": "team", "Value": "data"}]
    assert {p["ParameterKey"]: p["ParameterValue"] for p in child["Parameters"]} == {
        "Prefix": name, "Visibility": "30", "Zones": "x,y,z"}
    assert set(child["Capabilities"]) == {"CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"}
    stream_arn = kinesis.describe_stream_summary(StreamName=f"{name}-stream")["StreamDescriptionSummary"]["StreamARN"]
    queue_url = outputs(child)["QueueUrl"]
    assert queue_url == sqs.get_queue_url(QueueName=f"{name}-queue")["QueueUrl"]
    assert outputs(parent) == {"ChildId": child["StackId"], "StreamArn": stream_arn,
                               "Visibility": "visibility 30", "Zones": "x+y+z"}

    # A parent update with nothing to change leaves the child alone.
    with pytest.raises(ClientError, match="No updates are to be performed."):
        cfn.update_stack(StackName=name, UsePreviousTemplate=True,
                         Parameters=parameters(ChildUrl=url, Prefix=name))

    # A changed parameter reaches the child: updated in place, the parent's outputs with it.
    cfn.update_stack(StackName=name, UsePreviousTemplate=True,
                     Parameters=parameters(ChildUrl=url, Prefix=name, Visibility="45"))
    parent = settled(cfn, name)
    assert parent["StackStatus"] == "UPDATE_COMPLETE", parent.get("StackStatusReason")
    updated = child_of(cfn, name)
    assert updated["StackId"] == child["StackId"] and updated["StackStatus"] == "UPDATE_COMPLETE"
    assert visibility(sqs, queue_url) == "45"
    assert outputs(parent)["Visibility"] == "visibility 45"

    # The same TemplateURL and parameters, another template behind the URL: an update of the parent
    # updates the child too (CloudFormation initiates an update of its nested stacks with every
    # update of the parent).
    extra = "  Extra:\n    Type: AWS::SQS::Queue\n    Properties: {QueueName: !Sub \"${Prefix}-extra\"}\n"
    upload(server, s3, bucket, f"{name}/child.yaml", CHILD.replace("Outputs:\n", extra + "Outputs:\n"))
    cfn.update_stack(StackName=name, TemplateBody=PARENT + "  Note: {Value: more}\n",
                     Parameters=parameters(ChildUrl=url, Prefix=name, Visibility="45"))
    assert settled(cfn, name)["StackStatus"] == "UPDATE_COMPLETE"
    assert sqs.get_queue_url(QueueName=f"{name}-extra")["QueueUrl"]

    # Deleting the parent deletes the child, and what the child made.
    cfn.delete_stack(StackName=name)
    assert settled(cfn, parent["StackId"])["StackStatus"] == "DELETE_COMPLETE"
    assert cfn.describe_stacks(StackName=child["StackId"])["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
    with pytest.raises(ClientError, match=f"Stack with id {child['StackName']} does not exist"):
        cfn.describe_stacks(StackName=child["StackName"])
    assert not stream_exists(kinesis, f"{name}-stream")
    for queue in ("queue", "extra"):
        with pytest.raises(ClientError, match="NonExistentQueue"):
            sqs.get_queue_url(QueueName=f"{name}-{queue}")


def test_a_child_that_fails_rolls_the_parent_back_and_is_deleted(server, cfn, s3, sqs, kinesis, bucket, name):
    # 99999 s is beyond SQS's largest visibility timeout (12 hours): the child's queue cannot be
    # created, after its stream was.
    url = upload(server, s3, bucket, f"{name}/child.yaml",
                 CHILD.replace("Properties: {QueueName", "DependsOn: Stream\n    Properties: {QueueName"))
    cfn.create_stack(StackName=name, TemplateBody=PARENT,
                     Parameters=parameters(ChildUrl=url, Prefix=name, Visibility="99999"))
    parent = settled(cfn, name)
    assert parent["StackStatus"] == "ROLLBACK_COMPLETE"
    assert parent["StackStatusReason"] == "The following resource(s) failed to create: [Child]. "

    events = cfn.describe_stack_events(StackName=name)["StackEvents"]
    failed = [e for e in events if e["LogicalResourceId"] == "Child" and e["ResourceStatus"] == "CREATE_FAILED"]
    assert len(failed) == 1
    match = re.search(r"Embedded stack (arn:aws:cloudformation:us-east-1:\d+:stack/"
                      rf"({name}-Child-[A-Z0-9]{{12}})/[-0-9a-f]+) was not successfully created: "
                      r"The following resource\(s\) failed to create: \[Queue\]\.", failed[0]["ResourceStatusReason"])
    assert match, failed[0]["ResourceStatusReason"]
    child_id, child_name = match.groups()

    # The child rolled back (its stream deleted), then the parent's rollback deleted it.
    assert cfn.describe_stacks(StackName=child_id)["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
    with pytest.raises(ClientError, match=f"Stack with id {child_name} does not exist"):
        cfn.describe_stacks(StackName=child_name)
    child_events = [e["ResourceStatus"] for e in cfn.describe_stack_events(StackName=child_id)["StackEvents"]
                    if e["LogicalResourceId"] == child_name]
    assert child_events[:3] == ["DELETE_COMPLETE", "DELETE_IN_PROGRESS", "ROLLBACK_COMPLETE"]
    assert not stream_exists(kinesis, f"{name}-stream")
    with pytest.raises(ClientError, match="NonExistentQueue"):
        sqs.get_queue_url(QueueName=f"{name}-queue")
    cfn.delete_stack(StackName=name)


def test_a_failed_child_update_rolls_both_back(server, cfn, s3, sqs, bucket, name):
    url = upload(server, s3, bucket, f"{name}/child.yaml", CHILD)
    cfn.create_stack(StackName=name, TemplateBody=PARENT, Parameters=parameters(ChildUrl=url, Prefix=name))
    assert settled(cfn, name)["StackStatus"] == "CREATE_COMPLETE"
    child = child_of(cfn, name)
    queue_url = outputs(child)["QueueUrl"]

    # 99999 s is beyond SQS's largest visibility timeout (12 hours): the child's update fails.
    cfn.update_stack(StackName=name, UsePreviousTemplate=True,
                     Parameters=parameters(ChildUrl=url, Prefix=name, Visibility="99999"))
    parent = settled(cfn, name)
    assert parent["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    events = cfn.describe_stack_events(StackName=name)["StackEvents"]
    failed = [e for e in events if e["LogicalResourceId"] == "Child" and e["ResourceStatus"] == "UPDATE_FAILED"]
    assert f"Embedded stack {child['StackId']} was not successfully updated. Currently in " \
           "UPDATE_ROLLBACK_IN_PROGRESS with reason: The following resource(s) failed to update: [Queue]." \
           in failed[0]["ResourceStatusReason"]
    assert child_of(cfn, name)["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert visibility(sqs, queue_url) == "30"
    assert outputs(parent)["Visibility"] == "visibility 30"

    # An output the child does not have: the parent's update fails, and rolls back.
    cfn.update_stack(StackName=name, TemplateBody=PARENT.replace("Outputs.Zones", "Outputs.Missing"),
                     Parameters=parameters(ChildUrl=url, Prefix=name))
    parent = settled(cfn, name)
    assert parent["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert "resource Child does not support attribute type Outputs.Missing in Fn::GetAtt" in \
           parent["StackStatusReason"] + json.dumps(cfn.describe_stack_events(StackName=name)["StackEvents"],
                                                      default=str)
    cfn.delete_stack(StackName=name)
    assert settled(cfn, parent["StackId"])["StackStatus"] == "DELETE_COMPLETE"
    assert cfn.describe_stacks(StackName=child["StackId"])["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"


def test_getatt_of_an_output_passes_the_template_check(server, cfn):
    template = PARENT.replace("!Ref ChildUrl", "https://s3.amazonaws.com/nowhere/child.yaml")
    body = cfn.validate_template(TemplateBody=template)
    assert [p["ParameterKey"] for p in body["Parameters"]] == ["ChildUrl", "Prefix", "Visibility"]
    bad = PARENT.replace("Child.Outputs.StreamArn", "Child.StreamArn")
    with pytest.raises(ClientError, match="does not support attribute type StreamArn in Fn::GetAtt"):
        cfn.create_stack(StackName="n" + uuid.uuid4().hex[:10], TemplateBody=bad,
                         Parameters=parameters(ChildUrl="https://s3.amazonaws.com/b/k", Prefix="p"))


# kinesim deploy: a local TemplateURL, packaged as `aws cloudformation package` packages it


LOCAL_PARENT = """
Resources:
  Child:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: nested/child.yaml
      Parameters: {Prefix: !Ref AWS::StackName}
Outputs:
  Answer: {Value: !GetAtt Child.Outputs.Answer}
"""

LOCAL_CHILD = """
Parameters:
  Prefix: {Type: String}
Resources:
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      FunctionName: !Sub "${Prefix}-fn"
      Runtime: python3.12
      Handler: index.handler
      Role: arn:aws:iam::000000000000:role/r
      Code: src/
Outputs:
  Answer: {Value: !Ref Fn}
"""


def local_project(tmp_path, answer: str):
    (tmp_path / "nested" / "src").mkdir(parents=True, exist_ok=True)
    (tmp_path / "template.yaml").write_text(LOCAL_PARENT)
    (tmp_path / "nested" / "child.yaml").write_text(LOCAL_CHILD)
    (tmp_path / "nested" / "src" / "index.py").write_text(
        f"def handler(event, context):\n    return {{'answer': {answer!r}}}\n")
    return tmp_path / "template.yaml"


def test_kinesim_deploy_packages_a_local_nested_template(server, cfn, tmp_path, name, capsys):
    lam = client_for(server.url, "lambda")
    path = local_project(tmp_path, "first")
    code, actions, _, err = deploy(capsys, server.url, str(path), "--stack-name", name)
    assert code == 0, err
    assert actions == {"Child": "created"}
    child = child_of(cfn, name)
    body = cfn.get_template(StackName=name)["TemplateBody"]  # boto3 gives a JSON body parsed
    template_url = (json.loads(body) if isinstance(body, str) else body)["Resources"]["Child"]["Properties"][
        "TemplateURL"]
    assert re.fullmatch(r"https?://.+/kinesim-deploy-artifacts-\d+-us-east-1/[0-9a-f]{64}\.template", template_url)
    assert outputs(cfn.describe_stacks(StackName=name)["Stacks"][0]) == {"Answer": f"{name}-fn"}
    result = json.loads(lam.invoke(FunctionName=f"{name}-fn", Payload=b"{}")["Payload"].read())
    assert result == {"answer": "first"}

    # The child's code changed: a new packaged template, a new URL, the child's function updated.
    local_project(tmp_path, "second")
    code, actions, _, err = deploy(capsys, server.url, str(path), "--stack-name", name)
    assert code == 0, err
    assert actions == {"Child": "updated"}
    assert child_of(cfn, name)["StackId"] == child["StackId"]
    result = json.loads(lam.invoke(FunctionName=f"{name}-fn", Payload=b"{}")["Payload"].read())
    assert result == {"answer": "second"}

    code, actions, _, err = deploy(capsys, server.url, str(path), "--stack-name", name, "--delete")
    assert code == 0, err
    assert cfn.describe_stacks(StackName=child["StackId"])["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        lam.get_function(FunctionName=f"{name}-fn")


def test_package_names_a_nested_template_by_the_servers_url(server, s3, tmp_path):
    path = local_project(tmp_path, "x")
    bucket = "pkg-" + uuid.uuid4().hex[:10]
    packaged = package_template(load_template(path), tmp_path, s3, bucket, server.url)
    template_url = packaged["Resources"]["Child"]["Properties"]["TemplateURL"]
    prefix = f"{server.url}/{bucket}/"
    assert template_url.startswith(prefix) and template_url.endswith(".template")
    child = json.loads(s3.get_object(Bucket=bucket, Key=template_url[len(prefix):])["Body"].read())
    code = child["Resources"]["Fn"]["Properties"]["Code"]
    assert code["S3Bucket"] == bucket and s3.head_object(Bucket=bucket, Key=code["S3Key"])
    # The same files, the same key: an unchanged child is not updated.
    again = package_template(load_template(path), tmp_path, s3, bucket, server.url)
    assert again["Resources"]["Child"]["Properties"]["TemplateURL"] == template_url
    # A template that nests itself is refused.
    (tmp_path / "nested" / "child.yaml").write_text(LOCAL_PARENT.replace("nested/child.yaml", "child.yaml"))
    with pytest.raises(Exception, match="nests itself"):
        package_template(load_template(path), tmp_path, s3, bucket, server.url)


SAM_PARENT = """
Transform: AWS::Serverless-2016-10-31
Resources:
  App:
    Type: AWS::Serverless::Application
    Properties:
      Location: nested/child.yaml
      Parameters: {Prefix: !Ref AWS::StackName}
Outputs:
  Answer: {Value: !GetAtt App.Outputs.Answer}
"""


def test_kinesim_deploy_packages_a_local_serverless_application(server, cfn, tmp_path, name, capsys):
    path = local_project(tmp_path, "sam")
    path.write_text(SAM_PARENT)
    code, actions, _, err = deploy(capsys, server.url, str(path), "--stack-name", name)
    assert code == 0, err
    assert actions == {"App": "created"}
    assert outputs(cfn.describe_stacks(StackName=name)["Stacks"][0]) == {"Answer": f"{name}-fn"}
    child = cfn.describe_stacks(StackName=cfn.describe_stack_resource(
        StackName=name, LogicalResourceId="App")["StackResourceDetail"]["PhysicalResourceId"])["Stacks"][0]
    assert re.fullmatch(rf"{name}-App-[A-Z0-9]{{12}}", child["StackName"])
    assert child["Tags"] == [{"Key": "lambda:createdBy", "Value": "SAM"}]  # as the SAM translator tags it
    code, actions, _, err = deploy(capsys, server.url, str(path), "--stack-name", name, "--delete")
    assert code == 0, err
    assert cfn.describe_stacks(StackName=child["StackId"])["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"
