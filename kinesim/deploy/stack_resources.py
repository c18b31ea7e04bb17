"""Nested stacks: AWS::CloudFormation::Stack, a stack made from another template (TemplateURL) by
the CloudFormation API of the same server, as CloudFormation makes it for the parent stack.

- The child is named as CloudFormation names it, `<parent>-<LogicalId>-<12 upper-case letters
  and digits>` ("cloudformation2-BBBNetworkStack-6LV2DJOIC9I8" in AWS's errors quoted in
  aws-samples/aws-scalable-big-blue-button-example#74; LocalStack's test_nested_stacks.py looks
  for `<parent>-ChildStack-`). The name is recorded before the child is created (the type's
  "name" for the engine), so a child a killed deploy left half-made is found and deleted.
- `Ref` is the child's stack id (ARN); `Fn::GetAtt Child.Outputs.<Key>` each of its outputs.
- The parent waits until the child has settled. A child that failed fails its resource with
  AWS's words: "Embedded stack <arn> was not successfully created: <the child's reason>", and
  "... was not successfully updated. Currently in UPDATE_ROLLBACK_IN_PROGRESS with reason: ...",
  "... was not successfully deleted: ..." (as AWS's stack events quoted in issues show them).
- No property change replaces a nested stack (the type's schema has no createOnlyProperties).
  CloudFormation "initiates an update to its nested stacks" whenever the parent is updated
  (AWS::CloudFormation::Stack's documentation; ChangeSource `Automatic` in botocore's model):
  the child is updated when its TemplateURL, parameters, tags or notification ARNs change, and
  when the object at TemplateURL changed (its ETag is part of the desired properties).
"""
from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .resources import Applied, AttributeNames, ResourceHandler, error_code
from .template import DeployError, TemplateError
from .template_url import s3_location

TYPE = "AWS::CloudFormation::Stack"
# A nested stack may hold IAM resources and macros: its parent's acknowledgement covers them.
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
# How long a child may take when the template sets no TimeoutInMinutes (a stack of functions
# with dependencies takes minutes; one that takes an hour is stuck).
DEFAULT_TIMEOUT_S = 60 * 60
MAX_POLL_S = 1.0
# The longest wait for a child's operation to end before it is described again.
MAX_AWAIT_S = 30.0
NO_UPDATES = "No updates are to be performed."
# What the child is while an operation is under way.
_BUSY_SUFFIX = "_IN_PROGRESS"
_PARAMETERS_TYPE = "Value of property Parameters must be an object with String (or simple type) properties"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise DeployError(_PARAMETERS_TYPE)


def _parameter(value: Any) -> str:
    """A parameter value as the child is given it: a list (a List<...> or CommaDelimitedList
    parameter, from Fn::Split or Fn::GetAZs) comma-joined."""
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    return _text(value)


class CloudFormationStack(ResourceHandler):
    type_name = TYPE
    # Not a property of the type: the engine generates the child's name under it (none is given).
    name_property = "StackName"
    name_max_length = 128
    attributes = AttributeNames({r"Outputs\..*"})
    SUPPORTED = {"TemplateURL", "Parameters", "Tags", "TimeoutInMinutes", "NotificationARNs"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        url = properties.get("TemplateURL")
        if not isinstance(url, str) or not url:
            raise DeployError("property TemplateURL of AWS::CloudFormation::Stack is required")
        parameters = properties.get("Parameters") or {}
        if not isinstance(parameters, dict):
            raise DeployError(_PARAMETERS_TYPE)
        tags = properties.get("Tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, dict) and "Key" in t and "Value" in t for t in tags):
            raise DeployError("property Tags of AWS::CloudFormation::Stack must be a list of {Key, Value}")
        arns = properties.get("NotificationARNs") or []
        if not isinstance(arns, list) or len(arns) > 5:
            raise DeployError("property NotificationARNs of AWS::CloudFormation::Stack must be a list of at most "
                              "5 topic ARNs")
        timeout = properties.get("TimeoutInMinutes")
        if timeout is not None:
            try:
                timeout = int(timeout)
            except (TypeError, ValueError):
                raise DeployError(f"property TimeoutInMinutes of AWS::CloudFormation::Stack must be an integer, "
                                  f"not {timeout!r}") from None
            if timeout < 1:
                raise DeployError("property TimeoutInMinutes of AWS::CloudFormation::Stack must be at least 1")
        return {"TemplateURL": url, "Parameters": {str(k): _parameter(v) for k, v in parameters.items()},
                "Tags": [{"Key": str(t["Key"]), "Value": _text(t["Value"])} for t in tags],
                "NotificationARNs": [str(a) for a in arns], "TimeoutInMinutes": timeout,
                "TemplateETag": self._etag(url)}

    def _etag(self, url: str) -> str | None:
        """The version of the template at `url` (None if it cannot be read now: creating the child
        then says why, as CloudFormation does)."""
        from kinesim.protocol.errors import AwsError

        if self.target.s3 is None:
            return None
        try:
            bucket, key = s3_location(url)
            return str(self.target.s3.head_object(Bucket=bucket, Key=key).get("ETag"))
        except (TemplateError, AwsError, ClientError, BotoCoreError):
            return None

    # the API calls

    def _request(self, desired: dict[str, Any]) -> dict[str, Any]:
        return {"TemplateURL": desired["TemplateURL"], "Capabilities": CAPABILITIES, "Tags": desired["Tags"],
                "NotificationARNs": desired["NotificationARNs"],
                "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in desired["Parameters"].items()]}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        request = {"StackName": name, **self._request(desired)}
        if desired["TimeoutInMinutes"] is not None:
            request["TimeoutInMinutes"] = desired["TimeoutInMinutes"]
        try:
            stack_id = self.target.cloudformation.create_stack(**request)["StackId"]
        except ClientError as err:
            if error_code(err) == "LimitExceededException":
                # The account's quotas end a chain of nested stacks; the resource's status reason is
                # the quota's message alone, as AWS gives it ("Limit for stack has been exceeded").
                raise DeployError(err.response["Error"].get("Message") or error_code(err)) from None
            found = self._describe(name) if error_code(err) == "AlreadyExistsException" else None
            if found is None:
                raise
            stack_id = found["StackId"]  # a retried request whose first attempt went through: the name is ours
        stack = self._settled(stack_id, desired["TimeoutInMinutes"], "created")
        if stack is None or stack["StackStatus"] != "CREATE_COMPLETE":
            failure = DeployError(f"Embedded stack {stack_id} was not successfully created: {_reason(stack)}")
            # Half made is not made: the child that failed (ROLLBACK_COMPLETE) goes, as the
            # parent's rollback deletes it on AWS.
            self.delete(stack_id, desired)
            raise failure
        return Applied(stack_id, _outputs(stack))

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        self._settled(physical_id, new["TimeoutInMinutes"], "updated")  # an operation a kill left under way
        try:
            self.target.cloudformation.update_stack(StackName=physical_id, **self._request(new))
            changed = True
        except ClientError as err:
            if (err.response.get("Error", {}).get("Message") or "") != NO_UPDATES:
                raise
            changed = False  # already as desired (after a rollback of the child's own, too)
        stack = self._settled(physical_id, new["TimeoutInMinutes"], "updated")
        if stack is None or changed and stack["StackStatus"] != "UPDATE_COMPLETE":
            raise DeployError(f"Embedded stack {physical_id} was not successfully updated. Currently in "
                              f"UPDATE_ROLLBACK_IN_PROGRESS with reason: {_reason(stack)}")
        return _outputs(stack)

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        # By id, or by name for a child whose creation never answered (it may not exist).
        stack = self._settled(physical_id, desired.get("TimeoutInMinutes"), "deleted")
        if stack is None or stack["StackStatus"] == "DELETE_COMPLETE":
            return
        self.target.cloudformation.delete_stack(StackName=stack["StackId"])
        stack = self._settled(stack["StackId"], desired.get("TimeoutInMinutes"), "deleted",
                              until=("DELETE_COMPLETE", "DELETE_FAILED"))
        if stack is not None and stack["StackStatus"] == "DELETE_FAILED":
            raise DeployError(f"Embedded stack {stack['StackId']} was not successfully deleted: {_reason(stack)}")

    def _describe(self, name_or_id: str) -> dict[str, Any] | None:
        try:
            return self.target.cloudformation.describe_stacks(StackName=name_or_id)["Stacks"][0]
        except ClientError as err:
            if "does not exist" in (err.response.get("Error", {}).get("Message") or ""):
                return None
            raise

    def _settled(self, name_or_id: str, timeout_minutes: int | None, what: str,
                 until: tuple[str, ...] | None = None) -> dict[str, Any] | None:
        """The child once no operation is under way on it (or, with `until`, once it is in one of
        those statuses); None if it does not exist. Described again when the child's operation ends
        (the server tells its engine), else polled from 50 ms, backing off to 1 s."""
        limit = timeout_minutes * 60 if timeout_minutes else DEFAULT_TIMEOUT_S
        deadline, delay = time.monotonic() + limit, 0.05
        while True:
            stack = self._describe(name_or_id)
            if stack is None:
                return None
            status = stack["StackStatus"]
            settled = status in until if until else not status.endswith(_BUSY_SUFFIX) or status == "REVIEW_IN_PROGRESS"
            if settled:
                return stack
            if time.monotonic() > deadline:
                raise DeployError(f"Embedded stack {stack['StackId']} was not successfully {what}: it is still "
                                  f"{status} after {limit // 60} minutes")
            awaited = self.target.await_stack is not None and \
                self.target.await_stack(stack["StackName"], min(MAX_AWAIT_S, max(deadline - time.monotonic(), 0.0)))
            if not awaited:
                time.sleep(delay)
                delay = min(delay * 2, MAX_POLL_S)


def _outputs(stack: dict[str, Any]) -> dict[str, Any]:
    return {f"Outputs.{o['OutputKey']}": o.get("OutputValue", "") for o in stack.get("Outputs") or []}


def _reason(stack: dict[str, Any] | None) -> str:
    if stack is None:
        return "the stack is gone"
    return stack.get("StackStatusReason") or stack["StackStatus"]
