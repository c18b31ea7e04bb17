"""Queues and messages in the store, as documents: one `sqs-queue` document per queue, and per
queue a kind `sqs-message/<name>` holding its messages (by id) and its live FIFO deduplication
entries (`dedup/<key>`). Each call is one transaction: a batch is stored whole or not at all."""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from kinesim.store import Store

from .messages import Message
from .queue import Queue, queue_from_doc

QUEUE_KIND = "sqs-queue"
_DEDUP = "dedup/"


def _kind(queue: str) -> str:
    return f"sqs-message/{queue}"


class QueueStore:
    def __init__(self, store: Store):
        self.store = store

    def load(self, make_condition: Callable[[], threading.Condition]) -> dict[str, Queue]:
        queues = {}
        for name, doc in self.store.documents(QUEUE_KIND).items():
            docs = self.store.documents(_kind(name))
            messages = [Message.from_doc(d) for k, d in docs.items() if not k.startswith(_DEDUP)]
            dedup = {k[len(_DEDUP):]: d for k, d in docs.items() if k.startswith(_DEDUP)}
            queues[name] = queue_from_doc(doc, messages, dedup, make_condition)
        return queues

    def save_queue(self, queue: Queue) -> None:
        self.store.put_document(QUEUE_KIND, queue.name, queue.to_doc())

    def delete_queue(self, queue: Queue) -> None:
        self.store.delete_documents(_kind(queue.name))
        self.store.delete_document(QUEUE_KIND, queue.name)

    def save_messages(self, queue: Queue, messages: Iterable[Message], dedup_keys: Iterable[str] = ()) -> None:
        docs: dict[str, Any] = {m.id: m.to_doc() for m in messages}
        docs.update({_DEDUP + key: list(queue.dedup[key]) for key in dedup_keys})
        self.store.put_documents(_kind(queue.name), docs)

    def delete_messages(self, queue: Queue, ids: Iterable[str] = (), dedup_keys: Iterable[str] = ()) -> None:
        names = list(ids) + [_DEDUP + key for key in dedup_keys]
        if names:
            self.store.delete_documents(_kind(queue.name), names)

    def purge(self, queue: Queue) -> None:
        """Every message of the queue (its deduplication entries stay: PurgeQueue keeps them)."""
        self.store.delete_documents(_kind(queue.name), list(queue.messages))
