"""The SNS service: operation registry, topics and subscriptions, persistence.

Each operation is a plain function `(service, params) -> result dict` registered with `@operation`
in the module of its concern (`topics_api`, `subscriptions_api`, `publish_api`); the query
protocol's front (`api.py`) decodes requests and encodes answers. Topics and subscriptions are
documents in the store ("sns-topic", "sns-subscription"), written before an operation answers.
Deliveries (`delivery.py`) are best-effort and asynchronous, as AWS's are.
"""
from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Any

from kinesim.config import Settings
from kinesim.protocol.errors import AwsError
from kinesim.protocol.operations import Operations
from kinesim.store import Store

from .delivery import Deliveries, Send

OPERATIONS = Operations()
operation = OPERATIONS.register


def invalid(message: str) -> AwsError:
    return AwsError("InvalidParameter", message)


def not_found(message: str) -> AwsError:
    return AwsError("NotFound", message, 404)


@dataclass
class Topic:
    name: str
    arn: str
    attributes: dict[str, str] = field(default_factory=dict)  # as set (Create/SetTopicAttributes)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoTopic") == "true"

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "attributes": self.attributes, "tags": self.tags}


@dataclass
class Subscription:
    arn: str
    topic_arn: str
    protocol: str
    endpoint: str
    owner: str
    attributes: dict[str, str] = field(default_factory=dict)  # as set (Subscribe/SetSubscriptionAttributes)

    @property
    def raw(self) -> bool:
        return self.attributes.get("RawMessageDelivery") == "true"

    def to_doc(self) -> dict[str, Any]:
        return {"arn": self.arn, "topic_arn": self.topic_arn, "protocol": self.protocol,
                "endpoint": self.endpoint, "owner": self.owner, "attributes": self.attributes}


class SnsService:
    operations = OPERATIONS

    def __init__(self, settings: Settings, store: Store, send: Send, base_url: str):
        # Importing the operation modules registers their operations.
        from . import publish_api, subscriptions_api, topics_api  # noqa: F401
        self.settings = settings
        self.store = store
        self.lock = threading.RLock()  # topics and subscriptions maps
        self.topics: dict[str, Topic] = {
            arn: Topic(**doc) for arn, doc in store.documents("sns-topic").items()}
        self.subscriptions: dict[str, Subscription] = {
            arn: Subscription(**doc) for arn, doc in store.documents("sns-subscription").items()}
        self.deliveries = Deliveries(send, base_url)
        self.sequencer = publish_api.Sequencer()  # FIFO sequence numbers and deduplication

    def close(self) -> None:
        """Nothing is left to stop: deliveries run within the publishing request."""

    def call(self, op: str, params: dict[str, Any]) -> dict[str, Any] | None:
        return self.operations[op](self, params)

    def has_operation(self, op: str) -> bool:
        return op in self.operations

    # identity

    @property
    def account(self) -> str:
        return self.settings.account_id

    @property
    def region(self) -> str:
        return self.settings.region

    def topic_arn(self, name: str) -> str:
        return f"arn:aws:sns:{self.region}:{self.account}:{name}"

    # lookup

    def topic(self, arn: str, member: str = "TopicArn") -> Topic:
        """The topic an ARN names, or AWS's error for a malformed ARN / a missing topic."""
        parts = check_arn(arn, member)
        if parts[3] != self.region or parts[2] != "sns":
            raise invalid(f"Invalid parameter: {member}")
        topic = self.topics.get(arn)
        if topic is None:
            raise not_found("Topic does not exist")
        return topic

    def subscription(self, arn: str) -> Subscription:
        check_arn(arn, "SubscriptionArn")
        sub = self.subscriptions.get(arn)
        if sub is None:
            raise not_found("Subscription does not exist")
        return sub

    def subscriptions_of(self, topic_arn: str) -> list[Subscription]:
        with self.lock:
            return [s for s in self.subscriptions.values() if s.topic_arn == topic_arn]

    # persistence

    def save_topic(self, topic: Topic) -> None:
        with self.lock:
            self.store.put_document("sns-topic", topic.arn, topic.to_doc())
            self.topics[topic.arn] = topic

    def drop_topic(self, topic: Topic) -> None:
        """Delete a topic and its subscriptions (AWS keeps them detached for a while; nothing can
        be delivered through them, so they are dropped at once)."""
        with self.lock:
            for sub in self.subscriptions_of(topic.arn):
                self.drop_subscription(sub)
            self.store.delete_document("sns-topic", topic.arn)
            self.topics.pop(topic.arn, None)

    def save_subscription(self, sub: Subscription) -> None:
        with self.lock:
            self.store.put_document("sns-subscription", sub.arn, sub.to_doc())
            self.subscriptions[sub.arn] = sub

    def drop_subscription(self, sub: Subscription) -> None:
        with self.lock:
            self.store.delete_document("sns-subscription", sub.arn)
            self.subscriptions.pop(sub.arn, None)


def check_arn(arn: str, member: str) -> list[str]:
    """An ARN's parts, or AWS's text for one with too few (LocalStack's recordings of AWS:
    "Invalid parameter: TopicArn Reason: An ARN must have at least 6 elements, not 1")."""
    parts = arn.split(":")
    if len(parts) < 6:
        raise invalid(f"Invalid parameter: {member} Reason: An ARN must have at least 6 elements, not {len(parts)}")
    return parts


def page(items: list[str], token: str | None, size: int) -> tuple[list[str], str | None]:
    """One page of a sorted list of ARNs and the token of the next (the last ARN returned)."""
    start = 0
    if token:
        start = bisect.bisect_right(items, token)
    chunk = items[start:start + size]
    more = start + size < len(items)
    return chunk, (chunk[-1] if more and chunk else None)
