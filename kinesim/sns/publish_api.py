"""Publish and PublishBatch: checks in AWS's order, FIFO sequencing and deduplication, fan-out.

Texts are AWS's as LocalStack recorded them (tests/aws/services/sns snapshots). A batch with one bad
entry fails whole, as recorded ("AWS fails the whole publish if something is wrong in the format of
1 message"). Limits: 256 KiB for a message with its attributes (names, types and values count), and
for a whole batch; 10 entries a batch. FIFO topics deduplicate within five minutes on
MessageDeduplicationId, or on the message's SHA-256 with ContentBasedDeduplication; a duplicate is
acknowledged with the first message's ids and not delivered again.
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json
from kinesim.protocol.errors import AwsError

from .delivery import Message
from .errors import check_arn, invalid, not_found
from .model import Topic

if TYPE_CHECKING:
    from .service import SnsService

MAX_MESSAGE_BYTES = 256 * 1024
MAX_BATCH_ENTRIES = 10
DEDUP_WINDOW_S = 300.0
_ATTR_NAME = re.compile(r"(?!\.)(?!.*\.$)(?!.*\.\.)[a-zA-Z0-9_\-.]+")
_ATTR_TYPE = re.compile(r"(String|Number|Binary)(\..+)?")
_ENTRY_ID = re.compile(r"[a-zA-Z0-9_-]+")
# The operations that take the request's X-Amzn-Trace-Id as a third argument: what they deliver
# carries it on (Lambda's recursive loop detection follows chains through SNS).
TRACED = frozenset(("Publish", "PublishBatch"))


def _value_error(message: str) -> AwsError:
    return AwsError("ParameterValueInvalid", message)


def _check_attributes(attributes: dict[str, dict[str, Any]]) -> None:
    for name, attr in attributes.items():
        if len(name.encode()) > 256:
            raise _value_error("Length of message attribute name must be less than 256 bytes.")
        if not _ATTR_NAME.fullmatch(name):
            bad = next((c for c in name if not (c.isalnum() or c in "_-.")), None)
            if bad is not None:
                raise _value_error(f"Invalid non-alphanumeric character '#x{ord(bad):X}' was found in the message "
                                   "attribute name. Can only include alphanumeric characters, hyphens, "
                                   "underscores, or dots.")
            if name.startswith("."):
                raise _value_error("Invalid message attribute name starting with character '.' was found.")
            if name.endswith("."):
                raise _value_error("Invalid message attribute name ending with character '.' was found.")
            raise _value_error("Message attribute name can not have successive '.' character.")
        kind = attr["DataType"]
        if not _ATTR_TYPE.fullmatch(kind):
            raise _value_error(f"The message attribute '{name}' has an invalid message attribute type, the set of "
                               "supported type prefixes is Binary, Number, and String.")
        field = "Binary" if kind.startswith("Binary") else "String"
        if "StringValue" not in attr and "BinaryValue" not in attr:
            raise _value_error(f"The message attribute '{name}' must contain non-empty message attribute value "
                               f"for message attribute type '{kind}'.")
        if f"{field}Value" not in attr:
            raise _value_error(f"The message attribute '{name}' with type '{kind}' must use field '{field}'.")
        if not attr[f"{field}Value"]:
            raise _value_error(f"The message attribute '{name}' must contain non-empty message attribute value "
                               f"for message attribute type '{kind}'.")


def _size(message: str, attributes: dict[str, dict[str, Any]]) -> int:
    size = len(message.encode())
    for name, attr in attributes.items():
        size += len(name.encode()) + sum(len(v if isinstance(v, bytes) else str(v).encode()) for v in attr.values())
    return size


def _structured(message: str, structure: str | None) -> str | dict[str, str]:
    if structure != "json":
        return message
    try:
        doc = user_json.loads(message)
    except user_json.InvalidJson:  # AWS's one text for any document it cannot read (recorded)
        raise invalid("Invalid parameter: Message Structure - JSON message body failed to parse") from None
    # Only string values name a protocol's text; others are ignored (AWS's documentation).
    texts = {k: v for k, v in doc.items() if isinstance(v, str)} if isinstance(doc, dict) else {}
    if "default" not in texts:
        raise invalid("Invalid parameter: Message Structure - No default entry in JSON message body")
    return texts


def _check_fifo(topic: Topic, group_id: str | None, dedup_id: str | None) -> None:
    if topic.fifo:
        if not group_id:
            raise invalid("Invalid parameter: The MessageGroupId parameter is required for FIFO topics")
        if topic.attributes.get("ContentBasedDeduplication") != "true" and not dedup_id:
            raise invalid("Invalid parameter: The topic should either have ContentBasedDeduplication enabled or "
                          "MessageDeduplicationId provided explicitly")
    elif dedup_id:
        raise invalid("Invalid parameter: MessageDeduplicationId Reason: The request includes "
                      "MessageDeduplicationId parameter that is not valid for this topic type")


def _lookup(svc: SnsService, arn: str, member: str) -> Topic:
    parts = check_arn(arn, member)
    if member == "TargetArn" and len(parts) == 6 and parts[2] == "sns" and "/" in parts[5]:
        # A mobile endpoint ARN (`...:endpoint/GCM/app/id`): kinesim has none.
        raise invalid("Invalid parameter: TargetArn Reason: No endpoint found for the target arn specified")
    if parts[3] != svc.region or parts[2] != "sns":
        raise invalid(f"Invalid parameter: {member}")
    topic = svc.topics.get(arn)
    if topic is None:
        raise not_found("Topic does not exist")
    return topic


class Sequencer:
    """Per FIFO topic: increasing sequence numbers (time-based, so they keep increasing across
    restarts) and the deduplication window."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}
        self._seen: dict[str, dict[str, tuple[float, str, str]]] = {}

    def next(self, topic_arn: str, dedup_key: str, message_id: str) -> tuple[str, str, bool]:
        """(message id, sequence number, is_new) for a message with this deduplication key."""
        now = time.time()
        with self._lock:
            seen = self._seen.setdefault(topic_arn, {})
            for key in [k for k, (t, _, _) in seen.items() if now - t > DEDUP_WINDOW_S]:
                del seen[key]
            if dedup_key in seen:
                _, first_id, first_seq = seen[dedup_key]
                return first_id, first_seq, False
            number = max(self._last.get(topic_arn, 0) + 1, time.time_ns() // 1000 * 1000)
            self._last[topic_arn] = number
            seq = f"{number:020d}"
            seen[dedup_key] = (now, message_id, seq)
            return message_id, seq, True


def _publish(svc: SnsService, topic: Topic, msg: Message) -> Message | None:
    """Sequence a FIFO message (None: a duplicate, not delivered again) and fan it out."""
    if topic.fifo:
        key = msg.dedup_id or hashlib.sha256(msg.text("default").encode()).hexdigest()
        msg.id, msg.sequence_number, new = svc.sequencer.next(topic.arn, key, msg.id)
        if not new:
            return None
    svc.deliveries.fan_out(topic, svc.subscriptions_of(topic.arn), msg)
    return msg


def _answer(msg: Message) -> dict[str, Any]:
    out = {"MessageId": msg.id}
    if msg.sequence_number:
        out["SequenceNumber"] = msg.sequence_number
    return out


def publish(svc: SnsService, p: dict[str, Any], trace_header: str | None = None) -> dict[str, Any]:
    subject, message = p.get("Subject"), p["Message"]
    if subject is not None and (not subject or len(subject) >= 100 or "\n" in subject or not subject.isascii()):
        raise invalid("Invalid parameter: Subject")
    if not message:
        raise invalid("Invalid parameter: Empty message")
    if p.get("PhoneNumber"):
        raise invalid("Invalid parameter: PhoneNumber Reason: kinesim does not send SMS messages")
    attributes = p.get("MessageAttributes") or {}
    _check_attributes(attributes)
    if _size(message, attributes) > MAX_MESSAGE_BYTES:
        raise invalid("Invalid parameter: Message too long")
    member = "TopicArn" if p.get("TopicArn") else "TargetArn" if p.get("TargetArn") else None
    if member is None:
        raise invalid("Invalid parameter: TopicArn or TargetArn Reason: no value for required parameter")
    topic = _lookup(svc, p[member], member)
    group_id, dedup_id = p.get("MessageGroupId"), p.get("MessageDeduplicationId")
    _check_fifo(topic, group_id, dedup_id)
    msg = Message(topic.arn, _structured(message, p.get("MessageStructure")), subject, attributes, group_id, dedup_id,
                  trace_header=trace_header)
    return _answer(_publish(svc, topic, msg) or msg)


def publish_batch(svc: SnsService, p: dict[str, Any], trace_header: str | None = None) -> dict[str, Any]:
    entries = p["PublishBatchRequestEntries"]
    if len(entries) > MAX_BATCH_ENTRIES:
        raise AwsError("TooManyEntriesInBatchRequest", "The batch request contains more entries than permissible.")
    topic = _lookup(svc, p["TopicArn"], "TopicArn")
    if not entries:
        raise AwsError("EmptyBatchRequest", "The batch request doesn't contain any entries.")
    ids = [e["Id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise AwsError("BatchEntryIdsNotDistinct", "Two or more batch entries in the request have the same Id.")
    for entry_id in ids:
        if len(entry_id) > 80:
            raise AwsError("InvalidBatchEntryId",
                           f"The Id of a batch entry in the batch request is too long: {entry_id}")
        if not _ENTRY_ID.fullmatch(entry_id):
            raise AwsError("InvalidBatchEntryId", "The Id of a batch entry in the batch request contains an "
                                                  f"impermissible character: {entry_id}")
    total = 0
    messages = []
    for entry in entries:
        attributes = entry.get("MessageAttributes") or {}
        _check_attributes(attributes)
        total += _size(entry["Message"], attributes)
        _check_fifo(topic, entry.get("MessageGroupId"), entry.get("MessageDeduplicationId"))
        subject = entry.get("Subject")
        if subject is not None and (not subject or len(subject) >= 100 or "\n" in subject):
            raise invalid("Invalid parameter: Subject")
        if not entry["Message"]:
            raise invalid("Invalid parameter: Empty message")
        messages.append(Message(topic.arn, _structured(entry["Message"], entry.get("MessageStructure")), subject,
                                attributes, entry.get("MessageGroupId"), entry.get("MessageDeduplicationId"),
                                trace_header=trace_header))
    if total > MAX_MESSAGE_BYTES:
        raise AwsError("BatchRequestTooLong", "The length of all the messages put together is more than the limit.")
    successful = []
    for entry, msg in zip(entries, messages):
        successful.append({"Id": entry["Id"], **_answer(_publish(svc, topic, msg) or msg)})
    return {"Successful": successful, "Failed": []}
