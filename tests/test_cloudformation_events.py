"""CloudFormation's DescribeEvents and ListHookResults through boto3 (issue 31): a stack's events
grouped by operation in the OperationEvent shape, the FailedEvents filter, paging; a failed change
set answered as the CDK's change set diagnosis needs it (no failed events, no hook results: it then
reports the change set's StatusReason and nothing above it). Waits are the stack waiters, not times."""
from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from kinesim.cloudformation import events_api

WAIT = {"Delay": 0.2, "MaxAttempts": 300}
QUEUE = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n"
# A change set that fails when it is computed (kinesim: at once, as CreateChangeSet answers).
UNRESOLVED = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties: {QueueName: !Ref Missing}\n"


@pytest.fixture
def name():
    return "ev" + uuid.uuid4().hex[:10]


def error_of(call, **kwargs) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_stack_s_events_by_operation(cfn, name):
    created = cfn.create_stack(StackName=name, TemplateBody=QUEUE)
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=WAIT)
    stack_id, create_op = created["StackId"], created["OperationId"]
    answer = cfn.describe_events(StackName=name)
    events = answer["OperationEvents"]
    assert "NextToken" not in answer
    # The same events as DescribeStackEvents, newest first, each naming its operation.
    stack_events = cfn.describe_stack_events(StackName=name)["StackEvents"]
    assert [e["EventId"] for e in events] == [e["EventId"] for e in stack_events]
    assert {e["OperationId"] for e in stack_events} == {create_op}
    first = events[-1]
    assert (first["StackId"], first["OperationId"], first["OperationType"], first["OperationStatus"],
            first["EventType"], first["LogicalResourceId"], first["PhysicalResourceId"], first["ResourceType"],
            first["ResourceStatus"], first["ResourceStatusReason"]) == (
        stack_id, create_op, "CREATE_STACK", "SUCCEEDED", "STACK_EVENT", name, stack_id,
        "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS", "User Initiated")
    queue = [e for e in events if e["LogicalResourceId"] == "Queue"]
    assert queue and {e["EventType"] for e in queue} == {"PROGRESS_EVENT"}
    assert queue[0]["ResourceStatus"] == "CREATE_COMPLETE"
    assert events[0]["ResourceStatus"] == "CREATE_COMPLETE" and events[0]["EventType"] == "STACK_EVENT"
    # Nothing failed; the operation by its id, alone or with the stack, is the same events.
    assert cfn.describe_events(StackName=name, Filters={"FailedEvents": True})["OperationEvents"] == []
    assert cfn.describe_events(OperationId=create_op)["OperationEvents"] == events
    assert cfn.describe_events(StackName=stack_id, OperationId=create_op)["OperationEvents"] == events
    assert cfn.describe_events(StackName=name, OperationId=str(uuid.uuid4()))["OperationEvents"] == []

    # The stack's deletion is an operation of its own; the deleted stack's events stay, by its id.
    cfn.delete_stack(StackName=name)
    cfn.get_waiter("stack_delete_complete").wait(StackName=name, WaiterConfig=WAIT)
    after = cfn.describe_events(StackName=stack_id)["OperationEvents"]
    deletion = [e for e in after if e["OperationId"] != create_op]
    assert {(e["OperationType"], e["OperationStatus"]) for e in deletion} == {("DELETE_STACK", "SUCCEEDED")}
    assert deletion[0]["ResourceStatus"] == "DELETE_COMPLETE"
    assert after[len(deletion):] == events


def test_a_failed_change_set_as_the_cdk_asks(cfn, name):
    created = cfn.create_change_set(StackName=name, TemplateBody=UNRESOLVED, ChangeSetName="cdk-deploy-change-set",
                                    ChangeSetType="CREATE")
    change_set = cfn.describe_change_set(StackName=name, ChangeSetName="cdk-deploy-change-set")
    assert change_set["Status"] == "FAILED" and "Missing" in change_set["StatusReason"], change_set
    # The CDK's first question: the change set's failed events (its early validation errors). None here.
    failed = cfn.get_paginator("describe_events").paginate(
        StackName=name, ChangeSetName="cdk-deploy-change-set", Filters={"FailedEvents": True})
    assert [e for page in failed for e in page["OperationEvents"]] == []
    # Its creation's events: the new stack, in review.
    (review,) = cfn.describe_events(ChangeSetName=created["Id"])["OperationEvents"]
    assert (review["OperationType"], review["OperationStatus"], review["EventType"], review["ResourceStatus"],
            review["StackId"]) == ("CREATE_CHANGESET", "FAILED", "STACK_EVENT", "REVIEW_IN_PROGRESS",
                                   created["StackId"])
    assert cfn.describe_events(StackName=name, ChangeSetName="cdk-deploy-change-set")["OperationEvents"] == [review]
    # The CDK's second: the change set's hook results. None, the target echoed.
    hooks = cfn.list_hook_results(TargetType="CHANGE_SET", TargetId=created["Id"])
    assert (hooks["TargetType"], hooks["TargetId"], hooks["HookResults"]) == ("CHANGE_SET", created["Id"], [])
    assert "NextToken" not in hooks
    stack = cfn.list_hook_results(TargetType="STACK", TargetId=created["StackId"])
    assert (stack["TargetType"], stack["TargetId"], stack["HookResults"]) == ("STACK", created["StackId"], [])
    assert cfn.list_hook_results()["HookResults"] == []
    cfn.delete_stack(StackName=name)


def test_hook_results_of_a_resource(cfn, name):
    cfn.create_stack(StackName=name, TemplateBody=QUEUE)
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=WAIT)
    (queue,) = cfn.describe_stack_resources(StackName=name)["StackResources"]
    answer = cfn.list_hook_results(TargetType="RESOURCE", TargetId=queue["PhysicalResourceId"])
    assert (answer["TargetType"], answer["TargetId"], answer["HookResults"]) == (
        "RESOURCE", queue["PhysicalResourceId"], [])
    cfn.delete_stack(StackName=name)


def test_errors(cfn, name):
    missing = f"arn:aws:cloudformation:us-east-1:000000000000:changeSet/none/{uuid.uuid4()}"
    not_found = ("HookResultNotFound", "The specified target doesn't have any requested Hook invocations.", 404)
    assert error_of(cfn.list_hook_results, TargetType="CHANGE_SET", TargetId=missing) == not_found
    assert error_of(cfn.list_hook_results, TargetType="STACK", TargetId=name) == not_found
    assert error_of(cfn.list_hook_results, TargetType="CLOUD_CONTROL", TargetId=str(uuid.uuid4())) == not_found
    assert error_of(cfn.list_hook_results, TargetId=missing)[0] == "ValidationError"
    scope = ("ValidationError", "One of ChangeSetName, OperationId or StackName must be specified", 400)
    assert error_of(cfn.describe_events) == scope
    assert error_of(cfn.describe_events, ChangeSetName="some-change-set") == scope
    assert error_of(cfn.describe_events, StackName=name) == ("ValidationError", f"Stack [{name}] does not exist", 400)
    assert error_of(cfn.describe_events, ChangeSetName=missing)[:2] == (
        "ChangeSetNotFound", f"ChangeSet [{missing}] does not exist")
    cfn.create_stack(StackName=name, TemplateBody=QUEUE)
    assert error_of(cfn.describe_events, StackName=name, NextToken="bm90LWFuLWV2ZW50")[:2] == (
        "ValidationError", "Invalid NextToken")
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=WAIT)
    cfn.delete_stack(StackName=name)


def test_paging_and_the_failed_filter():
    """Pure logic: pages of PAGE_SIZE, each token naming the last event shown; failed events."""
    stack = "arn:aws:cloudformation:us-east-1:000000000000:stack/s/1"
    base = {"StackId": stack, "OperationId": "op", "OperationType": "UPDATE_STACK"}
    stored = [{**base, "EventId": "e0", "LogicalResourceId": "s", "PhysicalResourceId": stack,
               "ResourceType": "AWS::CloudFormation::Stack", "ResourceStatus": "UPDATE_ROLLBACK_COMPLETE"},
              {**base, "EventId": "e1", "LogicalResourceId": "Q", "ResourceType": "AWS::SQS::Queue",
               "ResourceStatus": "UPDATE_FAILED", "ResourceStatusReason": "boom"}]
    stored += [{**base, "EventId": f"p{i}", "LogicalResourceId": "Q", "ResourceType": "AWS::SQS::Queue",
                "ResourceStatus": "UPDATE_IN_PROGRESS"} for i in range(events_api.PAGE_SIZE + 5)]
    shown = events_api.operation_events(stored, {})
    assert {e["OperationStatus"] for e in shown} == {"FAILED"}
    assert [e["EventType"] for e in shown[:3]] == ["STACK_EVENT", "PROVISIONING_ERROR", "PROGRESS_EVENT"]
    first, token = events_api.paged(shown, None)
    assert len(first) == events_api.PAGE_SIZE and token
    second, last = events_api.paged(shown, token)
    assert [e["EventId"] for e in first + second] == [e["EventId"] for e in shown] and last is None
