"""Custom resources (`AWS::CloudFormation::CustomResource` and `Custom::<Name>`), as CloudFormation
runs them (UserGuide crpg-ref.html, crpg-ref-requests.html, crpg-ref-responses.html).

Each Create, Update and Delete is a request to the provider that `ServiceToken` names: a Lambda
function, invoked asynchronously as CloudFormation invokes it, or an SNS topic, which gets the
request as its message. The resource then waits for the provider's answer, a JSON document PUT to
the request's `ResponseURL` (on AWS a presigned S3 URL; here a route of this server, see
kinesim/cloudformation/custom_responses.py), for up to `ServiceTimeout` seconds (default 3,600).
The answer's `PhysicalResourceId` is the resource's and its `Data` are what `Fn::GetAtt` gives.
An Update answered with another `PhysicalResourceId` is a replacement: the engine sends the old one
a Delete in the clean-up phase, once the whole update succeeded.

The provider sees every property as CloudFormation sends it: numbers and booleans as strings,
`ServiceToken` (and `ServiceTimeout`) included.
"""
from __future__ import annotations

import json
import re
import uuid
from typing import Any, Protocol

from .resources import Applied, ResourceHandler, Target
from .template import DeployError

CUSTOM_RESOURCE = "AWS::CloudFormation::CustomResource"
DEFAULT_SERVICE_TIMEOUT_S = 3600
# "Custom resource type names can be up to 60 characters long and can include alphanumeric and the
# following characters: _@-" (crpg-ref-requests.html).
_CUSTOM_TYPE = re.compile(r"Custom::[A-Za-z0-9_@-]{1,52}")
_TOKEN = re.compile(r"arn:aws[a-z-]*:(lambda|sns):([a-z0-9-]+):\d{12}:.+")
MASK = "*****"


def is_custom(type_name: str) -> bool:
    return type_name == CUSTOM_RESOURCE or type_name.startswith("Custom::")


def check_type_name(type_name: str) -> str | None:
    """What is wrong with a custom resource type's name, if anything."""
    if type_name == CUSTOM_RESOURCE or _CUSTOM_TYPE.fullmatch(type_name):
        return None
    return (f"Invalid custom resource type {type_name}: names are Custom:: followed by up to 52 letters, digits "
            "and the characters _@-")


class Responses(Protocol):
    """Where providers' answers arrive (the server's CloudFormation: custom_responses.py)."""

    def open(self) -> tuple[str, str]: ...  # (token, ResponseURL)

    def wait(self, token: str, timeout: float) -> Any: ...  # the answer, or None after `timeout`

    def close(self, token: str) -> None: ...


def as_sent(value: Any) -> Any:
    """A property value as CloudFormation sends it to a provider: scalars become strings."""
    if isinstance(value, dict):
        return {k: as_sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_sent(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


class CustomResource(ResourceHandler):
    """One custom resource of a stack: its type, logical id and stack go into every request."""
    type_name = CUSTOM_RESOURCE

    def __init__(self, target: Target, resource_type: str = CUSTOM_RESOURCE, logical_id: str = "",
                 stack_id: str = ""):
        super().__init__(target)
        self.resource_type = resource_type
        self.logical_id = logical_id
        self.stack_id = stack_id
        self.no_echo = False  # the last answer asked for its Data to be masked
        self.failed_id: str | None = None  # the physical id a FAILED answer to Create gave

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        token = properties.get("ServiceToken")
        if not isinstance(token, str) or not token:
            raise DeployError("Property ServiceToken cannot be empty.")
        found = _TOKEN.fullmatch(token)
        if not found:
            raise DeployError(f"Invalid service token {token!r}: a Lambda function ARN or an SNS topic ARN")
        if found.group(2) != self.target.region:
            raise DeployError(f"Invalid service token {token}: it must be in the stack's Region "
                              f"({self.target.region})")
        if "ServiceTimeout" in properties:
            timeout = str(properties["ServiceTimeout"])
            if not timeout.isdigit() or not 1 <= int(timeout) <= DEFAULT_SERVICE_TIMEOUT_S:
                raise DeployError(f"Property ServiceTimeout: {timeout} is not an integer from 1 to 3600")
        return as_sent(properties)

    def replacement_reasons(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return []  # the provider decides, by answering an Update with another PhysicalResourceId

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        return self._request("Create", desired)

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        return self.update_resource(physical_id, old, new, attributes).attributes

    def update_resource(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
                        attributes: dict[str, Any]) -> Applied:
        if old.get("ServiceToken") != new.get("ServiceToken"):
            raise DeployError("Modifying service token is not allowed.")
        return self._request("Update", new, physical_id, old)

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        self._request("Delete", desired, physical_id)

    def _request(self, kind: str, properties: dict[str, Any], physical_id: str | None = None,
                 old: dict[str, Any] | None = None) -> Applied:
        responses: Responses | None = self.target.custom_resources
        if responses is None:
            raise DeployError("custom resources are run by the server's CloudFormation (kinesim serve)")
        token, url = responses.open()
        request_id = str(uuid.uuid4())
        request: dict[str, Any] = {
            "RequestType": kind, "ServiceToken": properties["ServiceToken"], "ResponseURL": url,
            "StackId": self.stack_id, "RequestId": request_id, "LogicalResourceId": self.logical_id,
            "ResourceType": self.resource_type}
        if physical_id is not None:
            request["PhysicalResourceId"] = physical_id
        request["ResourceProperties"] = properties
        if old is not None:
            request["OldResourceProperties"] = old
        try:
            self._send(properties["ServiceToken"], request)
            answer = responses.wait(token, _timeout(properties))
        finally:
            responses.close(token)
        return self._outcome(answer, request_id, physical_id)

    def _send(self, token: str, request: dict[str, Any]) -> None:
        payload = json.dumps(request)
        if token.split(":")[2] == "lambda":
            # CloudFormation invokes the function asynchronously: Lambda's retries and its
            # on-failure destinations apply, and the answer comes through the ResponseURL.
            self.target.lambda_.invoke(FunctionName=token, InvocationType="Event", Payload=payload.encode())
        else:
            self.target.sns.publish(TopicArn=token, Message=payload,
                                    Subject="AWS CloudFormation custom resource request")

    def _outcome(self, answer: Any, request_id: str, physical_id: str | None) -> Applied:
        if answer is None:
            # AWS's words, quoted in many issue threads (aws-samples/...#162, aws-cdk#2126).
            raise DeployError("CloudFormation did not receive a response from your Custom Resource. Please check "
                              f"your logs for requestId [{request_id}]. If you are using the Python cfn-response "
                              "module, you may need to update your Lambda function code so that CloudFormation "
                              "can attach the updated version.")
        if isinstance(answer, str):  # the answer could not be taken (too long, not JSON)
            raise DeployError(answer)
        status = answer.get("Status")
        if status == "FAILED":
            if physical_id is None:  # a failed Create: its physical id gets a Delete in the rollback
                self.failed_id = answer.get("PhysicalResourceId") if isinstance(answer.get("PhysicalResourceId"),
                                                                                str) else None
            raise DeployError(f"Received response status [FAILED] from custom resource. Message returned: "
                              f"{answer.get('Reason', '')} (RequestId: {request_id})")
        if status != "SUCCESS":
            raise DeployError(f"Invalid response status [{status}] from custom resource: it is SUCCESS or FAILED "
                              f"(RequestId: {request_id})")
        new_id = answer.get("PhysicalResourceId")
        if not isinstance(new_id, str) or not new_id:
            if physical_id is None:
                raise DeployError(f"Invalid PhysicalResourceId: the custom resource's response has none "
                                  f"(RequestId: {request_id})")
            new_id = physical_id
        if len(new_id.encode()) > 1024:
            raise DeployError(f"Invalid PhysicalResourceId: longer than 1 KB (RequestId: {request_id})")
        data = answer.get("Data")
        if data is not None and not isinstance(data, dict):
            raise DeployError(f"Invalid response Data from custom resource: a JSON object (RequestId: {request_id})")
        self.no_echo = answer.get("NoEcho") in (True, "true", "True")
        return Applied(new_id, data or {})


def _timeout(properties: dict[str, Any]) -> float:
    return float(properties.get("ServiceTimeout") or DEFAULT_SERVICE_TIMEOUT_S)


def masked(value: Any, secrets: set[str]) -> Any:
    """`value` with every string a NoEcho answer gave replaced by asterisks, as CloudFormation shows
    such values in events and outputs."""
    if not secrets:
        return value
    if isinstance(value, dict):
        return {k: masked(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [masked(v, secrets) for v in value]
    return MASK if isinstance(value, str) and value in secrets else value
