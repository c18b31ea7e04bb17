"""What an SQS event source mapping hands a function, and how it reads the answer.

The event is AWS's (the Lambda developer guide's examples, and LocalStack's recordings of AWS in
tests/aws/services/lambda_/event_source_mapping/test_lambda_integration_sqs.snapshot.json):
each record has messageId, receiptHandle, body, attributes (the message's system attributes as
strings; a FIFO queue's add SequenceNumber, MessageGroupId, MessageDeduplicationId),
messageAttributes in Lambda's own casing (stringValue / binaryValue, the reserved
stringListValues / binaryListValues always empty, dataType), md5OfMessageAttributes (null when
the message has none, as recorded), md5OfBody, eventSource "aws:sqs", eventSourceARN, awsRegion.

The answer, with ReportBatchItemFailures (the guide's "Implementing partial batch responses"):
a null or empty `batchItemFailures`, or an empty or null response, is a complete success; a
response that is not JSON, or an entry whose itemIdentifier is empty, null, under another key or
not a message of the batch, fails the whole batch; otherwise exactly the listed messages failed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from ..protocol import user_json

if TYPE_CHECKING:
    from ..sqs.consumer import Received

# The order of the attributes in AWS's events (the guide's standard and FIFO examples).
_ATTRIBUTE_ORDER = ("ApproximateReceiveCount", "SentTimestamp", "SequenceNumber", "MessageGroupId", "SenderId",
                    "MessageDeduplicationId", "ApproximateFirstReceiveTimestamp", "AWSTraceHeader")


def sqs_record(m: Received, queue_arn: str, region: str) -> dict[str, Any]:
    attributes = {name: m.attributes[name] for name in _ATTRIBUTE_ORDER if name in m.attributes}
    return {
        "messageId": m.message_id,
        "receiptHandle": m.receipt_handle,
        "body": m.body,
        "attributes": attributes,
        "messageAttributes": {name: _attribute(value) for name, value in m.message_attributes.items()},
        "md5OfMessageAttributes": m.md5_of_message_attributes,
        "md5OfBody": m.md5_of_body,
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def _attribute(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "BinaryValue" in value:
        out["binaryValue"] = value["BinaryValue"]  # stored as base64, which is how the event carries it
    else:
        out["stringValue"] = value["StringValue"]
    out["stringListValues"] = []
    out["binaryListValues"] = []
    out["dataType"] = value["DataType"]
    return out


def sqs_event(records: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"Records": records})


def filter_view(record: dict[str, Any]) -> dict[str, Any]:
    """What filter patterns see of a record: the record, `body` parsed as JSON. A body that is not
    JSON stays a plain string, which a pattern on a field of `body` never matches (AWS drops such a
    message: LocalStack's recorded "valid-json-filter" case)."""
    view = dict(record)
    try:
        view["body"] = user_json.loads(record["body"])
    except ValueError:  # InvalidJson (syntax, or nested past its depth limit)
        pass  # the plain string itself
    return view


def failed_messages(payload: bytes, ids: list[str]) -> set[str] | None:
    """The messages a ReportBatchItemFailures answer says failed: an empty set for a complete
    success, None when the whole batch failed."""
    try:
        body = orjson.loads(payload) if payload and payload.strip() else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return set()
    failures = body.get("batchItemFailures")
    if not failures:
        return set()
    if not isinstance(failures, list):
        return None
    known = set(ids)
    failed = set()
    for failure in failures:
        ident = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not isinstance(ident, str) or ident not in known:
            return None
        failed.add(ident)
    return failed
