"""Dead-letter queue redrive: StartMessageMoveTask, ListMessageMoveTasks, CancelMessageMoveTask.

A task moves the dead-letter queue's visible messages to the destination, or each back to the
queue it came from (its DeadLetterQueueSourceArn). kinesim moves them all before answering, so a
task is COMPLETED (or FAILED) when listed; `MaxNumberOfMessagesPerSecond` is recorded, not
applied. Texts: AWS's recorded answers (LocalStack's test_sqs_move_task snapshot). Tasks are
kept in memory: after a restart none are listed (the messages they moved stay moved).
"""
from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any

from kinesim.protocol import user_json

from .errors import SqsError, invalid_parameter, invalid_value
from .messages_api import transfer
from .queue import Queue, now

if TYPE_CHECKING:
    from .service import Call

_NOT_FOUND = "The resource that you specified for the {} parameter doesn't exist."


def _by_arn(call: Call, arn: str, parameter: str) -> Queue:
    queue = call.service.queue_by_arn(arn)
    if queue is None:
        raise SqsError("ResourceNotFoundException", _NOT_FOUND.format(parameter))
    return queue


def _is_dead_letter_queue(call: Call, queue: Queue) -> bool:
    return any((q.redrive or {}).get("deadLetterTargetArn") == queue.arn for q in call.service.queues.values())


def start_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    rate = params.get("MaxNumberOfMessagesPerSecond")
    if rate is not None and not 1 <= rate <= 500:
        raise invalid_value("MaxNumberOfMessagesPerSecond", rate, "Must be between 1 and 500.")
    service = call.service
    with service.lock:
        source = _by_arn(call, params["SourceArn"], "SourceArn")
        if not _is_dead_letter_queue(call, source):
            raise invalid_parameter("Source queue must be configured as a Dead Letter Queue.")
        destination = _by_arn(call, params["DestinationArn"], "DestinationArn") if params.get("DestinationArn") else None
        current = now()
        movable = [m for m in source.messages.values() if m.visible_at <= current]
        task: dict[str, Any] = {"TaskId": uuid.uuid4().hex, "SourceArn": source.arn, "Status": "COMPLETED",
                                "StartedTimestamp": int(current * 1000), "ApproximateNumberOfMessagesMoved": 0,
                                "ApproximateNumberOfMessagesToMove": len(movable)}
        if destination is not None:
            task["DestinationArn"] = destination.arn
        if rate is not None:
            task["MaxNumberOfMessagesPerSecond"] = rate
        for message in movable:
            target = destination or (service.queue_by_arn(message.source_arn) if message.source_arn else None)
            if target is None:
                task.update(Status="FAILED", FailureReason="AWS.SimpleQueueService.NonExistentQueue")
                break
            # Back in a source queue, it starts over: received 0 times, no longer a dead letter.
            transfer(service, source, target, message, current, 0, None)
            task["ApproximateNumberOfMessagesMoved"] += 1
        service.move_tasks.insert(0, task)
        handle = base64.b64encode(json.dumps({"taskId": task["TaskId"], "sourceArn": source.arn}).encode()).decode()
        return {"TaskHandle": handle}


def list_message_move_tasks(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    limit = params.get("MaxResults", 1)
    if not 1 <= limit <= 10:
        raise invalid_value("MaxResults", limit, "You must enter a number that's between 1 and 10.")
    with call.service.lock:
        source = _by_arn(call, params["SourceArn"], "SourceArn")
        tasks = [t for t in call.service.move_tasks if t["SourceArn"] == source.arn][:limit]
        return {"Results": [{k: v for k, v in t.items() if k != "TaskId"} for t in tasks]}


def cancel_message_move_task(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    try:
        handle = user_json.loads(base64.b64decode(params["TaskHandle"], validate=True))  # the client's text
        source_arn = handle["sourceArn"]
        if not isinstance(source_arn, str) or not isinstance(handle["taskId"], str):
            raise TypeError
    except (ValueError, TypeError, KeyError):
        raise invalid_parameter("Value for parameter TaskHandle is invalid.") from None
    with call.service.lock:
        _by_arn(call, source_arn, "SourceArn")
    # A task runs to its end before StartMessageMoveTask answers: none is left to cancel.
    raise SqsError("ResourceNotFoundException", "Task does not exist.")
