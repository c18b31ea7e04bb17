"""The asynchronous invocation queue on disk: one document per accepted event (kind
`lambda-async-event`), written before the 202 (or before an in-process `submit` returns), rewritten
when an attempt fails and the event waits for its retry, deleted once the event is done (succeeded,
given up, or its function deleted). What a `kill -9` leaves is exactly the events still to run,
with their attempt counts, first-accepted time, the last failed attempt's answer and the trace
header that places them in their chain of requests.

Only ids and times are kept in memory (`PendingEvent`): payloads (up to 1 MB each) and the last
failed attempt's answer (up to 6 MB) are read back when an attempt starts, so a long queue costs
little memory.
"""
from __future__ import annotations

import base64
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from ..store import Store

log = logging.getLogger("kinesim.functions.async")

KIND = "lambda-async-event"


@dataclass
class Attempt:
    """A finished attempt's answer, as the invocation record reports it."""
    status_code: int
    executed_version: str
    function_error: str | None
    payload: bytes

    def to_doc(self) -> dict[str, Any]:
        return {"statusCode": self.status_code, "executedVersion": self.executed_version,
                "functionError": self.function_error, "payload": base64.b64encode(self.payload).decode()}

    @classmethod
    def from_doc(cls, doc: dict[str, Any] | None) -> "Attempt | None":
        if not doc:
            return None
        return cls(doc["statusCode"], doc["executedVersion"], doc.get("functionError"),
                   base64.b64decode(doc.get("payload") or ""))


@dataclass
class PendingEvent:
    id: str
    function: str          # the reference it was submitted with: name, name:qualifier or ARN
    request_id: str        # the same for every attempt, as on AWS
    accepted: float        # epoch seconds: when it was first accepted (MaximumEventAgeInSeconds counts from it)
    due: float             # epoch seconds of its next attempt
    attempts: int = 0      # attempts that reached the function and failed (approximateInvokeCount)
    backoff_s: float = 0.0  # the current wait after a throttle / system error (exponential)
    last: Attempt | None = None
    trace_header: str | None = None  # X-Ray trace header of what caused it: its chain (recursion.py)

    def to_doc(self, payload: bytes) -> dict[str, Any]:
        doc = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("id", "last")}
        doc["last"] = self.last.to_doc() if self.last else None
        doc["payload"] = base64.b64encode(payload).decode()
        return doc

    @classmethod
    def from_doc(cls, event_id: str, doc: dict[str, Any]) -> "PendingEvent":
        return cls(event_id, doc["function"], doc["request_id"], float(doc["accepted"]), float(doc["due"]),
                   int(doc.get("attempts", 0)), float(doc.get("backoff_s", 0.0)), Attempt.from_doc(doc.get("last")),
                   doc.get("trace_header"))


class EventQueueStore:
    def __init__(self, store: Store):
        self.store = store

    def load(self) -> list[PendingEvent]:
        """The events accepted before a restart and not done yet (unreadable ones are logged and dropped)."""
        events = []
        for event_id, doc in self.store.documents(KIND).items():
            try:
                events.append(dataclasses.replace(PendingEvent.from_doc(event_id, doc), last=None))
            except (KeyError, TypeError, ValueError) as err:
                log.warning("asynchronous event %s is unreadable (%s): dropped", event_id, err)
                self.store.delete_document(KIND, event_id)
        return events

    def save(self, event: PendingEvent, payload: bytes) -> None:
        self.store.put_document(KIND, event.id, event.to_doc(payload))

    def body(self, event_id: str) -> tuple[bytes, Attempt | None] | None:
        """The event's payload and its last failed attempt (kept out of memory between attempts),
        or None once it is deleted."""
        doc = self.store.document(KIND, event_id)
        return None if doc is None else (base64.b64decode(doc["payload"]), Attempt.from_doc(doc.get("last")))

    def delete(self, event_id: str) -> None:
        self.store.delete_document(KIND, event_id)
