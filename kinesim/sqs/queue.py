"""One queue: its messages in arrival order, visibility, FIFO groups and deduplication, and the
condition long polls wait on.

Every method runs with the service's lock held (the queue's condition is built on it), which keeps
moves between a queue and its dead-letter queue simple. Times are wall-clock epoch seconds so that
a message in flight when the server stopped becomes visible at the same moment after a restart.

State changes are written through `persist` (kinesim.sqs.persistence) before the call that made
them answers: a sent message is stored before its MessageId is returned, a received one's new
visibility and receive count before it is handed out, a deleted one is gone from disk first.
"""
from __future__ import annotations

import base64
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import attributes as attrs
from .messages import Message

DEDUP_WINDOW_S = 300.0  # "any messages sent with the same deduplication ID ... within 5 minutes"


@dataclass
class Queue:
    name: str
    arn: str
    fifo: bool
    attributes: dict[str, str]
    created: float
    modified: float
    tags: dict[str, str] = field(default_factory=dict)
    messages: dict[str, Message] = field(default_factory=dict)  # by id, in arrival order
    dedup: dict[str, tuple[str, str | None, float]] = field(default_factory=dict)  # key -> (id, seq, until)
    next_order: int = 0
    last_sequence: int = 0
    purged_at: float = 0.0
    cond: threading.Condition | None = None
    deleted: bool = False

    # metadata

    def to_doc(self) -> dict[str, Any]:
        return {"name": self.name, "arn": self.arn, "fifo": self.fifo, "attributes": self.attributes,
                "created": self.created, "modified": self.modified, "tags": self.tags}

    def int_attribute(self, name: str) -> int:
        return int(self.attributes.get(name, attrs.defaults(self.fifo).get(name, "0")))

    @property
    def redrive(self) -> dict[str, Any] | None:
        text = self.attributes.get("RedrivePolicy")
        return attrs.redrive_policy(text) if text else None

    # counts

    def counts(self, now: float) -> tuple[int, int, int]:
        """(visible, in flight, delayed): the three ApproximateNumberOf... attributes."""
        visible = in_flight = delayed = 0
        for m in self.messages.values():
            if m.visible_at <= now:
                visible += 1
            elif m.receive_count:
                in_flight += 1
            else:
                delayed += 1
        return visible, in_flight, delayed

    def expired(self, now: float) -> list[Message]:
        """Messages past MessageRetentionPeriod (AWS deletes them; kinesim does at next touch)."""
        limit = now - self.int_attribute("MessageRetentionPeriod")
        return [m for m in self.messages.values() if m.sent < limit]

    def next_change(self, now: float) -> float | None:
        """When the next delayed or in-flight message becomes visible: a long poll wakes then."""
        times = [m.visible_at for m in self.messages.values() if m.visible_at > now]
        return min(times) if times else None

    # sending

    def new_message(self, body: str, now: float, delay: int, **fields: Any) -> Message:
        message = Message(id=str(uuid.uuid4()), body=body, sent=now, visible_at=now + delay,
                          order=self.next_order, **fields)
        self.next_order += 1
        if self.fifo:
            # 20-digit, strictly increasing within the queue, as AWS's are; from the clock so
            # that they keep increasing across restarts.
            self.last_sequence = max(self.last_sequence + 1, 10**19 + int(now * 1e6))
            message.sequence = str(self.last_sequence)
        return message

    def dedup_key(self, group: str | None, dedup: str) -> str:
        scope = self.attributes.get("DeduplicationScope", "queue")
        return f"{group}\x00{dedup}" if scope == "messageGroup" else dedup

    def duplicate_of(self, key: str, now: float) -> tuple[str, str | None] | None:
        found = self.dedup.get(key)
        return (found[0], found[1]) if found and found[2] > now else None

    def forget_old_dedup(self, now: float) -> list[str]:
        gone = [k for k, (_, _, until) in self.dedup.items() if until <= now]
        for key in gone:
            del self.dedup[key]
        return gone

    def add(self, message: Message) -> None:
        self.messages[message.id] = message
        if message.order >= self.next_order:
            self.next_order = message.order + 1
        assert self.cond is not None
        self.cond.notify_all()

    # receiving

    def receivable(self, now: float, limit: int) -> list[Message]:
        """Up to `limit` visible messages in the order they would be handed out. A FIFO queue hands
        out a group's messages in order and none of a group while one of it is in flight."""
        found: list[Message] = []
        blocked: set[str | None] = set()
        for m in self.messages.values():
            if len(found) >= limit:
                break
            if self.fifo:
                if m.group in blocked:
                    continue
                if m.visible_at > now:
                    blocked.add(m.group)
                    continue
            elif m.visible_at > now:
                continue
            found.append(m)
        return found

    def take(self, message: Message, now: float, visibility: int) -> None:
        message.receive_count += 1
        if message.first_receive is None:
            message.first_receive = now
        message.visible_at = now + visibility
        message.receipt = receipt_handle(self.arn, message.id)

    def remove(self, ids: Iterable[str]) -> list[Message]:
        return [m for m in (self.messages.pop(i, None) for i in ids) if m is not None]


def queue_from_doc(doc: dict[str, Any], messages: list[Message], dedup: dict[str, Any],
                   make_condition: Callable[[], threading.Condition]) -> Queue:
    queue = Queue(name=doc["name"], arn=doc["arn"], fifo=doc["fifo"], attributes=doc["attributes"],
                  created=doc["created"], modified=doc["modified"], tags=doc.get("tags", {}),
                  cond=make_condition())
    for m in sorted(messages, key=lambda m: m.order):
        queue.messages[m.id] = m
        queue.next_order = m.order + 1
        if m.sequence:
            queue.last_sequence = max(queue.last_sequence, int(m.sequence))
    queue.dedup = {k: tuple(v) for k, v in dedup.items()}  # type: ignore[misc]
    for _, seq, _ in queue.dedup.values():
        if seq:
            queue.last_sequence = max(queue.last_sequence, int(seq))
    return queue


def now() -> float:
    return time.time()


def receipt_handle(arn: str, message_id: str) -> str:
    """An opaque handle naming the queue and message, new at each receive."""
    return base64.b64encode(f"{arn} {message_id} {uuid.uuid4().hex}".encode()).decode()


def parse_receipt(handle: str) -> tuple[str, str] | None:
    """(queue ARN, message id) of a handle this server gave out, or None."""
    try:
        parts = base64.b64decode(handle, validate=True).decode().split(" ")
    except (ValueError, UnicodeDecodeError):
        return None
    return (parts[0], parts[1]) if len(parts) == 3 else None
