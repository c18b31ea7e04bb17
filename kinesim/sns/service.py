"""The SNS service: topics and subscriptions, persistence.

Each operation is a plain function `(service, params) -> result dict` in the module of its concern,
named in the table of `operations.py` (`topics_api`, `subscriptions_api`, `publish_api`); the query
protocol's front (`api.py`) decodes requests and encodes answers. Topics and subscriptions are
documents in the store ("sns-topic", "sns-subscription"), written before an operation answers.
Deliveries (`delivery.py`) are best-effort and asynchronous, as AWS's are.
"""
from __future__ import annotations

import threading
from typing import Any

from kinesim.config import Settings
from kinesim.store import Store

from . import publish_api
from .delivery import Deliveries, Send
from .errors import check_arn, invalid, not_found
from .model import Subscription, Topic
from .operations import OPERATIONS


class SnsService:
    operations = OPERATIONS

    def __init__(self, settings: Settings, store: Store, send: Send, base_url: str):
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

    def call(self, op: str, params: dict[str, Any], trace_header: str | None = None) -> dict[str, Any] | None:
        """Run an operation; `trace_header` (the request's X-Amzn-Trace-Id) goes with what a
        Publish delivers."""
        if op in publish_api.TRACED:
            return self.operations[op](self, params, trace_header)
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

    def topic_policy(self, arn: str) -> str | None:
        """A topic's `Policy` attribute (None: no such topic), which decides the calls of other
        accounts (kinesim/cross_account.py)."""
        from .topics_api import default_policy
        topic = self.topics.get(arn)
        return None if topic is None else topic.attributes.get("Policy") or default_policy(self, arn)

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
