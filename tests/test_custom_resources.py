"""Custom resources as CloudFormation runs them (issue 31): requests in AWS's shape to a Lambda
function or an SNS topic, answers PUT to the ResponseURL by AWS's cfnresponse (Python) and
cfn-response (Node.js, https to port 443 as AWS's module sends it), Data for Fn::GetAtt, NoEcho,
a new PhysicalResourceId on update (the old one deleted in the clean-up phase), a FAILED answer
rolled back with the provider's Reason, ServiceTimeout, and the ResponseURL's own answers."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError

from conftest import wait_for
from test_deploy import deploy

pytestmark = pytest.mark.timeout(600)

# A provider that tells the test every request it gets (through a queue made outside the stack),
# then answers as its properties ask: with Data, failing, or not at all.
PYTHON_PROVIDER = """
import json, os
import boto3
import cfnresponse

def handler(event, context):
    boto3.client("sqs").send_message(QueueUrl=os.environ["SEEN"], MessageBody=json.dumps(event))
    props = event["ResourceProperties"]
    if props.get("Mode") == "fail" and event["RequestType"] != "Delete":
        cfnresponse.send(event, context, cfnresponse.FAILED, {}, reason="the provider says no")
    elif props.get("Mode") != "silent":
        physical_id = event.get("PhysicalResourceId") if event["RequestType"] == "Delete" else \\
            "thing-" + props.get("Generation", "1")
        cfnresponse.send(event, context, cfnresponse.SUCCESS,
                         {"Greeting": "hello " + props.get("Name", ""), "Token": "tok-" + props.get("Generation", "1")},
                         physical_id, noEcho=props.get("Hide") == "true")
"""

NODE_PROVIDER = """
const response = require('cfn-response');
const { SQSClient, SendMessageCommand } = require('@aws-sdk/client-sqs');
exports.handler = async (event, context) => {
  await new SQSClient({}).send(new SendMessageCommand({ QueueUrl: process.env.SEEN, MessageBody: JSON.stringify(event) }));
  await response.send(event, context, response.SUCCESS, { Sum: String(Number(event.ResourceProperties.A) + 1) },
                      'node-thing');
};
"""


def provider(runtime: str, code: str, seen_url: str) -> dict:
    return {"Type": "AWS::Lambda::Function", "Properties": {
        "Runtime": runtime, "Handler": "index.handler", "Role": "arn:aws:iam::000000000000:role/provider",
        "Timeout": 30, "Code": {"ZipFile": code}, "Environment": {"Variables": {"SEEN": seen_url}}}}


@pytest.fixture
def seen(sqs):
    """A queue the providers report each request to, and a reader of what they reported."""
    url = sqs.create_queue(QueueName="seen-" + uuid.uuid4().hex[:10])["QueueUrl"]
    got: list[dict] = []

    def requests(count: int) -> list[dict]:
        def enough():
            for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
                got.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            return len(got) >= count
        wait_for(enough, timeout=120)
        return got[:count]

    yield url, requests
    sqs.delete_queue(QueueUrl=url)


def settle(cfn, name: str) -> dict:
    def settled():
        stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
        return stack if not stack["StackStatus"].endswith("_IN_PROGRESS") else None
    return wait_for(settled, timeout=180)


def outputs(stack: dict) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def template(seen_url: str, thing: dict, runtime: str = "python3.12", code: str = PYTHON_PROVIDER,
             outputs_: dict | None = None) -> str:
    return json.dumps({"Resources": {"Provider": provider(runtime, code, seen_url), "Thing": thing},
                       "Outputs": outputs_ or {}})


def thing(type_name: str = "Custom::Thing", **properties) -> dict:
    return {"Type": type_name, "Properties": {"ServiceToken": {"Fn::GetAtt": ["Provider", "Arn"]}, **properties}}


def test_python_provider_create_update_replace_and_delete(cfn, seen):
    seen_url, requests = seen
    name = "cr-" + uuid.uuid4().hex[:8]
    greeting = {"Greeting": {"Value": {"Fn::GetAtt": ["Thing", "Greeting"]}},
                "Id": {"Value": {"Ref": "Thing"}}}
    cfn.create_stack(StackName=name, TemplateBody=template(
        seen_url, thing(Name="world", Count=3, Enabled=True, Items=[1, "two"], Generation="1"), outputs_=greeting))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    assert outputs(stack) == {"Greeting": "hello world", "Id": "thing-1"}
    (create,) = requests(1)
    assert create["RequestType"] == "Create" and create["ResourceType"] == "Custom::Thing"
    assert create["LogicalResourceId"] == "Thing" and create["StackId"] == stack["StackId"]
    assert "PhysicalResourceId" not in create and "OldResourceProperties" not in create
    # Every property as CloudFormation sends it: scalars as strings, the ServiceToken included.
    assert create["ResourceProperties"] == {"ServiceToken": create["ServiceToken"], "Name": "world", "Count": "3",
                                            "Enabled": "true", "Items": ["1", "two"], "Generation": "1"}
    assert create["ServiceToken"].startswith("arn:aws:lambda:") and create["ResponseURL"].startswith("http")
    uuid.UUID(create["RequestId"])
    (resource,) = cfn.describe_stack_resources(StackName=name, LogicalResourceId="Thing")["StackResources"]
    assert resource["PhysicalResourceId"] == "thing-1" and resource["ResourceType"] == "Custom::Thing"

    # An update keeping the physical id: Update with the old properties, no Delete.
    cfn.update_stack(StackName=name, TemplateBody=template(
        seen_url, thing(Name="again", Count=3, Enabled=True, Items=[1, "two"], Generation="1"), outputs_=greeting))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "UPDATE_COMPLETE", stack.get("StackStatusReason")
    assert outputs(stack)["Greeting"] == "hello again"
    update = requests(2)[1]
    assert update["RequestType"] == "Update" and update["PhysicalResourceId"] == "thing-1"
    assert update["OldResourceProperties"]["Name"] == "world" and update["ResourceProperties"]["Name"] == "again"

    # An update answered with another physical id is a replacement: the old one gets a Delete,
    # after the new one (the clean-up phase).
    cfn.update_stack(StackName=name, TemplateBody=template(
        seen_url, thing(Name="again", Count=3, Enabled=True, Items=[1, "two"], Generation="2"), outputs_=greeting))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "UPDATE_COMPLETE", stack.get("StackStatusReason")
    assert outputs(stack)["Id"] == "thing-2"
    replace, cleanup = requests(4)[2:]
    assert (replace["RequestType"], replace["PhysicalResourceId"]) == ("Update", "thing-1")
    assert (cleanup["RequestType"], cleanup["PhysicalResourceId"]) == ("Delete", "thing-1")
    assert cleanup["ResourceProperties"]["Generation"] == "1"  # the old resource's properties
    statuses = [e["ResourceStatus"] for e in reversed(cfn.describe_stack_events(StackName=name)["StackEvents"])
                if e["LogicalResourceId"] == name]
    assert statuses[-3:] == ["UPDATE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", "UPDATE_COMPLETE"]

    cfn.delete_stack(StackName=name)
    wait_for(lambda: not _exists(cfn, name), timeout=180)
    delete = requests(5)[4]
    assert (delete["RequestType"], delete["PhysicalResourceId"]) == ("Delete", "thing-2")


def test_node_provider_answers_through_https_as_cfn_response_sends_it(cfn, seen):
    seen_url, requests = seen
    name = "crn-" + uuid.uuid4().hex[:8]
    cfn.create_stack(StackName=name, TemplateBody=template(
        seen_url, thing("AWS::CloudFormation::CustomResource", A=41), "nodejs22.x", NODE_PROVIDER,
        {"Sum": {"Value": {"Fn::GetAtt": ["Thing", "Sum"]}}}))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    assert outputs(stack) == {"Sum": "42"}
    (create,) = requests(1)
    assert create["ResourceType"] == "AWS::CloudFormation::CustomResource"
    cfn.delete_stack(StackName=name)
    wait_for(lambda: not _exists(cfn, name), timeout=180)
    assert requests(2)[1]["PhysicalResourceId"] == "node-thing"


def test_failed_answer_rolls_back_with_the_providers_reason(cfn, seen):
    seen_url, requests = seen
    name = "crf-" + uuid.uuid4().hex[:8]
    cfn.create_stack(StackName=name, TemplateBody=template(seen_url, thing(Mode="fail")))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    (failed,) = [e for e in cfn.describe_stack_events(StackName=name)["StackEvents"]
                 if e["LogicalResourceId"] == "Thing" and e["ResourceStatus"] == "CREATE_FAILED"]
    request_id = requests(1)[0]["RequestId"]
    assert failed["ResourceStatusReason"] == (
        f"Received response status [FAILED] from custom resource. Message returned: the provider says no "
        f"(RequestId: {request_id})")
    # The rollback sends the failed resource a Delete, with the physical id its answer gave (the
    # provider's log stream, cfnresponse's default), as CloudFormation does.
    delete = requests(2)[1]
    assert delete["RequestType"] == "Delete" and delete["PhysicalResourceId"].startswith("20")
    cfn.delete_stack(StackName=name)


def test_service_timeout_fails_a_provider_that_never_answers(cfn, seen):
    seen_url, requests = seen
    name = "crt-" + uuid.uuid4().hex[:8]
    cfn.create_stack(StackName=name, TemplateBody=template(seen_url, thing(Mode="silent", ServiceTimeout=3)))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    request_id = requests(1)[0]["RequestId"]
    (failed,) = [e for e in cfn.describe_stack_events(StackName=name)["StackEvents"]
                 if e["LogicalResourceId"] == "Thing" and e["ResourceStatus"] == "CREATE_FAILED"]
    assert (f"CloudFormation did not receive a response from your Custom Resource. Please check your logs for "
            f"requestId [{request_id}].") in failed["ResourceStatusReason"]
    cfn.delete_stack(StackName=name)


def test_sns_token_and_no_echo(server, cfn, seen):
    seen_url, requests = seen
    name = "crs-" + uuid.uuid4().hex[:8]
    sns_provider = PYTHON_PROVIDER.replace("def handler(event, context):",
                                           "def handler(sns_event, context):\n"
                                           "    event = json.loads(sns_event['Records'][0]['Sns']['Message'])")
    body = {"Resources": {
        "Provider": provider("python3.12", sns_provider, seen_url),
        "Topic": {"Type": "AWS::SNS::Topic"},
        "Subscription": {"Type": "AWS::SNS::Subscription", "Properties": {
            "TopicArn": {"Ref": "Topic"}, "Protocol": "lambda", "Endpoint": {"Fn::GetAtt": ["Provider", "Arn"]}}},
        "Allow": {"Type": "AWS::Lambda::Permission", "Properties": {
            "FunctionName": {"Ref": "Provider"}, "Action": "lambda:InvokeFunction", "Principal": "sns.amazonaws.com",
            "SourceArn": {"Ref": "Topic"}}},
        "Thing": {"Type": "Custom::Secret", "DependsOn": ["Subscription", "Allow"],
                  "Properties": {"ServiceToken": {"Ref": "Topic"}, "Name": "sns", "Hide": True}}},
        "Outputs": {"Token": {"Value": {"Fn::GetAtt": ["Thing", "Token"]}},
                    "Plain": {"Value": {"Fn::Sub": "${Thing}"}}}}
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(body))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    assert requests(1)[0]["ServiceToken"].startswith("arn:aws:sns:")
    # NoEcho: what the answer's Data gave is masked where CloudFormation shows it.
    assert outputs(stack) == {"Token": "*****", "Plain": "thing-1"}
    cfn.delete_stack(StackName=name)
    wait_for(lambda: not _exists(cfn, name), timeout=180)
    assert requests(2)[1]["RequestType"] == "Delete"


def test_invalid_service_tokens_are_refused_before_anything_is_made(cfn):
    name = "cri-" + uuid.uuid4().hex[:8]
    body = {"Resources": {"Thing": {"Type": "Custom::Thing", "Properties": {
        "ServiceToken": "arn:aws:lambda:eu-west-1:000000000000:function:elsewhere"}}}}
    with pytest.raises(ClientError, match="it must be in the stack's Region"):
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(body))
    body["Resources"]["Thing"] = {"Type": "Custom::Bad.Name", "Properties": {"ServiceToken": "x"}}
    with pytest.raises(ClientError, match="Invalid custom resource type Custom::Bad.Name"):
        cfn.create_stack(StackName=name, TemplateBody=json.dumps(body))


def test_kinesim_deploy_runs_custom_resources_too(server, seen, tmp_path, capsys):
    seen_url, requests = seen
    name = "crk-" + uuid.uuid4().hex[:8]
    path = tmp_path / "template.json"
    path.write_text(template(seen_url, thing(Name="deploy"), outputs_={"Greeting": {
        "Value": {"Fn::GetAtt": ["Thing", "Greeting"]}}}))
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", name)
    assert code == 0, out + err
    assert "hello deploy" in out and requests(1)[0]["RequestType"] == "Create"
    code, _, out, err = deploy(capsys, server.url, str(path), "--stack-name", name, "--delete")
    assert code == 0, out + err
    assert (requests(2)[1]["RequestType"], requests(2)[1]["PhysicalResourceId"]) == ("Delete", "thing-1")


def test_response_url_answers_as_a_presigned_url(server):
    url = f"{server.url}/_kinesim/cloudformation/responses/not-a-token"
    request = urllib.request.Request(url, data=b"{}", method="PUT", headers={"Content-Type": ""})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == 403 and b"<Code>AccessDenied</Code>" in caught.value.read()


def _exists(cfn, name: str) -> bool:
    try:
        return cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"] != "DELETE_COMPLETE"
    except ClientError:
        return False


def test_a_response_past_4096_bytes_fails_the_resource(cfn, seen):
    seen_url, requests = seen
    name = "crl-" + uuid.uuid4().hex[:8]
    long_answer = PYTHON_PROVIDER.replace('{"Greeting": "hello " + props.get("Name", "")',
                                          '{"Greeting": "x" * 5000')
    cfn.create_stack(StackName=name, TemplateBody=template(seen_url, thing(Name="big"), code=long_answer))
    stack = settle(cfn, name)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    (failed,) = [e for e in cfn.describe_stack_events(StackName=name)["StackEvents"]
                 if e["LogicalResourceId"] == "Thing" and e["ResourceStatus"] == "CREATE_FAILED"]
    assert failed["ResourceStatusReason"] == "Response object is too long."
    assert requests(1)[0]["RequestType"] == "Create"
    cfn.delete_stack(StackName=name)
