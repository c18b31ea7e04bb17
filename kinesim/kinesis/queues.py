"""Kinesis queues, the control plane: CreateQueue, DescribeQueue, ListQueues, UpdateQueue,
DeleteQueue, and the registry of queues the service keeps (loaded at start).

A queue delivers one on-demand stream's records SQS-style (queue_records.py, queue_dlq.py); its
delivery state is in queue_state.py. Facts from botocore 1.44.5's model and AWS's "Quotas and
limits for queues" page (docs.aws.amazon.com/streams/latest/dev/queues-quotas.html): on-demand
streams only; a queue counts as a registered consumer (20 per stream together with enhanced
fan-out consumers); at most 5 queues CREATING or DELETING per account; 120,000 in-flight records
per queue; a stream with queues cannot be deleted nor switched to provisioned mode. Like
consumers, CREATING/UPDATING/DELETING end lazily, `settings.update_stream_ms` after the call.
"""
from __future__ import annotations

import base64
import binascii
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..protocol.errors import in_use, invalid_argument, limit_exceeded, not_found, validation_error
from .consumers import MAX_CONSUMERS
from .checkpoints import Checkpoint
from .model import Stream
from .queue_state import QueueState
from .reader import starting_checkpoint
from .tag_rules import check_new_tags

if TYPE_CHECKING:
    from .service import KinesisService

QUEUE_KIND = "kinesis-queue"
MAX_TRANSITIONING = 5          # queues CREATING or DELETING at once per account (AWS's quota)
DEFAULT_VISIBILITY = 30
DEFAULT_MAX_RECEIVES = 6
_QUEUE_ARN = re.compile(r"arn:aws[^:]*:kinesis:([^:]*):(\d{12}):queue/(\S+)")


def seconds(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)


@dataclass
class Queue:
    id: str
    name: str
    arn: str
    created: float
    stream_name: str
    stream_arn: str
    stream_created: float
    start_type: str
    start_at: float | None         # the configured AT_TIMESTAMP time
    effective_start: float         # where delivery began, shown once ACTIVE
    visibility: int = DEFAULT_VISIBILITY
    dead_letter: str = "BUILT_IN"  # or "NONE"
    max_receives: int = DEFAULT_MAX_RECEIVES
    status: str = "CREATING"
    ready_at: float = 0.0
    tags: dict[str, str] = field(default_factory=dict)
    state: QueueState | None = field(default=None, repr=False, compare=False)

    @property
    def delivering(self) -> bool:
        # "You can continue to receive and acknowledge records while the queue is UPDATING" (UpdateQueue)
        return self.status in ("ACTIVE", "UPDATING")

    @property
    def dead_after(self) -> int | None:
        return self.max_receives if self.dead_letter == "BUILT_IN" else None

    def to_doc(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "state"}

    @classmethod
    def from_doc(cls, d: dict[str, Any]) -> "Queue":
        return cls(**d)


class QueueRegistry:
    """The account's queues by id. `lock` guards the map and each queue's status fields."""

    def __init__(self, svc: KinesisService):
        self.svc = svc
        self.lock = threading.RLock()
        self.queues: dict[str, Queue] = {}
        now = time.time()
        for doc in svc.store.documents(QUEUE_KIND).values():
            queue = Queue.from_doc(doc)
            queue.state = QueueState(svc.store, queue.id)
            queue.state.load(now)
            self.queues[queue.id] = queue
        for queue in list(self.queues.values()):
            self.settle(queue)  # finishes a deletion a kill -9 interrupted

    def save(self, queue: Queue) -> None:
        self.svc.store.put_document(QUEUE_KIND, queue.id, queue.to_doc())

    def settle(self, queue: Queue) -> None:
        """Apply a due status change. A deleted queue's state goes before its document: after a
        kill -9 in between, the DELETING document is still there and the next start finishes."""
        with self.lock:
            if not queue.ready_at or time.time() < queue.ready_at:
                return
            queue.ready_at = 0.0
            if queue.status == "DELETING":
                assert queue.state is not None
                with queue.state.lock:
                    queue.state.drop_all()
                    queue.state.close()
                self.svc.store.delete_document(QUEUE_KIND, queue.id)
                self.queues.pop(queue.id, None)
                return
            queue.status = "ACTIVE"
            self.save(queue)

    def all(self) -> list[Queue]:
        for queue in list(self.queues.values()):
            self.settle(queue)
        return list(self.queues.values())

    def live(self) -> list[Queue]:
        """The queues, without settling any (no lock taken: callers may hold a stream's lock,
        and settling a deletion takes the queue's state lock, which a receive holds while it
        reads the stream); a deletion that is due counts as done."""
        now = time.time()
        return [q for q in list(self.queues.values())
                if not (q.status == "DELETING" and q.ready_at and now >= q.ready_at)]

    def on_stream(self, stream: Stream) -> list[Queue]:
        return [q for q in self.live() if q.stream_name == stream.name and q.stream_created == stream.created]

    def by_arn(self, arn: str) -> Queue:
        m = _QUEUE_ARN.fullmatch(arn)
        queue = None
        if m is not None and (m.group(1), m.group(2)) == (self.svc.settings.region, self.svc.account):
            queue = self.queues.get(m.group(3))
        if queue is not None:
            self.settle(queue)
            queue = self.queues.get(queue.id)
        if queue is None:
            raise not_found(f"Queue {arn} under account {self.svc.account} not found.")
        return queue

    def refuse_if_any(self, stream: Stream, doing: str) -> None:
        """Refuse DeleteStream / a switch to PROVISIONED while queues exist: "You must delete
        every queue on a data stream before you can delete the stream, or switch it from
        on-demand to provisioned capacity mode" (DeleteQueue). ResourceInUseException, as
        DeleteStream's for consumers; the text is ours."""
        count = len(self.on_stream(stream))
        if count:
            raise in_use(f"Stream {stream.name} under account {self.svc.account} has {count} queue(s). Delete "
                         f"the queues before you {doing}.")

    def begin(self, queue: Queue, status: str) -> None:
        """Enter a transitional status for `update_stream_ms` (0: the change is immediate)."""
        delay = self.svc.settings.update_stream_ms
        queue.status, queue.ready_at = status, time.time() + delay / 1000.0
        if delay <= 0 and status != "DELETING":
            queue.status, queue.ready_at = "ACTIVE", 0.0


# describing

def describe(queue: Queue) -> dict[str, Any]:
    position: dict[str, Any] = {"Type": queue.start_type}
    if queue.status != "CREATING":
        # "Once the queue is ACTIVE, the response always includes this member" (the model)
        position["Timestamp"] = queue.effective_start
    elif queue.start_at is not None:
        position["Timestamp"] = queue.start_at
    dead_letter: dict[str, Any] = {"TargetType": queue.dead_letter}
    if queue.dead_letter == "BUILT_IN":
        dead_letter["MaxReceiveCount"] = queue.max_receives
    return {"QueueName": queue.name, "QueueARN": queue.arn, "QueueStatus": queue.status,
            "QueueCreationTimestamp": queue.created,
            "StreamConfigurationList": [{"StreamARN": queue.stream_arn, "StartingPosition": position}],
            "QueueAttributes": {"VisibilityTimeoutSeconds": queue.visibility,
                                "DeadLetterConfiguration": dead_letter}}


def _attributes(queue: Queue, attrs: dict[str, Any]) -> None:
    """Apply QueueAttributes: "Attributes you do not specify are left unchanged" (UpdateQueue)."""
    if "VisibilityTimeoutSeconds" in attrs:
        queue.visibility = attrs["VisibilityTimeoutSeconds"]
    config = attrs.get("DeadLetterConfiguration")
    if config is not None:
        target, count = config["TargetType"], config.get("MaxReceiveCount")
        # "If you specify it with a TargetType of BUILT_IN, you must also specify MaxReceiveCount"
        # (the model); with NONE a count means nothing, refused likewise (our choice, our text).
        if target == "BUILT_IN" and count is None:
            raise validation_error("MaxReceiveCount is required when TargetType is BUILT_IN.")
        if target == "NONE" and count is not None:
            raise validation_error("MaxReceiveCount cannot be specified when TargetType is NONE.")
        queue.dead_letter = target
        queue.max_receives = count if count is not None else DEFAULT_MAX_RECEIVES


# starting position

def _start(svc: KinesisService, stream: Stream, queue: Queue) -> Checkpoint:
    """Where delivery begins in every shard, and the queue's effective start time: "for
    AT_TIMESTAMP, it is the timestamp you provided or the earliest time the stream can be read
    from, whichever is later" (the model); TRIM_HORIZON shows that earliest time, LATEST the
    queue's creation."""
    horizon = max(svc.retention_horizon(stream), stream.created)
    if queue.start_type == "LATEST":
        queue.effective_start = queue.created
    elif queue.start_type == "TRIM_HORIZON":
        queue.effective_start = horizon
    else:
        queue.effective_start = max(queue.start_at or 0.0, horizon)
    return starting_checkpoint(svc, stream, queue.start_type, queue.start_at)


def _stream_config(svc: KinesisService, p: dict[str, Any]) -> tuple[Stream, str, float | None]:
    configs = p["StreamConfigurationList"]
    if len(configs) != 1:
        # "The list must contain exactly one entry" (the model); the exception is the one the
        # model documents for "a combination of parameters is not supported"; the text is ours.
        raise validation_error("StreamConfigurationList must contain exactly one entry.")
    config = configs[0]
    position = config.get("StartingPosition") or {"Type": "LATEST"}
    kind, at = position["Type"], position.get("Timestamp")
    # "It is required in that case, and specifying it for any other type returns a
    # ValidationException" (QueueStartingPosition.Timestamp)
    if kind == "AT_TIMESTAMP" and at is None:
        raise validation_error("Timestamp is required when StartingPosition Type is AT_TIMESTAMP.")
    if kind != "AT_TIMESTAMP" and at is not None:
        raise validation_error(f"Timestamp can only be specified when StartingPosition Type is AT_TIMESTAMP, "
                               f"not {kind}.")
    stream = svc.stream({"StreamARN": config["StreamARN"]})
    if stream.status not in ("ACTIVE", "UPDATING"):
        raise in_use(f"Stream {stream.name} under account {svc.account} not ACTIVE, instead in state {stream.status}")
    if stream.mode != "ON_DEMAND":
        # ValidationException: "the operation is not supported for the stream's capacity mode"
        # (the model's ValidationException); "Provisioned mode is not supported" (quotas page).
        raise validation_error(f"Queues are supported only on streams in ON_DEMAND capacity mode. Stream "
                               f"{stream.name} under account {svc.account} is in {stream.mode} mode.")
    return stream, kind, None if at is None else seconds(at)


def consumer_slots_used(svc: KinesisService, stream: Stream) -> int:
    """Registered consumers plus queues: they share the stream's consumer limit."""
    return len(stream.consumers) + len(svc.queues.on_stream(stream))


# operations

def create_queue(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    registry: QueueRegistry = svc.queues
    name = p["QueueName"]
    stream, kind, at = _stream_config(svc, p)
    tags = dict(p.get("Tags") or {})
    if tags:
        check_new_tags({}, tags, f"queue {name} under account {svc.account}", "queue")
    now = time.time()
    queue = Queue(id=uuid.uuid4().hex, name=name, arn="", created=now, stream_name=stream.name,
                  stream_arn=stream.arn, stream_created=stream.created, start_type=kind, start_at=at,
                  effective_start=now, tags=tags)
    queue.arn = f"arn:aws:kinesis:{svc.settings.region}:{svc.account}:queue/{queue.id}"
    _attributes(queue, p.get("QueueAttributes") or {})
    # Lock order: the stream's lock, then the registry's (RegisterStreamConsumer and DeleteStream
    # count queues while holding the stream's lock).
    with stream.lock, registry.lock:
        queues = registry.live()
        if any(q.name == name for q in queues):
            raise in_use(f"Queue {name} already exists for account {svc.account}.")
        if consumer_slots_used(svc, stream) >= MAX_CONSUMERS:
            raise limit_exceeded(f"Consumer limit of {MAX_CONSUMERS} reached for stream {stream.name} under account "
                                 f"{svc.account}. Queues and registered consumers share this limit.")
        if svc.settings.update_stream_ms > 0 and \
                sum(q.status in ("CREATING", "DELETING") for q in queues) >= MAX_TRANSITIONING:
            raise limit_exceeded(f"Only {MAX_TRANSITIONING} queues can be in CREATING or DELETING status at the "
                                 "same time.")
        queue.state = QueueState(svc.store, queue.id)
        queue.state.checkpoint = _start(svc, stream, queue)
        registry.begin(queue, "CREATING")
        # The cursors first: a queue document is never without them.
        with queue.state.lock:
            queue.state.save([], cursors=True)
        registry.save(queue)
        registry.queues[queue.id] = queue
    return {"QueueDescription": describe(queue)}


def describe_queue(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    return {"QueueDescription": describe(svc.queues.by_arn(p["QueueARN"]))}


def update_queue(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    registry: QueueRegistry = svc.queues
    queue = registry.by_arn(p["QueueARN"])
    with registry.lock:
        if queue.status != "ACTIVE":
            raise in_use(f"Queue {queue.name} under account {svc.account} not ACTIVE, instead in state "
                         f"{queue.status}")
        _attributes(queue, p["QueueAttributes"])
        registry.begin(queue, "UPDATING")
        registry.save(queue)
    return {"QueueDescription": describe(queue)}


def delete_queue(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    registry: QueueRegistry = svc.queues
    queue = registry.by_arn(p["QueueARN"])
    with registry.lock:
        if queue.status == "DELETING":
            return {}
        if svc.settings.update_stream_ms > 0 and \
                sum(q.status in ("CREATING", "DELETING") for q in registry.all()) >= MAX_TRANSITIONING:
            raise limit_exceeded(f"Only {MAX_TRANSITIONING} queues can be in CREATING or DELETING status at the "
                                 "same time.")
        registry.begin(queue, "DELETING")
        registry.save(queue)
    registry.settle(queue)
    return {}


def list_queues(svc: KinesisService, p: dict[str, Any]) -> dict[str, Any]:
    queues = sorted(svc.queues.all(), key=lambda q: (q.created, q.id))
    filters = p.get("StreamFilter")
    if filters is not None:
        def matches(q: Queue) -> bool:
            return any(f["StreamARN"] == q.stream_arn and (f.get("StreamCreationTimestamp") is None or
                       int(seconds(f["StreamCreationTimestamp"])) == int(q.stream_created)) for f in filters)
        queues = [q for q in queues if matches(q)]
    token = p.get("NextToken")
    if token is not None:
        after = _decode_token(token)
        queues = [q for q in queues if (q.created, q.id) > after]
    limit = p.get("MaxResults", 100)
    page = queues[:limit]
    out: dict[str, Any] = {"QueueSummaries": [
        {"QueueName": q.name, "QueueARN": q.arn, "QueueStatus": q.status, "QueueCreationTimestamp": q.created,
         "Streams": [{"StreamARN": q.stream_arn, "StreamCreationTimestamp": q.stream_created}]} for q in page]}
    if len(queues) > limit:
        last = page[-1]
        out["NextToken"] = base64.urlsafe_b64encode(f"queues|{last.created!r}|{last.id}".encode()).decode()
    return out


def _decode_token(token: str) -> tuple[float, str]:
    try:
        kind, created, last = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        if kind == "queues":
            return float(created), last
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise invalid_argument(f"Invalid NextToken: {token}")
