"""CloudFormation's API (query protocol) served by kinesim, through boto3 as users call it: stacks,
events, resources, templates, updates and rollbacks, change sets, TemplateURL, capabilities,
exports and imports, DeletionPolicy, termination protection.

Expected answers are AWS's, as LocalStack's recordings of real AWS show them
(tests/aws/services/cloudformation/api/test_{stacks,changesets,update_stack,templates}.snapshot.json,
engine/test_deletion_policy.snapshot.json in the localstack/localstack repository), and the texts the
AWS CLI, the SAM CLI and the CDK match on (e.g. "Stack with id NAME does not exist")."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest
from botocore.exceptions import ClientError, WaiterError
from conftest import client_for
from test_deploy import s3_client

WAIT = {"Delay": 0.2, "MaxAttempts": 300}
NO_CHANGES = "The submitted information didn't contain changes. Submit different information to create a change set."


@pytest.fixture
def name():
    return "cfn" + uuid.uuid4().hex[:10]


def error_of(call, **kwargs) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    response = caught.value.response
    return response["Error"]["Code"], response["Error"]["Message"], response["ResponseMetadata"]["HTTPStatusCode"]


def wait(cfn, waiter: str, **kwargs) -> None:
    cfn.get_waiter(waiter).wait(WaiterConfig=WAIT, **kwargs)


def stack_of(cfn, name: str) -> dict:
    return cfn.describe_stacks(StackName=name)["Stacks"][0]


def events_of(cfn, name: str) -> list[dict]:
    """Oldest first (DescribeStackEvents lists them newest first)."""
    return list(reversed(cfn.describe_stack_events(StackName=name)["StackEvents"]))


def stack_statuses(cfn, name: str) -> list[str]:
    return [e["ResourceStatus"] for e in events_of(cfn, name) if e["ResourceType"] == "AWS::CloudFormation::Stack"]


def queue_exists(sqs, queue_name: str) -> bool:
    try:
        sqs.get_queue_url(QueueName=queue_name)
        return True
    except ClientError:
        return False


def queue_and_stream(name: str, extra: str = "") -> str:
    return f"""Parameters:
  Secret: {{Type: String, NoEcho: true}}
  Hours: {{Type: Number, Default: 24, Description: retention}}
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties: {{QueueName: {name}-q}}
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {name}-s, ShardCount: 1, RetentionPeriodHours: !Ref Hours}}
{extra}Outputs:
  StreamArn:
    Description: the stream
    Value: !GetAtt Stream.Arn
    Export: {{Name: {name}-stream-arn}}
"""


# Stacks: create, describe, events, resources, templates


def test_create_stack_answers_as_aws_does(cfn, name):
    template = queue_and_stream(name)
    stack_id = cfn.create_stack(StackName=name, TemplateBody=template, Tags=[{"Key": "team", "Value": "data"}],
                                Parameters=[{"ParameterKey": "Secret", "ParameterValue": "hush"}])["StackId"]
    assert stack_id.startswith(f"arn:aws:cloudformation:us-east-1:000000000000:stack/{name}/")
    wait(cfn, "stack_create_complete", StackName=name)

    stack = stack_of(cfn, name)
    assert stack["StackId"] == stack_id and stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack["Parameters"] == [{"ParameterKey": "Secret", "ParameterValue": "****"},
                                   {"ParameterKey": "Hours", "ParameterValue": "24"}]
    assert stack["Outputs"] == [{"OutputKey": "StreamArn", "Description": "the stream", "ExportName": f"{name}-stream-arn",
                                 "OutputValue": f"arn:aws:kinesis:us-east-1:000000000000:stream/{name}-s"}]
    assert stack["Tags"] == [{"Key": "team", "Value": "data"}]
    assert stack["EnableTerminationProtection"] is False and stack["DisableRollback"] is False
    assert stack["NotificationARNs"] == [] and stack["RollbackConfiguration"] == {}
    assert stack["DriftInformation"] == {"StackDriftStatus": "NOT_CHECKED"}
    assert "Capabilities" not in stack  # AWS leaves it out when none were granted
    assert stack["LastUpdatedTime"] >= stack["CreationTime"]
    assert any(s["StackId"] == stack_id for s in cfn.describe_stacks()["Stacks"])

    # Events: newest first; the stack's "User Initiated" start, each resource's IN_PROGRESS then
    # COMPLETE, and the stack's CREATE_COMPLETE last.
    listed = cfn.describe_stack_events(StackName=name)["StackEvents"]
    assert [e["Timestamp"] for e in listed] == sorted((e["Timestamp"] for e in listed), reverse=True)
    assert len({e["Timestamp"] for e in listed}) == len(listed) and len({e["EventId"] for e in listed}) == len(listed)
    events = list(reversed(listed))
    first, last = events[0], events[-1]
    assert (first["LogicalResourceId"], first["ResourceType"], first["ResourceStatus"], first["ResourceStatusReason"],
            first["PhysicalResourceId"]) == (name, "AWS::CloudFormation::Stack", "CREATE_IN_PROGRESS",
                                             "User Initiated", stack_id)
    assert (last["LogicalResourceId"], last["ResourceStatus"], last["PhysicalResourceId"]) == (
        name, "CREATE_COMPLETE", stack_id)
    assert all(e["StackId"] == stack_id and e["StackName"] == name for e in events)
    for lid, type_name in (("Queue", "AWS::SQS::Queue"), ("Stream", "AWS::Kinesis::Stream")):
        mine = [e for e in events if e["LogicalResourceId"] == lid]
        # AWS's order: in progress (no physical id yet), "Resource creation Initiated" (with it), complete.
        assert [(e["ResourceStatus"], e.get("ResourceStatusReason")) for e in mine] == [
            ("CREATE_IN_PROGRESS", None), ("CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ("CREATE_COMPLETE", None)]
        assert mine[0]["PhysicalResourceId"] == "" and mine[1]["PhysicalResourceId"] == mine[2]["PhysicalResourceId"]
        assert all(e["ResourceType"] == type_name for e in mine)
    in_progress = next(e for e in events if e["LogicalResourceId"] == "Stream")
    assert json.loads(in_progress["ResourceProperties"])["Name"] == f"{name}-s"
    stream_done = next(e for e in events if e["LogicalResourceId"] == "Stream" and e["ResourceStatus"] == "CREATE_COMPLETE")
    assert stream_done["PhysicalResourceId"] == f"{name}-s"

    # Resources
    summaries = {r["LogicalResourceId"]: r for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]}
    assert set(summaries) == {"Queue", "Stream"}
    assert summaries["Stream"]["PhysicalResourceId"] == f"{name}-s"
    assert summaries["Queue"]["PhysicalResourceId"].endswith(f"/000000000000/{name}-q")  # a queue's id is its URL
    assert all(r["ResourceStatus"] == "CREATE_COMPLETE" and "LastUpdatedTimestamp" in r for r in summaries.values())
    detail = cfn.describe_stack_resource(StackName=name, LogicalResourceId="Stream")["StackResourceDetail"]
    assert (detail["StackName"], detail["StackId"], detail["ResourceType"], detail["ResourceStatus"]) == (
        name, stack_id, "AWS::Kinesis::Stream", "CREATE_COMPLETE")
    assert detail["DriftInformation"] == {"StackResourceDriftStatus": "NOT_CHECKED"}
    assert error_of(cfn.describe_stack_resource, StackName=name, LogicalResourceId="Nope") == (
        "ValidationError", f"Resource Nope does not exist for stack {name}", 400)
    resources = cfn.describe_stack_resources(StackName=name)["StackResources"]
    assert {r["LogicalResourceId"] for r in resources} == {"Queue", "Stream"}
    by_physical = cfn.describe_stack_resources(PhysicalResourceId=f"{name}-s")["StackResources"]
    assert [(r["StackName"], r["LogicalResourceId"]) for r in by_physical] == [(name, "Stream")]

    # Templates: the text exactly as sent; Processed is the same text when there is no transform.
    original = cfn.get_template(StackName=name)
    assert original["TemplateBody"] == template and original["StagesAvailable"] == ["Original", "Processed"]
    assert cfn.get_template(StackName=stack_id, TemplateStage="Processed")["TemplateBody"] == template
    summary = cfn.get_template_summary(StackName=name)
    assert summary["Parameters"] == [
        {"ParameterKey": "Secret", "ParameterType": "String", "NoEcho": True, "ParameterConstraints": {}},
        {"ParameterKey": "Hours", "DefaultValue": "24", "ParameterType": "Number", "NoEcho": False,
         "Description": "retention", "ParameterConstraints": {}}]
    assert summary["ResourceTypes"] == ["AWS::Kinesis::Stream", "AWS::SQS::Queue"]
    assert summary["Version"] == "2010-09-09" and "DeclaredTransforms" not in summary
    assert {s["ResourceType"]: s["LogicalResourceIds"] for s in summary["ResourceIdentifierSummaries"]} == {
        "AWS::SQS::Queue": ["Queue"], "AWS::Kinesis::Stream": ["Stream"]}
    assert cfn.get_template_summary(TemplateBody=template)["Parameters"] == summary["Parameters"]
    validated = cfn.validate_template(TemplateBody=template)
    assert validated["Parameters"] == [{"ParameterKey": "Secret", "NoEcho": True},
                                       {"ParameterKey": "Hours", "DefaultValue": "24", "NoEcho": False,
                                        "Description": "retention"}]
    assert "Capabilities" not in validated and "DeclaredTransforms" not in validated

    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


def test_template_errors_are_aws_texts(cfn, name):
    cases = {
        '{"this is invalid JSON"="bobbins"}': "Template format error: JSON not well-formed. (line 1, column 25)",
        "Resources:\n  B:\n    Type: AWS::S3::Bucket\n    Properties:\n        BucketName: test\n"
        "      VersioningConfiguration:\n        Status: Enabled\n":
            "Template format error: YAML not well-formed. (line 6, column 7)",
        "{}": "Template format error: At least one Resources member must be defined.",
        "Resources:\n  A:\n    Properties: {}\n":
            "Template format error: [/Resources/A] Every Resources object must contain a Type member.",
        "Resources:\n  A:\n    Type: AWS::SQS::Queue\n    Invalid: 10\n": "Invalid template resource property 'Invalid'",
        "Resources:\n  A:\n    Type: AWS::SQS::Queue\nOutputs:\n  Out:\n    Value:\n":
            "[/Outputs/Out/Value] 'null' values are not allowed in templates",
        "Resources:\n  A:\n    Type: AWS::SQS::Queue\nOutputs:\n  Out: {}\n":
            "Template format error: Every Outputs member must contain a Value object",
    }
    for body, message in cases.items():
        assert error_of(cfn.validate_template, TemplateBody=body) == ("ValidationError", message, 400)
        assert error_of(cfn.create_stack, StackName=name, TemplateBody=body)[1] == message
    assert error_of(cfn.describe_stacks, StackName=name)[1] == f"Stack with id {name} does not exist"
    assert error_of(cfn.get_template)[1] == "StackName is required if ChangeSetName is not specified."
    assert error_of(cfn.get_template, ChangeSetName="some-change-set")[1] == "StackName is a required parameter."


def test_missing_and_deleted_stacks(cfn, sqs, name):
    missing = f"{name}-missing"
    for call in (cfn.describe_stacks, cfn.get_template, cfn.list_stack_resources, cfn.describe_stack_resources,
                 cfn.get_template_summary):
        assert error_of(call, StackName=missing) == ("ValidationError", f"Stack with id {missing} does not exist", 400)
    assert error_of(cfn.describe_stack_events, StackName=missing) == (
        "ValidationError", f"Stack [{missing}] does not exist", 400)
    assert error_of(cfn.update_stack, StackName=missing, TemplateBody="Resources: {Q: {Type: AWS::SQS::Queue}}")[1] \
        == f"Stack with id {missing} does not exist"
    cfn.delete_stack(StackName=missing)  # deleting a stack that does not exist succeeds

    template = f"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties: {{QueueName: {name}-q}}\n"
    stack_id = cfn.create_stack(StackName=name, TemplateBody=template)["StackId"]
    assert error_of(cfn.create_stack, StackName=name, TemplateBody=template) == (
        "AlreadyExistsException", f"Stack [{name}] already exists", 400)
    wait(cfn, "stack_create_complete", StackName=name)
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)
    assert not queue_exists(sqs, f"{name}-q")

    # By name it is gone; by its id it is DELETE_COMPLETE, as ListStacks shows it.
    assert error_of(cfn.describe_stacks, StackName=name)[1] == f"Stack with id {name} does not exist"
    assert error_of(cfn.describe_stack_events, StackName=name)[1] == f"Stack [{name}] does not exist"
    deleted = stack_of(cfn, stack_id)
    assert (deleted["StackName"], deleted["StackStatus"]) == (name, "DELETE_COMPLETE")
    assert deleted["DeletionTime"] >= deleted["CreationTime"] and "EnableTerminationProtection" not in deleted
    assert all(s["StackId"] != stack_id for s in cfn.describe_stacks()["Stacks"])
    listed = [s for s in cfn.list_stacks()["StackSummaries"] if s["StackId"] == stack_id]
    assert [(s["StackName"], s["StackStatus"]) for s in listed] == [(name, "DELETE_COMPLETE")]
    assert [s["StackId"] for s in cfn.list_stacks(StackStatusFilter=["DELETE_COMPLETE"])["StackSummaries"]
            if s["StackName"] == name] == [stack_id]
    assert stack_statuses(cfn, stack_id)[-2:] == ["DELETE_IN_PROGRESS", "DELETE_COMPLETE"]
    assert cfn.get_template(StackName=stack_id)["TemplateBody"] == template
    assert error_of(cfn.update_stack, StackName=stack_id, TemplateBody=template)[1] == \
        f"Stack:{stack_id} is in DELETE_COMPLETE state and can not be updated."
    assert error_of(cfn.create_change_set, StackName=stack_id, TemplateBody=template, ChangeSetName="again",
                    ChangeSetType="UPDATE")[1] == f"Stack:{stack_id} is in DELETE_COMPLETE state and can not be updated."
    assert error_of(cfn.create_change_set, StackName=stack_id, TemplateBody=template, ChangeSetName="again",
                    ChangeSetType="CREATE")[1] == \
        f"Stack [{stack_id}] already exists and cannot be created again with the changeSet [again]."

    # The name is free again: a new stack, a new id.
    second = cfn.create_stack(StackName=name, TemplateBody=template)["StackId"]
    assert second != stack_id
    wait(cfn, "stack_create_complete", StackName=name)
    cfn.delete_stack(StackName=second)
    wait(cfn, "stack_delete_complete", StackName=second)


# Updates


def test_update_stack_parameters_and_no_updates(cfn, kinesis, name):
    template = queue_and_stream(name)
    cfn.create_stack(StackName=name, TemplateBody=template, Parameters=[{"ParameterKey": "Secret", "ParameterValue": "a"}])
    wait(cfn, "stack_create_complete", StackName=name)

    cfn.update_stack(StackName=name, UsePreviousTemplate=True,
                     Parameters=[{"ParameterKey": "Secret", "UsePreviousValue": True},
                                 {"ParameterKey": "Hours", "ParameterValue": "48"}])
    wait(cfn, "stack_update_complete", StackName=name)
    stack = stack_of(cfn, name)
    assert stack["StackStatus"] == "UPDATE_COMPLETE" and "ChangeSetId" not in stack
    assert stack["Parameters"] == [{"ParameterKey": "Secret", "ParameterValue": "****"},
                                   {"ParameterKey": "Hours", "ParameterValue": "48"}]
    assert kinesis.describe_stream_summary(StreamName=f"{name}-s")["StreamDescriptionSummary"]["RetentionPeriodHours"] == 48
    assert stack_statuses(cfn, name)[-3:] == ["UPDATE_IN_PROGRESS", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
                                              "UPDATE_COMPLETE"]

    # Every value as it was (UsePreviousValue, as `aws cloudformation deploy` sends it): nothing to do.
    previous = [{"ParameterKey": "Secret", "UsePreviousValue": True}, {"ParameterKey": "Hours", "UsePreviousValue": True}]
    assert error_of(cfn.update_stack, StackName=name, TemplateBody=template, Parameters=previous) == (
        "ValidationError", "No updates are to be performed.", 400)
    assert error_of(cfn.update_stack, StackName=name, UsePreviousTemplate=True,
                    Parameters=previous + [{"ParameterKey": "Nope", "ParameterValue": "1"}])[1] == \
        "Parameters: [Nope] do not exist in the template"
    assert error_of(cfn.update_stack, StackName=name)[1] == "Either Template URL or Template Body must be specified."
    assert error_of(cfn.create_stack, StackName=f"{name}-x", TemplateBody=template)[1] == \
        "Parameters: [Secret] must have values"

    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


def test_failed_update_rolls_back_to_the_previous_stack(cfn, sqs, kinesis, name):
    template = queue_and_stream(name)
    given = [{"ParameterKey": "Secret", "ParameterValue": "a"}]
    cfn.create_stack(StackName=name, TemplateBody=template, Parameters=given)
    wait(cfn, "stack_create_complete", StackName=name)

    # The new queue is made, then the stream's retention is refused by Kinesis (at most 8760 hours):
    # the update fails at apply time and everything returns to the last complete deploy.
    updated = queue_and_stream(name, f"""  Added:
    Type: AWS::SQS::Queue
    Properties: {{QueueName: {name}-added}}
""").replace("RetentionPeriodHours: !Ref Hours}", "RetentionPeriodHours: !Ref Hours}\n    DependsOn: Added")
    cfn.update_stack(StackName=name, TemplateBody=updated, Parameters=[
        {"ParameterKey": "Secret", "UsePreviousValue": True}, {"ParameterKey": "Hours", "ParameterValue": "9000"}])
    with pytest.raises(WaiterError) as failed:
        wait(cfn, "stack_update_complete", StackName=name)
    assert "UPDATE_ROLLBACK_COMPLETE" in str(failed.value)

    stack = stack_of(cfn, name)
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert stack["StackStatusReason"] == "The following resource(s) failed to update: [Stream]. "
    assert stack["Parameters"][1] == {"ParameterKey": "Hours", "ParameterValue": "24"}
    assert cfn.get_template(StackName=name)["TemplateBody"] == template
    assert {r["LogicalResourceId"] for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]} == {
        "Queue", "Stream"}
    assert queue_exists(sqs, f"{name}-q") and not queue_exists(sqs, f"{name}-added")
    assert kinesis.describe_stream_summary(StreamName=f"{name}-s")["StreamDescriptionSummary"]["RetentionPeriodHours"] == 24

    events = events_of(cfn, name)
    update = events[max(i for i, e in enumerate(events) if e.get("ResourceStatusReason") == "User Initiated"):]
    steps = [(e["LogicalResourceId"], e["ResourceStatus"]) for e in update]
    assert steps[0] == (name, "UPDATE_IN_PROGRESS") and steps[-1] == (name, "UPDATE_ROLLBACK_COMPLETE")
    failure = steps.index(("Stream", "UPDATE_FAILED"))
    assert steps[failure + 1] == (name, "UPDATE_ROLLBACK_IN_PROGRESS")
    assert update[failure + 1]["ResourceStatusReason"] == "The following resource(s) failed to update: [Stream]. "
    assert "Maximum allowed retention period is 8760 hours" in update[failure]["ResourceStatusReason"]
    assert ("Added", "CREATE_COMPLETE") in steps[:failure] and ("Added", "DELETE_COMPLETE") in steps[failure:]

    # A stack rolled back can be updated again.
    cfn.update_stack(StackName=name, UsePreviousTemplate=True, Parameters=[
        {"ParameterKey": "Secret", "UsePreviousValue": True}, {"ParameterKey": "Hours", "ParameterValue": "36"}])
    wait(cfn, "stack_update_complete", StackName=name)
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


def test_failed_create_ends_rolled_back(cfn, kinesis, sqs, name):
    template = queue_and_stream(name).replace("RetentionPeriodHours: !Ref Hours}",
                                              "RetentionPeriodHours: !Ref Hours}\n    DependsOn: Queue")
    stack_id = cfn.create_stack(StackName=name, TemplateBody=template, Parameters=[
        {"ParameterKey": "Secret", "ParameterValue": "a"}, {"ParameterKey": "Hours", "ParameterValue": "9000"}])["StackId"]
    with pytest.raises(WaiterError) as failed:
        wait(cfn, "stack_create_complete", StackName=name)
    assert "ROLLBACK_COMPLETE" in str(failed.value)
    stack = stack_of(cfn, name)
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    assert stack["StackStatusReason"] == "The following resource(s) failed to create: [Stream]. "
    assert stack_statuses(cfn, name) == ["CREATE_IN_PROGRESS", "ROLLBACK_IN_PROGRESS", "ROLLBACK_COMPLETE"]
    assert ("Stream", "CREATE_FAILED") in [(e["LogicalResourceId"], e["ResourceStatus"]) for e in events_of(cfn, name)]
    assert not queue_exists(sqs, f"{name}-q") and f"{name}-s" not in kinesis.list_streams()["StreamNames"]
    assert error_of(cfn.update_stack, StackName=name, TemplateBody=template)[1] == \
        f"Stack:{stack_id} is in ROLLBACK_COMPLETE state and can not be updated."
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)
    assert stack_of(cfn, stack_id)["StackStatus"] == "DELETE_COMPLETE"


def test_failed_create_leaves_a_resource_of_the_same_name_alone(cfn, kinesis, name):
    kinesis.create_stream(StreamName=f"{name}-s", ShardCount=1)
    template = f"Resources:\n  Stream:\n    Type: AWS::Kinesis::Stream\n    Properties: {{Name: {name}-s, ShardCount: 1}}\n"
    cfn.create_stack(StackName=name, TemplateBody=template)
    with pytest.raises(WaiterError):
        wait(cfn, "stack_create_complete", StackName=name)
    # CreateStream answered "already exists": the stream is not the stack's, nor its rollback's, to delete.
    assert f"{name}-s" in kinesis.list_streams()["StreamNames"]
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)
    assert f"{name}-s" in kinesis.list_streams()["StreamNames"]
    kinesis.delete_stream(StreamName=f"{name}-s")


# Change sets


def test_change_sets_from_creation_to_execution(cfn, sqs, name):
    template = f"""Parameters:
  Timeout: {{Type: Number, Default: 30}}
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties: {{QueueName: {name}-q, VisibilityTimeout: !Ref Timeout}}
  Stream:
    Type: AWS::Kinesis::Stream
    Properties: {{Name: {name}-s, ShardCount: 1}}
"""
    created = cfn.create_change_set(StackName=name, TemplateBody=template, ChangeSetName="initial",
                                    ChangeSetType="CREATE")
    stack_id = created["StackId"]
    assert created["Id"].startswith("arn:aws:cloudformation:us-east-1:000000000000:changeSet/initial/")
    # The stack exists at once, in review, with one event (the SAM CLI reads StackEvents[0]).
    stack = stack_of(cfn, name)
    assert (stack["StackId"], stack["StackStatus"], stack["StackStatusReason"]) == (
        stack_id, "REVIEW_IN_PROGRESS", "User Initiated")
    [event] = cfn.describe_stack_events(StackName=name)["StackEvents"]
    assert (event["ResourceStatus"], event["ResourceStatusReason"], event["PhysicalResourceId"]) == (
        "REVIEW_IN_PROGRESS", "User Initiated", stack_id)
    assert error_of(cfn.get_template_summary, StackName=name)[1] == \
        "GetTemplateSummary cannot be called on REVIEW_IN_PROGRESS stacks."
    wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName="initial")
    described = cfn.describe_change_set(StackName=name, ChangeSetName="initial")
    assert (described["Status"], described["ExecutionStatus"], described["ChangeSetName"], described["StackId"]) == (
        "CREATE_COMPLETE", "AVAILABLE", "initial", stack_id)
    assert described["Parameters"] == [{"ParameterKey": "Timeout", "ParameterValue": "30"}]
    assert described["Capabilities"] == [] and described["NotificationARNs"] == [] and "Tags" not in described
    assert described["IncludeNestedStacks"] is False and described["RollbackConfiguration"] == {}
    assert [c["ResourceChange"] for c in described["Changes"]] == [
        {"Action": "Add", "LogicalResourceId": "Queue", "ResourceType": "AWS::SQS::Queue", "Scope": [], "Details": []},
        {"Action": "Add", "LogicalResourceId": "Stream", "ResourceType": "AWS::Kinesis::Stream", "Scope": [],
         "Details": []}]
    assert cfn.get_template(StackName=name, ChangeSetName="initial")["TemplateBody"] == template
    [summary] = cfn.list_change_sets(StackName=name)["Summaries"]
    assert (summary["ChangeSetId"], summary["Status"], summary["ExecutionStatus"]) == (
        created["Id"], "CREATE_COMPLETE", "AVAILABLE")

    cfn.execute_change_set(StackName=name, ChangeSetName="initial")
    wait(cfn, "stack_create_complete", StackName=name)
    assert stack_of(cfn, name)["ChangeSetId"] == created["Id"]
    assert cfn.describe_change_set(ChangeSetName=created["Id"])["ExecutionStatus"] == "EXECUTE_COMPLETE"
    assert stack_statuses(cfn, name) == ["REVIEW_IN_PROGRESS", "CREATE_IN_PROGRESS", "CREATE_COMPLETE"]

    # An update: a property changed in place, one that replaces, a parameter's new value, an addition.
    changed = template.replace(f"Name: {name}-s,", f"Name: {name}-s2,").replace(
        "Resources:\n", "Resources:\n  Extra:\n    Type: AWS::SQS::Queue\n")
    update = cfn.create_change_set(StackName=name, TemplateBody=changed, ChangeSetName="update",
                                   Parameters=[{"ParameterKey": "Timeout", "ParameterValue": "60"}])
    wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName=update["Id"])
    changes = {c["ResourceChange"]["LogicalResourceId"]: c["ResourceChange"]
               for c in cfn.describe_change_set(StackName=name, ChangeSetName="update")["Changes"]}
    assert changes["Extra"]["Action"] == "Add"
    queue = changes["Queue"]
    assert (queue["Action"], queue["Replacement"], queue["Scope"], queue["PhysicalResourceId"]) == (
        "Modify", "False", ["Properties"], sqs.get_queue_url(QueueName=f"{name}-q")["QueueUrl"])
    assert "PolicyAction" not in queue
    target = {"Attribute": "Properties", "Name": "VisibilityTimeout", "RequiresRecreation": "Never"}
    assert queue["Details"] == [
        {"Target": target, "Evaluation": "Static", "ChangeSource": "ParameterReference", "CausingEntity": "Timeout"},
        {"Target": target, "Evaluation": "Dynamic", "ChangeSource": "DirectModification"}]
    stream = changes["Stream"]
    assert (stream["Action"], stream["Replacement"], stream["PolicyAction"], stream["PhysicalResourceId"]) == (
        "Modify", "True", "ReplaceAndDelete", f"{name}-s")
    assert stream["Details"] == [{"Target": {"Attribute": "Properties", "Name": "Name", "RequiresRecreation": "Always"},
                                  "Evaluation": "Static", "ChangeSource": "DirectModification"}]

    # A removal, and a change set that changes nothing.
    removal = cfn.create_change_set(StackName=name, ChangeSetName="removal", TemplateBody=template.replace(
        template[template.index("  Stream:"):], ""))
    wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName="removal")
    [remove] = cfn.describe_change_set(StackName=name, ChangeSetName="removal")["Changes"]
    assert remove["ResourceChange"] == {"Action": "Remove", "LogicalResourceId": "Stream", "PolicyAction": "Delete",
                                        "PhysicalResourceId": f"{name}-s", "ResourceType": "AWS::Kinesis::Stream",
                                        "Scope": [], "Details": []}
    nothing = cfn.create_change_set(StackName=name, ChangeSetName="nothing", TemplateBody=template)
    with pytest.raises(WaiterError):
        wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName="nothing")
    failed = cfn.describe_change_set(StackName=name, ChangeSetName="nothing")
    assert (failed["Status"], failed["ExecutionStatus"], failed["StatusReason"], failed["Changes"]) == (
        "FAILED", "UNAVAILABLE", NO_CHANGES, [])
    assert error_of(cfn.execute_change_set, StackName=name, ChangeSetName="nothing") == (
        "InvalidChangeSetStatus",
        f"ChangeSet [{nothing['Id']}] cannot be executed in its current status of [FAILED]", 400)
    assert error_of(cfn.create_change_set, StackName=name, ChangeSetName="nothing", TemplateBody=template)[:2] == (
        "AlreadyExistsException", "ChangeSet [nothing] already exists")
    assert {s["ChangeSetName"] for s in cfn.list_change_sets(StackName=name)["Summaries"]} == {
        "initial", "update", "removal", "nothing"}

    # Deleting one; a name that is not there (the CDK deletes its change set before every deploy).
    cfn.delete_change_set(StackName=name, ChangeSetName="removal")
    assert error_of(cfn.describe_change_set, StackName=name, ChangeSetName="removal") == (
        "ChangeSetNotFound", "ChangeSet [removal] does not exist", 404)
    assert error_of(cfn.describe_change_set, ChangeSetName=removal["Id"]) == (
        "ChangeSetNotFound", f"ChangeSet [{removal['Id']}] does not exist", 404)
    cfn.delete_change_set(StackName=name, ChangeSetName="never-made")
    assert error_of(cfn.delete_change_set, StackName=f"{name}-none", ChangeSetName="x") == (
        "ValidationError", f"Stack [{name}-none] does not exist", 400)
    assert error_of(cfn.describe_change_set, StackName=f"{name}-none", ChangeSetName="x")[1] == \
        f"Stack [{name}-none] does not exist"
    assert error_of(cfn.delete_change_set, ChangeSetName="x")[1] == \
        "StackName must be specified if ChangeSetName is not specified as an ARN."

    # Executing one deletes the stack's other change sets.
    cfn.execute_change_set(StackName=name, ChangeSetName=update["Id"])
    wait(cfn, "stack_update_complete", StackName=name)
    assert [(s["ChangeSetName"], s["ExecutionStatus"]) for s in cfn.list_change_sets(StackName=name)["Summaries"]] == [
        ("update", "EXECUTE_COMPLETE")]
    assert sqs.get_queue_attributes(QueueUrl=queue["PhysicalResourceId"], AttributeNames=["VisibilityTimeout"])[
        "Attributes"]["VisibilityTimeout"] == "60"
    assert stack_of(cfn, name)["ChangeSetId"] == update["Id"]
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


def test_create_stack_while_a_change_set_holds_it_in_review(cfn, name):
    template = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n"
    created = cfn.create_change_set(StackName=name, TemplateBody=template, ChangeSetName="review",
                                    ChangeSetType="CREATE")
    wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName="review")
    assert error_of(cfn.create_change_set, StackName=name, TemplateBody=template, ChangeSetName="review",
                    ChangeSetType="CREATE")[:2] == ("AlreadyExistsException", "ChangeSet [review] already exists")
    # AWS creates it (LocalStack's test_create_while_in_review): the same stack, its change set obsolete.
    assert cfn.create_stack(StackName=name, TemplateBody=template)["StackId"] == created["StackId"]
    wait(cfn, "stack_create_complete", StackName=name)
    assert cfn.describe_change_set(ChangeSetName=created["Id"])["ExecutionStatus"] == "OBSOLETE"
    assert error_of(cfn.create_change_set, StackName=name, TemplateBody=template, ChangeSetName="again",
                    ChangeSetType="CREATE")[1] == \
        f"Stack [{name}] already exists and cannot be created again with the changeSet [again]."
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


# TemplateURL and capabilities


def test_template_url_forms(server, cfn, name):
    s3 = s3_client(server.url)
    bucket = f"{name}-templates"
    s3.create_bucket(Bucket=bucket)
    template = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n"
    s3.put_object(Bucket=bucket, Key="dir/template.yaml", Body=template.encode())
    host, port = server.url.split("//")[1].split(":")
    for url in (f"http://{host}:{port}/{bucket}/dir/template.yaml",  # as `sam deploy` and the AWS CLI write it
                f"https://{bucket}.s3.amazonaws.com/dir/template.yaml",
                f"https://s3.us-east-1.amazonaws.com/{bucket}/dir/template.yaml"):
        assert cfn.validate_template(TemplateURL=url)["Parameters"] == []
    cfn.create_stack(StackName=name, TemplateURL=f"https://{bucket}.s3.amazonaws.com/dir/template.yaml")
    wait(cfn, "stack_create_complete", StackName=name)
    assert cfn.get_template(StackName=name)["TemplateBody"] == template

    assert error_of(cfn.create_stack, StackName=f"{name}-x", TemplateURL="ftp://example.com/t.yaml") == (
        "ValidationError", "TemplateURL must be a supported URL.", 400)
    assert error_of(cfn.validate_template, TemplateURL=f"https://{bucket}.s3.amazonaws.com/missing.yaml")[1] == \
        "S3 error: The specified key does not exist."
    assert error_of(cfn.create_stack, StackName=f"{name}-x")[1] == "Either Template URL or Template Body must be specified."
    assert error_of(cfn.validate_template)[1] == "Either Template URL or Template Body must be specified."
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


ROLE = """Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement: [{Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: "sts:AssumeRole"}]
"""


def sam_function(name: str) -> str:
    return f"""Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      FunctionName: {name}-fn
      Runtime: python3.12
      Handler: index.handler
      InlineCode: |
        def handler(event, context):
            return "ok"
"""


def test_capabilities(cfn, name):
    assert error_of(cfn.create_stack, StackName=name, TemplateBody=ROLE) == (
        "InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_IAM]", 400)
    named = ROLE.replace("Properties:\n", f"Properties:\n      RoleName: {name}-role\n")
    assert error_of(cfn.create_stack, StackName=name, TemplateBody=named, Capabilities=["CAPABILITY_IAM"])[:2] == (
        "InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_NAMED_IAM]")
    assert error_of(cfn.create_change_set, StackName=name, TemplateBody=ROLE, ChangeSetName="c",
                    ChangeSetType="CREATE")[:2] == (
        "InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_IAM]")
    validated = cfn.validate_template(TemplateBody=ROLE)
    assert (validated["Capabilities"], validated["CapabilitiesReason"]) == (
        ["CAPABILITY_IAM"], "The following resource(s) require capabilities: [Role]")
    # A SAM template: CreateStack needs CAPABILITY_AUTO_EXPAND; a change set does not (as `sam deploy` sends it).
    sam = sam_function(name)
    assert error_of(cfn.create_stack, StackName=name, TemplateBody=sam, Capabilities=["CAPABILITY_IAM"])[:2] == (
        "InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_AUTO_EXPAND]")
    cfn.create_change_set(StackName=f"{name}-bare", TemplateBody=sam, ChangeSetName="c", ChangeSetType="CREATE")
    with pytest.raises(WaiterError):
        wait(cfn, "change_set_create_complete", StackName=f"{name}-bare", ChangeSetName="c")
    bare = cfn.describe_change_set(StackName=f"{name}-bare", ChangeSetName="c")
    assert (bare["Status"], bare["StatusReason"]) == ("FAILED", "Requires capabilities : [CAPABILITY_IAM]")
    cfn.delete_stack(StackName=f"{name}-bare")

    cfn.create_stack(StackName=name, TemplateBody=named, Capabilities=["CAPABILITY_NAMED_IAM"])
    wait(cfn, "stack_create_complete", StackName=name)
    assert stack_of(cfn, name)["Capabilities"] == ["CAPABILITY_NAMED_IAM"]
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


def test_sam_template_through_a_change_set(cfn, server, name):
    sam = sam_function(name)
    cfn.create_change_set(StackName=name, TemplateBody=sam, ChangeSetName="sam", ChangeSetType="CREATE",
                          Capabilities=["CAPABILITY_IAM"])
    wait(cfn, "change_set_create_complete", StackName=name, ChangeSetName="sam")
    described = cfn.describe_change_set(StackName=name, ChangeSetName="sam")
    assert described["Capabilities"] == ["CAPABILITY_IAM"]
    assert {(c["ResourceChange"]["Action"], c["ResourceChange"]["ResourceType"]) for c in described["Changes"]} == {
        ("Add", "AWS::Lambda::Function"), ("Add", "AWS::IAM::Role")}
    cfn.execute_change_set(StackName=name, ChangeSetName="sam")
    wait(cfn, "stack_create_complete", StackName=name)

    assert cfn.get_template(StackName=name)["TemplateBody"] == sam  # as sent, before the transform
    processed = cfn.get_template(StackName=name, TemplateStage="Processed")["TemplateBody"]
    assert "Transform" not in processed  # botocore reads the JSON into a dict
    assert processed["Resources"]["Fn"]["Type"] == "AWS::Lambda::Function"
    assert processed["Resources"]["Fn"]["Properties"]["FunctionName"] == f"{name}-fn"
    summary = cfn.get_template_summary(StackName=name)
    assert summary["DeclaredTransforms"] == ["AWS::Serverless-2016-10-31"]
    assert summary["ResourceTypes"] == ["AWS::IAM::Role", "AWS::Lambda::Function"]
    assert summary["Capabilities"] == ["CAPABILITY_IAM"]
    lam = client_for(server.url, "lambda")
    assert lam.get_function(FunctionName=f"{name}-fn")["Configuration"]["Runtime"] == "python3.12"
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)


# Exports, deletion, termination protection


def test_exports_and_imports(cfn, sqs, name):
    exporter = f"""Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties: {{QueueName: {name}-q}}
Outputs:
  Url:
    Value: !Ref Queue
    Export: {{Name: {name}-url}}
"""
    importer = f"""Resources:
  Copy:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: {name}-copy
      Tags: [{{Key: source, Value: !ImportValue {name}-url}}]
"""
    exporter_id = cfn.create_stack(StackName=f"{name}-exp", TemplateBody=exporter)["StackId"]
    wait(cfn, "stack_create_complete", StackName=f"{name}-exp")
    url = sqs.get_queue_url(QueueName=f"{name}-q")["QueueUrl"]
    assert {"ExportingStackId": exporter_id, "Name": f"{name}-url", "Value": url} in cfn.list_exports()["Exports"]
    assert error_of(cfn.list_imports, ExportName=f"{name}-url")[1] == f"Export '{name}-url' is not imported by any stack."
    code, message, _ = error_of(cfn.create_stack, StackName=f"{name}-imp",
                                TemplateBody=importer.replace(f"{name}-url", f"{name}-none"))
    assert code == "ValidationError" and message.endswith(f"No export named {name}-none found.")

    cfn.create_stack(StackName=f"{name}-imp", TemplateBody=importer)
    wait(cfn, "stack_create_complete", StackName=f"{name}-imp")
    copy = sqs.get_queue_url(QueueName=f"{name}-copy")["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=copy)["Tags"] == {"source": url}
    assert cfn.list_imports(ExportName=f"{name}-url")["Imports"] == [f"{name}-imp"]

    # The exporter cannot go while its export is imported.
    cfn.delete_stack(StackName=f"{name}-exp")
    with pytest.raises(WaiterError):
        wait(cfn, "stack_delete_complete", StackName=f"{name}-exp")
    stack = stack_of(cfn, f"{name}-exp")
    reason = f"Export {name}-url cannot be deleted as it is in use by {name}-imp"
    assert (stack["StackStatus"], stack["StackStatusReason"]) == ("DELETE_FAILED", reason)
    assert events_of(cfn, f"{name}-exp")[-1]["ResourceStatusReason"] == reason
    assert queue_exists(sqs, f"{name}-q")

    cfn.delete_stack(StackName=f"{name}-imp")
    wait(cfn, "stack_delete_complete", StackName=f"{name}-imp")
    cfn.delete_stack(StackName=f"{name}-exp")
    wait(cfn, "stack_delete_complete", StackName=f"{name}-exp")
    assert all(e["Name"] != f"{name}-url" for e in cfn.list_exports()["Exports"])
    assert not queue_exists(sqs, f"{name}-q")


def test_retained_resources_and_a_bucket_that_is_not_empty(server, cfn, sqs, name):
    s3 = s3_client(server.url)
    template = f"""Resources:
  Kept:
    Type: AWS::SQS::Queue
    DeletionPolicy: Retain
    Properties: {{QueueName: {name}-kept}}
  Bucket:
    Type: AWS::S3::Bucket
    Properties: {{BucketName: {name}-bucket}}
"""
    cfn.create_stack(StackName=name, TemplateBody=template)
    wait(cfn, "stack_create_complete", StackName=name)
    s3.put_object(Bucket=f"{name}-bucket", Key="object", Body=b"data")

    cfn.delete_stack(StackName=name)
    with pytest.raises(WaiterError):
        wait(cfn, "stack_delete_complete", StackName=name)
    stack = stack_of(cfn, name)
    assert (stack["StackStatus"], stack["StackStatusReason"]) == (
        "DELETE_FAILED", "The following resource(s) failed to delete: [Bucket]. ")
    events = events_of(cfn, name)
    [bucket_failed] = [e for e in events if e["LogicalResourceId"] == "Bucket" and e["ResourceStatus"] == "DELETE_FAILED"]
    assert f"{name}-bucket" in bucket_failed["ResourceStatusReason"]
    assert "not empty" in bucket_failed["ResourceStatusReason"]
    assert [e["ResourceStatus"] for e in events if e["LogicalResourceId"] == "Kept"] == [
        "CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS", "CREATE_COMPLETE", "DELETE_SKIPPED"]
    assert [r["LogicalResourceId"] for r in cfn.list_stack_resources(StackName=name)["StackResourceSummaries"]] == [
        "Bucket"]

    s3.delete_object(Bucket=f"{name}-bucket", Key="object")
    cfn.delete_stack(StackName=name)
    wait(cfn, "stack_delete_complete", StackName=name)
    assert stack_statuses(cfn, stack["StackId"])[-2:] == ["DELETE_IN_PROGRESS", "DELETE_COMPLETE"]
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=f"{name}-bucket")
    assert queue_exists(sqs, f"{name}-kept")  # retained: the stack's deletion leaves it
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=f"{name}-kept")["QueueUrl"])


def test_termination_protection(cfn, name):
    cfn.create_stack(StackName=name, TemplateBody="Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n",
                     EnableTerminationProtection=True)
    wait(cfn, "stack_create_complete", StackName=name)
    assert stack_of(cfn, name)["EnableTerminationProtection"] is True
    assert error_of(cfn.delete_stack, StackName=name) == (
        "ValidationError", f"Stack [{name}] cannot be deleted while TerminationProtection is enabled", 400)
    assert stack_of(cfn, name)["StackStatus"] == "CREATE_COMPLETE"
    stack_id = cfn.update_termination_protection(StackName=name, EnableTerminationProtection=False)["StackId"]
    assert stack_of(cfn, name)["EnableTerminationProtection"] is False
    cfn.delete_stack(StackName=stack_id)
    wait(cfn, "stack_delete_complete", StackName=stack_id)


# Raw HTTP


def post(url: str, body: str, signed: bool = True) -> tuple[int, str]:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if signed:  # the scope names the service (the server does not check signatures unless told to)
        headers.update({"X-Amz-Date": "20260101T000000Z", "Authorization": (
            "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/cloudformation/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=" + "0" * 64)})
    request = urllib.request.Request(url + "/", data=body.encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_raw_requests_are_answered_in_xml(server):
    cases = [
        ("Action=DescribeStacks&Version=2010-05-15", False, None),  # unsigned
        ("Action=CreateStack&Version=2010-05-15", True, "ValidationError"),  # no StackName
        ("Action=CreateStack&Version=2010-05-15&StackName=a&Parameters.member.x.ParameterKey=1", True, None),
        ("Action=CreateStack&Version=2010-05-15&StackName=a&TimeoutInMinutes=soon&TemplateBody="
         + urllib.parse.quote("Resources: {Q: {Type: AWS::SQS::Queue}}"), True, None),
        ("Action=NoSuchAction&Version=2010-05-15", True, None),
        ("%%%", True, None),
    ]
    for body, signed, code in cases:
        status, text = post(server.url, body, signed)
        assert 400 <= status < 500, (body, status, text)
        assert "<ErrorResponse" in text and "<Code>" in text and "<RequestId>" in text, (body, text)
        if code is not None:
            assert f"<Code>{code}</Code>" in text
    status, text = post(server.url, "Action=DescribeStacks&Version=2010-05-15&StackName=nope-" + uuid.uuid4().hex[:6])
    assert status == 400 and "does not exist</Message>" in text
    assert 'xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"' in text


def test_an_answer_quoting_what_xml_cannot_carry_is_still_xml(server, cfn):
    # The message quotes the stack name: with a NUL or an escape character in it the answer was no
    # XML document, and boto3 read no error ("Unable to parse response"). Such characters are
    # answered as U+FFFD, as kinesim's S3 answers them in keys.
    for name, shown in (("no\x00such", "no\ufffdsuch"), ("no\x1bsuch\ufffe", "no\ufffdsuch\ufffd")):
        assert error_of(cfn.describe_stacks, StackName=name) == (
            "ValidationError", f"Stack with id {shown} does not exist", 400)
