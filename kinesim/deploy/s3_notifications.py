"""AWS::S3::Bucket's `NotificationConfiguration` as the PutBucketNotificationConfiguration request
CloudFormation makes of it.

CloudFormation's shape (one event per entry; the ARN under `Function` / `Queue` / `Topic`; key
filters under `Filter.S3Key.Rules`) differs from the S3 API's (`Events` lists, `*Arn` members,
`Filter.Key.FilterRules`); SAM's `S3` events generate the former. Checks are S3's own: the request
is sent as it is and S3 answers what is wrong with it.
"""
from __future__ import annotations

from typing import Any

from .template import DeployError

# CloudFormation list -> (S3 API list, CloudFormation ARN property, S3 API ARN member)
_KINDS = (("TopicConfigurations", "TopicConfigurations", "Topic", "TopicArn"),
          ("QueueConfigurations", "QueueConfigurations", "Queue", "QueueArn"),
          ("LambdaConfigurations", "LambdaFunctionConfigurations", "Function", "LambdaFunctionArn"))
PROPERTIES = frozenset({"TopicConfigurations", "QueueConfigurations", "LambdaConfigurations",
                        "EventBridgeConfiguration"})


def request_shape(configuration: dict[str, Any] | None) -> dict[str, Any]:
    """The `NotificationConfiguration` parameter of PutBucketNotificationConfiguration for the
    template's property ({} — no notifications — when it is absent). DeployError for a property
    CloudFormation's schema does not have."""
    if not configuration:
        return {}
    if not isinstance(configuration, dict):
        raise DeployError("NotificationConfiguration must be an object")
    unknown = sorted(set(configuration) - PROPERTIES)
    if unknown:
        raise DeployError(f"NotificationConfiguration: unknown properties {', '.join(unknown)}")
    out: dict[str, Any] = {}
    for cfn_key, api_key, cfn_arn, api_arn in _KINDS:
        entries = configuration.get(cfn_key) or []
        if not isinstance(entries, list):
            raise DeployError(f"NotificationConfiguration.{cfn_key} must be a list")
        for n, entry in enumerate(entries):
            where = f"NotificationConfiguration.{cfn_key}[{n}]"
            if not isinstance(entry, dict) or "Event" not in entry or cfn_arn not in entry:
                raise DeployError(f"{where} needs Event and {cfn_arn}")
            extra = sorted(set(entry) - {"Event", cfn_arn, "Filter"})
            if extra:
                raise DeployError(f"{where}: unknown properties {', '.join(extra)}")
            item: dict[str, Any] = {api_arn: entry[cfn_arn], "Events": [entry["Event"]]}
            rules = _rules(entry.get("Filter"), where)
            if rules:
                item["Filter"] = {"Key": {"FilterRules": rules}}
            out.setdefault(api_key, []).append(item)
    bridge = configuration.get("EventBridgeConfiguration")
    if bridge is not None:
        if not isinstance(bridge, dict) or set(bridge) - {"EventBridgeEnabled"}:
            raise DeployError("NotificationConfiguration.EventBridgeConfiguration takes EventBridgeEnabled only")
        if str(bridge.get("EventBridgeEnabled", True)).lower() == "true":
            out["EventBridgeConfiguration"] = {}
    return out


def _rules(filter_: Any, where: str) -> list[dict[str, str]]:
    if filter_ is None:
        return []
    rules = (filter_.get("S3Key") or {}).get("Rules") if isinstance(filter_, dict) else None
    if not isinstance(rules, list) or not all(isinstance(r, dict) and set(r) == {"Name", "Value"} for r in rules):
        raise DeployError(f"{where}.Filter must be {{S3Key: {{Rules: [{{Name, Value}}, ...]}}}}")
    return [{"Name": str(r["Name"]), "Value": str(r["Value"])} for r in rules]


def put_arguments(configuration: dict[str, Any] | None) -> dict[str, Any]:
    """PutBucketNotificationConfiguration's arguments but Bucket (what the bucket's configuration
    table wants); removing the property puts `{}`, as CloudFormation does."""
    return {"NotificationConfiguration": request_shape(configuration)}
