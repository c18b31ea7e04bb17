"""Queues read in-process by other services: what a Lambda event source mapping polls.

A consumer here does what a ReceiveMessage / DeleteMessage / ChangeMessageVisibility client does,
through the same queue code (retention, redrive to the dead-letter queue after maxReceiveCount
receives, FIFO group order, persistence before the answer), without HTTP and without holding one
of the server's long-poll request threads: a receive waits on the queue's condition, which a send
(or a message becoming visible again) wakes, and `wake()` ends a wait at once (a poller stopping).

The queue is looked up by ARN at each call, so a consumer outlives its queue: a receive on a
deleted queue answers None, and one on a queue created again under the same name reads it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .errors import SqsError
from .messages_api import change_visibility_one, receive_messages, system_attributes
from .queue import Queue, now, parse_receipt

if TYPE_CHECKING:
    from .service import SqsService

# The system attributes a received message carries (ReceiveMessage's "All").
_ALL_SYSTEM = ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
               "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
               "DeadLetterQueueSourceArn")


@dataclass(frozen=True)
class QueueInfo:
    arn: str
    fifo: bool
    visibility_timeout: int


@dataclass(frozen=True)
class Received:
    """One received message, as ReceiveMessage with every attribute would show it."""
    message_id: str
    receipt_handle: str
    body: str
    md5_of_body: str
    attributes: dict[str, str]                      # system attributes, values as strings
    message_attributes: dict[str, dict[str, Any]]   # {name: {DataType, StringValue | BinaryValue (base64)}}
    md5_of_message_attributes: str | None
    group: str | None                               # FIFO: MessageGroupId


class QueueConsumer:
    """Receive, delete and release the messages of the queue one ARN names."""

    def __init__(self, service: SqsService, arn: str):
        self.service, self.arn = service, arn

    def _queue(self) -> Queue | None:
        queue = self.service.queue_by_arn(self.arn)
        return None if queue is None or queue.deleted else queue

    def info(self) -> QueueInfo | None:
        with self.service.lock:
            queue = self._queue()
            return None if queue is None else QueueInfo(queue.arn, queue.fifo,
                                                        queue.int_attribute("VisibilityTimeout"))

    def receive(self, limit: int, wait_s: float, cancelled: Callable[[], bool] = lambda: False
                ) -> list[Received] | None:
        """Up to `limit` (1-10) messages, hidden for the queue's visibility timeout; waits up to
        `wait_s` for the first one, unless `cancelled()` (asked again after each `wake()`).
        None: the queue does not exist (or the server is closing)."""
        service = self.service
        deadline = now() + max(0.0, wait_s)
        with service.lock:
            while True:
                queue = self._queue()
                if queue is None or service.closing:
                    return None
                if cancelled():  # before receiving: a cancelled receive takes nothing
                    return []
                taken = receive_messages(service, queue, limit, queue.int_attribute("VisibilityTimeout"))
                current = now()
                if taken or current >= deadline:
                    return [_received(m) for m in taken]
                due = queue.next_change(current)
                assert queue.cond is not None
                queue.cond.wait(min(deadline, due) - current if due is not None else deadline - current)

    def wake(self) -> None:
        """Make a waiting receive look at its `cancelled` again now."""
        with self.service.lock:
            queue = self.service.queue_by_arn(self.arn)
            if queue is not None and queue.cond is not None:
                queue.cond.notify_all()

    def delete(self, receipts: list[str]) -> int:
        """Delete the messages the handles name, in one write; how many were deleted. A handle that
        no longer holds its message is skipped, as DeleteMessage would refuse it or find nothing: a
        FIFO message whose visibility ran out (another receive may have it), or a message gone."""
        with self.service.lock:
            queue = self._queue()
            if queue is None:
                return 0
            current = now()
            ids = []
            for handle in receipts:
                parsed = parse_receipt(handle)
                message = queue.messages.get(parsed[1]) if parsed and parsed[0] == queue.arn else None
                if message is None:
                    continue
                if queue.fifo and (message.receipt != handle or message.visible_at <= current):
                    continue
                ids.append(message.id)
            if ids:
                self.service.persist.delete_messages(queue, ids)
                queue.remove(ids)
                if queue.fifo:  # their groups' next messages can be received now: wake the waits
                    assert queue.cond is not None
                    queue.cond.notify_all()
            return len(ids)

    def release(self, receipts: list[str]) -> None:
        """Make the messages visible again now (ChangeMessageVisibility to 0): received but not
        handed on, they go back to the head of the queue (of their group, on a FIFO queue)."""
        with self.service.lock:
            queue = self._queue()
            if queue is None:
                return
            for handle in receipts:
                try:
                    change_visibility_one(self.service, queue, handle, 0)
                except SqsError:
                    pass  # deleted meanwhile, or its visibility ran out: nothing to give back


class QueueConsumers:
    """What the composition root hands another service: consumers of this server's queues."""

    def __init__(self, service: SqsService):
        self.service = service

    def find(self, arn: str) -> QueueInfo | None:
        """The queue `arn` names, if it exists."""
        return QueueConsumer(self.service, arn).info()

    def consumer(self, arn: str) -> QueueConsumer:
        return QueueConsumer(self.service, arn)


def _received(m: Any) -> Received:
    return Received(message_id=m.id, receipt_handle=m.receipt, body=m.body, md5_of_body=m.md5_body,
                    attributes=system_attributes(m, list(_ALL_SYSTEM)),
                    message_attributes={k: dict(v) for k, v in m.attributes.items()},
                    md5_of_message_attributes=m.md5_attributes, group=m.group)
