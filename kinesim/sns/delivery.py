"""Fan-out of a published message to a topic's subscriptions, in the shapes AWS delivers.

Every delivery goes through kinesim.destinations (the receiving service's sender, by the endpoint's
ARN), in the publishing request: when Publish answers, each subscriber's service holds the message
(an SQS queue's store, a Firehose buffer, Lambda's event queue), with the publisher's X-Ray trace
header (a queue's AWSTraceHeader, an invocation's chain for Lambda's recursive loop detection). A
delivery that fails (a deleted queue, a missing function) is logged and, when the subscription has
a RedrivePolicy, sent to its dead-letter queue; it is not retried (AWS retries per its delivery
policy first; a local endpoint that is missing stays missing, so retrying would only delay the log
line).

Shapes (AWS's documentation and LocalStack's recordings of AWS):
* SQS: the JSON envelope (Type, MessageId, [SequenceNumber], TopicArn, [Subject], Message,
  Timestamp, SignatureVersion/Signature/SigningCertURL for standard topics, UnsubscribeURL,
  [MessageAttributes]), or with RawMessageDelivery the message itself, its attributes becoming
  SQS message attributes.
* Lambda: `{"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0", "EventSubscriptionArn",
  "Sns": {...}}]}`, invoked asynchronously; `Subject` is null when absent, URLs spelled `...Url`.
* Firehose: the envelope without the signature members (or the raw message), one line per record
  ("line breaks separate each message" in the S3 objects, AWS's SNS-to-Firehose documentation).

Signatures: kinesim has no SNS signing certificate; `Signature` is a base64 SHA digest of AWS's
canonical string, present so that the shape matches, not verifiable against a certificate.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kinesim.protocol import user_json
from kinesim.protocol.errors import AwsError

from .filter_policy import matches

if TYPE_CHECKING:
    from .model import Subscription, Topic

log = logging.getLogger("kinesim.sns")

# send(arn, message bytes, attributes, trace header): kinesim.destinations.Destinations.send
Send = Callable[[str, bytes, "dict[str, Any] | None", "str | None"], None]


@dataclass
class Message:
    topic_arn: str
    message: str | dict[str, str]   # a dict with MessageStructure=json: per-protocol texts, "default"
    subject: str | None = None
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)  # MessageAttributeValue shapes
    group_id: str | None = None
    dedup_id: str | None = None
    sequence_number: str | None = None
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: float = field(default_factory=time.time)
    trace_header: str | None = None  # the publisher's X-Amzn-Trace-Id, passed to every subscriber

    def text(self, protocol: str) -> str:
        if isinstance(self.message, dict):
            return self.message.get(protocol, self.message["default"])
        return self.message


class Deliveries:
    def __init__(self, send: Send, base_url: str):
        self.send = send
        self.base_url = base_url        # where UnsubscribeURL and SigningCertURL point

    def fan_out(self, topic: "Topic", subscriptions: list["Subscription"], msg: Message) -> None:
        for sub in subscriptions:
            try:
                if not matches(sub.attributes, msg):
                    continue
            except Exception:  # a policy that cannot be evaluated is a non-match, never the publisher's failure
                log.exception("SNS: evaluating the filter policy of %s failed; not delivered to it", sub.arn)
                continue
            try:
                body, attrs = self._payload(topic, sub, msg)
            except Exception:  # a bug in shaping one delivery must not fail the publish
                log.exception("SNS: shaping the delivery to %s failed", sub.endpoint)
                continue
            self._deliver(sub, body, attrs, msg.trace_header)

    def _deliver(self, sub: "Subscription", body: bytes, attrs: dict[str, Any] | None, trace: str | None) -> None:
        try:
            self.send(sub.endpoint, body, attrs, trace)
            return
        except AwsError as err:
            reason = f"{err.code}: {err.message}"
        except Exception as err:  # the receiving service's own failure: logged, never the publisher's
            log.exception("SNS: delivery to %s failed", sub.endpoint)
            reason = repr(err)
        dlq = _dead_letter_arn(sub)
        log.warning("SNS: delivery of a message on %s to %s failed (%s); not retried%s", sub.topic_arn,
                    sub.endpoint, reason, f", sent to {dlq}" if dlq else "")
        if dlq:
            try:
                self.send(dlq, body, attrs, trace)
            except Exception as err:
                log.warning("SNS: the dead-letter queue %s of %s took nothing either: %s", dlq, sub.arn, err)

    # shapes

    def _payload(self, topic: "Topic", sub: "Subscription", msg: Message) -> tuple[bytes, dict[str, Any] | None]:
        text = msg.text(sub.protocol)
        if sub.protocol == "lambda":
            return _dumps({"Records": [{"EventSource": "aws:sns", "EventVersion": "1.0",
                                        "EventSubscriptionArn": sub.arn,
                                        "Sns": self._lambda_record(topic, sub, msg, text)}]}), None
        if sub.protocol == "firehose":
            if sub.raw:
                return (text + "\n").encode(), None
            env = self._envelope(topic, sub, msg, text, signed=False)
            return _dumps(env) + b"\n", None
        # sqs
        attrs: dict[str, Any] = {}
        if topic.fifo and sub.endpoint.endswith(".fifo"):  # a standard queue takes neither id
            attrs["MessageGroupId"] = msg.group_id
            attrs["MessageDeduplicationId"] = msg.dedup_id or hashlib.sha256(text.encode()).hexdigest()
        if sub.raw:
            if msg.attributes:
                attrs["MessageAttributes"] = {k: dict(v) for k, v in msg.attributes.items()}
            return text.encode(), attrs or None
        return _dumps(self._envelope(topic, sub, msg, text, signed=not topic.fifo)), attrs or None

    def _envelope(self, topic: "Topic", sub: "Subscription", msg: Message, text: str, signed: bool) -> dict[str, Any]:
        env: dict[str, Any] = {"Type": "Notification", "MessageId": msg.id}
        if msg.sequence_number:
            env["SequenceNumber"] = msg.sequence_number
        env["TopicArn"] = msg.topic_arn
        if msg.subject is not None:
            env["Subject"] = msg.subject
        env["Message"] = text
        env["Timestamp"] = _iso(msg.timestamp)
        if signed:
            version = topic.attributes.get("SignatureVersion", "1")
            env["SignatureVersion"] = version
            env["Signature"] = _signature(env, version)
            env["SigningCertURL"] = self._cert_url()
        env["UnsubscribeURL"] = self._unsubscribe_url(sub)
        if msg.attributes:
            env["MessageAttributes"] = _envelope_attributes(msg.attributes)
        return env

    def _lambda_record(self, topic: "Topic", sub: "Subscription", msg: Message, text: str) -> dict[str, Any]:
        version = topic.attributes.get("SignatureVersion", "1")
        signed = {"Type": "Notification", "MessageId": msg.id, "TopicArn": msg.topic_arn, "Subject": msg.subject,
                  "Message": text, "Timestamp": _iso(msg.timestamp)}
        # The members in the order of AWS's example event (Lambda's "Using Lambda with Amazon SNS").
        return {"SignatureVersion": version, "Timestamp": signed["Timestamp"],
                "Signature": _signature(signed, version), "SigningCertUrl": self._cert_url(), "MessageId": msg.id,
                "Message": text, "MessageAttributes": _envelope_attributes(msg.attributes), "Type": "Notification",
                "UnsubscribeUrl": self._unsubscribe_url(sub), "TopicArn": msg.topic_arn, "Subject": msg.subject}

    def _cert_url(self) -> str:
        return f"{self.base_url}/SimpleNotificationService-kinesim.pem"

    def _unsubscribe_url(self, sub: "Subscription") -> str:
        return f"{self.base_url}/?Action=Unsubscribe&SubscriptionArn={sub.arn}"


def _envelope_attributes(attributes: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    out = {}
    for name, attr in attributes.items():
        if "BinaryValue" in attr:
            value = base64.b64encode(attr["BinaryValue"]).decode()
        else:
            value = attr.get("StringValue", "")
        out[name] = {"Type": attr["DataType"], "Value": value}
    return out


def _signature(env: dict[str, Any], version: str) -> str:
    # AWS's canonical string for a notification: name/value lines of these members, in this order.
    lines = []
    for key in ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"):
        if env.get(key) is not None:
            lines.append(f"{key}\n{env[key]}\n")
    digest = hashlib.sha256 if version == "2" else hashlib.sha1
    return base64.b64encode(digest("".join(lines).encode()).digest()).decode()


def _dead_letter_arn(sub: "Subscription") -> str | None:
    policy = sub.attributes.get("RedrivePolicy")
    if not policy:
        return None
    try:
        return user_json.loads(policy).get("deadLetterTargetArn")
    except (user_json.InvalidJson, AttributeError):
        return None


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
