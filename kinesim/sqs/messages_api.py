"""Message operations: SendMessage, ReceiveMessage (long polling, redrive to a dead-letter queue),
DeleteMessage, ChangeMessageVisibility; their batch forms are in `batches`."""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from . import messages as msgs
from .errors import SqsError, invalid_parameter, invalid_value, missing_parameter
from .messages import Message
from .queue import DEDUP_WINDOW_S, Queue, now, parse_receipt

if TYPE_CHECKING:
    from .service import Call, SqsService

_SYSTEM_NAMES = ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
                 "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
                 "DeadLetterQueueSourceArn")


# ---------------------------------------------------------------------------------------------
# sending


def send_one(service: SqsService, queue: Queue, entry: dict[str, Any], batch: bool = False,
             trace_header: str | None = None) -> dict[str, Any]:
    """Check, store and enqueue one message (the service's lock held); SendMessage's answer.
    `trace_header`: the request's X-Amzn-Trace-Id, kept as the message's AWSTraceHeader unless the
    entry sets that attribute itself ("If both are set, the message system attribute overrides the
    HTTP trace header": X-Ray's guide, Amazon SQS and AWS X-Ray). Only the attributes the entry
    sent are in MD5OfMessageSystemAttributes: the sender checks the digest of what it sent."""
    body = msgs.check_body(entry.get("MessageBody"))
    user = msgs.stored_attributes(entry.get("MessageAttributes"))
    system = msgs.stored_system_attributes(entry.get("MessageSystemAttributes"))
    limit = queue.int_attribute("MaximumMessageSize")
    if msgs.size_of(body, user) > limit:
        # The batch form words it differently (AWS's recorded answers in LocalStack's snapshots).
        lead = "One or more parameters cannot be validated." if batch else "One or more parameters are invalid."
        raise invalid_parameter(f"{lead} Reason: Message must be shorter than {limit} bytes.")
    delay = entry.get("DelaySeconds")
    if delay is not None and not 0 <= delay <= 900:
        raise invalid_value("DelaySeconds", delay, "DelaySeconds must be >= 0 and <= 900.")
    group, dedup = entry.get("MessageGroupId"), entry.get("MessageDeduplicationId")
    msgs.check_fifo_id(group, "MessageGroupId")
    msgs.check_fifo_id(dedup, "MessageDeduplicationId")
    current = now()
    dedup = _deduplication_id(queue, body, delay, group, dedup, batch)
    dedup_key = queue.dedup_key(group, dedup) if dedup is not None else None
    answer: dict[str, Any] = {"MD5OfMessageBody": msgs.md5_hex(body.encode())}
    md5_user, md5_system = msgs.attributes_md5(user), msgs.attributes_md5(system)
    if md5_user:
        answer["MD5OfMessageAttributes"] = md5_user
    if md5_system:
        answer["MD5OfMessageSystemAttributes"] = md5_system
    if queue.fifo:
        gone = queue.forget_old_dedup(current)
        if gone:
            service.persist.delete_messages(queue, dedup_keys=gone)
    duplicate = queue.duplicate_of(dedup_key, current) if dedup_key is not None else None
    if duplicate is not None:
        # Accepted, not enqueued again: the first message's id and sequence number.
        answer["MessageId"] = duplicate[0]
        if duplicate[1]:
            answer["SequenceNumber"] = duplicate[1]
        return answer
    if delay is None or queue.fifo:
        delay = queue.int_attribute("DelaySeconds")
    if trace_header and "AWSTraceHeader" not in system:
        system["AWSTraceHeader"] = {"DataType": "String", "StringValue": trace_header}
    message = queue.new_message(body, current, delay, attributes=user, system=system, md5_attributes=md5_user,
                                md5_system=md5_system, group=group, dedup=dedup,
                                sender=service.account)
    keys = []
    if dedup_key is not None:
        queue.dedup[dedup_key] = (message.id, message.sequence, current + DEDUP_WINDOW_S)
        keys.append(dedup_key)
    service.persist.save_messages(queue, [message], keys)
    queue.add(message)
    answer["MessageId"] = message.id
    if message.sequence:
        answer["SequenceNumber"] = message.sequence
    return answer


def _deduplication_id(queue: Queue, body: str, delay: int | None, group: str | None, dedup: str | None,
                      batch: bool) -> str | None:
    """A FIFO message's deduplication id (given, or the body's SHA-256 with ContentBasedDeduplication)
    after FIFO's checks; None on a standard queue, which takes no deduplication id."""
    if not queue.fifo:
        if dedup is not None:
            raise invalid_value("MessageDeduplicationId", dedup, "The request includes a parameter that is not "
                                                                 "valid for this queue type.")
        return None
    if delay:  # FIFO queues delay per queue only; 0 means the queue's delay
        raise invalid_value("DelaySeconds", delay, "The request include parameter that is not valid for this "
                                                   "queue type.")
    if group is None:
        # Worded as a missing parameter for SendMessage, an invalid value for a batch entry
        # (AWS's recorded answers).
        if batch:
            raise invalid_parameter("The request must contain the parameter MessageGroupId.")
        raise missing_parameter("MessageGroupId")
    if dedup is not None:
        return dedup
    if queue.attributes.get("ContentBasedDeduplication") != "true":
        raise invalid_parameter("The queue should either have ContentBasedDeduplication enabled or "
                                "MessageDeduplicationId provided explicitly")
    return hashlib.sha256(body.encode()).hexdigest()


def send_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        return send_one(call.service, queue, params, trace_header=call.trace_header)


# ---------------------------------------------------------------------------------------------
# receiving


def _bounded(params: dict[str, Any], name: str, default: int, low: int, high: int, reason: str) -> int:
    value = params.get(name)
    if value is None:
        return default
    if not low <= value <= high:
        raise invalid_value(name, value, reason)
    return value


def receive_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    service = call.service
    limit = _bounded(params, "MaxNumberOfMessages", 1, 1, 10, "Must be between 1 and 10, if provided.")
    with service.lock:
        queue = call.queue(params["QueueUrl"])
        wait = _bounded(params, "WaitTimeSeconds", queue.int_attribute("ReceiveMessageWaitTimeSeconds"), 0, 20,
                        "Must be >= 0 and <= 20, if provided.")
        visibility = _bounded(params, "VisibilityTimeout", queue.int_attribute("VisibilityTimeout"), 0, 43200,
                              "Must be >= 0 and <= 43200, if provided.")
        system_names = _system_names(params)
        user_filter = params.get("MessageAttributeNames") or []
        assert queue.cond is not None
        # Each waiting receive holds a request thread: past the cap it answers at once, so that
        # long polls cannot take the threads other clients need.
        with service.long_polls.waiting(wait > 0) as waiting:
            deadline = now() + (wait if waiting else 0)
            while True:
                taken = receive_messages(service, queue, limit, visibility)
                current = now()
                if taken or current >= deadline or queue.deleted or service.closing:
                    break
                # Woken by a send (Queue.add), or when the next delayed or in-flight message is due.
                due = queue.next_change(current)
                queue.cond.wait(min(deadline, due) - current if due is not None else deadline - current)
        if not taken:
            return {}  # AWS leaves Messages out when there are none
        return {"Messages": [_wire_message(m, queue, system_names, user_filter) for m in taken]}


def drop_expired(service: SqsService, queue: Queue, current: float) -> None:
    """Delete the messages past MessageRetentionPeriod (AWS does it in the background; kinesim
    when the queue is next read)."""
    expired = queue.expired(current)
    if expired:
        service.persist.delete_messages(queue, [m.id for m in expired])
        queue.remove(m.id for m in expired)


def receive_messages(service: SqsService, queue: Queue, limit: int, visibility: int) -> list[Message]:
    """Hand out up to `limit` messages: retention applied first, messages received
    maxReceiveCount times moved to the dead-letter queue instead."""
    current = now()
    drop_expired(service, queue, current)
    policy = queue.redrive
    dead_letter = service.queue_by_arn(policy["deadLetterTargetArn"]) if policy else None
    taken: list[Message] = []
    for message in queue.receivable(current, len(queue.messages)):
        if len(taken) >= limit:
            break
        if dead_letter is not None and message.receive_count >= policy["maxReceiveCount"]:  # type: ignore[index]
            _move(service, queue, dead_letter, message, current)
            continue
        queue.take(message, current, visibility)
        taken.append(message)
    if taken:
        service.persist.save_messages(queue, taken)
    return taken


def _move(service: SqsService, source: Queue, target: Queue, message: Message, current: float) -> None:
    """Redrive: the message, with its id, body, attributes and receive count, into the dead-letter
    queue, which it names as its source (DeadLetterQueueSourceArn)."""
    transfer(service, source, target, message, current, message.receive_count, source.arn)


def transfer(service: SqsService, source: Queue, target: Queue, message: Message, current: float,
             receive_count: int, source_arn: str | None) -> None:
    """Move a message between queues (visible at once in the target), stored there before it
    leaves the source: a crash between the two leaves a copy, never none."""
    moved = target.new_message(message.body, message.sent, 0, attributes=message.attributes,
                               system=message.system, md5_attributes=message.md5_attributes,
                               md5_system=message.md5_system, group=message.group, dedup=message.dedup,
                               sender=message.sender, receive_count=receive_count,
                               first_receive=message.first_receive if receive_count else None,
                               source_arn=source_arn)
    moved.id, moved.visible_at = message.id, current
    service.persist.save_messages(target, [moved])
    service.persist.delete_messages(source, [message.id])
    source.remove([message.id])
    target.add(moved)


def _system_names(params: dict[str, Any]) -> list[str]:
    names = list(params.get("AttributeNames") or []) + list(params.get("MessageSystemAttributeNames") or [])
    if "All" in names:
        return list(_SYSTEM_NAMES)
    return [n for n in names if n in _SYSTEM_NAMES]  # queue attribute names (the old enum) give nothing


def system_attributes(m: Message, names: list[str]) -> dict[str, str]:
    values = {"SenderId": m.sender, "SentTimestamp": str(int(m.sent * 1000)),
              "ApproximateReceiveCount": str(m.receive_count),
              "ApproximateFirstReceiveTimestamp": str(int((m.first_receive or m.sent) * 1000)),
              "SequenceNumber": m.sequence, "MessageDeduplicationId": m.dedup, "MessageGroupId": m.group,
              "AWSTraceHeader": m.system.get("AWSTraceHeader", {}).get("StringValue"),
              "DeadLetterQueueSourceArn": m.source_arn}
    return {n: values[n] for n in names if values.get(n) is not None}  # type: ignore[misc]


def _selected_attributes(attributes: dict[str, dict[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """MessageAttributeNames: "All", "*" or ".*" for every one, "prefix.*" for a prefix, else names."""
    if any(n in ("All", "*", ".*") for n in names):
        return attributes
    prefixes = [n[:-2] for n in names if n.endswith(".*")]
    return {k: v for k, v in attributes.items() if k in names or any(k.startswith(p) for p in prefixes)}


def _wire_message(m: Message, queue: Queue, system_names: list[str], user_filter: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"MessageId": m.id, "ReceiptHandle": m.receipt, "MD5OfBody": m.md5_body, "Body": m.body}
    system = system_attributes(m, system_names)
    if system:
        out["Attributes"] = system
    user = _selected_attributes(m.attributes, user_filter)
    if user:
        out["MD5OfMessageAttributes"] = msgs.attributes_md5(user)
        out["MessageAttributes"] = msgs.wire_attributes(user)
    return out


# ---------------------------------------------------------------------------------------------
# deleting and changing visibility


def _handle(queue: Queue, handle: Any) -> str:
    """The message id a receipt handle of this queue names; ReceiptHandleIsInvalid otherwise."""
    parsed = parse_receipt(handle) if isinstance(handle, str) else None
    if parsed is None or parsed[0] != queue.arn:
        raise SqsError("ReceiptHandleIsInvalid", f'The input receipt handle "{handle}" is not a valid receipt handle.')
    return parsed[1]


def delete_one(service: SqsService, queue: Queue, handle: str) -> None:
    message_id = _handle(queue, handle)
    message = queue.messages.get(message_id)
    if message is None:
        return  # deleted already: AWS answers success
    if queue.fifo and (message.receipt != handle or message.visible_at <= now()):
        # A FIFO message whose visibility ran out may be with another consumer now.
        raise invalid_value("ReceiptHandle", handle, "The receipt handle has expired.")
    service.persist.delete_messages(queue, [message_id])
    queue.remove([message_id])
    if queue.fifo:  # the message's group may be receivable now: wake long polls waiting on it
        assert queue.cond is not None
        queue.cond.notify_all()


def change_visibility_one(service: SqsService, queue: Queue, handle: str, timeout: Any) -> None:
    message_id = _handle(queue, handle)
    if timeout is None:
        raise missing_parameter("VisibilityTimeout")
    if not 0 <= timeout <= 43200:
        raise invalid_value("VisibilityTimeout", timeout, "Must be >= 0 and <= 43200, if provided.")
    message = queue.messages.get(message_id)
    if message is None or message.receipt is None or (queue.fifo and message.receipt != handle):
        raise invalid_value("ReceiptHandle", handle, "Message does not exist or is not available for visibility "
                                                     "timeout change.")
    message.visible_at = now() + timeout
    service.persist.save_messages(queue, [message])
    assert queue.cond is not None
    queue.cond.notify_all()  # a timeout of 0 makes it receivable now


def delete_message(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        delete_one(call.service, call.queue(params["QueueUrl"]), params["ReceiptHandle"])
    return {}


def change_message_visibility(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    with call.service.lock:
        change_visibility_one(call.service, call.queue(params["QueueUrl"]), params["ReceiptHandle"],
                              params.get("VisibilityTimeout"))
    return {}
