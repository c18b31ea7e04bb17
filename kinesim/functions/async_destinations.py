"""Where the records of asynchronous invocations go: the invocation record to an OnSuccess or
OnFailure destination, and the bare event to the function's dead-letter queue.

AWS's destinations for asynchronous invocations (Capturing records of Lambda asynchronous
invocations, Lambda developer guide): an SQS queue or SNS topic gets the record's JSON as the
message, a Lambda function gets it as its (asynchronous) event, an S3 bucket (OnFailure only) an
object `aws/lambda/async/<function-name>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>`, an EventBridge bus
a `Lambda Function Invocation Result` event. kinesim serves no EventBridge, so an event bus is
refused when the configuration is saved (event_invoke_config_api), never accepted and dropped.

A dead-letter queue (the function's `DeadLetterConfig`, an SQS queue or SNS topic) gets the event
itself, with the message attributes RequestID, ErrorCode and ErrorMessage (the first 1 KB of the
error message).

A record that cannot be delivered (a queue deleted since) is logged and dropped: AWS counts it in
its DestinationDeliveryFailures metric and drops it too.

Records and dead letters sent to a queue, topic or function carry the event's X-Ray trace header,
so that a destination that invokes the function again stays in the event's chain of requests
(recursion.py).
"""
from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from ..destinations import arn_service
from ..protocol.errors import AwsError
from .failure_destinations import s3_bucket

if TYPE_CHECKING:
    from ..destinations import Destinations
    from ..s3.objects import ObjectStore

log = logging.getLogger("kinesim.functions.async")

# Destination services delivered through kinesim.destinations (the receiving service's sender).
VIA_DESTINATIONS = ("sqs", "sns", "lambda")
MAX_DLQ_ERROR_MESSAGE_BYTES = 1024


def record_object_key(function_name: str, timestamp: str) -> str:
    """`aws/lambda/async/<function-name>/YYYY/MM/DD/YYYY-MM-DDTHH.MM.SS-<uuid>`, from the record's own
    `timestamp` (2019-11-14T00:38:06.021Z) so that both name the same second."""
    day = timestamp[:10].replace("-", "/")
    second = timestamp[:19].replace(":", ".")
    return f"aws/lambda/async/{function_name}/{day}/{second}-{uuid.uuid4()}"


class RecordSender:
    def __init__(self, destinations: "Destinations | None", objects: "ObjectStore | None"):
        self.destinations, self.objects = destinations, objects

    def can_deliver(self, arn: str) -> bool:
        """Whether this server has the service the ARN names (checked when a configuration is saved)."""
        if s3_bucket(arn) is not None:
            return self.objects is not None
        return arn_service(arn) in VIA_DESTINATIONS and self.destinations is not None \
            and self.destinations.can_send(arn)

    def send_record(self, arn: str, record: dict[str, Any], function_name: str,
                    trace_header: str | None = None) -> None:
        try:
            body = orjson.dumps(record)
            bucket = s3_bucket(arn)
            if bucket is not None:
                if self.objects is None:
                    raise AwsError("NoSuchBucket", f"this server has no object store for {arn}", 404)
                self.objects.put_object(bucket, record_object_key(function_name, record["timestamp"]), body,
                                        content_type="application/json")
            else:
                self._send(arn, body, None, trace_header)
        except (AwsError, OSError) as err:
            log.warning("invocation record of %s (request %s) not delivered to %s: %s", function_name,
                        record["requestContext"]["requestId"], arn, getattr(err, "message", err))

    def send_dead_letter(self, arn: str, event: bytes, request_id: str, error_message: str,
                         trace_header: str | None = None) -> None:
        text = error_message.encode()[:MAX_DLQ_ERROR_MESSAGE_BYTES].decode("utf-8", "ignore")
        attributes = {"MessageAttributes": {
            "RequestID": {"DataType": "String", "StringValue": request_id},
            "ErrorCode": {"DataType": "Number", "StringValue": "200"},
            "ErrorMessage": {"DataType": "String", "StringValue": text or "(no message)"},
        }}
        try:
            self._send(arn, event, attributes, trace_header)
        except (AwsError, OSError) as err:
            log.warning("event %s not delivered to dead-letter queue %s: %s", request_id, arn,
                        getattr(err, "message", err))

    def _send(self, arn: str, body: bytes, attributes: dict[str, Any] | None, trace_header: str | None) -> None:
        if self.destinations is None:
            raise AwsError("ResourceNotFoundException", f"kinesim cannot deliver messages to {arn}", 404)
        self.destinations.send(arn, body, attributes, trace_header)
