"""Where a stream event source mapping's `OnFailure` records go: the invocation record of a batch
that was given up (events.failure_record), delivered in-process.

AWS accepts SQS queues, SNS topics and S3 buckets for Kinesis sources (CloudFormation's
`AWS::Lambda::EventSourceMapping OnFailure`: "To retain records of failed invocations from Kinesis,
DynamoDB, self-managed Kafka or Amazon MSK, you can configure an Amazon SNS topic, Amazon SQS queue,
or Amazon S3 bucket"); kinesim adds Kinesis streams. Only the ARN's service is checked when the
mapping is created: whether the queue, topic, bucket or stream exists is found out when a record is
sent, and a destination that cannot take it holds the shard (LastProcessingResult says why).

- SQS queue: the record's JSON is the message body (LocalStack's AWS recording,
  test_kinesis_event_source_mapping_with_on_failure_destination_config).
- SNS topic: the record's JSON is the notification's `Message`, no subject
  (test_kinesis_event_source_mapping_with_sns_on_failure_destination_config).
- S3 bucket: an object `aws/lambda/<UUID>/<shard>/YYYY/MM/DD/...` with the record and, as
  `payload`, the whole event the function was sent.
- Kinesis stream (kinesim): one record, partition key the shard id.
The SQS and SNS services receive through `kinesim.destinations` (their own registered senders).
"""
from __future__ import annotations

import logging
from typing import Any

import orjson

from ..destinations import Destinations, arn_service
from ..kinesis.records import put_record
from ..kinesis.service import KinesisService
from ..protocol.errors import AwsError
from ..s3.objects import ObjectStore
from . import events

log = logging.getLogger("kinesim.pollers")

# The ARN services a Kinesis mapping's OnFailure may name, by how they are reached.
VIA_DESTINATIONS = ("sqs", "sns")


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterValueException", message)


def s3_bucket(arn: str) -> str | None:
    """The bucket an S3 bucket ARN names (no region, no account, no key), else None."""
    parts = arn.split(":", 5)
    if len(parts) == 6 and parts[0] == "arn" and parts[1].startswith("aws") and parts[2] == "s3" \
            and parts[3] == parts[4] == "" and parts[5] and "/" not in parts[5]:
        return parts[5]
    return None


def _kinesis_stream(arn: str) -> bool:
    return arn.startswith("arn:aws") and ":kinesis:" in arn and ":stream/" in arn and "/consumer/" not in arn


def check_destination(arn: str) -> None:
    """Refuse an OnFailure destination of a service no Kinesis mapping can deliver to."""
    if s3_bucket(arn) is not None or _kinesis_stream(arn) or arn_service(arn) in VIA_DESTINATIONS:
        return
    service = arn_service(arn) or "?"
    raise invalid_parameter(
        f"Unsupported OnFailure destination {arn}: the failure records of stream event source mappings go to "
        f"SQS queues, SNS topics and S3 buckets (and, in kinesim, Kinesis streams), not to {service}.")


class FailureSender:
    """Delivers invocation records for the mappings of one server."""

    def __init__(self, kinesis: KinesisService, objects: ObjectStore | None, destinations: Destinations | None):
        self.kinesis, self.objects, self.destinations = kinesis, objects, destinations

    def check_usable(self, arn: str) -> None:
        """Whenever a mapping is (re)started: the ARN's service, and an object store for S3."""
        check_destination(arn)
        if s3_bucket(arn) is not None and self.objects is None:
            raise invalid_parameter(f"Unsupported OnFailure destination {arn}: this server has no object store "
                                    "for S3 destinations.")

    def check_available(self, arn: str) -> None:
        """At CreateEventSourceMapping/Update, also: refuse a destination this server has no service
        for (AWS has them all; a record kinesim could never deliver would hold the shard forever).
        Not when mappings resume at start-up: the SQS and SNS services register afterwards."""
        self.check_usable(arn)
        if arn_service(arn) in VIA_DESTINATIONS and (self.destinations is None or not self.destinations.can_send(arn)):
            raise invalid_parameter(f"Unsupported OnFailure destination {arn}: this kinesim server has no "
                                    f"{arn_service(arn).upper()} service to deliver to.")

    def send(self, destination: str, record: dict[str, Any], mapping_uuid: str, shard_id: str,
             event: bytes) -> str | None:
        """Deliver `record` (for the batch `event`); None once delivered, else the problem for
        LastProcessingResult."""
        try:
            self._send(destination, record, mapping_uuid, shard_id, event)
        except AwsError as err:
            log.warning("mapping %s: on-failure record not delivered to %s: %s %s",
                        mapping_uuid, destination, err.code, err.message)
            return f"PROBLEM: On-failure destination {destination} unavailable: {err.code}: {err.message}"
        except OSError as err:
            log.warning("mapping %s: on-failure record not delivered to %s: %s", mapping_uuid, destination, err)
            return f"PROBLEM: On-failure destination {destination} unavailable: {err}"
        return None

    def _send(self, destination: str, record: dict[str, Any], mapping_uuid: str, shard_id: str,
              event: bytes) -> None:
        bucket = s3_bucket(destination)
        if bucket is not None:
            if self.objects is None:
                raise AwsError("NoSuchBucket", f"this server has no object store for {destination}", 404)
            key = events.failure_object_key(mapping_uuid, shard_id, record["timestamp"])
            body = orjson.dumps({**record, "payload": event.decode()})
            self.objects.put_object(bucket, key, body, content_type="application/json")
        elif arn_service(destination) in VIA_DESTINATIONS:
            if self.destinations is None:
                raise AwsError("ResourceNotFoundException", f"kinesim cannot deliver messages to {destination}", 404)
            self.destinations.send(destination, orjson.dumps(record), None)
        else:
            put_record(self.kinesis, {"StreamARN": destination, "Data": orjson.dumps(record),
                                      "PartitionKey": shard_id})
