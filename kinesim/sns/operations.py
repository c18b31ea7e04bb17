"""The SNS operations: AWS's action name -> the function `(service, params) -> result` that
answers it.

One explicit table, imported by the service class (the operation modules import the service only
for type checking)."""
from __future__ import annotations

from typing import Any, Callable

from . import publish_api, subscriptions_api, topics_api

OPERATIONS: dict[str, Callable[..., Any]] = {
    # topics_api
    "CreateTopic": topics_api.create_topic,
    "DeleteTopic": topics_api.delete_topic,
    "ListTopics": topics_api.list_topics,
    "GetTopicAttributes": topics_api.get_topic_attributes,
    "SetTopicAttributes": topics_api.set_topic_attributes,
    "TagResource": topics_api.tag_resource,
    "UntagResource": topics_api.untag_resource,
    "ListTagsForResource": topics_api.list_tags,
    # subscriptions_api
    "Subscribe": subscriptions_api.subscribe,
    "Unsubscribe": subscriptions_api.unsubscribe,
    "ListSubscriptions": subscriptions_api.list_subscriptions,
    "ListSubscriptionsByTopic": subscriptions_api.list_subscriptions_by_topic,
    "GetSubscriptionAttributes": subscriptions_api.get_subscription_attributes,
    "SetSubscriptionAttributes": subscriptions_api.set_subscription_attributes,
    "ConfirmSubscription": subscriptions_api.confirm_subscription,
    # publish_api
    "Publish": publish_api.publish,
    "PublishBatch": publish_api.publish_batch,
}

