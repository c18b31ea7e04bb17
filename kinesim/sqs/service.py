"""The SQS service: queue lookup by URL and ARN, persistence, and the sender other services
deliver through (`edge.destinations`, service name "sqs").

Each operation is a plain function `(call, params) -> response dict` in the module of its concern,
named in the table of `operations.py` (`queues_api`: queues and their attributes and tags,
`messages_api`: send, receive, delete, visibility). `call` is the request's `Call`: the service and the endpoint
the request came in on, which queue URLs are built from (SDKs send later calls to a queue's URL,
so it must name this server as the client reached it).

One lock guards every queue (each queue's condition is built on it): operations are short, and a
move to a dead-letter queue touches two queues without any lock order to get wrong. Long polls
wait on their queue's condition, which releases the lock.
"""
from __future__ import annotations

import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

from kinesim.config import Settings
from kinesim.protocol.errors import AwsError
from kinesim.protocol.operations import JsonService
from kinesim.protocol.validation import ModelValidator
from kinesim.long_polls import LongPolls
from kinesim.protocol.models import service_model
from kinesim.store import Store

from .consumer import QueueConsumers
from .errors import SqsError, invalid_parameter, missing_parameter, queue_does_not_exist, unknown_attribute
from .messages_api import send_one
from .operations import OPERATIONS
from .persistence import QueueStore
from .queue import Queue

DEFAULT_ENDPOINT = "http://localhost:4566"


def _attribute_name_members(shape: Any) -> dict[str, frozenset[str]]:
    """Members that hold attribute names from an enum (lists of them, maps keyed by them)."""
    found = {}
    for name, member in shape.members.items():
        inner = member.member if member.type_name == "list" else member.key if member.type_name == "map" else None
        if inner is not None and getattr(inner, "enum", None):
            found[name] = frozenset(inner.enum)
    return found


@dataclass
class Call:
    """One request: the service, the endpoint (`scheme://host[:port]`) it came in on, and its X-Ray
    trace header (X-Amzn-Trace-Id), which the messages it sends keep as their AWSTraceHeader."""
    service: "SqsService"
    endpoint: str = DEFAULT_ENDPOINT
    trace_header: str | None = None

    def url(self, queue: Queue) -> str:
        return f"{self.endpoint}/{self.service.account}/{queue.name}"

    def queue(self, url: Any) -> Queue:
        return self.service.queue_by_url(url)


class SqsService(JsonService):
    operations = OPERATIONS
    target_prefix = "AmazonSQS"  # JSON 1.0 (the model's jsonVersion): the edge answers in it

    def __init__(self, settings: Settings, store: Store, long_polls: LongPolls | None = None):
        self.settings = settings
        self.validator = ModelValidator("sqs")
        model = service_model("sqs")
        inputs = {op: model.operation_model(op).input_shape for op in model.operation_names}
        self._required = {op: list(shape.required_members) for op, shape in inputs.items() if shape}
        self._named = {op: _attribute_name_members(shape) for op, shape in inputs.items() if shape}
        # ReceiveMessage's deprecated AttributeNames is modelled with the queue attributes' enum,
        # but AWS takes message system attribute names there (what SDK examples pass).
        received = self._named["ReceiveMessage"]
        received["AttributeNames"] = received["AttributeNames"] | received["MessageSystemAttributeNames"]
        self.lock = threading.RLock()
        self.persist = QueueStore(store)
        self.closing = False
        # ReceiveMessage calls waiting now: one cap with Kinesis queues' long polls, from the server.
        self.long_polls = long_polls or LongPolls(settings.max_long_polls)
        self.move_tasks: list[dict[str, Any]] = []  # newest first (move_tasks_api)
        with self.lock:
            self.queues: dict[str, Queue] = self.persist.load(self.new_condition)
        # In-process readers of queues (Lambda event source mappings), handed out by the edge.
        self.consumers = QueueConsumers(self)

    @property
    def account(self) -> str:
        return self.settings.account_id

    def arn(self, name: str) -> str:
        return f"arn:aws:sqs:{self.settings.region}:{self.account}:{name}"

    def new_condition(self) -> threading.Condition:
        return threading.Condition(self.lock)

    # dispatch

    def call(self, op: str, params: dict[str, Any], cbor: bool = False,  # type: ignore[override]
             endpoint: str = DEFAULT_ENDPOINT, trace_header: str | None = None) -> dict[str, Any]:
        handler = self.operations.get(op)
        if handler is None:
            raise AwsError("UnknownOperationException")
        for name in self._required.get(op, ()):
            if params.get(name) is None:
                raise missing_parameter(name)
        for member, allowed in self._named.get(op, {}).items():
            # SQS answers an attribute name it does not know with InvalidAttributeName, not with
            # the model's enum violation.
            names = params.get(member)
            for name in (names if isinstance(names, (list, dict)) else ()):
                if isinstance(name, str) and name not in allowed:
                    raise unknown_attribute(name)
        legacy = params.pop("AttributeNames", None) if op == "ReceiveMessage" else None
        if legacy is not None and not (isinstance(legacy, list) and all(isinstance(n, str) for n in legacy)):
            raise invalid_parameter("AttributeNames is a list of attribute names.")
        try:
            parsed = self.validator.parse(op, params, cbor=cbor)
            if legacy is not None:
                parsed["AttributeNames"] = legacy
        except AwsError as err:
            # The model's own checks (nested required members, lists' bounds) in SQS's words.
            if err.code == "ValidationException":
                raise invalid_parameter(err.message or "") from None
            raise
        return handler(Call(self, endpoint, trace_header), parsed)

    # lookup

    def queue_by_url(self, url: Any) -> Queue:
        """The queue a QueueUrl names: `<any endpoint>/<account>/<name>`, as SDKs send back the
        URLs this server gave out (whatever host they reached it by)."""
        if not isinstance(url, str) or not url:
            raise missing_parameter("QueueUrl")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SqsError("InvalidAddress", f"The address {url} is not valid for this endpoint.")
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) < 2 or segments[-2] != self.account:
            raise queue_does_not_exist()
        return self.queue_named(segments[-1])

    def queue_named(self, name: str) -> Queue:
        queue = self.queues.get(name)
        if queue is None:
            raise queue_does_not_exist()
        return queue

    def queue_policy(self, name: str) -> str | None:
        """The `Policy` attribute of the queue of that name (None: no such queue, or no policy), which
        decides the calls of other accounts (kinesim/cross_account.py)."""
        queue = self.queues.get(name)
        return queue.attributes.get("Policy") or None if queue is not None else None

    def queue_by_arn(self, arn: str) -> Queue | None:
        parts = arn.split(":")
        if len(parts) != 6 or parts[2] != "sqs" or parts[4] != self.account:
            return None
        queue = self.queues.get(parts[5])
        return queue if queue is not None and queue.arn == arn else None

    # in-process deliveries (edge.destinations)

    def send_to_arn(self, arn: str, message: bytes, attributes: dict[str, Any] | None = None,
                    trace_header: str | None = None) -> None:
        """A SendMessage to the queue `arn` names, from another service (an OnFailure destination,
        an SNS subscription). `attributes` may hold MessageAttributes (in SendMessage's request
        shape), MessageGroupId and MessageDeduplicationId; `trace_header` becomes the message's
        AWSTraceHeader. An unknown queue raises SQS's QueueDoesNotExist (query code
        AWS.SimpleQueueService.NonExistentQueue)."""
        with self.lock:
            queue = self.queue_by_arn(arn)
            if queue is None:
                raise queue_does_not_exist()
            entry = {"MessageBody": message.decode("utf-8", errors="replace")}
            for key in ("MessageAttributes", "MessageGroupId", "MessageDeduplicationId"):
                if attributes and attributes.get(key) is not None:
                    entry[key] = attributes[key]
            send_one(self, queue, entry, trace_header=trace_header)

    def close(self) -> None:
        """Wake every long poll (each answers with what it has) and take no more waits."""
        with self.lock:
            self.closing = True
            for queue in self.queues.values():
                assert queue.cond is not None
                queue.cond.notify_all()
