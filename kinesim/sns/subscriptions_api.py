"""Subscriptions: Subscribe (idempotent), Unsubscribe, ListSubscriptions(ByTopic),
Get/SetSubscriptionAttributes, ConfirmSubscription.

kinesim delivers to the endpoints AWS confirms at once (sqs, lambda, firehose: no confirmation
message, PendingConfirmation "false"); http(s), email, sms and mobile endpoints are refused with a
message saying so, rather than accepted and never delivered to. Texts are AWS's as LocalStack
recorded them (tests/aws/services/sns snapshots).
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json
from kinesim.protocol.errors import AwsError

from . import filter_policy_rules
from .errors import check_arn, invalid
from .model import Subscription
from .topics_api import LIST_PAGE, page

if TYPE_CHECKING:
    from .service import SnsService

AWS_PROTOCOLS = ("http", "https", "email", "email-json", "sms", "sqs", "application", "lambda", "firehose")
DELIVERED = ("sqs", "lambda", "firehose")
SETTABLE = ("DeliveryPolicy", "FilterPolicy", "FilterPolicyScope", "RawMessageDelivery", "RedrivePolicy",
            "SubscriptionRoleArn", "ReplayPolicy")
_COMPARED = ("DeliveryPolicy", "FilterPolicy", "FilterPolicyScope", "RawMessageDelivery", "RedrivePolicy",
             "SubscriptionRoleArn")


def _check_attribute(name: str, value: str, topic_fifo: bool, prefix: str, scope: str) -> str:
    """A subscription attribute's value as stored, or AWS's error. `prefix` is "Attributes Reason: "
    for Subscribe, "" for SetSubscriptionAttributes (the two texts AWS words differently); `scope`
    is the FilterPolicyScope a FilterPolicy is checked for."""
    if name not in SETTABLE:
        raise invalid("Invalid parameter: AttributeName")
    if name == "RawMessageDelivery":
        if value.lower() not in ("true", "false"):
            raise invalid(f"Invalid parameter: {prefix}RawMessageDelivery: Invalid value [{value}]. "
                          "Must be true or false.")
        return value.lower()
    if name == "FilterPolicy" and value:  # refused here, so that no Publish ever fails on it
        try:
            filter_policy_rules.check(value, scope)
        except filter_policy_rules.PolicyRefused as err:
            raise invalid(f"Invalid parameter: {prefix}{err}") from None
    if name in ("RedrivePolicy", "DeliveryPolicy") and value:
        try:
            doc = user_json.loads(value)
        except user_json.InvalidJson as err:
            raise invalid(f"Invalid parameter: {prefix}{name}: failed to parse JSON. {err}") from None
        if name == "RedrivePolicy":
            dlq = doc.get("deadLetterTargetArn", "") if isinstance(doc, dict) else ""
            if len(str(dlq).split(":")) < 6 or not str(dlq).startswith("arn:"):
                raise invalid(f"Invalid parameter: {prefix}RedrivePolicy: deadLetterTargetArn is an invalid arn")
            if topic_fifo and not str(dlq).endswith(".fifo"):
                raise invalid(f"Invalid parameter: {prefix}RedrivePolicy: must use a FIFO queue as DLQ for a FIFO "
                              "Subscription to a FIFO Topic.")
    if name == "FilterPolicyScope" and value not in ("MessageAttributes", "MessageBody"):
        raise invalid(f"Invalid parameter: {prefix}FilterPolicyScope: Invalid value [{value}]. Please use either "
                      "MessageBody or MessageAttributes")
    return value


def _check_endpoint(protocol: str, endpoint: str | None, topic_arn: str) -> str:
    if protocol not in AWS_PROTOCOLS:
        raise invalid(f"Invalid parameter: Amazon SNS does not support this protocol string: {protocol}")
    if protocol not in DELIVERED:
        raise invalid(f"Invalid parameter: Protocol Reason: kinesim delivers to {', '.join(DELIVERED)} "
                      f"endpoints only, not {protocol}")
    if not endpoint:
        raise invalid("Invalid parameter: Endpoint Reason: no value for required parameter")
    parts = endpoint.split(":")
    if len(parts) < 6 or parts[0] != "arn" or parts[2] != protocol:
        label = {"sqs": "SQS", "lambda": "Lambda", "firehose": "Firehose"}[protocol]
        raise invalid(f"Invalid parameter: {label} endpoint ARN")
    if protocol == "sqs" and endpoint.endswith(".fifo") and not topic_arn.endswith(".fifo"):
        raise invalid("Invalid parameter: Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be "
                      "subscribed to standard SNS topics")
    return endpoint


def subscribe(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    topic = svc.topic(p["TopicArn"])
    protocol = p["Protocol"]
    endpoint = _check_endpoint(protocol, p.get("Endpoint"), topic.arn)
    given = p.get("Attributes") or {}
    scope = given.get("FilterPolicyScope") or filter_policy_rules.MESSAGE_ATTRIBUTES
    attributes = {k: _check_attribute(k, v, topic.fifo, "Attributes Reason: ", scope) for k, v in given.items()}
    if protocol == "firehose" and not attributes.get("SubscriptionRoleArn"):
        # AWS requires the role SNS assumes to write to the delivery stream (exact text not recorded).
        raise invalid("Invalid parameter: Attributes Reason: SubscriptionRoleArn is required for firehose protocol")
    with svc.lock:
        for sub in svc.subscriptions_of(topic.arn):
            if sub.endpoint == endpoint and sub.protocol == protocol:
                if any(v and sub.attributes.get(k) != v for k, v in attributes.items() if k in _COMPARED):
                    raise invalid("Invalid parameter: Attributes Reason: Subscription already exists with "
                                  "different attributes")
                return {"SubscriptionArn": sub.arn}
        sub = Subscription(arn=f"{topic.arn}:{uuid.uuid4()}", topic_arn=topic.arn, protocol=protocol,
                           endpoint=endpoint, owner=svc.account, attributes=attributes)
        svc.save_subscription(sub)
    return {"SubscriptionArn": sub.arn}


def unsubscribe(svc: SnsService, p: dict[str, Any]) -> None:
    arn = p["SubscriptionArn"]
    check_arn(arn, "SubscriptionArn")
    with svc.lock:
        sub = svc.subscriptions.get(arn)
        if sub is not None:  # unsubscribing twice succeeds (AWS, recorded)
            svc.drop_subscription(sub)
    return None


def _listed(sub: Subscription) -> dict[str, str]:
    return {"SubscriptionArn": sub.arn, "Owner": sub.owner, "Protocol": sub.protocol,
            "Endpoint": sub.endpoint, "TopicArn": sub.topic_arn}


def _list(svc: SnsService, subs: list[Subscription], token: str | None) -> dict[str, Any]:
    by_arn = {s.arn: s for s in subs}
    arns, next_token = page(sorted(by_arn), token, LIST_PAGE)
    out: dict[str, Any] = {"Subscriptions": [_listed(by_arn[a]) for a in arns]}
    if next_token:
        out["NextToken"] = next_token
    return out


def list_subscriptions(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        subs = list(svc.subscriptions.values())
    return _list(svc, subs, p.get("NextToken"))


def list_subscriptions_by_topic(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    topic = svc.topic(p["TopicArn"])
    return _list(svc, svc.subscriptions_of(topic.arn), p.get("NextToken"))


def get_subscription_attributes(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    sub = svc.subscription(p["SubscriptionArn"])
    attrs = {"ConfirmationWasAuthenticated": "true", "Endpoint": sub.endpoint, "Owner": sub.owner,
             "PendingConfirmation": "false", "Protocol": sub.protocol, "RawMessageDelivery": "false",
             "SubscriptionArn": sub.arn, "SubscriptionPrincipal": f"arn:aws:iam::{svc.account}:user/kinesim",
             "TopicArn": sub.topic_arn}
    if sub.attributes.get("FilterPolicy"):
        attrs["FilterPolicyScope"] = "MessageAttributes"
    attrs.update(sub.attributes)
    return {"Attributes": attrs}


def set_subscription_attributes(svc: SnsService, p: dict[str, Any]) -> None:
    sub = svc.subscription(p["SubscriptionArn"])
    name, value = p["AttributeName"], p.get("AttributeValue", "")
    topic = svc.topics.get(sub.topic_arn)
    scope = sub.attributes.get("FilterPolicyScope") or filter_policy_rules.MESSAGE_ATTRIBUTES
    value = _check_attribute(name, value, bool(topic and topic.fifo), "", scope)
    with svc.lock:
        attributes = {**sub.attributes, name: value}
        if name in ("FilterPolicy", "RedrivePolicy") and not value:  # an empty value removes the policy
            attributes.pop(name)
        svc.save_subscription(Subscription(sub.arn, sub.topic_arn, sub.protocol, sub.endpoint, sub.owner,
                                           attributes))
    return None


def confirm_subscription(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    # Only endpoints that need a confirmation message get a token; kinesim's (sqs, lambda,
    # firehose) are confirmed at once, so no token it is given can be valid.
    svc.topic(p["TopicArn"], "Topic")
    raise AwsError("InvalidParameter", "Invalid parameter: Token")
