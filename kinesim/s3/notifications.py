"""S3 event notifications: each bucket's configuration, and the events of its objects sent to
the SQS queues, SNS topics and Lambda functions it names.

The object store calls `object_created` / `object_removed` inside a write, before the write is
answered; the messages for every matching configuration are put in the durable outbox there
(`notification_outbox.py`), so an acknowledged write's notifications survive `kill -9`.

Destinations are reached through the composition root's `Destinations` (kinesim/destinations.py):
SQS gets the event JSON as a message body; SNS a Publish with Subject "Amazon S3 Notification";
Lambda an asynchronous invocation (the "lambda" sender submits to the functions service's async
invoker, which retries and sends to on-failure destinations as Lambda does), as S3 invokes
functions with InvocationType Event. Each delivery carries the X-Ray trace header of the write
that caused it, which Lambda's recursive loop detection follows (a function writing to the bucket
that triggers it is stopped after 16 invocations of one chain).

Layout under the object store's root: `.notifications/config/<bucket>.json` (the configuration, in
botocore's shape) and `.notifications/outbox/` (deliveries not yet made).
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ..protocol.errors import AwsError
from . import notification_config as nc
from .errors import invalid_argument
from .notification_events import SNS_SUBJECT, ObjectEvent, Sequencer, WriteOrigin, message, owner_principal, test_event
from .notification_outbox import Delivery, Dispatcher, Outbox, delivery_delay

if TYPE_CHECKING:
    from ..destinations import Destinations

log = logging.getLogger("kinesim.s3.notifications")

# Errors of the receiving services that mean "no such destination".
_NOT_FOUND = ("ResourceNotFoundException", "NotFound", "NotFoundException", "QueueDoesNotExist",
              "AWS.SimpleQueueService.NonExistentQueue")


class BucketNotifications:
    def __init__(self, root: str, account_id: str, destinations: "Destinations",
                 find_function: Callable[[str], Any], region_of: Callable[[str], str],
                 owner_of: Callable[[str], str] | None = None):
        """`root`: the object store's directory. `find_function(arn)` raises AwsError when the
        function an ARN names does not exist (a Lambda destination is checked, never invoked, when
        a configuration is saved). `region_of(bucket)`: the bucket's region; `owner_of(bucket)`: the
        account that owns it (None: every bucket is `account_id`'s)."""
        self.account_id = account_id
        self.region_of = region_of
        self.owner_of = owner_of
        self.owner_id = owner_principal(account_id)
        self.destinations = destinations
        self.find_function = find_function
        self._config_dir = os.path.join(root, ".notifications", "config")
        os.makedirs(self._config_dir, exist_ok=True)
        self._tmp = os.path.join(root, ".tmp")
        os.makedirs(self._tmp, exist_ok=True)
        self._configs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.sequencer = Sequencer()
        self.outbox = Outbox(os.path.join(root, ".notifications", "outbox"))
        self.dispatcher = Dispatcher(self.outbox, self._send, delivery_delay())

    def start(self) -> None:
        self.dispatcher.start()

    def close(self) -> None:
        self.dispatcher.close()

    # ------------------------------------------------------------------------------------------
    # configurations

    def _path(self, bucket: str) -> str:
        return os.path.join(self._config_dir, bucket + ".json")

    def configuration(self, bucket: str) -> dict[str, Any]:
        """The bucket's configuration ({} for none). The caller has checked that the bucket exists."""
        with self._lock:
            config = self._configs.get(bucket)
            if config is None:
                try:
                    with open(self._path(bucket), "rb") as f:
                        config = json.loads(f.read())
                except (FileNotFoundError, ValueError):
                    config = {}
                self._configs[bucket] = config
            return config

    def put_configuration(self, bucket: str, region: str, config: dict[str, Any], request_id: str, host_id: str,
                          skip_validation: bool = False) -> None:
        """Check a configuration as S3 does (the document, then each destination, unless
        `skip_validation`: x-amz-skip-destination-validation), send the s3:TestEvent to its SQS and SNS
        destinations, and keep it."""
        nc.check(config)
        for kind, entry in nc.entries(config):
            # S3 sends only to destinations in the bucket's region (the text is moto's, written from S3's).
            if nc.arn_parts(entry[kind.arn_key])[2] != region:  # type: ignore[index]
                raise invalid_argument("The notification destination service region is not valid for the bucket "
                                       "location constraint", kind.arn_element, entry[kind.arn_key])
        if not skip_validation:
            self._validate_destinations(bucket, config, request_id, host_id)
        doc = json.dumps(config, separators=(",", ":")).encode()
        with self._lock:
            self.region_of(bucket)  # NoSuchBucket if it was deleted meanwhile (its deletion takes this lock)
            fd, tmp = tempfile.mkstemp(dir=self._tmp, suffix=".json")
            with os.fdopen(fd, "wb") as f:
                f.write(doc)
            os.replace(tmp, self._path(bucket))
            self._configs[bucket] = config

    def _validate_destinations(self, bucket: str, config: dict[str, Any], request_id: str, host_id: str) -> None:
        """S3 proves an SQS or SNS destination by sending it the s3:TestEvent, and checks that a
        function exists (and lets S3 invoke it: kinesim keeps function policies but enforces none).
        Every failure is reported at once. Reasons are S3's (LocalStack's recordings and its
        notifier's texts)."""
        failures: list[tuple[str, str]] = []
        test = json.dumps(test_event(bucket, request_id, host_id))
        done: set[str] = set()
        for kind, entry in nc.entries(config):
            arn = entry[kind.arn_key]
            if arn in done:
                continue
            done.add(arn)
            if kind.service == "lambda":
                try:
                    self.find_function(arn)
                except AwsError:
                    # S3 cannot tell a missing function from one it may not invoke (its recorded answer).
                    failures.append((f"{arn}, null", f"Not authorized to invoke function [{arn}]"))
                continue
            noun = "queue" if kind.service == "sqs" else "topic"
            try:
                self.destinations.send(arn, test.encode(), {"Subject": SNS_SUBJECT} if kind.service == "sns" else None)
            except AwsError as err:
                if err.code in _NOT_FOUND or err.status == 404:
                    failures.append((arn, f"The destination {noun} does not exist"))
                else:
                    failures.append((arn, f"Permissions on the destination {noun} do not allow S3 to publish "
                                          "notifications from this bucket"))
        if failures:
            raise nc.destination_error(failures)

    def bucket_deleted(self, bucket: str) -> None:
        with self._lock:
            self._configs.pop(bucket, None)
            try:
                os.unlink(self._path(bucket))
            except FileNotFoundError:
                pass

    # ------------------------------------------------------------------------------------------
    # events (called by the object store, under its lock, before the write is answered)

    def object_created(self, bucket: str, key: str, size: int, etag: str, origin: WriteOrigin | None) -> None:
        self._record(bucket, key, origin or WriteOrigin(), size, etag)

    def object_removed(self, bucket: str, key: str, origin: WriteOrigin | None) -> None:
        self._record(bucket, key, origin or WriteOrigin(event="ObjectRemoved:Delete"))

    def _record(self, bucket: str, key: str, origin: WriteOrigin, size: int | None = None,
                etag: str | None = None) -> None:
        config = self.configuration(bucket)
        targets = [(kind, entry) for kind, entry in nc.entries(config) if nc.matches(entry, origin.event, key)]
        if not targets:
            return
        owner_id = owner_principal(self.owner_of(bucket)) if self.owner_of is not None else self.owner_id
        ev = ObjectEvent(event=origin.event, bucket=bucket, region=self.region_of(bucket), key=key,
                         sequencer=self.sequencer.next(), time=time.time(), origin=origin, owner_id=owner_id,
                         size=size, etag=etag)
        deliveries = []
        for kind, entry in targets:
            body = json.dumps(message(ev, entry["Id"]))
            attributes = {"Subject": SNS_SUBJECT} if kind.service == "sns" else None
            deliveries.append(Delivery(entry[kind.arn_key], body, attributes, origin.trace_header))
        self.outbox.add(deliveries)
        self.dispatcher.notify()

    def _send(self, delivery: Delivery) -> None:
        self.destinations.send(delivery.arn, delivery.message.encode(), delivery.attributes, delivery.trace_header)
