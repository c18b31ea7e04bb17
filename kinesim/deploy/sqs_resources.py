"""SQS resources: AWS::SQS::Queue, and AWS::SQS::QueuePolicy (accepted and recorded like IAM:
kinesim checks no permissions). A queue's `Ref` is its URL, as CloudFormation's."""
from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from .iam_resources import ResourcePolicy
from .resources import Applied, ResourceHandler, error_code, generated_name, tag_map
from .template import DeployError

# Template property -> the value SetQueueAttributes restores when the property is removed.
_ATTRIBUTES = {
    "DelaySeconds": "0", "MaximumMessageSize": "1048576", "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0", "VisibilityTimeout": "30", "RedrivePolicy": "",
    "RedriveAllowPolicy": "", "KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300",
    "SqsManagedSseEnabled": "true", "ContentBasedDeduplication": "false", "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
_GONE = "AWS.SimpleQueueService.NonExistentQueue"


def _text(value: Any) -> str:
    """A property as SQS's string attributes take it (JSON documents serialised, booleans lowercase)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class SqsQueue(ResourceHandler):
    type_name = "AWS::SQS::Queue"
    name_property = "QueueName"
    name_max_length = 80
    attributes = frozenset({"Arn", "QueueName", "QueueUrl"})
    SUPPORTED = {"QueueName", "FifoQueue", "Tags", *_ATTRIBUTES}

    def desired(self, properties: dict[str, Any]) -> dict[str, Any]:
        self._reject_unsupported(properties, self.SUPPORTED)
        fifo = _text(properties.get("FifoQueue", False)).lower() == "true"
        name = properties.get("QueueName")
        if name is not None and fifo != str(name).endswith(".fifo"):
            raise DeployError(f"QueueName {name}: a FIFO queue's name ends in .fifo, and only a FIFO queue's does")
        return {"QueueName": name, "FifoQueue": fifo,
                "Attributes": {k: _text(properties[k]) for k in _ATTRIBUTES if k in properties},
                "Tags": tag_map(properties.get("Tags"))}

    def generate_name(self, logical_id: str) -> str:
        # A generated FIFO queue name keeps its suffix, as CloudFormation's does; `desired` is
        # not at hand here, so the suffix is added in `create`.
        return generated_name(self.target.stack_name, logical_id, self.name_max_length - len(".fifo"))

    def create(self, name: str | None, desired: dict[str, Any]) -> Applied:
        assert name
        if desired["FifoQueue"] and not name.endswith(".fifo"):
            name += ".fifo"
        attributes = dict(desired["Attributes"])
        if desired["FifoQueue"]:
            attributes["FifoQueue"] = "true"
        request: dict[str, Any] = {"QueueName": name, "Attributes": attributes}
        if desired["Tags"]:
            request["tags"] = desired["Tags"]
        url = self.target.sqs.create_queue(**request)["QueueUrl"]
        arn = self.target.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return Applied(url, {"Arn": arn, "QueueName": name, "QueueUrl": url})

    def update(self, physical_id: str, old: dict[str, Any], new: dict[str, Any],
               attributes: dict[str, Any]) -> dict[str, Any]:
        sqs = self.target.sqs
        changed = {k: new["Attributes"].get(k, _ATTRIBUTES[k]) for k in set(old["Attributes"]) | set(new["Attributes"])
                   if old["Attributes"].get(k) != new["Attributes"].get(k)}
        if changed:
            sqs.set_queue_attributes(QueueUrl=physical_id, Attributes=changed)
        removed = sorted(set(old["Tags"]) - set(new["Tags"]))
        if removed:
            sqs.untag_queue(QueueUrl=physical_id, TagKeys=removed)
        tags = {k: v for k, v in new["Tags"].items() if old["Tags"].get(k) != v}
        if tags:
            sqs.tag_queue(QueueUrl=physical_id, Tags=tags)
        return attributes

    def delete(self, physical_id: str, desired: dict[str, Any]) -> None:
        sqs = self.target.sqs
        try:
            # A create that failed midway recorded the queue's name, not yet its URL.
            url = physical_id if "://" in physical_id else sqs.get_queue_url(QueueName=physical_id)["QueueUrl"]
            sqs.delete_queue(QueueUrl=url)
        except ClientError as err:
            if error_code(err) != _GONE:
                raise


class SqsQueuePolicy(ResourcePolicy):
    type_name = "AWS::SQS::QueuePolicy"
    kind = "QueuePolicy"
    note = "queue policies are not applied: kinesim does not check permissions"
