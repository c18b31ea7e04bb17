"""SNS resources: AWS::SNS::Topic (with its inline `Subscription` list), AWS::SNS::Subscription,
and AWS::SNS::TopicPolicy (accepted and recorded like IAM: kinesim checks no permissions)."""
from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from .iam_resources import ResourcePolicy
from .resources import Applied, ResourceHandler, error_code, tag_map
from .template import DeployError

# Template property -> topic attribute (the same names, as strings).
_TOPIC_ATTRIBUTES = ("DisplayName", "KmsMasterKeyId", "SignatureVersion", "TracingConfig",
                     "ContentBasedDeduplication", "ArchivePolicy", "DataProtectionPolicy", "FifoThroughputScope")


def _text(value: Any) -> str:
    """A property as SNS's string attributes take it (JSON documents serialised, booleans lowercase)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _gone(err: ClientError) -> bool:
    return error_code(err) in ("NotFound", "ResourceNotFound")


class SnsTopic(ResourceHandler):
    type_name = "AWS::SNS::Topic"
    name_property = "TopicName"
    name_max_length = 256
    attributes = frozenset({"TopicArn", "TopicName"})
    SUPPORTED = {"TopicName", "FifoTopic", "Subscription", "Tags", *_TOPIC_ATTRIBUTES}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        out: dict[str, Any] = {"TopicName": properties.get("TopicName"),
                               "FifoTopic": _text(properties.get("FifoTopic", False)).lower() == "true",
                               "Attributes": {k: _text(properties[k]) for k in _TOPIC_ATTRIBUTES if k in properties},
                               "Tags": tag_map(properties.get("Tags"))}
        subs = []
        for sub in properties.get("Subscription") or []:
            if not isinstance(sub, dict) or not sub.get("Endpoint") or not sub.get("Protocol"):
                raise DeployError("each Subscription of an AWS::SNS::Topic needs Endpoint and Protocol")
            subs.append({"Protocol": str(sub["Protocol"]), "Endpoint": str(sub["Endpoint"])})
        out["Subscription"] = subs
        return out

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        if desired["FifoTopic"] and not desired["TopicName"] and not name.endswith(".fifo"):
            name = name[:251] + ".fifo"  # a generated FIFO topic name keeps its suffix, as CloudFormation's
        attributes = dict(desired["Attributes"])
        if desired["FifoTopic"]:
            attributes["FifoTopic"] = "true"
        request: dict[str, Any] = {"Name": name, "Attributes": attributes}
        if desired["Tags"]:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in desired["Tags"].items()]
        arn = self.target.sns.create_topic(**request)["TopicArn"]
        try:
            for sub in desired["Subscription"]:
                self.target.sns.subscribe(TopicArn=arn, ReturnSubscriptionArn=True, **sub)
        except Exception:
            self.delete(arn, desired)  # half made is not made
            raise
        return Applied(arn, {"TopicArn": arn, "TopicName": name})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        sns = self.target.sns
        for key in sorted(set(old["Attributes"]) | set(new["Attributes"])):
            if old["Attributes"].get(key) != new["Attributes"].get(key):
                value = new["Attributes"].get(key, "false" if key == "ContentBasedDeduplication" else "")
                sns.set_topic_attributes(TopicArn=physical_id, AttributeName=key, AttributeValue=value)
        wanted = {(s["Protocol"], s["Endpoint"]) for s in new["Subscription"]}
        had = {(s["Protocol"], s["Endpoint"]) for s in old["Subscription"]}
        for sub in self._subscriptions(physical_id):
            if (sub["Protocol"], sub["Endpoint"]) in had - wanted:
                sns.unsubscribe(SubscriptionArn=sub["SubscriptionArn"])
        for protocol, endpoint in sorted(wanted - had):
            sns.subscribe(TopicArn=physical_id, Protocol=protocol, Endpoint=endpoint, ReturnSubscriptionArn=True)
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            sns.untag_resource(ResourceArn=physical_id, TagKeys=removed)
        changed = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if changed:
            sns.tag_resource(ResourceArn=physical_id, Tags=[{"Key": k, "Value": v} for k, v in changed.items()])
        return attributes

    def _subscriptions(self, arn: str) -> list[dict[str, Any]]:
        pages = self.target.sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn)
        return [s for page in pages for s in page["Subscriptions"]]

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        self.target.sns.delete_topic(TopicArn=physical_id)  # also removes its subscriptions; gone is fine


class SnsSubscription(ResourceHandler):
    type_name = "AWS::SNS::Subscription"
    attributes = frozenset({"Arn"})
    POLICIES = ("FilterPolicy", "RedrivePolicy", "DeliveryPolicy", "ReplayPolicy")
    SETTABLE = ("RawMessageDelivery", "FilterPolicyScope", "SubscriptionRoleArn", *POLICIES)
    SUPPORTED = {"TopicArn", "Protocol", "Endpoint", "Region", *SETTABLE}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        for key in ("TopicArn", "Protocol"):
            if not properties.get(key):
                raise DeployError(f"{key} is required for {self.type_name}")
        region = properties.get("Region")
        if region and region != self.target.region:
            raise DeployError(f"Region {region} of {self.type_name}: kinesim serves {self.target.region} only")
        return {"TopicArn": str(properties["TopicArn"]), "Protocol": str(properties["Protocol"]),
                "Endpoint": str(properties.get("Endpoint", "")),
                "Attributes": {k: _text(properties[k]) for k in self.SETTABLE if k in properties}}

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        request: dict[str, Any] = {"TopicArn": desired["TopicArn"], "Protocol": desired["Protocol"],
                                   "Endpoint": desired["Endpoint"], "ReturnSubscriptionArn": True}
        if desired["Attributes"]:
            request["Attributes"] = desired["Attributes"]
        arn = self.target.sns.subscribe(**request)["SubscriptionArn"]
        return Applied(arn, {"Arn": arn})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        for key in self.SETTABLE:
            before, after = old["Attributes"].get(key), new["Attributes"].get(key)
            if before != after:
                value = after if after is not None else ("false" if key == "RawMessageDelivery" else "")
                self.target.sns.set_subscription_attributes(SubscriptionArn=physical_id, AttributeName=key,
                                                            AttributeValue=value)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        try:
            self.target.sns.unsubscribe(SubscriptionArn=physical_id)
        except ClientError as err:
            if not _gone(err):
                raise


class SnsTopicPolicy(ResourcePolicy):
    type_name = "AWS::SNS::TopicPolicy"
    kind = "TopicPolicy"
    note = "topic policies are not applied: kinesim does not check permissions"
