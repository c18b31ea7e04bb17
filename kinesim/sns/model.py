"""Topics and subscriptions as they are stored (documents "sns-topic", "sns-subscription")."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
