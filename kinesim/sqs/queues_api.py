"""Queue operations: CreateQueue, GetQueueUrl, ListQueues, DeleteQueue, Get/SetQueueAttributes,
PurgeQueue, TagQueue/UntagQueue/ListQueueTags, ListDeadLetterSourceQueues."""
from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json

from . import attributes as attrs
from .errors import SqsError, invalid_parameter, invalid_value, queue_does_not_exist
from .messages_api import drop_expired
from .queue import Queue, now

if TYPE_CHECKING:
    from .service import Call

_STANDARD_NAME = re.compile(r"[a-zA-Z0-9_-]{1,80}")
_FIFO_NAME = re.compile(r"[a-zA-Z0-9_-]{1,75}\.fifo")
_PURGE_INTERVAL_S = 60.0


def create_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    name = params["QueueName"]
    given = {k: str(v) for k, v in (params.get("Attributes") or {}).items()}
    fifo = given.get("FifoQueue", "").lower() == "true"
    if fifo and not _FIFO_NAME.fullmatch(name):
        raise invalid_parameter("The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                                "underscores, must end with .fifo suffix and be 1 to 80 in length")
    if not fifo and not _STANDARD_NAME.fullmatch(name):
        raise invalid_parameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
    attrs.check_names_for_create(given, fifo)
    wanted = attrs.normalise(given, fifo, creating=True)
    tags = _checked_tags(params.get("tags") or {})
    with service.lock:
        if "RedrivePolicy" in wanted:
            _check_dead_letter_target(call, wanted["RedrivePolicy"], fifo)
        existing = service.queues.get(name)
        if existing is not None:
            current = {**attrs.defaults(existing.fifo), **existing.attributes}
            for key, value in wanted.items():
                if current.get(key) != value:
                    raise SqsError("QueueNameExists", "A queue already exists with the same name and a different "
                                                      f"value for attribute {key}")
            return {"QueueUrl": call.url(existing)}
        created = now()
        queue = Queue(name=name, arn=service.arn(name), fifo=fifo,
                      attributes=attrs.apply(attrs.defaults(fifo), wanted), created=created, modified=created,
                      tags=tags, cond=service.new_condition())
        service.persist.save_queue(queue)
        service.queues[name] = queue
        return {"QueueUrl": call.url(queue)}


def _check_dead_letter_target(call: Call, policy_text: str, fifo: bool) -> None:
    """The dead-letter queue must exist and be of the source's type (AWS's texts)."""
    policy = attrs.redrive_policy(policy_text)
    target = call.service.queue_by_arn(policy["deadLetterTargetArn"])
    if target is None:
        raise invalid_value("RedrivePolicy", policy_text, "Dead letter target does not exist.")
    if target.fifo != fifo:
        raise invalid_value("RedrivePolicy", policy_text, "Dead-letter queue must be same type of queue as the source.")


def _checked_tags(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > 50:
        raise invalid_parameter("Too many tags added for queue. Maximum number of tags is 50.")
    for key in tags:
        if not 1 <= len(key) <= 128:
            raise invalid_parameter(f"Tag key {key!r} must be 1 to 128 characters long.")
    return {k: str(v) for k, v in tags.items()}


def get_queue_url(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    owner = params.get("QueueOwnerAWSAccountId")
    with call.service.lock:
        if owner is not None and owner != call.service.account:
            raise queue_does_not_exist()
        return {"QueueUrl": call.url(call.service.queue_named(params["QueueName"]))}


def _page(names: list[str], params: dict[str, Any]) -> tuple[list[str], str | None]:
    """A page of queue names (sorted) after NextToken, MaxResults of them (1 to 1000)."""
    limit = params.get("MaxResults")
    if limit is not None and not 1 <= limit <= 1000:
        raise invalid_value("MaxResults", limit, "MaxResults must be an integer between 1 and 1000.")
    token = params.get("NextToken")
    if token is not None:
        try:
            after = base64.b64decode(token, validate=True).decode()
        except ValueError:
            raise invalid_parameter("Invalid NextToken value.") from None
        names = [n for n in names if n > after]
    if limit is None:
        return names[:1000], None
    page = names[:limit]
    more = len(names) > limit
    return page, base64.b64encode(page[-1].encode()).decode() if more else None


def list_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    prefix = params.get("QueueNamePrefix") or ""
    with call.service.lock:
        names = sorted(n for n in call.service.queues if n.startswith(prefix))
        page, token = _page(names, params)
        out: dict[str, Any] = {}
        if page:  # AWS leaves QueueUrls out when there are none
            out["QueueUrls"] = [call.url(call.service.queues[n]) for n in page]
        if token:
            out["NextToken"] = token
        return out


def delete_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    with service.lock:
        queue = call.queue(params["QueueUrl"])
        service.persist.delete_queue(queue)
        del service.queues[queue.name]
        queue.deleted = True
        assert queue.cond is not None
        queue.cond.notify_all()  # long polls on it answer now
    return {}


def get_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    with service.lock:
        queue = call.queue(params["QueueUrl"])
        names = attrs.requested_names(params.get("AttributeNames") or [], queue.fifo)
        if not names:
            return {}
        current = now()
        drop_expired(service, queue, current)
        visible, in_flight, delayed = queue.counts(current)
        computed = {
            "ApproximateNumberOfMessages": visible, "ApproximateNumberOfMessagesNotVisible": in_flight,
            "ApproximateNumberOfMessagesDelayed": delayed, "CreatedTimestamp": int(queue.created),
            "LastModifiedTimestamp": int(queue.modified), "QueueArn": queue.arn}
        values = {**queue.attributes, **{k: str(v) for k, v in computed.items()}}
        found = {n: values[n] for n in names if n in values}
        return {"Attributes": found} if found else {}  # AWS leaves Attributes out when none is set


def set_queue_attributes(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    given = {k: str(v) for k, v in (params.get("Attributes") or {}).items()}
    with service.lock:
        queue = call.queue(params["QueueUrl"])
        changes = attrs.normalise(given, queue.fifo, creating=False)
        if changes.get("RedrivePolicy"):
            _check_dead_letter_target(call, changes["RedrivePolicy"], queue.fifo)
        queue.attributes = attrs.apply(queue.attributes, changes)
        queue.modified = now()
        service.persist.save_queue(queue)
    return {}


def purge_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    with service.lock:
        queue = call.queue(params["QueueUrl"])
        current = now()
        if current - queue.purged_at < _PURGE_INTERVAL_S:
            raise SqsError("PurgeQueueInProgress", f"Only one PurgeQueue operation on {queue.name} is allowed every "
                                                   f"60 seconds.")
        service.persist.purge(queue)
        queue.messages.clear()
        queue.purged_at = current
    return {}


def tag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        queue.tags = _checked_tags({**queue.tags, **params["Tags"]})
        call.service.persist.save_queue(queue)
    return {}


def untag_queue(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        for key in params["TagKeys"]:
            queue.tags.pop(key, None)
        call.service.persist.save_queue(queue)
    return {}


def list_queue_tags(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        return {"Tags": dict(queue.tags)} if queue.tags else {}


def list_dead_letter_source_queues(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    with service.lock:
        target = call.queue(params["QueueUrl"])
        names = sorted(q.name for q in service.queues.values()
                       if q.attributes.get("RedrivePolicy")
                       and user_json.loads(q.attributes["RedrivePolicy"])["deadLetterTargetArn"] == target.arn)
        page, token = _page(names, params)
        out: dict[str, Any] = {"queueUrls": [call.url(service.queues[n]) for n in page]}
        if token:
            out["NextToken"] = token
        return out
