"""The batch operations: SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch.

What is wrong with the request as a whole (no entries, more than 10, bad or repeated ids, more
than 1 MiB in all, a FIFO entry without MessageGroupId) fails it whole; what is wrong with one
entry fails that entry only, reported under `Failed` with its query error code."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from .errors import SqsError, invalid_parameter
from .messages_api import change_visibility_one, delete_one, send_one

if TYPE_CHECKING:
    from .service import Call

_ENTRY_ID = re.compile(r"[A-Za-z0-9_-]{1,80}")
MAX_ENTRIES = 10
MAX_BATCH_BYTES = 1024 * 1024


def _check_entries(entries: list[dict[str, Any]], shape: str) -> None:
    if not entries:
        raise SqsError("EmptyBatchRequest", f"There should be at least one {shape} in the request.")
    if len(entries) > MAX_ENTRIES:
        raise SqsError("TooManyEntriesInBatchRequest", f"Maximum number of entries per request are {MAX_ENTRIES}. "
                                                       f"You have sent {len(entries)}.")
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry["Id"]
        if not _ENTRY_ID.fullmatch(entry_id):
            raise SqsError("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, "
                                                  "hyphens and underscores. It can be at most 80 letters long.")
        if entry_id in seen:
            raise SqsError("BatchEntryIdsNotDistinct", f"Id {entry_id} repeated.")
        seen.add(entry_id)


def _each(entries: list[dict[str, Any]], apply: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    successful, failed = [], []
    for entry in entries:
        try:
            successful.append({"Id": entry["Id"], **apply(entry)})
        except SqsError as err:
            failed.append({"Id": entry["Id"], "SenderFault": True, "Code": err.query_error.split(";")[0],
                           "Message": err.message})
    return {"Successful": successful, "Failed": failed}


def send_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    entries = params["Entries"]
    _check_entries(entries, "SendMessageBatchRequestEntry")
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])
        total = 0
        for entry in entries:
            body = entry.get("MessageBody") or ""
            total += len(body.encode())
            for name, value in (entry.get("MessageAttributes") or {}).items():
                total += len(name.encode()) + sum(len(v.encode()) if isinstance(v, str) else len(v)
                                                  for v in value.values() if isinstance(v, (str, bytes)))
            if queue.fifo and entry.get("MessageGroupId") is None:
                raise invalid_parameter("The request must contain the parameter MessageGroupId.")
            if queue.fifo and entry.get("MessageDeduplicationId") is None \
                    and queue.attributes.get("ContentBasedDeduplication") != "true":
                raise invalid_parameter("The queue should either have ContentBasedDeduplication enabled or "
                                        "MessageDeduplicationId provided explicitly")
        if total > MAX_BATCH_BYTES:
            raise SqsError("BatchRequestTooLong", f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. "
                                                  f"You have sent {total} bytes.")
        return _each(entries, lambda entry: send_one(call.service, queue, entry, batch=True,
                                                     trace_header=call.trace_header))


def delete_message_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    entries = params["Entries"]
    _check_entries(entries, "DeleteMessageBatchRequestEntry")
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])

        def delete(entry: dict[str, Any]) -> dict[str, Any]:
            delete_one(call.service, queue, entry["ReceiptHandle"])
            return {}
        return _each(entries, delete)


def change_message_visibility_batch(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    entries = params["Entries"]
    _check_entries(entries, "ChangeMessageVisibilityBatchRequestEntry")
    with call.service.lock:
        queue = call.queue(params["QueueUrl"])

        def change(entry: dict[str, Any]) -> dict[str, Any]:
            change_visibility_one(call.service, queue, entry["ReceiptHandle"], entry.get("VisibilityTimeout"))
            return {}
        return _each(entries, change)

