"""S3 event notification messages in AWS's shape (eventVersion 2.1), and what a write tells them.

The record's fields and which of them each event has follow S3's own messages as LocalStack
recorded them from AWS (tests/aws/services/s3/test_s3_notifications_{sqs,sns,lambda}.snapshot.json):
- created events carry the object's `size` and `eTag` (MD5 hex, no quotes); removed events carry
  neither (a delete marker has the empty object's eTag and no size);
- `versionId` only for a versioned bucket's objects (kinesim's objects have none);
- `sequencer`: hex digits that grow with each event of a key, so a consumer can order them;
- the key URL-encoded as a form value (S3 documents `application/x-www-form-urlencoded`: "red
  flower.jpg" is "red+flower.jpg", "a@b" is "a%40b") with "/" kept as it is (what S3 sends today,
  minio issue 11665).
"""
from __future__ import annotations

import base64
import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus

from .xmldoc import iso8601

EVENT_VERSION = "2.1"
SCHEMA_VERSION = "1.0"
SNS_SUBJECT = "Amazon S3 Notification"
# The WHATWG form encoder leaves "*-._" unencoded besides letters and digits (Python's also "~");
# "/" is kept as S3 does.
_FORM_SAFE = "*/"


def new_request_id() -> str:
    """An S3 request id: 16 upper-case hex digits."""
    return os.urandom(8).hex().upper()


def new_host_id() -> str:
    """An x-amz-id-2: 48 random bytes in base64."""
    return base64.b64encode(os.urandom(48)).decode()


@dataclass(frozen=True)
class WriteOrigin:
    """What a write tells its notification: the event (without "s3:") and the request behind it.
    Writes from inside kinesim (Firehose deliveries, channels) use the defaults, as a PutObject."""
    event: str = "ObjectCreated:Put"
    request_id: str = field(default_factory=new_request_id)
    host_id: str = field(default_factory=new_host_id)
    source_ip: str = "127.0.0.1"
    principal_id: str | None = None  # None: the bucket owner's
    # The request's X-Amzn-Trace-Id, carried to the function the event invokes (and to the queue or
    # topic it is sent to): Lambda's recursive loop detection follows it through S3.
    trace_header: str | None = None


def encode_key(key: str) -> str:
    """The key as S3 writes it in an event: form-encoded (space as "+"), "/" kept."""
    return quote_plus(key, safe=_FORM_SAFE).replace("~", "%7E")


def owner_principal(account_id: str) -> str:
    """The principal id S3 shows for the bucket owner (a stable upper-case id derived from the account,
    shaped like AWS's, e.g. "A3NL1KOZZKExample")."""
    return "A" + hashlib.sha256(account_id.encode()).hexdigest()[:13].upper()


class Sequencer:
    """Sequencer values: 18 upper-case hex digits (AWS's length, e.g. "0055AED6DCD90281E5") from
    the clock in nanoseconds, each larger than the one before, so a key's events compare in the
    order they happened, across restarts too (as long as the clock does not go back)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> str:
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return f"{self._last:018X}"


@dataclass(frozen=True)
class ObjectEvent:
    """One event of one object, before it is addressed to a configuration."""
    event: str            # "ObjectCreated:Put"
    bucket: str
    region: str
    key: str
    sequencer: str
    time: float
    origin: WriteOrigin
    owner_id: str
    size: int | None = None
    etag: str | None = None  # quoted or not


def record(ev: ObjectEvent, configuration_id: str, partition: str = "aws") -> dict[str, Any]:
    """The event record for one configuration, in S3's field order."""
    obj: dict[str, Any] = {"key": encode_key(ev.key)}
    if ev.event.startswith("ObjectCreated:"):
        obj["size"] = ev.size
        obj["eTag"] = (ev.etag or "").strip('"')
    obj["sequencer"] = ev.sequencer
    return {
        "eventVersion": EVENT_VERSION,
        "eventSource": "aws:s3",
        "awsRegion": ev.region,
        "eventTime": iso8601(ev.time),
        "eventName": ev.event,
        "userIdentity": {"principalId": ev.origin.principal_id or ev.owner_id},
        "requestParameters": {"sourceIPAddress": ev.origin.source_ip},
        "responseElements": {"x-amz-request-id": ev.origin.request_id, "x-amz-id-2": ev.origin.host_id},
        "s3": {
            "s3SchemaVersion": SCHEMA_VERSION,
            "configurationId": configuration_id,
            "bucket": {"name": ev.bucket, "ownerIdentity": {"principalId": ev.owner_id},
                       "arn": f"arn:{partition}:s3:::{ev.bucket}"},
            "object": obj,
        },
    }


def message(ev: ObjectEvent, configuration_id: str) -> dict[str, Any]:
    """What a destination receives: `{"Records": [record]}` (one record per message, as S3 sends)."""
    return {"Records": [record(ev, configuration_id)]}


def test_event(bucket: str, request_id: str, host_id: str) -> dict[str, Any]:
    """The message S3 sends to an SQS or SNS destination when a configuration naming it is saved."""
    return {"Service": "Amazon S3", "Event": "s3:TestEvent", "Time": iso8601(time.time()), "Bucket": bucket,
            "RequestId": request_id, "HostId": host_id}

