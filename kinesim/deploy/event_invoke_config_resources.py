"""AWS::Lambda::EventInvokeConfig: how a function's version or alias handles asynchronous
invocations (retries, event age, OnSuccess / OnFailure destinations), made with
PutFunctionEventInvokeConfig and removed with DeleteFunctionEventInvokeConfig. It is also what
SAM's `EventInvokeConfig` property of `AWS::Serverless::Function` becomes (for the `$LATEST`
qualifier, or the alias of `AutoPublishAlias`).

FunctionName and Qualifier identify the configuration (the schema's primaryIdentifier, both
create-only: a change replaces it); `Ref` gives them as `FunctionName|Qualifier`, the way
CloudFormation joins a multi-part identifier. An update puts the whole configuration again, so a
property removed from the template is removed from the configuration too.
"""
from __future__ import annotations

from typing import Any

from .resources import Applied, ResourceHandler, _input_shape, coerce, unless_gone
from .template import DeployError


class LambdaEventInvokeConfig(ResourceHandler):
    type_name = "AWS::Lambda::EventInvokeConfig"
    SUPPORTED = {"FunctionName", "Qualifier", "MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig"}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        missing = sorted({"FunctionName", "Qualifier"} - set(properties))
        if missing:
            raise DeployError(f"property {', '.join(missing)} is required")
        destinations = properties.get("DestinationConfig")
        if destinations is not None and not isinstance(destinations, dict):
            raise DeployError("property DestinationConfig must be an object with OnSuccess and/or OnFailure")
        for kind, destination in (destinations or {}).items():
            arn = destination.get("Destination") if isinstance(destination, dict) else None
            if isinstance(arn, str) and arn.startswith("arn:") and arn.split(":")[2:3] == ["events"]:
                # Said before anything is made (the API refuses it too): kinesim serves no EventBridge.
                raise DeployError(f"DestinationConfig.{kind} is an EventBridge event bus ({arn}); kinesim does not "
                                  "serve EventBridge: use an SQS queue, SNS topic or Lambda function (or, for "
                                  "OnFailure, an S3 bucket)")
        return coerce(_input_shape(self.target.lambda_, "PutFunctionEventInvokeConfig"), dict(properties))

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        self._put(desired)
        return Applied(f"{desired['FunctionName']}|{desired['Qualifier']}", {})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        self._put(new)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        # The function may be gone already (deleted before this resource, or with its stack).
        unless_gone(lambda: self.target.lambda_.delete_function_event_invoke_config(
            FunctionName=desired["FunctionName"], Qualifier=desired["Qualifier"]))

    def _put(self, desired: dict[str, Any]) -> None:
        # PutFunctionEventInvokeConfig wants at least one setting; a template may give none (all
        # defaults): then the configuration is the defaults, stated.
        params = dict(desired)
        if not any(k in params for k in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds", "DestinationConfig")):
            params["DestinationConfig"] = {}
        self.target.lambda_.put_function_event_invoke_config(**params)
