"""Topics: CreateTopic (idempotent), DeleteTopic, ListTopics, Get/SetTopicAttributes, tags.

Texts and defaults are AWS's as LocalStack recorded them (tests/aws/services/sns snapshots): the
default access policy, the EffectiveDeliveryPolicy, "Invalid parameter: Topic Name", "Topic
already exists with different attributes|tags", FifoTopic settable only at creation.
"""
from __future__ import annotations

import bisect
import json
import re
from typing import TYPE_CHECKING, Any

from kinesim.protocol.errors import AwsError

from .errors import invalid
from .model import Topic

if TYPE_CHECKING:
    from .service import SnsService

_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}")
_FIFO_NAME = re.compile(r"[A-Za-z0-9_-]{1,251}\.fifo")
LIST_PAGE = 100  # ListTopics' page size on AWS


def page(items: list[str], token: str | None, size: int) -> tuple[list[str], str | None]:
    """One page of a sorted list of ARNs and the token of the next (the last ARN returned)."""
    start = 0
    if token:
        start = bisect.bisect_right(items, token)
    chunk = items[start:start + size]
    more = start + size < len(items)
    return chunk, (chunk[-1] if more and chunk else None)


_FEEDBACK = [f"{p}{k}" for p in ("Application", "Firehose", "HTTP", "Lambda", "SQS")
             for k in ("SuccessFeedbackRoleArn", "SuccessFeedbackSampleRate", "FailureFeedbackRoleArn")]
SETTABLE = frozenset(["DeliveryPolicy", "DisplayName", "Policy", "TracingConfig", "KmsMasterKeyId",
                      "SignatureVersion", "ContentBasedDeduplication", "ArchivePolicy", "FifoThroughputScope",
                      "DataProtectionPolicy", *_FEEDBACK])

_EFFECTIVE_DELIVERY_POLICY = json.dumps({"http": {
    "defaultHealthyRetryPolicy": {"minDelayTarget": 20, "maxDelayTarget": 20, "numRetries": 3,
                                  "numMaxDelayRetries": 0, "numNoDelayRetries": 0, "numMinDelayRetries": 0,
                                  "backoffFunction": "linear"},
    "disableSubscriptionOverrides": False,
    "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"}}}, separators=(",", ":"))


def default_policy(svc: SnsService, arn: str) -> str:
    return json.dumps({"Version": "2008-10-17", "Id": "__default_policy_ID", "Statement": [{
        "Sid": "__default_statement_ID", "Effect": "Allow", "Principal": {"AWS": "*"},
        "Action": ["SNS:GetTopicAttributes", "SNS:SetTopicAttributes", "SNS:AddPermission",
                   "SNS:RemovePermission", "SNS:DeleteTopic", "SNS:Subscribe", "SNS:ListSubscriptionsByTopic",
                   "SNS:Publish"],
        "Resource": arn, "Condition": {"StringEquals": {"AWS:SourceOwner": svc.account}}}]},
        separators=(",", ":"))


def _check_attribute(name: str, value: str, fifo: bool) -> str:
    if name not in SETTABLE:
        raise invalid("Invalid parameter: AttributeName")
    if name == "ContentBasedDeduplication":
        if not fifo:
            # AWS refuses it on a standard topic; the exact text was not recorded.
            raise invalid("Invalid parameter: ContentBasedDeduplication Reason: ContentBasedDeduplication "
                          "can only be set for FIFO topics")
        if value.lower() not in ("true", "false"):
            raise invalid(f"Invalid parameter: ContentBasedDeduplication Reason: Invalid value [{value}]. "
                          "Must be true or false.")
        return value.lower()
    return value


def _tag_map(tags: list[dict[str, str]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for tag in tags or []:
        if tag["Key"] in out:
            raise invalid("Invalid parameter: Duplicated keys are not allowed.")
        out[tag["Key"]] = tag["Value"]
    return out


def create_topic(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    name = p["Name"]
    attributes = dict(p.get("Attributes") or {})
    fifo = attributes.pop("FifoTopic", "false").lower() == "true"
    if not (_FIFO_NAME if fifo else _NAME).fullmatch(name):
        raise invalid("Invalid parameter: Topic Name")
    attributes = {k: _check_attribute(k, v, fifo) for k, v in attributes.items()}
    if fifo:
        attributes = {"FifoTopic": "true", "ContentBasedDeduplication": "false", **attributes}
    tags = _tag_map(p.get("Tags"))
    arn = svc.topic_arn(name)
    with svc.lock:
        existing = svc.topics.get(arn)
        if existing is not None:  # idempotent when nothing asked differs from what exists
            if any(existing.attributes.get(k) != v for k, v in attributes.items()):
                raise invalid("Invalid parameter: Attributes Reason: Topic already exists with different attributes")
            if any(existing.tags.get(k) != v for k, v in tags.items()):
                raise invalid("Invalid parameter: Tags Reason: Topic already exists with different tags")
            return {"TopicArn": arn}
        svc.save_topic(Topic(name=name, arn=arn, attributes=attributes, tags=tags))
    return {"TopicArn": arn}


def delete_topic(svc: SnsService, p: dict[str, Any]) -> None:
    arn = p["TopicArn"]
    try:
        topic = svc.topic(arn)
    except AwsError as err:
        if err.code == "NotFound":
            return None  # deleting a topic that does not exist succeeds (AWS, recorded)
        raise
    svc.drop_topic(topic)
    return None


def list_topics(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    arns, token = page(sorted(svc.topics), p.get("NextToken"), LIST_PAGE)
    out: dict[str, Any] = {"Topics": [{"TopicArn": a} for a in arns]}
    if token:
        out["NextToken"] = token
    return out


def get_topic_attributes(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    topic = svc.topic(p["TopicArn"])
    subs = svc.subscriptions_of(topic.arn)
    attrs = {"DisplayName": "", "EffectiveDeliveryPolicy": _EFFECTIVE_DELIVERY_POLICY, "Owner": svc.account,
             "Policy": default_policy(svc, topic.arn), "SubscriptionsConfirmed": str(len(subs)),
             "SubscriptionsDeleted": "0", "SubscriptionsPending": "0", "TopicArn": topic.arn}
    attrs.update(topic.attributes)
    return {"Attributes": attrs}


def set_topic_attributes(svc: SnsService, p: dict[str, Any]) -> None:
    topic = svc.topic(p["TopicArn"])
    name, value = p["AttributeName"], p.get("AttributeValue", "")
    value = _check_attribute(name, value, topic.fifo)  # FifoTopic is not settable after creation
    with svc.lock:
        svc.save_topic(Topic(topic.name, topic.arn, {**topic.attributes, name: value}, topic.tags))
    return None


def _tagged(svc: SnsService, arn: str) -> Topic:
    topic = svc.topics.get(arn)
    if topic is None:
        raise AwsError("ResourceNotFound", "Resource does not exist", 404)
    return topic


def tag_resource(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    tags = _tag_map(p["Tags"])
    with svc.lock:
        topic = _tagged(svc, p["ResourceArn"])
        merged = {**topic.tags, **tags}
        if len(merged) > 50:
                raise AwsError("TagLimitExceeded", "Could not complete request: tag quota of per resource exceeded")
        svc.save_topic(Topic(topic.name, topic.arn, topic.attributes, merged))
    return {}


def untag_resource(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    with svc.lock:
        topic = _tagged(svc, p["ResourceArn"])
        kept = {k: v for k, v in topic.tags.items() if k not in set(p["TagKeys"])}
        svc.save_topic(Topic(topic.name, topic.arn, topic.attributes, kept))
    return {}


def list_tags(svc: SnsService, p: dict[str, Any]) -> dict[str, Any]:
    topic = _tagged(svc, p["ResourceArn"])
    return {"Tags": [{"Key": k, "Value": v} for k, v in topic.tags.items()]}
